"""One swept program against the same runs as separate processes, side by side in one run.

For each agent (SAC on Pendulum-v1 with 64-unit layers, PPO on CartPole-v1 with its defaults)
the grid is 3 learning rates x 4 seeds = 12 runs of ``--sac-steps`` / ``--ppo-steps`` env steps
each, run three ways through the command line,
each timed from process start to exit (imports, compile, training, writing the run
directories; what a user waits for):

- ``sweep``: one ``ajax sweep AGENT --set learning_rate=a,b,c --n-seeds 4`` (one program);
- ``per rate``: 3 processes ``ajax train AGENT --learning-rate r --n-seeds 4`` (seeds vmapped,
  the way a grid runs without sweeps);
- ``per run``: 12 processes ``ajax train AGENT --learning-rate r --seed s`` (one run each).

It prints env steps per second (12 x steps / wall seconds) of each and the ratios sweep / per
rate and sweep / per run. Each way runs in sequence on the same machine, nothing else running.

Usage::

    python benchmarks/sweep_speed.py [--agents sac,ppo] [--sac-steps N] [--ppo-steps N]
        [--out DIR] [--ways sweep,rate,run]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RATES = ("1e-4", "3e-4", "1e-3")
SEEDS = 4
SETTINGS = {  # agent: (env, extra flags); defaults otherwise (the agents' presets off)
    "sac": ("Pendulum-v1", ["--eval-episodes", "2", "--hidden", "64", "--learning-starts", "500"]),
    "ppo": ("CartPole-v1", ["--eval-episodes", "2"]),
}


def ajax(args: list[str]) -> float:
    """Run ``python -m ajax ARGS`` to its end; its wall seconds (a failure stops the benchmark
    with its output)."""
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ajax", *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"ajax {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return time.perf_counter() - t


def common(agent: str, steps: int) -> list[str]:
    env, extra = SETTINGS[agent]
    every = str(max(1, steps // 2))
    return ["--env", env, "--steps", str(steps), "--eval-freq", every, "--preset", "none",
            "--no-progress", *extra]  # fmt: skip


def time_ways(agent: str, steps: int, root: Path, ways: list[str]) -> dict[str, float]:
    """Wall seconds of each way of running the 12 runs."""
    base = common(agent, steps)
    wall = {}
    if "sweep" in ways:
        wall["sweep"] = ajax(["sweep", agent, *base, "--set", f"learning_rate={','.join(RATES)}",
                              "--n-seeds", str(SEEDS), "--out", str(root / "sweep")])  # fmt: skip
    train = ["train", agent, *base, "--learning-rate"]
    if "rate" in ways:
        wall["per rate"] = sum(
            ajax([*train, r, "--n-seeds", str(SEEDS), "--out", str(root / f"rate-{r}")])
            for r in RATES
        )
    if "run" in ways:
        wall["per run"] = sum(
            ajax([*train, r, "--seed", str(s), "--out", str(root / f"run-{r}-{s}")])
            for r in RATES
            for s in range(SEEDS)
        )
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", default="sac,ppo")
    parser.add_argument("--sac-steps", type=int, default=3_000)
    parser.add_argument("--ppo-steps", type=int, default=32_768)
    parser.add_argument("--ways", default="sweep,rate,run")
    parser.add_argument("--out", default=None, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    steps = {"sac": args.sac_steps, "ppo": args.ppo_steps}
    ways = args.ways.split(",")
    root = Path(args.out or tempfile.mkdtemp(prefix="sweep_speed-"))
    print(f"{len(RATES)} learning rates x {SEEDS} seeds = {len(RATES) * SEEDS} runs per agent; "
          "wall seconds from process start to exit, each way in sequence")  # fmt: skip
    print(f"{'agent':6s} {'steps/run':>9s} {'way':>9s} {'wall s':>8s} {'env steps/s':>12s}")
    try:
        for agent in args.agents.split(","):
            wall = time_ways(agent, steps[agent], root / agent, ways)
            total = len(RATES) * SEEDS * steps[agent]
            for way, seconds in wall.items():
                print(f"{agent:6s} {steps[agent]:9d} {way:>9s} {seconds:8.1f} "
                      f"{total / seconds:12.0f}")  # fmt: skip
            for other in ("per rate", "per run"):
                if "sweep" in wall and other in wall:
                    print(f"{agent:6s} ratio sweep / {other}: x {wall[other] / wall['sweep']:.2f}")
            sys.stdout.flush()
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
