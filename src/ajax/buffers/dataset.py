"""Offline datasets of whole episodes, one file per task: Ajax's format and the official TD-MPC2's.

Ajax's format (written by ``ajax collect``) is a directory with ``dataset.json`` and one
``<task>.npz`` per task::

    dataset.json  {"format": "ajax-episodes", "version": 1, "tasks": {name: TaskMeta fields}}
    <task>.npz    obs [E, L + 1, O] float32, action [E, L, A] float32, reward [E, L] float32,
                  terminated [E, L] bool, length [E] int32 (steps of each episode, <= L)

Row t of an episode holds o_t, a_t, r_t (the reward of o_t -> o_{t+1}); rows past ``length``
are zeros. Every file is written to a temporary name and renamed, so a crash leaves either the
old dataset or the new one.

The official format (nicklashansen/tdmpc2 trainer/offline_trainer.py and common/buffer.py) is
a directory of ``*.pt`` TensorDicts [E, L + 1] with ``obs``, ``action``, ``reward`` and
``task``, where row 0's action and reward are placeholders (the buffer reads ``action[:, 1:]``).
It is read without torch (:mod:`ajax.buffers.torch_pickle`; torch and tensordict, not
dependencies of Ajax, only for pickles that reader does not know), given the task set it was made
for (its ``task`` ids index that set); each task's own observation and action widths are the
columns its data ever fills.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ajax.buffers import torch_pickle
from ajax.failures import naming

FORMAT, VERSION, INDEX = "ajax-episodes", 1, "dataset.json"


class DatasetError(ValueError):
    """A dataset that cannot be read as it is; the message names the problem and the fix."""


class Episodes(NamedTuple):
    """One task's episodes (numpy): see the module docstring for the layout."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    length: np.ndarray

    def check(self, where: str) -> None:
        """DatasetError naming the first array whose shape breaks the layout."""
        if self.obs.ndim != 3 or self.obs.shape[1] < 2:
            raise DatasetError(f"{where}: obs has shape {self.obs.shape}, not [E, L + 1, O]")
        e, steps = self.obs.shape[0], self.obs.shape[1] - 1
        want = {"action": (e, steps, self.action.shape[-1]), "reward": (e, steps),
                "terminated": (e, steps), "length": (e,)}  # fmt: skip
        for name, shape in want.items():
            if getattr(self, name).shape != shape:
                raise DatasetError(
                    f"{where}: {name} has shape {getattr(self, name).shape}, not {shape} (obs "
                    f"{self.obs.shape}); write the task again with 'ajax collect'"
                )
        if e == 0 or np.any(self.length < 1) or np.any(self.length > steps):
            raise DatasetError(f"{where}: episode lengths must be in [1, {steps}] with E >= 1")


@dataclasses.dataclass(frozen=True)
class TaskMeta:
    """What ``dataset.json`` records of one task.

    Attributes:
        name: the task's name (its file is ``<name>.npz``).
        env: the env id to evaluate it on ("" when unknown, e.g. an official dataset).
        obs_dim, action_dim: the task's own widths.
        episode_length: L, the longest episode in agent steps (its discount).
        episodes: E.
        env_options: ``make_env`` options of ``env``.
        action_repeat: env steps per agent step in the data.
        source: where the data came from (the run directory, its agent, the noise).
    """

    name: str
    env: str
    obs_dim: int
    action_dim: int
    episode_length: int
    episodes: int
    env_options: dict = dataclasses.field(default_factory=dict, hash=False)
    action_repeat: int = 1
    source: dict = dataclasses.field(default_factory=dict, hash=False)


class Dataset(NamedTuple):
    """Tasks in a fixed order (their ids) and each task's episodes."""

    tasks: tuple[TaskMeta, ...]
    episodes: dict[str, Episodes]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tasks)


def _replace_atomic(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with naming(path), open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith(".") or name == Path(INDEX).stem:
        raise DatasetError(f"task name {name!r} cannot be a file name; pick e.g. 'pendulum'")


def read_index(root: Path) -> dict:
    """``dataset.json`` of ``root`` ({} if there is none); DatasetError if it is not one."""
    path = root / INDEX
    if not path.exists():
        return {}
    try:
        index = json.loads(path.read_text())
    except ValueError as err:
        raise DatasetError(
            f"{path} is not valid JSON ({err}); restore it or collect again"
        ) from err
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise DatasetError(f"{path} is not an Ajax episode dataset (format {FORMAT!r})")
    if index.get("version") != VERSION:
        raise DatasetError(f"{path} has version {index.get('version')}, this Ajax reads {VERSION}")
    return index


def write_task(root: str | Path, meta: TaskMeta, episodes: Episodes) -> Path:
    """Add (or replace) task ``meta.name`` in the dataset at ``root`` (created if missing)."""
    root = Path(root)
    _check_name(meta.name)
    episodes.check(f"task {meta.name}")
    if root.exists() and not root.is_dir():
        raise DatasetError(f"{root} exists and is not a directory; pick another --out")
    if root.exists() and any(root.glob("*.pt")):
        raise DatasetError(f"{root} holds an official (*.pt) dataset; collect into another --out")
    index = read_index(root) if root.exists() else {}
    root.mkdir(parents=True, exist_ok=True)
    arrays = {k: np.asarray(v) for k, v in episodes._asdict().items()}
    _replace_atomic(root / f"{meta.name}.npz", lambda f: np.savez(f, **arrays))
    tasks = dict(index.get("tasks", {}))
    tasks[meta.name] = dataclasses.asdict(meta)
    text = json.dumps({"format": FORMAT, "version": VERSION, "tasks": tasks}, indent=1)
    _replace_atomic(root / INDEX, lambda f: f.write(text.encode()))
    return root / f"{meta.name}.npz"


def _read_ajax(root: Path, index: dict) -> Dataset:
    tasks, episodes = [], {}
    fields = {f.name for f in dataclasses.fields(TaskMeta)}
    for name, entry in index.get("tasks", {}).items():
        if not isinstance(entry, dict) or set(entry) - fields or entry.get("name") != name:
            raise DatasetError(f"{root / INDEX}: task {name!r} has unexpected fields")
        meta = TaskMeta(**entry)
        path = root / f"{name}.npz"
        if not path.exists():
            raise DatasetError(f"{path} is missing; collect task {name!r} again")
        with np.load(path) as f:
            missing = [k for k in Episodes._fields if k not in f]
            if missing:
                raise DatasetError(f"{path} lacks {missing}; collect task {name!r} again")
            eps = Episodes(**{k: f[k] for k in Episodes._fields})
        eps.check(str(path))
        if eps.obs.shape[-1] != meta.obs_dim or eps.action.shape[-1] != meta.action_dim:
            raise DatasetError(f"{path}: widths differ from {INDEX}'s; collect it again")
        tasks.append(meta)
        episodes[name] = eps
    if not tasks:
        raise DatasetError(f"{root / INDEX} lists no task; collect one with 'ajax collect'")
    return Dataset(tuple(tasks), episodes)


def _used_width(x: np.ndarray) -> int:
    """Columns up to the last one any row fills (>= 1): a task's width inside padded data."""
    filled = np.nonzero(np.any(x != 0, axis=(0, 1)))[0]
    return max(int(filled.max(initial=-1)) + 1, 1)


def official_to_episodes(obs, action, reward, task, names) -> Dataset:
    """Official rows [E, L + 1] (``obs``, ``action``, ``reward``, ``task``) as Ajax episodes.

    Drops row 0's placeholder action and reward; ``task`` ids index ``names`` (the task set).
    A task's widths are the columns its data ever fills (padding is zero in the reference).
    """
    obs, action = np.asarray(obs, np.float32), np.asarray(action, np.float32)
    reward, task = np.asarray(reward, np.float32), np.asarray(task)
    if obs.ndim != 3 or action.shape[:2] != obs.shape[:2] or reward.shape[:2] != obs.shape[:2]:
        raise DatasetError(
            f"official data must be TensorDicts [E, L + 1] (obs {obs.shape}, action "
            f"{action.shape}, reward {reward.shape}); is this a TD-MPC2 dataset?"
        )
    reward = reward.reshape(obs.shape[:2])
    ids = task.reshape(obs.shape[0], -1)[:, 0].astype(np.int64)
    tasks, episodes = [], {}
    for i in np.unique(ids):
        if not 0 <= i < len(names):
            raise DatasetError(
                f"task id {i} is not in the task set ({len(names)} tasks); pass the --task-set "
                "the data was made for"
            )
        rows = ids == i
        o, a = obs[rows], np.nan_to_num(action[rows][:, 1:])
        o_dim, a_dim = _used_width(o), _used_width(a)
        e, length = o.shape[0], o.shape[1] - 1
        episodes[names[i]] = Episodes(
            obs=o[..., :o_dim],
            action=a[..., :a_dim],
            reward=np.nan_to_num(reward[rows][:, 1:]),
            terminated=np.zeros((e, length), bool),
            length=np.full((e,), length, np.int32),
        )
        tasks.append(TaskMeta(names[i], "", o_dim, a_dim, length, e, source={"format": "official"}))
    return Dataset(tuple(tasks), episodes)


def _load_pt(path: Path) -> dict:
    """One official ``*.pt`` TensorDict as a dict of numpy arrays: read without torch
    (:mod:`ajax.buffers.torch_pickle`), or with torch and tensordict where that reader does not
    know the file's pickle (e.g. another tensordict version's)."""
    try:
        return torch_pickle.load(path)
    except torch_pickle.UnsupportedPickle as unsupported:
        try:
            import torch
        except ImportError as err:
            raise DatasetError(
                f"{path}: {unsupported}; reading it needs torch and tensordict (pip install "
                "torch tensordict, CPU wheels), or convert it elsewhere to Ajax's format"
            ) from err
        td = torch.load(path, weights_only=False)
        return {k: td[k].numpy() for k in td.keys()}


def _read_official(root: Path, names) -> Dataset:
    if names is None:
        raise DatasetError(
            f"{root} holds an official TD-MPC2 dataset (*.pt), whose task ids need the task set "
            "it was made for: pass --task-set (mt30 or mt80)"
        )
    parts = []
    for path in sorted(root.glob("*.pt")):
        td = _load_pt(path)
        missing = [k for k in ("obs", "action", "reward", "task") if k not in td]
        if missing:
            raise DatasetError(f"{path} lacks {missing}; is this a TD-MPC2 dataset?")
        parts.append([np.asarray(td[k]) for k in ("obs", "action", "reward", "task")])
    stacked = [np.concatenate(xs) for xs in zip(*parts, strict=True)]
    return official_to_episodes(*stacked, tuple(names))


def load_dataset(root: str | Path, official_names=None) -> Dataset:
    """The dataset at ``root`` in either format (DatasetError names what is wrong);
    ``official_names`` are the task names an official dataset's task ids index."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"--dataset {root} is not a directory; collect one with 'ajax collect'")
    index = read_index(root)
    if index:
        return _read_ajax(root, index)
    if any(root.glob("*.pt")):
        return _read_official(root, official_names)
    raise DatasetError(
        f"{root} holds neither {INDEX} (Ajax's format, from 'ajax collect') nor *.pt files "
        "(the official TD-MPC2 format)"
    )
