"""Image envs: env steps/s inside one jitted scan, and DreamerV3's replay bytes per million frames.

Run from the repository root: ``python benchmarks/image_envs.py [--envs 16] [--steps 2000]``.
Two tables from one run:

1. each JAX image env (gymnax MinAtar, Craftax-Classic pixels) stepped with uniform random
   actions in a jitted ``lax.scan`` over ``--envs`` vectorised envs, compiled first, then timed,
   and each host image env (rendered dm_control, Atari) stepped in Python over ``--envs``
   simulators: env steps/s;
2. the bytes DreamerV3's sequence replay holds per million frames (one env), read off the
   shapes it allocates (``Algorithm.replay_nbytes``) at size1m and size12m, with the images
   stored as uint8 against what float32 storage would need, and how much of it stays on the
   device with ``--replay-on host`` (the flags; the rest is in host memory).

"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from ajax import make_env
from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config
from ajax.environments import list_envs

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--envs", type=int, default=16)
parser.add_argument("--steps", type=int, default=2000, help="vector steps per timed call")
parser.add_argument("--repeats", type=int, default=3)
parser.add_argument("--host-steps", type=int, default=100, help="vector steps of each host env")
args = parser.parse_args()


def steps_per_second(env_id: str) -> float:
    env = make_env(env_id, n_envs=args.envs)
    n_actions = env.spec.action_space.n

    @jax.jit
    def run(key):
        def step(state, key):
            k_a, k_e = jax.random.split(key)
            action = jax.random.randint(k_a, (args.envs,), 0, n_actions)
            ts = env.step(k_e, state, action)
            return ts.state, ts.reward.sum()

        ts = env.reset(key)
        _, rewards = jax.lax.scan(step, ts.state, jax.random.split(key, args.steps))
        return rewards.sum()

    jax.block_until_ready(run(jax.random.PRNGKey(0)))  # compile
    start = time.perf_counter()
    for i in range(args.repeats):
        jax.block_until_ready(run(jax.random.PRNGKey(i + 1)))
    return args.repeats * args.steps * args.envs / (time.perf_counter() - start)


def host_steps_per_second(env_id: str, steps: int, **options) -> float:
    env = make_env(env_id, n_envs=args.envs, **options)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    n = env.spec.action_space.n if env.spec.discrete else None
    act = lambda: (rng.integers(0, n, args.envs) if n else
                   rng.uniform(-1, 1, (args.envs, *env.spec.action_space.shape)))  # fmt: skip
    start = time.perf_counter()
    for _ in range(steps):
        env.step(act())
    rate = steps * args.envs / (time.perf_counter() - start)
    env.close()
    return rate


print(f"| image env | kind | obs | env steps/s ({args.envs} envs) |")
print("|---|---|---|---|")
infos = list_envs(("gymnax", "craftax"))
jax_images = [i for info in infos.values() for i in info["images"]]
jax_images = [i for i in jax_images if "Classic" in i or i.endswith("MinAtar")]
for env_id in jax_images:
    shape = make_env(env_id).spec.image_shape
    rate = steps_per_second(env_id)
    print(f"| {env_id} | JAX, jitted scan | {'x'.join(map(str, shape))} | {rate:,.0f} |")
for env_id, options in (("dmc:cartpole-swingup", {"pixels": True}), ("atari:Pong", {})):
    rate = host_steps_per_second(env_id, args.host_steps, **options)
    print(f"| {env_id} {' '.join(options)} | host, Python loop | 64x64x3 | {rate:,.0f} |")

print()
print("| DreamerV3 replay, 1M frames, 1 env | size | bytes/frame | GiB per 1M frames "
      "| of which images (uint8) | images if float32 | on the device with --replay-on host |")  # fmt: skip
print("|---|---|---|---|---|---|---|")
frames = 1_000_000
for env_id in ("Breakout-MinAtar", "SpaceInvaders-MinAtar"):
    for size in ("1m", "12m"):
        cfg = DreamerV3Config.preset(size, buffer_size=frames + 1)
        algo = DreamerV3(env_id, cfg)
        total = algo.replay_nbytes(frames)
        pixels = algo.env.spec.obs_dim * (frames + 1)
        on_host = DreamerV3(env_id, DreamerV3Config.preset(size, buffer_size=frames + 1,
                                                           replay_on="host"))  # fmt: skip
        device = on_host.replay_bytes(frames)[0]
        print(f"| {env_id} | {size} | {total / (frames + 1):,.0f} | {total / 2**30:.2f} "
              f"| {pixels / 2**30:.2f} GiB | {4 * pixels / 2**30:.2f} GiB "
              f"| {device / 2**30:.4f} GiB |")  # fmt: skip
