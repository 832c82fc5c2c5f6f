"""Env steps per second of SAC on Pendulum-v1: Ajax beside rejax and sbx, same settings.

Settings shared by all three: 1 env, one gradient step per env step (UTD 1), batch 256,
256 x 256 ReLU MLPs for actor and twin critics, Adam at 3e-4, target EMA rate 0.005,
gamma 0.99, learned temperature (initial 1, target entropy -action_dim), no update during the
first 1,000 env steps, a replay buffer that holds the whole run, one evaluation
episode at the end (Ajax and rejax; sbx's ``learn`` has none). Ajax and rejax run the whole
loop under ``jax.jit`` on gymnax's Pendulum-v1 and are compiled ahead of time
(``lower().compile()``), then timed on one run; sbx steps gymnasium's Pendulum-v1 on the host
around jitted updates and is timed on its second model (the first one compiles the update).
So the numbers are training throughput without compilation.

Differences left in (each costs at most a few element-wise ops per step): rejax acts with its
untrained policy during the first 1,000 steps where Ajax and sbx sample uniform actions;
rejax's critic target does not bootstrap through Pendulum's time limit (it only sees
``done``); log-std clips differ (Ajax/sbx [-20, 2], rejax [-10, 2]).

Usage (needs the ``bench`` extra, torch's CPU wheel first, see pyproject.toml)::

    python benchmarks/model_free_speed.py [--steps 5000]

A framework that is not installed or fails is reported as such and left out of the ratios.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
from gymnax.environments.classic_control.pendulum import Pendulum

BATCH, HIDDEN, LEARNING_STARTS = 256, 256, 1_000
LEARNING_RATE, TAU, GAMMA = 3e-4, 0.005, 0.99


class FiveTuplePendulum(Pendulum):
    """gymnax's Pendulum-v1 with the pre-1.0 step signature that rejax 0.1.3 unpacks.

    gymnax 1.0 returns ``(obs, state, reward, terminated, truncated, info)``; rejax (every
    release so far) expects ``(obs, state, reward, done, info)``. Folding the two flags into
    ``done`` restores the old contract exactly: gymnax 1.0 still auto-resets on either flag
    and returns the reset observation, as gymnax 0.0.x did.
    """

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward, jnp.logical_or(terminated, truncated), info


def _time_compiled(train) -> float:
    """Seconds of one run of ``train(key)``, compiled ahead of time (compilation not timed)."""
    key = jax.random.PRNGKey(0)
    compiled = jax.jit(train).lower(key).compile()
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(key))
    return time.perf_counter() - t0


def ajax_sac(steps: int) -> float:
    from ajax.agents.sac import SAC, SACConfig

    config = SACConfig(
        learning_rate=LEARNING_RATE,
        tau=TAU,
        gamma=GAMMA,
        hidden=HIDDEN,
        batch_size=BATCH,
        learning_starts=LEARNING_STARTS,
        train_freq=1,
        gradient_steps=1,
        buffer_size=steps,
        eval_freq=steps,  # one chunk: a single jitted scan and one evaluation at the end
        eval_episodes=1,
    )
    return steps / _time_compiled(SAC(env="Pendulum-v1", config=config).make_train(steps))


def rejax_sac(steps: int) -> float:
    from rejax import SAC
    from rejax.evaluate import evaluate

    env = FiveTuplePendulum()
    # rejax's SAC (algos/sac.py, 0.1.3): each train_iteration steps num_envs envs once, then
    # runs num_epochs gradient steps once global_step > fill_buffer, then applies the EMA
    # target <- polyak * target + (1 - polyak) * online every target_update_freq env steps.
    algo = SAC.create(
        env=env,
        env_params=env.default_params,
        num_envs=1,
        num_epochs=1,  # gradient steps per env step: UTD 1
        total_timesteps=steps,
        eval_freq=steps,
        skip_initial_evaluation=True,
        buffer_size=steps,
        fill_buffer=LEARNING_STARTS,
        batch_size=BATCH,
        learning_rate=LEARNING_RATE,
        gamma=GAMMA,
        polyak=1.0 - TAU,
        target_update_freq=1,
        num_critics=2,
        agent_kwargs={"activation": "relu"},
        hidden_layer_sizes=(HIDDEN, HIDDEN),
    )

    # rejax evaluates 128 episodes by default; Ajax evaluates one, so match that.
    def one_episode(algo, ts, rng):
        return evaluate(algo.make_act(ts), rng, env, algo.env_params, 1, None)

    return steps / _time_compiled(algo.replace(eval_callback=one_episode).train)


def sbx_sac(steps: int) -> float:
    import gymnasium as gym
    from sbx import SAC

    def model():
        return SAC(
            "MlpPolicy",
            gym.make("Pendulum-v1"),
            learning_rate=LEARNING_RATE,
            tau=TAU,
            gamma=GAMMA,
            learning_starts=LEARNING_STARTS,  # sbx's default is 100
            batch_size=BATCH,
            buffer_size=steps,
            train_freq=1,
            gradient_steps=1,
            policy_delay=1,
            ent_coef="auto",
            policy_kwargs={"net_arch": [HIDDEN, HIDDEN], "n_critics": 2},
            seed=0,
        )

    # sbx jits its update as a static method, so a fresh model with the same shapes reuses it.
    model().learn(LEARNING_STARTS + 2 * BATCH)
    m = model()
    t0 = time.perf_counter()
    m.learn(steps)
    return steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5_000)
    args = parser.parse_args()
    if args.steps <= LEARNING_STARTS + BATCH:
        parser.error(f"--steps must exceed {LEARNING_STARTS + BATCH} so that updates are timed")
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
        elif rows["ajax"] is None:
            print(f"{name:10s} {sps:12.1f} {'n/a':>10s}")
        else:
            print(f"{name:10s} {sps:12.1f} {rows['ajax'] / sps:10.2f}")


if __name__ == "__main__":
    main()
