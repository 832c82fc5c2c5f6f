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
import time

AGENTS = ("sac", "ppo", "crossq", "tdmpc2", "dreamerv3")


def _compile(fn, *args):
    """(compiled, seconds to lower and compile)."""
    import jax

    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def _median_s(compiled, args, repeats: int) -> float:
    import jax
    import numpy as np

    jax.block_until_ready(compiled(*args))  # warm
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(agent: str) -> dict:
    """{'compile_s', 'run_s'} of one agent in this interpreter."""
    import jax

    sys.path.insert(0, os.path.dirname(__file__))
    key = jax.random.PRNGKey(0)
    if agent in ("sac", "ppo", "crossq"):
        import model_free_speed as mf

        builders = {"sac": mf.ajax_sac, "ppo": mf.ajax_ppo, "crossq": mf.ajax_crossq}
        steps = mf.DEFAULT_STEPS[agent]
        train = builders[agent](steps, make_only=True)
        compiled, compile_s = _compile(train, key)
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(key))
        return {"compile_s": compile_s, "run_s": time.perf_counter() - t0}
    if agent == "tdmpc2":
        import jax.numpy as jnp
        import tdmpc2_speed as ts

        from ajax.agents.tdmpc2.act import ActState, act
        from ajax.agents.tdmpc2.update import update

        cfg, model, state, batch = ts.update_problem(1)
        step = lambda s, b, k: update(cfg, model, 0.99, s, b, k)[0]
        plan = lambda p, a, o, k: act(cfg, model, 0.99, p, a, o, k, False)
        planner = ActState.create(1, cfg.planner.horizon, ts.ACTION_DIM)
        plan_args = (state.params, planner, jnp.zeros((1, ts.OBS_DIM)), key)
        c_update, s_update = _compile(step, state, batch, key)
        c_plan, s_plan = _compile(plan, *plan_args)
        return {
            "compile_s": s_update + s_plan,
            "run_s": _median_s(c_update, (state, batch, key), 10)
            + _median_s(c_plan, plan_args, 10),
        }
    import dreamerv3_speed as ds

    from ajax.agents.dreamerv3 import DreamerV3Config
    from ajax.agents.dreamerv3.model import Nets
    from ajax.agents.dreamerv3.rssm import initial_state
    from ajax.agents.dreamerv3.update import init_state, train_step

    cfg = DreamerV3Config.preset("1m")
    nets = Nets.create(cfg, ds.OBS_DIM, ds.ACTION_DIM, False)
    args = (init_state(cfg, nets, key, ds.OBS_DIM), ds._batch(cfg, key),
            initial_state(cfg.rssm(ds.ACTION_DIM, False), cfg.batch_size), key)  # fmt: skip
    compiled, compile_s = _compile(lambda s, b, st, k: train_step(cfg, nets, s, b, st, k)[0], *args)
    return {"compile_s": compile_s, "run_s": _median_s(compiled, args, 5)}


def child(level: str, agents: list[str]) -> None:
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
        return child(args.child, agents)
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
