"""DreamerV3 speed on this machine: train step, policy step, whole jitted run, FLOP/s vs roofline.

Run from the repository root: ``python benchmarks/dreamerv3_speed.py [--sizes 1m 12m]``.
Shapes follow the official defaults: batch 16 x 64 (+ 1 context row), vector observations of
a small task (5 features, 1 continuous action: the shapes at which the official size1m has
637,446 parameters). Times are medians of compiled calls (compilation timed separately).
FLOPs are matmul FLOPs counted from the jaxpr (scans times their length). The last table
times the same jitted run with the replay on the device and with its rows in host memory
(``--replay-on host``), side by side, on an image env (``--replay-env``).

This script times Ajax only. The side-by-side ratio the project asks for needs the official
danijar/dreamerv3 in its own interpreter; that harness is not here yet (see the issue notes),
so no ratio is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))
from tdmpc2_speed import (  # noqa: E402
    _median_ms,
    compile_and_time,
    matmul_flops,
    matmul_gflops,
)

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config  # noqa: E402
from ajax.agents.dreamerv3.losses import Batch  # noqa: E402
from ajax.agents.dreamerv3.model import Nets, param_count  # noqa: E402
from ajax.agents.dreamerv3.rssm import initial_state  # noqa: E402
from ajax.agents.dreamerv3.update import act, init_carry, init_state, train_step  # noqa: E402

OBS_DIM, ACTION_DIM = 5, 1


def _batch(cfg: DreamerV3Config, key):
    b, t = cfg.batch_size, cfg.batch_length
    k1, k2, k3 = jax.random.split(key, 3)
    return Batch(
        obs=jax.random.normal(k1, (b, t, OBS_DIM)),
        prev_action=jax.random.uniform(k2, (b, t, ACTION_DIM), minval=-1, maxval=1),
        reward=jax.random.normal(k3, (b, t)),
        is_first=jnp.zeros((b, t), bool).at[:, 0].set(True),
        is_last=jnp.zeros((b, t), bool),
        is_terminal=jnp.zeros((b, t), bool),
    )


def train_problem(size: str):
    """(config, nets, train step, its args: fresh state, random batch, start latents, key) of
    the preset ``size``: the train step the DreamerV3 benchmarks time."""
    cfg = DreamerV3Config.preset(size)
    nets = Nets.create(cfg, OBS_DIM, ACTION_DIM, False)
    state = init_state(cfg, nets, jax.random.PRNGKey(0), OBS_DIM)
    batch = _batch(cfg, jax.random.PRNGKey(1))
    start = initial_state(cfg.rssm(ACTION_DIM, False), cfg.batch_size)
    step = lambda s, b, st, k: train_step(cfg, nets, s, b, st, k)[0]
    return cfg, nets, step, (state, batch, start, jax.random.PRNGKey(2))


def bench_size(size: str, repeats: int) -> dict:
    cfg, nets, step, args = train_problem(size)
    state, key = args[0], args[-1]
    compile_s, train_ms = compile_and_time(step, args, repeats)
    flops = matmul_flops(jax.make_jaxpr(step)(*args).jaxpr)
    carry = init_carry(cfg, 1, ACTION_DIM, False)
    obs, first = jnp.zeros((1, OBS_DIM)), jnp.ones((1,), bool)
    pol = lambda p, c, o, f, k: act(nets, p, c, o, f, k, False)
    policy_ms = _median_ms(pol, (state.params, carry, obs, first, key), repeats * 5)
    return dict(
        params=param_count(state.params),
        compile_s=compile_s,
        train_ms=train_ms,
        gflop=flops / 1e9,
        policy_ms=policy_ms,
    )


def bench_run(size: str, steps: int, ratio: float, env: str = "CartPole-v1",
              replay_on: str = "device") -> float:  # fmt: skip
    cfg = DreamerV3Config.preset(size, train_ratio=ratio, eval_freq=steps, eval_episodes=1,
                                 replay_on=replay_on)  # fmt: skip
    algo = DreamerV3(env, cfg)
    algo.train(seed=0, total_steps=steps)  # compile and warm
    start = time.perf_counter()
    jax.block_until_ready(algo.train(seed=1, total_steps=steps).state)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["1m", "12m"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--run-steps", type=int, default=1000)
    parser.add_argument("--run-ratio", type=float, default=512.0)
    parser.add_argument("--replay-env", default="Breakout-MinAtar")
    args = parser.parse_args()
    print(f"device: {jax.devices()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    mm = matmul_gflops(1024, 1024, 1024, 10)
    print(f"plain matmul 1024^3: {mm:.1f} GFLOP/s")
    print(f"{'size':>5} {'params':>10} {'compile s':>9} {'train ms':>9} {'GFLOP':>7} "
          f"{'GFLOP/s':>8} {'roofline':>8} {'policy ms':>9}")  # fmt: skip
    for size in args.sizes:
        r = bench_size(size, args.repeats)
        gfs = r["gflop"] / r["train_ms"] * 1e3
        print(
            f"{size:>5} {r['params']:>10,} {r['compile_s']:>9.1f} {r['train_ms']:>9.1f}"
            f" {r['gflop']:>7.2f} {gfs:>8.1f} {gfs / mm:>8.2f} {r['policy_ms']:>9.2f}"
        )
    sps = bench_run(args.sizes[0], args.run_steps, args.run_ratio)
    print(
        f"whole jitted run, size {args.sizes[0]}, CartPole-v1, ratio {args.run_ratio:g}, "
        f"{args.run_steps} steps: {sps:.1f} env steps/s"
    )
    rates = {where: bench_run(args.sizes[0], args.run_steps, args.run_ratio, args.replay_env,
                              where) for where in ("device", "host")}  # fmt: skip
    print(
        f"replay placement, size {args.sizes[0]}, {args.replay_env}, ratio {args.run_ratio:g}: "
        f"device {rates['device']:.1f}, host {rates['host']:.1f} env steps/s, "
        f"host/device {rates['host'] / rates['device']:.2f}x"
    )


if __name__ == "__main__":
    main()
