"""Times the official TD-MPC2 (nicklashansen/tdmpc2) on CPU; run by ``tdmpc2_speed.py``.

This script runs in the official code's own interpreter (torch, tensordict, omegaconf; see the
README's "Benchmarks"), never in Ajax's: it imports neither JAX nor Ajax. It prints one JSON
line per model size: median ms of one update (``TDMPC2._update`` on a random batch) and of one
planning decision (``TDMPC2.act``, which plans when ``mpc`` is on), with ``compile`` set as
asked, so eager and ``torch.compile`` are two runs of this script.

The official source hard-codes CUDA. As when the parity fixtures were made
(tests/agents/tdmpc2/fixtures/PROVENANCE.md), a throwaway copy of ``<repo>/tdmpc2`` gets three
kinds of edit and nothing else: device strings ``"cuda"``/``"cuda:0"`` become ``"cpu"``,
``.cuda()`` becomes ``.cpu()``, and Adam's ``capturable=True`` becomes ``False`` (capturable Adam
refuses CPU tensors; both apply the same formula); for the whole run, the replay's
``torch.cuda.mem_get_info()`` (common/buffer.py:53) becomes ``(0, 0)``, so it keeps its storage
in CPU memory, its own branch for a GPU without room. The edits made are printed on stderr.

The configuration is the official ``config.yaml`` with what ``common.parser.parse_cfg`` would
derive for a single state task, set here because parse_cfg needs a Hydra run: the model size's
dims from ``common.MODEL_SIZE``, ``bin_size``, one task, and the sizes below.

``--compile`` sets ``torch._inductor.config.pattern_matcher = False`` first: with it on, the
inductor's pattern matcher raises ``RuntimeError: Not all inputs to pattern found in
match.kwargs ... slice_shape`` while compiling this code on CPU (torch 2.13); its rows say
``"pattern_matcher": false``.

``--whole-run TASK`` instead times the official online trainer (``trainer/online_trainer.py``
``OnlineTrainer.train``, its own loop, buffer and ``envs.make_env``) on the DMC task TASK for
``--run-seed-steps`` seed steps and then ``--run-steps`` steps: env steps/s from the first env
step after the pretraining burst (the seed_steps updates at step seed_steps) to the last, from
the arrival time of every env step. Two changes to what ``train.py`` does, both printed in the
row: ``seed_steps`` is set (``make_env`` sets max(1000, 5 T)), and ``OnlineTrainer.eval`` is
replaced by a no-op (it would play ``eval_episodes`` planning episodes at step 0, before the
timed window; the window holds no evaluation either way). Two gymnasium 0.x behaviours the
official ``envs/`` needs are shimmed for the interpreter's gymnasium 1.x
(:func:`gymnasium_1x_shims`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

EDITS = (
    (re.compile(r"""(['"])cuda(:\d+)?\1"""), "'cpu'"),
    (re.compile(r"\.cuda\(\)"), ".cpu()"),
    (re.compile(r"capturable\s*=\s*True"), "capturable=False"),
    # common/buffer.py:53 asks CUDA for its free memory; (0, 0) takes its own CPU branch
    (re.compile(r"torch\.cuda\.mem_get_info\(\)"), "(0, 0)"),
)


def cpu_copy(repo: Path, into: Path) -> Path:
    """Copy ``repo/tdmpc2`` to ``into`` with the CPU edits; return the copy's root."""
    src = repo / "tdmpc2"
    dst = into / "tdmpc2"
    shutil.copytree(src, dst)
    for path in sorted(dst.rglob("*.py")):
        text = path.read_text()
        counts = []
        for pattern, repl in EDITS:
            text, n = pattern.subn(repl, text)
            counts.append(n)
        if any(counts):
            path.write_text(text)
            print(f"edited {path.relative_to(dst)}: device {counts[0]}, .cuda() {counts[1]},"
                  f" capturable {counts[2]}, mem_get_info {counts[3]}", file=sys.stderr)  # fmt: skip
    return dst


def official_config(root: Path, size: int, compile_: bool, args):
    """The official config.yaml with parse_cfg's derived fields for one state task."""
    from common import MODEL_SIZE  # the official size table, not a copy of it
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(root / "config.yaml")
    for key, value in MODEL_SIZE[size].items():
        cfg[key] = value
    fields = dict(
        task="ajax-benchmark", obs="state", episodic=False, multitask=False, task_dim=0,
        obs_shape={"state": [args.obs_dim]}, action_dim=args.action_dim,
        episode_length=args.episode_length, batch_size=args.batch_size, horizon=args.horizon,
        iterations=args.iterations, num_samples=args.num_samples, compile=compile_, mpc=True,
        model_size=size, seed=0, seed_steps=1000,
    )  # fmt: skip
    for key, value in fields.items():
        cfg[key] = value
    cfg.tasks = [cfg.task]
    cfg.action_dims = [args.action_dim]
    cfg.episode_lengths = [args.episode_length]
    cfg.bin_size = (cfg.vmax - cfg.vmin) / (cfg.num_bins - 1)
    return cfg


def median_ms(fn, warmup: int, repeats: int) -> float:
    for _ in range(warmup):  # the first calls compile (torch.compile) or warm allocators
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    times.sort()
    return times[len(times) // 2]


def bench(root: Path, size: int, compile_: bool, args) -> dict:
    import torch
    from tdmpc2 import TDMPC2

    torch.manual_seed(0)
    cfg = official_config(root, size, compile_, args)
    agent = TDMPC2(cfg)
    H, B = cfg.horizon, cfg.batch_size
    obs = torch.randn(H + 1, B, args.obs_dim)
    action = torch.rand(H, B, args.action_dim) * 2 - 1
    reward = torch.randn(H, B, 1)
    terminated = torch.zeros(H, B, 1)
    one_obs = torch.zeros(args.obs_dim)
    update = lambda: agent._update(obs, action, reward, terminated)  # noqa: E731
    plan = lambda: agent.act(one_obs, t0=False, eval_mode=False)  # noqa: E731
    start = time.perf_counter()
    update(), plan()  # compiles both when cfg.compile
    first_s = time.perf_counter() - start
    return {
        "size": size,
        "compile": compile_,
        "update_ms": median_ms(update, args.warmup, args.repeats),
        "plan_ms": median_ms(plan, args.warmup, args.repeats),
        "first_call_s": first_s,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def gymnasium_1x_shims(gymnasium) -> None:
    """The gymnasium 0.x behaviours ``envs/`` relies on, under the interpreter's gymnasium 1.x:
    ``logger.set_level`` (called at envs/__init__.py:62) as a no-op; a ``Wrapper`` that wraps an
    env which is not a ``gymnasium.Env`` (envs/dmcontrol.py's DMControlWrapper, under
    wrappers/timeout.py's Timeout; 1.x asserts it is one); and a ``Wrapper`` that forwards
    unknown attributes to the env it wraps (``max_episode_steps``, ``rand_act``). The official
    wrappers keep their own 4-tuple ``step``, which ``Wrapper`` passes through unchanged."""
    if not hasattr(gymnasium.logger, "set_level"):
        gymnasium.logger.set_level = lambda level: None
    init = gymnasium.Wrapper.__init__

    def wrap_any(self, env):
        if isinstance(env, gymnasium.Env):
            return init(self, env)
        self.env = env
        self._action_space = self._observation_space = self._metadata = None
        self._reward_range = None
        self._cached_spec = None

    def forward(self, name):  # 0.x forwarded unknown attributes (max_episode_steps, rand_act)
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    gymnasium.Wrapper.__init__ = wrap_any
    gymnasium.Wrapper.__getattr__ = forward


class _Logger:
    """What ``OnlineTrainer`` asks of ``common.logger.Logger``, writing nothing."""

    def log(self, metrics, category):
        pass

    def finish(self, agent):
        pass


def whole_run(root: Path, size: int, args) -> dict:
    """Env steps/s of the official online trainer after seeding (module docstring)."""
    import gymnasium
    import torch

    gymnasium_1x_shims(gymnasium)
    from common.buffer import Buffer
    from envs import make_env
    from tdmpc2 import TDMPC2
    from trainer.online_trainer import OnlineTrainer

    torch.manual_seed(0)
    cfg = official_config(root, size, False, args)
    cfg.task, cfg.tasks, cfg.task_title = args.whole_run, [args.whole_run], args.whole_run
    env = make_env(cfg)  # sets obs_shape, action_dim, episode_length, seed_steps
    cfg.action_dims, cfg.episode_lengths = [cfg.action_dim], [cfg.episode_length]
    cfg.seed_steps, cfg.steps = args.run_seed_steps, args.run_seed_steps + args.run_steps
    if cfg.seed_steps <= cfg.episode_length:  # buffer.sample needs one finished episode
        raise SystemExit(f"--run-seed-steps must exceed the episode length {cfg.episode_length}")
    cfg.save_video, cfg.eval_freq = False, cfg.steps + 1
    stamps = []
    step = env.step

    def timed(action):
        out = step(action)
        stamps.append(time.perf_counter())
        return out

    env.step = timed
    trainer = OnlineTrainer(cfg=cfg, env=env, agent=TDMPC2(cfg), buffer=Buffer(cfg),
                            logger=_Logger())  # fmt: skip
    trainer.eval = lambda: {}
    trainer.train()
    first = cfg.seed_steps + 1  # the first env step after the pretraining burst
    return {
        "size": size,
        "whole_run": args.whole_run,
        "steps_per_s": (len(stamps) - 1 - first) / (stamps[-1] - stamps[first]),
        "timed_steps": len(stamps) - 1 - first,
        "seed_steps": cfg.seed_steps,
        "action_repeat": 2,  # envs/dmcontrol.py's ActionRepeatWrapper
        "eval": "replaced by a no-op",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="official tdmpc2 checkout")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--compile", action="store_true", help="torch.compile, as cfg.compile")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--whole-run", metavar="TASK", help="time the online trainer on TASK")
    parser.add_argument("--run-seed-steps", type=int, default=1000)
    parser.add_argument("--run-steps", type=int, default=300)
    for name, default in (("obs-dim", 24), ("action-dim", 6), ("episode-length", 1000),
                          ("batch-size", 256), ("horizon", 3), ("iterations", 6),
                          ("num-samples", 512)):  # fmt: skip
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    if args.compile:  # see the module docstring
        import torch._inductor.config

        torch._inductor.config.pattern_matcher = False
    with tempfile.TemporaryDirectory() as tmp:
        root = cpu_copy(args.repo, Path(tmp))
        sys.path.insert(0, str(root))
        for size in args.sizes:
            if args.whole_run:
                row = whole_run(root, size, args)
            else:
                row = bench(root, size, args.compile, args)
                row["pattern_matcher"] = not args.compile
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
