"""Env steps/s against devices and vmapped seeds: one table from one run.

Run from the repository root: ``python benchmarks/scaling.py [--agent sac] [--devices 1 2 4]
[--seeds-per-device 1 2 4] [--steps 2000] [--parallel seeds|data]``. With ``--parallel data``
the seeds are not split: one run's env and update batches are (``--seeds-per-device`` then
counts seeds in all, and the agent must be a replay agent). On a CPU machine the devices are forced
(``XLA_FLAGS=--xla_force_host_platform_device_count=max(--devices)``, set before JAX starts), so
they share the same cores: the table then shows the cost of partitioning, not a speed-up. On a
machine with several GPUs the same command measures real devices (no flag is forced there).

Each cell: the whole jitted run (``shard_map`` over the seed axis, or the data layout, as
``--devices`` and ``--parallel`` do),
compiled first, then timed over ``--repeats`` calls; env steps/s counts every seed's steps.
"""

from __future__ import annotations

import argparse
import os
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--agent", default="sac", choices=["sac", "td3", "ppo", "tdmpc2", "dreamerv3"])
parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
parser.add_argument("--seeds-per-device", type=int, nargs="+", default=[1, 2, 4])
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--parallel", default="seeds", choices=["seeds", "data"])
args = parser.parse_args()

if "cuda" not in os.environ.get("JAX_PLATFORMS", "") and "--xla_force_host" not in os.environ.get(
    "XLA_FLAGS", ""
):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "")
        + f" --xla_force_host_platform_device_count={max(args.devices)}"
    )

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config  # noqa: E402
from ajax.agents.ppo import PPO, PPOConfig  # noqa: E402
from ajax.agents.sac import SAC, SACConfig  # noqa: E402
from ajax.agents.td3 import TD3, TD3Config  # noqa: E402
from ajax.agents.tdmpc2 import TDMPC2, TDMPC2Config  # noqa: E402
from ajax.training.driver import segment_fn  # noqa: E402
from ajax.training.sharding import (  # noqa: E402
    CHUNKS_THEN_SEEDS,
    SEEDS,
    mesh_context,
    over_seeds,
    shard_seeds,
)

AGENTS = {
    "sac": (SAC, "Pendulum-v1", SACConfig(hidden=64, batch_size=128, learning_starts=256,
                                          buffer_size=10_000, eval_freq=1000, eval_episodes=1)),
    "td3": (TD3, "Pendulum-v1", TD3Config(hidden=64, batch_size=128, learning_starts=256,
                                          buffer_size=10_000, eval_freq=1000, eval_episodes=1)),
    "ppo": (PPO, "CartPole-v1", PPOConfig(hidden=64, n_envs=4, n_steps=128, eval_freq=2048,
                                          eval_episodes=1)),
    "tdmpc2": (TDMPC2, "Pendulum-v1", TDMPC2Config.preset(1, seed_steps=256, eval_freq=500,
                                                          eval_episodes=1)),
    # size1m at a smaller batch (4 x 16) and ratio 8: 250 updates in 2,000 env steps
    "dreamerv3": (DreamerV3, "Pendulum-v1", DreamerV3Config.preset(
        "1m", batch_size=4, batch_length=16, train_ratio=8.0, eval_freq=1000, eval_episodes=1)),
}  # fmt: skip


def steps_per_second(devices: int, n_seeds: int) -> tuple[float, float]:
    """(env steps/s over all seeds, compile s) of the whole run on ``devices`` devices."""
    cls, env, config = AGENTS[args.agent]
    algo = cls(env, config)
    chunks = algo.make_chunks(args.steps)
    mesh = algo.mesh(devices, n_seeds, args.parallel)
    segment = segment_fn(chunks.run_chunk, chunks.n_chunks)
    run = over_seeds(lambda k: segment(jax.vmap(chunks.init)(k)), mesh, (SEEDS, CHUNKS_THEN_SEEDS))
    keys = shard_seeds(jax.vmap(jax.random.PRNGKey)(jnp.arange(n_seeds)), mesh)
    start = time.perf_counter()
    with mesh_context(mesh):
        compiled = algo.jit(run).lower(keys).compile()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(keys))
        times.append(time.perf_counter() - start)
    steps = chunks.n_chunks * chunks.steps_per_chunk * n_seeds
    return steps / sorted(times)[len(times) // 2], compile_s


def main() -> None:
    platform = jax.devices()[0].platform
    print(f"{args.agent} ({args.parallel} layout): {args.steps} env steps per seed, "
          f"{len(jax.devices())} {platform} "
          f"device(s), {os.cpu_count()} cores; median of {args.repeats} compiled runs")  # fmt: skip
    header = "devices  seeds  env steps/s  per seed  vs 1 device same seeds  compile s"
    print(header)
    base: dict[int, float] = {}
    for per in args.seeds_per_device:
        for devices in args.devices:
            n = per * devices if args.parallel == "seeds" else per
            sps, compile_s = steps_per_second(devices, n)
            if devices == 1:
                base[n] = sps
            if n not in base:
                base[n] = steps_per_second(1, n)[0]
            print(f"{devices:7d}  {n:5d}  {sps:11.0f}  {sps / n:8.0f}  "
                  f"{sps / base[n]:22.2f}  {compile_s:9.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
