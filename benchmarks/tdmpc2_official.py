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
refuses CPU tensors; both apply the same formula). The edits made are printed on stderr.

The configuration is the official ``config.yaml`` with what ``common.parser.parse_cfg`` would
derive for a single state task, set here because parse_cfg needs a Hydra run: the model size's
dims from ``common.MODEL_SIZE``, ``bin_size``, one task, and the sizes below.
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
                  f" capturable {counts[2]}", file=sys.stderr)  # fmt: skip
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="official tdmpc2 checkout")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--compile", action="store_true", help="torch.compile, as cfg.compile")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    for name, default in (("obs-dim", 24), ("action-dim", 6), ("episode-length", 1000),
                          ("batch-size", 256), ("horizon", 3), ("iterations", 6),
                          ("num-samples", 512)):  # fmt: skip
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = cpu_copy(args.repo, Path(tmp))
        sys.path.insert(0, str(root))
        for size in args.sizes:
            print(json.dumps(bench(root, size, args.compile, args)), flush=True)


if __name__ == "__main__":
    main()
