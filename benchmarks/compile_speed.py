"""Compile time and run time at XLA's default LLVM level beside ``--xla_backend_optimization_level=1``.

Usage: ``python benchmarks/compile_speed.py [--levels default 1] [--agents sac,ppo,crossq,tdmpc2,dreamerv3]``

XLA reads ``XLA_FLAGS`` once, when its CPU backend starts, so each level runs in its own
interpreter (this script, ``--child LEVEL``), one after the other in the same run, and the
table prints each level's seconds and their ratio to the first level's. What is timed per agent
(compile = ``jit(...).lower(...).compile()``; run = the compiled call, blocked on):

- sac, ppo, crossq: the whole jitted run of ``model_free_speed.py``'s settings (SAC 5,000
  steps, PPO 262,144, CrossQ 3,000), compiled, then run once;
- tdmpc2: the size-1 update and one planning step (``tdmpc2_speed.update_problem``), median
  of 10 calls;
- dreamerv3: the size1m train step at batch 16 x 64 (``dreamerv3_speed.py``'s problem),
  median of 5 calls.

The test suite compiles at level 1 (tests/conftest.py); the README says what this measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

AGENTS = ("sac", "ppo", "crossq", "tdmpc2", "dreamerv3")


def measure(agent: str) -> dict:
    """{'compile_s', 'run_s'} of one agent in this interpreter (the problems and timers are the
    other benchmarks')."""
    sys.path.insert(0, os.path.dirname(__file__))
    if agent in ("sac", "ppo", "crossq"):
        import model_free_speed as mf

        builders = {"sac": mf.ajax_sac, "ppo": mf.ajax_ppo, "crossq": mf.ajax_crossq}
        train = builders[agent](mf.DEFAULT_STEPS[agent], make_only=True)
        compile_s, run_s = mf.compile_and_run(train)
        return {"compile_s": compile_s, "run_s": run_s}
    if agent == "tdmpc2":
        from tdmpc2_speed import compile_and_time, update_and_plan

        _, update, plan = update_and_plan(1)
        compile_update, ms_update = compile_and_time(*update, 10)
        compile_plan, ms_plan = compile_and_time(*plan, 10)
        return {"compile_s": compile_update + compile_plan, "run_s": (ms_update + ms_plan) / 1e3}
    from dreamerv3_speed import train_problem
    from tdmpc2_speed import compile_and_time

    _, _, step, args = train_problem("1m")
    compile_s, ms = compile_and_time(step, args, 5)
    return {"compile_s": compile_s, "run_s": ms / 1e3}


def child(agents: list[str]) -> None:
    for agent in agents:
        print("RESULT " + json.dumps({"agent": agent, **measure(agent)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", nargs="+", default=["default", "1"])
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    agents = args.agents.split(",")
    unknown = sorted(set(agents) - set(AGENTS))
    if unknown:
        parser.error(f"unknown agents {unknown}; choose from {', '.join(AGENTS)}")
    if args.child is not None:
        return child(agents)
    rows = {}
    for level in args.levels:
        flags = [
            f for f in os.environ.get("XLA_FLAGS", "").split() if "optimization_level" not in f
        ]
        if level != "default":
            flags.append(f"--xla_backend_optimization_level={level}")
        env = {**os.environ, "XLA_FLAGS": " ".join(flags), "JAX_PLATFORMS": "cpu"}
        out = subprocess.run(
            [sys.executable, __file__, "--child", level, "--agents", ",".join(agents)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        results = [json.loads(ln[7:]) for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        if out.returncode != 0 or len(results) != len(agents):
            sys.exit(f"level {level} failed:\n{out.stderr[-3000:]}")
        rows[level] = {r["agent"]: r for r in results}
    first = args.levels[0]
    print(f"load {os.getloadavg()[0]:.1f}; ratios are against level {first}")
    print(
        f"{'agent':10s} {'level':>8s} {'compile s':>10s} {'run s':>8s} {'compile x':>10s} {'run x':>7s}"
    )
    for agent in agents:
        for level in args.levels:
            r, base = rows[level][agent], rows[first][agent]
            print(f"{agent:10s} {level:>8s} {r['compile_s']:10.1f} {r['run_s']:8.3f} "
                  f"{r['compile_s'] / base['compile_s']:10.2f} {r['run_s'] / base['run_s']:7.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
