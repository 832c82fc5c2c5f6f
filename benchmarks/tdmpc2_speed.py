"""TD-MPC2 speed: median ms per update (batch 256, H 3) and per planning decision at model sizes
1 and 5, and env steps/s of a whole jitted training run (issue 5).

Usage: ``python benchmarks/tdmpc2_speed.py [--repeats 20] [--run-steps 2000]``. Prints one table
next to the official PyTorch numbers measured on the reference machine.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from ajax.agents.tdmpc2 import TDMPC2, TDMPC2Config, WorldModel
from ajax.agents.tdmpc2.act import ActState, act
from ajax.agents.tdmpc2.update import init_state, update
from ajax.buffers.windows import TDMPC2Slice

OFFICIAL_MS = {1: (226.0, 279.0), 5: (722.0, 744.0)}  # (update, plan) on the machine
OBS_DIM, ACTION_DIM = 24, 6  # a walker-sized task


def _median_ms(fn, args, repeats):
    jax.block_until_ready(fn(*args))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(1e3 * (time.perf_counter() - start))
    return float(np.median(times))


def bench_size(size: int, repeats: int) -> tuple[float, float]:
    cfg = TDMPC2Config.preset(size)
    model = WorldModel(cfg, ACTION_DIM)
    state = init_state(cfg, model, jax.random.PRNGKey(0), OBS_DIM)
    H, B = cfg.planner.horizon, cfg.batch_size
    k = jax.random.split(jax.random.PRNGKey(1), 3)
    batch = TDMPC2Slice(
        obs=jax.random.normal(k[0], (H + 1, B, OBS_DIM)),
        action=jax.random.uniform(k[1], (H, B, ACTION_DIM), minval=-1, maxval=1),
        reward=jax.random.normal(k[2], (H, B)),
        terminated=jnp.zeros((H, B), bool),
    )
    step = jax.jit(lambda s, b, key: update(cfg, model, 0.99, s, b, key)[0])
    update_ms = _median_ms(step, (state, batch, jax.random.PRNGKey(2)), repeats)
    planner = ActState.create(1, H, ACTION_DIM)
    plan = jax.jit(lambda p, a, o, key: act(cfg, model, 0.99, p, a, o, key, False))
    obs = jnp.zeros((1, OBS_DIM))
    plan_ms = _median_ms(plan, (state.params, planner, obs, jax.random.PRNGKey(3)), repeats)
    return update_ms, plan_ms


def bench_run(steps: int) -> float:
    cfg = TDMPC2Config.preset(1, eval_freq=steps, eval_episodes=1, seed_steps=min(1000, steps // 2))
    agent = TDMPC2("Pendulum-v1", cfg)
    chunks = agent.make_chunks(steps)
    run = jax.jit(lambda s: chunks.run_chunk(s)[0])
    state = jax.jit(chunks.init)(jax.random.PRNGKey(0))
    compiled = run.lower(state).compile()
    start = time.perf_counter()
    jax.block_until_ready(compiled(state))
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--run-steps", type=int, default=2000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5])
    args = parser.parse_args()
    jax.config.update("jax_default_matmul_precision", "highest")
    print(f"device: {jax.devices()[0]}")
    print(
        f"{'size':>4} {'update ms':>10} {'official':>9} {'plan ms':>9} {'official':>9} {'speed-up':>9}"
    )
    for size in args.sizes:
        upd, pln = bench_size(size, args.repeats)
        o_upd, o_pln = OFFICIAL_MS.get(size, (float("nan"),) * 2)
        ratio = min(o_upd / upd, o_pln / pln)
        print(f"{size:>4} {upd:>10.1f} {o_upd:>9.0f} {pln:>9.1f} {o_pln:>9.0f} {ratio:>8.1f}x")
    sps = bench_run(args.run_steps)
    print(
        f"whole jitted run, size 1, Pendulum-v1, {args.run_steps} steps incl. eval: "
        f"{sps:.1f} env steps/s"
    )


if __name__ == "__main__":
    main()
