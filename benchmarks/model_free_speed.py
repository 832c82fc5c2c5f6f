"""Env steps per second of SAC on Pendulum-v1: Ajax beside rejax and sbx, same settings.

Settings shared by all three: 1 env, one gradient step per env step (UTD 1), batch 256,
256 x 256 ReLU MLPs for actor and critics, twin critics, 1,000 random steps first. Each
framework is timed on its second run (the first one compiles), so the numbers are training
throughput without compilation. Ajax and rejax run the whole loop under ``jax.jit`` on gymnax's
Pendulum-v1; sbx steps gymnasium's Pendulum-v1 on the host around jitted updates.

Usage (needs the ``bench`` extra: ``pip install -e '.[bench]'``)::

    python benchmarks/model_free_speed.py [--steps 5000]

A framework that is not installed or fails is reported as such and left out of the ratios.
rejax 0.1.3 (newest) unpacks 5 values from gymnax's step, so it fails with gymnax 1.0.1 (6).
"""

from __future__ import annotations

import argparse
import os
import time

import jax

BATCH, HIDDEN, LEARNING_STARTS = 256, 256, 1_000


def ajax_sac(steps: int) -> float:
    from ajax.agents.sac import SAC, SACConfig

    config = SACConfig(
        hidden=HIDDEN,
        batch_size=BATCH,
        learning_starts=LEARNING_STARTS,
        buffer_size=steps,
        eval_freq=steps,
        eval_episodes=1,
    )
    train = jax.jit(SAC(env="Pendulum-v1", config=config).make_train(steps))
    jax.block_until_ready(train(jax.random.PRNGKey(0)))  # compile
    t0 = time.perf_counter()
    jax.block_until_ready(train(jax.random.PRNGKey(1)))
    return steps / (time.perf_counter() - t0)


def rejax_sac(steps: int) -> float:
    from rejax import SAC

    algo = SAC.create(
        env="Pendulum-v1",
        num_envs=1,
        total_timesteps=steps,
        eval_freq=steps,
        skip_initial_evaluation=True,
        buffer_size=steps,
        fill_buffer=LEARNING_STARTS,
        batch_size=BATCH,
        learning_rate=3e-4,
        num_epochs=1,
        polyak=0.995,
        agent_kwargs={"activation": "relu"},
        hidden_layer_sizes=(HIDDEN, HIDDEN),
    )
    train = jax.jit(algo.train)
    jax.block_until_ready(train(jax.random.PRNGKey(0)))
    t0 = time.perf_counter()
    jax.block_until_ready(train(jax.random.PRNGKey(1)))
    return steps / (time.perf_counter() - t0)


def sbx_sac(steps: int) -> float:
    import gymnasium as gym
    from sbx import SAC

    def model():
        return SAC(
            "MlpPolicy",
            gym.make("Pendulum-v1"),
            learning_starts=LEARNING_STARTS,
            batch_size=BATCH,
            buffer_size=steps,
            train_freq=1,
            gradient_steps=1,
            policy_kwargs={"net_arch": [HIDDEN, HIDDEN]},
            seed=0,
        )

    model().learn(LEARNING_STARTS + 2 * BATCH)  # compile the update
    m = model()
    t0 = time.perf_counter()
    m.learn(steps)
    return steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5_000)
    args = parser.parse_args()
    rows = {}
    for name, fn in (("ajax", ajax_sac), ("rejax", rejax_sac), ("sbx", sbx_sac)):
        try:
            rows[name] = fn(args.steps)
        except Exception as err:  # not installed, or incompatible with the pinned stack
            rows[name] = None
            print(f"{name}: failed ({type(err).__name__}: {err})")
    print(f"SAC on Pendulum-v1, {args.steps} env steps, 1 env, UTD 1, batch {BATCH}, ")
    print(f"{HIDDEN}x{HIDDEN} MLPs; {jax.devices()[0].platform}, load {os.getloadavg()[0]:.1f}")
    print(f"{'framework':10s} {'env steps/s':>12s} {'ajax / it':>10s}")
    for name, sps in rows.items():
        if sps is None:
            print(f"{name:10s} {'n/a':>12s} {'n/a':>10s}")
        else:
            print(f"{name:10s} {sps:12.1f} {rows['ajax'] / sps:10.2f}")


if __name__ == "__main__":
    main()
