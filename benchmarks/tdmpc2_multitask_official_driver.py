"""The official multi-task offline TD-MPC2 trained on an Ajax dataset; run by
``tdmpc2_multitask_official.py``.

This script runs in the official code's own interpreter (torch, tensordict, torchrl; see
``shared/reference/README.md``), never in Ajax's: it imports neither JAX nor Ajax. It

1. converts the Ajax dataset (``ajax collect``: ``dataset.json`` and one ``<task>.npz`` of
   ``obs [E, L + 1, O]``, ``action [E, L, A]``, ``reward``/``terminated [E, L]``, ``length [E]``
   per task) to the official format: one TensorDict ``[E, L + 1]`` per task and episode length,
   saved with ``torch.save`` as ``<task>-<L>.pt``, laid out as the official online trainer's
   ``to_td`` writes an episode (row 0: the first observation, NaN action, reward and
   terminated; observations zero-padded to the widest task, actions to the most dimensions,
   as ``envs/wrappers/multitask.py``; ``task`` the task's index);
2. trains the official ``trainer/offline_trainer.py`` ``OfflineTrainer`` (its own ``train``
   loop, ``TDMPC2.update``, ``common/buffer.py`` ``Buffer`` and ``eval``) on those files;
3. evaluates with the official ``OfflineTrainer.eval`` (``eval_episodes`` planned episodes per
   task, ``agent.act(obs, t0, eval_mode=True, task)``) on Ajax's envs, which step in the
   caller's (Ajax's) interpreter: every ``reset(task)`` and ``step(action)`` is one JSON line
   on the file descriptors ``--fd-out`` (requests) and ``--fd-in`` (replies).

What the official code cannot take as it stands, and what is done instead (all printed in
the result's ``adaptations``):

- The source hard-codes CUDA: the CPU copy of ``tdmpc2_official.py`` (:func:`cpu_copy`:
  device strings, ``.cuda()``, capturable Adam, ``torch.cuda.mem_get_info``).
- ``OfflineTrainer.train`` asserts the task set is mt30 or mt80: ``cfg.task`` is "mt30" (read
  only by that assert, ``_load_dataset`` and the logger), ``cfg.tasks`` the dataset's tasks.
- ``OfflineTrainer._load_dataset`` sizes its Buffer for the released mt30/mt80 files (345M or
  550M rows, 501 or 101 per episode; a storage of that size is allocated at the first load)
  and asserts that length: it is replaced by the same steps with the dataset's own row count
  (``Buffer`` capacity = rows in the files) and no length assert (the tasks' episodes have
  different lengths; the official ``SliceSampler`` keys on ``episode`` and takes any length).
- ``common.parser.parse_cfg`` needs a Hydra run: the config is ``config.yaml`` with the
  fields it would set (``tdmpc2_official.official_config``'s way) and the dims given here.
- ``Logger`` (wandb, csv, saved agents) is a stub that keeps the printed metrics.
- ``eval`` runs at every ``eval_freq`` iterations as the trainer calls it; ``--eval-at``
  picks the iterations at which it really plays episodes (the others return no metrics), to
  spend the CPU on updates.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tdmpc2_official import cpu_copy  # noqa: E402  (no JAX, no Ajax in it)


def read_ajax_dataset(root: Path) -> list[tuple[dict, dict]]:
    """(meta, arrays) per task of an Ajax dataset, in ``dataset.json``'s order (task ids)."""
    index = json.loads((root / "dataset.json").read_text())
    out = []
    for name, meta in index["tasks"].items():
        with np.load(root / f"{name}.npz") as f:
            out.append((meta, {k: f[k] for k in f.files}))
    return out


def convert(root: Path, dst: Path) -> dict:
    """Write the official ``*.pt`` files of the Ajax dataset ``root`` into ``dst``; return the
    task names, widths and episode lengths (module docstring, step 1)."""
    import torch
    from tensordict import TensorDict

    tasks = read_ajax_dataset(root)
    obs_dim = max(m["obs_dim"] for m, _ in tasks)
    action_dim = max(m["action_dim"] for m, _ in tasks)
    dst.mkdir(parents=True, exist_ok=True)
    files = []
    for i, (meta, x) in enumerate(tasks):
        for length in np.unique(x["length"]):
            rows = x["length"] == length
            e, n = int(rows.sum()), int(length)
            obs = np.zeros((e, n + 1, obs_dim), np.float32)
            obs[..., : meta["obs_dim"]] = x["obs"][rows, : n + 1]
            action = np.full((e, n + 1, action_dim), np.nan, np.float32)
            action[:, 1:] = 0.0
            action[:, 1:, : meta["action_dim"]] = x["action"][rows, :n]
            reward = np.full((e, n + 1), np.nan, np.float32)
            reward[:, 1:] = x["reward"][rows, :n]
            terminated = np.full((e, n + 1), np.nan, np.float32)
            terminated[:, 1:] = x["terminated"][rows, :n]
            td = TensorDict(
                {"obs": torch.from_numpy(obs), "action": torch.from_numpy(action),
                 "reward": torch.from_numpy(reward), "terminated": torch.from_numpy(terminated),
                 "task": torch.full((e, n + 1), i, dtype=torch.int64)},
                batch_size=(e, n + 1),
            )  # fmt: skip
            path = dst / f"{i:02d}-{meta['name']}-{n}.pt"
            torch.save(td, path)
            files.append({"file": path.name, "episodes": e, "length": n,
                          "terminated": int(np.nansum(terminated))})  # fmt: skip
    return {
        "tasks": [m["name"] for m, _ in tasks],
        "obs_dims": [m["obs_dim"] for m, _ in tasks],
        "action_dims": [m["action_dim"] for m, _ in tasks],
        "episode_lengths": [m["episode_length"] for m, _ in tasks],
        "obs_dim": obs_dim,
        "action_dim": action_dim,
        "files": files,
    }


def official_config(root: Path, info: dict, args, data_dir: Path):
    """``config.yaml`` with the fields ``parse_cfg`` would set and this run's settings."""
    from common.parser import cfg_to_dataclass
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(root / "config.yaml")
    fields = dict(
        task="mt30", tasks=info["tasks"], multitask=True, obs="state", episodic=False,
        obs_shape={"state": [info["obs_dim"]]}, action_dim=info["action_dim"],
        action_dims=info["action_dims"], episode_lengths=info["episode_lengths"],
        episode_length=max(info["episode_lengths"]), obs_shapes=None,
        model_size=1, task_dim=96,  # parse_cfg: task_dim 96 at model size 1
        enc_dim=args.enc_dim, mlp_dim=args.mlp_dim, latent_dim=args.latent_dim,
        num_enc_layers=2, num_q=2,  # MODEL_SIZE[1]
        batch_size=args.batch_size, horizon=args.horizon, iterations=args.iterations,
        num_samples=args.num_samples, num_pi_trajs=args.num_pi_trajs,
        num_elites=args.num_elites, eval_episodes=args.eval_episodes, eval_freq=args.eval_freq,
        steps=args.updates + 1,  # train() evaluates at i % eval_freq == 0, i < steps
        compile=False, seed=args.seed, data_dir=str(data_dir), save_video=False,
        save_agent=False, enable_wandb=False, save_csv=False, work_dir=str(data_dir),
        task_title="MT-AJAX", seed_steps=0, wandb_project="none", wandb_entity="none",
        checkpoint="none",
    )  # fmt: skip
    for key, value in fields.items():
        cfg[key] = value
    cfg.bin_size = (cfg.vmax - cfg.vmin) / (cfg.num_bins - 1)
    return cfg_to_dataclass(cfg)


CONFIG_KEYS = (
    "enc_dim", "mlp_dim", "latent_dim", "num_enc_layers", "num_q", "task_dim", "batch_size",
    "horizon", "iterations", "num_samples", "num_pi_trajs", "num_elites", "eval_episodes",
    "eval_freq", "steps", "lr", "seed", "compile", "tasks", "action_dims", "episode_lengths",
)  # fmt: skip


class BridgeEnv:
    """The official multi-task env's interface (``reset(task_idx)``, 4-tuple ``step``) over
    Ajax's envs in the parent process: padded observations in, padded actions out."""

    def __init__(self, fd_in: int, fd_out: int):
        self.rx = os.fdopen(fd_in, "r")
        self.tx = os.fdopen(fd_out, "w")
        self.steps = 0
        self.seconds = 0.0

    def _call(self, msg: dict) -> dict:
        start = time.perf_counter()
        self.tx.write(json.dumps(msg) + "\n")
        self.tx.flush()
        reply = json.loads(self.rx.readline())
        self.seconds += time.perf_counter() - start
        return reply

    def reset(self, task_idx: int):
        import torch

        return torch.tensor(self._call({"cmd": "reset", "task": int(task_idx)})["obs"])

    def step(self, action):
        import torch

        self.steps += 1
        out = self._call({"cmd": "step", "action": [float(a) for a in action.reshape(-1)]})
        return torch.tensor(out["obs"]), out["reward"], out["done"], {"success": float("nan")}

    def close(self):
        self.tx.write(json.dumps({"cmd": "close"}) + "\n")
        self.tx.flush()


class StubLogger:
    """What ``OfflineTrainer`` asks of ``common.logger.Logger``; keeps every logged dict."""

    def __init__(self):
        self.rows = []

    def log(self, metrics, category):
        self.rows.append({k: float(v) if hasattr(v, "__float__") else v
                          for k, v in metrics.items()})  # fmt: skip

    def pprint_multitask(self, metrics, cfg):
        shown = {k: round(float(v), 2) for k, v in metrics.items() if "reward" in k}
        print(f"iteration {metrics['iteration']}: {shown}", flush=True)

    def save_agent(self, agent, identifier):
        pass

    def finish(self, agent):
        pass


def run(root: Path, args) -> dict:
    import torch
    from common.buffer import Buffer
    from common.seed import set_seed
    from tdmpc2 import TDMPC2
    from trainer.offline_trainer import OfflineTrainer

    data_dir = Path(tempfile.mkdtemp(prefix="mt_official_pt_"))
    start = time.perf_counter()
    info = convert(args.dataset, data_dir)
    convert_s = time.perf_counter() - start
    cfg = official_config(root, info, args, data_dir)
    set_seed(cfg.seed)

    class Offline(OfflineTrainer):
        def _load_dataset(self):
            """OfflineTrainer._load_dataset's steps, sized for these files (docstring)."""
            from copy import deepcopy
            from glob import glob

            fps = sorted(glob(os.path.join(self.cfg.data_dir, "*.pt")))
            tds = [torch.load(fp, weights_only=False) for fp in fps]
            _cfg = deepcopy(self.cfg)
            _cfg.buffer_size = _cfg.steps = sum(td.numel() for td in tds)
            self.buffer = Buffer(_cfg)
            for td in tds:
                self.buffer.load(td)
            print(f"Buffer: {self.buffer.num_eps} episodes, {_cfg.buffer_size} rows", flush=True)

    env = BridgeEnv(args.fd_in, args.fd_out)
    agent = TDMPC2(cfg)
    logger = StubLogger()
    trainer = Offline(cfg=cfg, env=env, agent=agent, buffer=None, logger=logger)

    update_s, n_updates = [0.0], [0]
    update = agent.update

    def timed_update(buffer):
        t = time.perf_counter()
        out = update(buffer)
        update_s[0] += time.perf_counter() - t
        n_updates[0] += 1
        if n_updates[0] % args.print_every == 0:
            rate = update_s[0] / n_updates[0]
            print(f"{n_updates[0]} updates, {1e3 * rate:.1f} ms each", flush=True)
        return out

    agent.update = timed_update
    evals, calls, official_eval = [], itertools.count(), trainer.eval
    eval_at = set(args.eval_at)

    def chosen_eval():
        i = next(calls) * cfg.eval_freq
        if i not in eval_at:
            return {}
        if args.save_agent:  # the weights evaluated, for a later look
            agent.save(args.save_agent / f"official_agent_{i}.pt")  # its model's state dict
        t, plays = time.perf_counter(), env.steps
        out = official_eval()
        rewards = {k.split("+", 1)[1]: float(v) for k, v in out.items()
                   if k.startswith("episode_reward+")}  # fmt: skip
        evals.append({"iteration": i, "updates": n_updates[0], "returns": rewards,
                      "seconds": time.perf_counter() - t, "env_steps": env.steps - plays})  # fmt: skip
        print(json.dumps(evals[-1]), flush=True)
        return out

    trainer.eval = chosen_eval
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    env.close()
    return {
        "updates": n_updates[0],
        "update_ms": 1e3 * update_s[0] / max(n_updates[0], 1),
        "train_wall_s": wall,
        "convert_s": convert_s,
        "bridge_s": env.seconds,
        "evals": evals,
        "logged": logger.rows,
        "dataset": info,
        "config": {k: getattr(cfg, k) for k in CONFIG_KEYS},
        "discounts": [float(d) for d in agent.discount],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "adaptations": [
            "CPU copy (tdmpc2_official.cpu_copy)",
            "cfg.task='mt30' for train()'s assert; cfg.tasks = the dataset's tasks",
            "_load_dataset sized to the dataset's rows, no 501-row assert",
            "config.yaml + parse_cfg's fields set here (no Hydra)",
            "Logger stubbed",
            f"eval played only at iterations {sorted(eval_at)}",
            "envs: Ajax's, stepped in the parent over a pipe",
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="official tdmpc2 checkout")
    parser.add_argument("--dataset", type=Path, required=True, help="an Ajax dataset folder")
    parser.add_argument("--out", type=Path, required=True, help="result JSON")
    parser.add_argument("--fd-in", type=int, required=True)
    parser.add_argument("--fd-out", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--updates", type=int, default=24_000)
    parser.add_argument("--eval-freq", type=int, default=4_000)
    parser.add_argument("--eval-at", type=int, nargs="*", default=[20_000, 24_000])
    parser.add_argument("--print-every", type=int, default=500)
    parser.add_argument("--save-agent", type=Path, help="folder for the evaluated weights")
    for name, default in (("enc-dim", 128), ("mlp-dim", 128), ("latent-dim", 64),
                          ("batch-size", 128), ("horizon", 3), ("iterations", 4),
                          ("num-samples", 256), ("num-pi-trajs", 16), ("num-elites", 32),
                          ("eval-episodes", 8), ("seed", 0)):  # fmt: skip
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()

    import torch

    warnings.filterwarnings("ignore")  # as train.py; np.nanmean of the NaN successes
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = cpu_copy(args.repo, Path(tmp))
        sys.path.insert(0, str(root))
        result = run(root, args)
    args.out.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({k: result[k] for k in ("updates", "update_ms", "train_wall_s", "evals")}))


if __name__ == "__main__":
    main()
