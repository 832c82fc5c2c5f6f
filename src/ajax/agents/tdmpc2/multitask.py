"""Multi-task offline TD-MPC2: one model trained on a dataset of several tasks' episodes.

arXiv:2310.16828v2 Sec. 4.2 (mt30, mt80) and App. C; nicklashansen/tdmpc2
trainer/offline_trainer.py (HEAD e9f5932): no environment interaction, only updates on windows
sampled from the dataset, and every ``eval_freq`` updates an evaluation of each task by
planning (with its task id, action mask and discount). The update is the single-task one
(:func:`ajax.agents.tdmpc2.update.update`) given the windows' task ids and discounts.

The run plugs into the shared run machinery (checkpoints, resume, ``ajax eval``) as an
:class:`~ajax.training.algorithm.Algorithm` whose "env steps" are updates. The dataset is held
on the device and closed over by the jitted run, so it must fit in device memory (the official
mt30/mt80 datasets, 345M and 545M transitions, do not fit on one device; streaming them from
the host is not built).
"""

from __future__ import annotations

from typing import NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

import ajax.agents.tdmpc2.update as update_lib
from ajax.agents.tdmpc2.agent import planning_policy
from ajax.agents.tdmpc2.config import TDMPC2Config
from ajax.agents.tdmpc2.networks import WorldModel
from ajax.agents.tdmpc2.tasks import TASK_SETS, TaskSet, check_task_set, with_task_set_widths
from ajax.buffers.dataset import Dataset, DatasetError, load_dataset
from ajax.buffers.windows import TDMPC2Slice
from ajax.environments import make_env
from ajax.environments.wrappers import ActionRepeat, PadSpaces
from ajax.training.api import Algorithm, Chunks, Policy, evaluate, n_chunks_for


class OfflineState(flax.struct.PyTreeNode):
    """A multi-task offline run: the learner, the run's key and the updates done."""

    agent: update_lib.TDMPC2State
    key: jax.Array
    step: jax.Array


class TaskData(NamedTuple):
    """Every task's episodes padded to one shape: obs [E, L + 1, O], action [E, L, A],
    reward and terminated [E, L], length and task id [E]."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    length: np.ndarray
    task: np.ndarray


def task_set_of(dataset: Dataset) -> TaskSet:
    """The :class:`TaskSet` of a dataset's tasks, in its order."""
    t = dataset.tasks
    return TaskSet(
        names=tuple(m.name for m in t),
        obs_dims=tuple(m.obs_dim for m in t),
        action_dims=tuple(m.action_dim for m in t),
        episode_lengths=tuple(m.episode_length for m in t),
    )


def _pad(x: np.ndarray, rows: int, width: int | None = None) -> np.ndarray:
    """[E, R, ...] zero-padded to ``rows`` steps (and ``width`` features)."""
    widths = [(0, 0), (0, rows - x.shape[1])]
    return np.pad(x, widths + ([] if width is None else [(0, width - x.shape[2])]))


def stack_tasks(dataset: Dataset, tasks: TaskSet) -> TaskData:
    """The dataset's episodes zero-padded to the widest task and the longest episode."""
    length = max(tasks.episode_lengths)
    parts = []
    for i, name in enumerate(tasks.names):
        eps = dataset.episodes[name]
        parts.append(TaskData(
            obs=_pad(eps.obs.astype(np.float32), length + 1, tasks.obs_dim),
            action=_pad(eps.action.astype(np.float32), length, tasks.action_dim),
            reward=_pad(eps.reward.astype(np.float32), length),
            terminated=_pad(eps.terminated.astype(bool), length),
            length=eps.length.astype(np.int32),
            task=np.full((eps.length.shape[0],), i, np.int32),
        ))  # fmt: skip
    return TaskData(*(np.concatenate(xs) for xs in zip(*parts, strict=True)))


def episode_weights(task: np.ndarray, rule: str) -> np.ndarray | None:
    """Probability of drawing each valid episode (``task`` [V]: their task ids) by ``rule``:
    None for "episode" (uniform over episodes), 1 / (the task's valid episodes) / (tasks
    present) for "task", so every task fills an equal share of the batch."""
    if rule == "episode":
        return None
    _, inverse, counts = np.unique(task, return_inverse=True, return_counts=True)
    return (1.0 / (counts[inverse] * counts.size)).astype(np.float32)


def sample_windows(data: TaskData, valid: jax.Array, key, batch_size: int, horizon: int,
                   p: jax.Array | None = None):  # fmt: skip
    """B windows of H steps: an episode drawn from ``valid`` (those of >= H steps), uniformly
    or with probabilities ``p`` (:func:`episode_weights`), then a start uniform over its own
    (the single-task sampler's rule). Returns (batch-major :class:`TDMPC2Slice`, task ids [B])."""
    k_ep, k_start = jax.random.split(key)
    if p is None:
        e = valid[jax.random.randint(k_ep, (batch_size,), 0, valid.shape[0])]
    else:
        e = jax.random.choice(k_ep, valid, (batch_size,), p=p)
    n_starts = data.length[e] - horizon + 1
    start = jnp.floor(jax.random.uniform(k_start, (batch_size,)) * n_starts).astype(jnp.int32)
    t = start[:, None] + jnp.arange(horizon + 1)[None, :]
    rows, steps = e[:, None], t[:, :horizon]
    batch = TDMPC2Slice(
        obs=data.obs[rows, t],
        action=data.action[rows, steps],
        reward=data.reward[rows, steps],
        terminated=data.terminated[rows, steps],
    )
    return batch, data.task[e]


class MultitaskTDMPC2(Algorithm):
    """TD-MPC2 trained offline on several tasks at once (task embedding, action masks).

    ``MultitaskTDMPC2("data/", TDMPC2Config.preset(1)).train(seed, total_steps=updates)``: the
    dataset is Ajax's (``ajax collect``) or the official one (``task_set`` "mt30"/"mt80").
    Each task is evaluated on the env its data came from, padded to the model's spaces; a task
    without one (official data) records NaN.
    """

    name = "tdmpc2"
    config_cls = TDMPC2Config

    def __init__(self, dataset, config: TDMPC2Config | None = None, task_set: str | None = None):
        self.config = TDMPC2Config() if config is None else config
        if not isinstance(self.config, TDMPC2Config):
            raise TypeError(f"tdmpc2 needs a TDMPC2Config, got {type(self.config).__name__}")
        if self.config.protocol is not None:
            raise ValueError(
                f"protocol {self.config.protocol!r} is single-task online training "
                "(nicklashansen/tdmpc2 trainer/online_trainer.py); multi-task tdmpc2 trains "
                "offline on a dataset (trainer/offline_trainer.py): drop --protocol"
            )
        if self.config.episodic or self.config.action_repeat != 1:
            raise ValueError(
                "multi-task tdmpc2 trains on the dataset's own steps, non-episodic: drop "
                "--episodic and --action-repeat (the data records its repeat)"
            )
        if self.config.replay_on != "device":
            raise ValueError(
                "multi-task tdmpc2 samples its dataset, which it holds whole on the device; "
                "drop --replay-on"
            )
        if task_set is not None and task_set not in TASK_SETS:
            raise ValueError(f"unknown --task-set {task_set!r}; known: {', '.join(TASK_SETS)}")
        if task_set is not None:
            self.config = with_task_set_widths(self.config, task_set)
        data = load_dataset(dataset, TASK_SETS.get(task_set))
        if task_set is not None:
            check_task_set(task_set, data.names)
            order = {name: i for i, name in enumerate(TASK_SETS[task_set])}
            data = data._replace(tasks=tuple(sorted(data.tasks, key=lambda m: order[m.name])))
        if len(data.tasks) < 2:
            raise DatasetError(
                f"--multitask needs a dataset of >= 2 tasks; {dataset} holds {list(data.names)}: "
                "collect more tasks into it, or train one task with 'ajax train tdmpc2 --env ID'"
            )
        self.dataset, self.tasks = data, task_set_of(data)
        self.env_id = f"dataset:{dataset}"
        self.env_options = {"dataset": str(dataset)} | ({"task_set": task_set} if task_set else {})
        self.model = WorldModel(self.config, self.tasks.action_dim, tasks=self.tasks)
        self.eval_envs = tuple(self._eval_env(m) for m in data.tasks)
        self.env = self.eval_env = next((e for e in self.eval_envs if e is not None), None)
        self.is_jax = True

    def _eval_env(self, meta):
        """The task's env in agent steps, padded to the model's spaces (None: no env id)."""
        if not meta.env:
            return None
        env = make_env(meta.env, **meta.env_options)
        if meta.action_repeat > 1:
            env = ActionRepeat(env, meta.action_repeat)
        if env.spec.max_episode_steps != meta.episode_length:
            raise DatasetError(
                f"task {meta.name}: {meta.env} has episodes of {env.spec.max_episode_steps} agent "
                f"steps but its data {meta.episode_length}; collect it again"
            )
        return PadSpaces(env, self.tasks.obs_dim, self.tasks.action_dim)

    def policy(self, task: int = 0) -> Policy:
        discounts = self.tasks.discounts(self.config)
        return planning_policy(self.config, self.model, float(discounts[task]), task)

    def evaluate(self, agent_state, env_state, key, episodes: int) -> jax.Array:
        """Mean return over the tasks that have an env (each task's own scale)."""
        return jnp.nanmean(self.task_returns(agent_state, key, episodes))

    def task_returns(self, agent_state, key, episodes: int) -> jax.Array:
        """[T] mean return of ``episodes`` planned eval episodes per task (NaN: no env)."""
        keys = jax.random.split(key, len(self.eval_envs))
        out = [
            jnp.float32(jnp.nan) if env is None
            else evaluate(env, self.policy(i), agent_state, keys[i], episodes)
            for i, env in enumerate(self.eval_envs)
        ]  # fmt: skip
        return jnp.stack(out)

    def make_chunks(self, total_steps: int) -> Chunks:
        """Chunks of ``eval_freq`` updates, each ending with an evaluation of every task."""
        cfg, model, tasks = self.config, self.model, self.tasks
        horizon = cfg.planner.horizon
        data = stack_tasks(self.dataset, tasks)
        valid = np.nonzero(data.length >= horizon)[0]
        if valid.size == 0:
            raise DatasetError(f"no episode in the dataset has {horizon} steps (the horizon)")
        p = episode_weights(data.task[valid], cfg.task_sampling)
        data, valid = jax.tree.map(jnp.asarray, data), jnp.asarray(valid, jnp.int32)
        discounts = jnp.asarray(tasks.discounts(cfg))
        per_chunk = cfg.eval_freq

        def init(key) -> OfflineState:
            k_init, k_run = jax.random.split(key)
            agent = update_lib.init_state(cfg, model, k_init, tasks.obs_dim)
            return OfflineState(agent=agent, key=k_run, step=jnp.zeros((), jnp.int32))

        def one_update(agent, key):
            k_sample, k_update = jax.random.split(key)
            batch, task = sample_windows(data, valid, k_sample, cfg.batch_size, horizon, p)
            batch = update_lib.time_major(batch)
            return update_lib.update(cfg, model, discounts[task], agent, batch, k_update, task)

        def run_chunk(state: OfflineState):
            key, k_updates, k_eval = jax.random.split(state.key, 3)
            agent, metrics = jax.lax.scan(
                one_update, state.agent, jax.random.split(k_updates, per_chunk)
            )
            returns = self.task_returns(agent, k_eval, cfg.eval_episodes)
            record = {
                "step": state.step + per_chunk,
                "eval_return": jnp.nanmean(returns),
                "train_return": jnp.float32(jnp.nan),
                **{k: v[-1] for k, v in metrics.items()},
                **{f"eval_return/{name}": returns[i] for i, name in enumerate(tasks.names)},
            }
            return OfflineState(agent=agent, key=key, step=state.step + per_chunk), record

        return Chunks(init, run_chunk, per_chunk, n_chunks_for(total_steps, per_chunk))
