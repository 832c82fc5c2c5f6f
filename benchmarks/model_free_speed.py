"""Env steps per second of SAC, TD3, PPO, DQN, PQN and CrossQ: Ajax beside rejax and sbx, same settings.

Each agent's settings are listed above its functions; for SAC, shared by all three: 1 env, one gradient step per env step (UTD 1), batch 256,
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

    python benchmarks/model_free_speed.py [--agents sac,td3,ppo,dqn,pqn,crossq] [--steps N]

A framework that is not installed or fails is reported as such and left out of the ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
from gymnax.environments.classic_control.cartpole import CartPole
from gymnax.environments.classic_control.pendulum import Pendulum

sys.path.insert(0, os.path.dirname(__file__))  # crossq_roofline, tdmpc2_speed's FLOP counter

BATCH, HIDDEN, LEARNING_STARTS = 256, 256, 1_000
LEARNING_RATE, TAU, GAMMA = 3e-4, 0.005, 0.99


class FiveTuple:
    """A gymnax env with the pre-1.0 step signature that rejax 0.1.3 unpacks (a mixin).

    gymnax 1.0 returns ``(obs, state, reward, terminated, truncated, info)``; rejax (every
    release so far) expects ``(obs, state, reward, done, info)``. Folding the two flags into
    ``done`` restores the old contract exactly: gymnax 1.0 still auto-resets on either flag
    and returns the reset observation, as gymnax 0.0.x did.
    """

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, reward, jnp.logical_or(terminated, truncated), info


class FiveTuplePendulum(FiveTuple, Pendulum):
    """Pendulum-v1 for rejax."""


class FiveTupleCartPole(FiveTuple, CartPole):
    """CartPole-v1 for rejax."""


def compile_and_run(train) -> tuple[float, float]:
    """(seconds to compile ``train(key)`` ahead of time, seconds of one compiled run)."""
    key = jax.random.PRNGKey(0)
    t0 = time.perf_counter()
    compiled = jax.jit(train).lower(key).compile()
    t1 = time.perf_counter()
    jax.block_until_ready(compiled(key))
    return t1 - t0, time.perf_counter() - t1


def _time_compiled(train) -> float:
    """Seconds of one run of ``train(key)``, compiled ahead of time (compilation not timed)."""
    return compile_and_run(train)[1]


def ajax_sac(steps: int, make_only: bool = False):
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
    train = SAC(env="Pendulum-v1", config=config).make_train(steps)
    return train if make_only else steps / _time_compiled(train)


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


# --------------------------------------------------------------------------- TD3, PPO
# TD3 on Pendulum-v1: 1 env, UTD 1, batch 256, 64 x 64 ReLU actor and twin critics (rejax 0.1.3
# builds TD3's networks at 64 x 64 whatever it is given), Adam 3e-4, target EMA 0.005, policy
# delay 2, exploration noise 0.1, target noise 0.2 clipped at 0.5.
TD3_HIDDEN = 64


def ajax_td3(steps: int) -> float:
    from ajax.agents.td3 import TD3, TD3Config

    config = TD3Config(
        learning_rate=LEARNING_RATE, tau=TAU, gamma=GAMMA, hidden=TD3_HIDDEN, batch_size=BATCH,
        learning_starts=LEARNING_STARTS, train_freq=1, gradient_steps=1, buffer_size=steps,
        eval_freq=steps, eval_episodes=1,
    )  # fmt: skip
    return steps / _time_compiled(TD3(env="Pendulum-v1", config=config).make_train(steps))


def rejax_td3(steps: int) -> float:
    from rejax import TD3 as RejaxTD3

    env = FiveTuplePendulum()
    algo = RejaxTD3.create(
        env=env, env_params=env.default_params, num_envs=1, num_epochs=1, total_timesteps=steps,
        eval_freq=steps, skip_initial_evaluation=True, buffer_size=steps,
        fill_buffer=LEARNING_STARTS, batch_size=BATCH, learning_rate=LEARNING_RATE, gamma=GAMMA,
        polyak=1.0 - TAU, target_update_freq=1, policy_delay=2, exploration_noise=0.1,
        target_noise=0.2, target_noise_clip=0.5, actor_kwargs={"activation": "relu"},
        critic_kwargs={"activation": "relu"},
    )  # fmt: skip
    return steps / _time_compiled(algo.replace(eval_callback=_one_episode_eval(env)).train)


# PPO on CartPole-v1: 16 envs x 128 steps per rollout, 4 epochs x 4 minibatches, 64 x 64 tanh
# actor and critic, Adam 2.5e-4 (constant), clip 0.2, entropy 0.01, value 0.5, grad norm 0.5.
PPO_SET = dict(n_envs=16, n_steps=128, num_epochs=4, num_minibatches=4, lr=2.5e-4)


def ajax_ppo(steps: int, make_only: bool = False):
    from ajax.agents.ppo import PPO, PPOConfig

    config = PPOConfig(
        n_envs=PPO_SET["n_envs"], n_steps=PPO_SET["n_steps"], num_epochs=PPO_SET["num_epochs"],
        num_minibatches=PPO_SET["num_minibatches"], learning_rate=PPO_SET["lr"], anneal_lr=False,
        eval_freq=steps, eval_episodes=1,
    )  # fmt: skip
    train = PPO(env="CartPole-v1", config=config).make_train(steps)
    return train if make_only else steps / _time_compiled(train)


def rejax_ppo(steps: int) -> float:
    from rejax import PPO as RejaxPPO

    env = FiveTupleCartPole()
    algo = RejaxPPO.create(
        env=env, env_params=env.default_params, num_envs=PPO_SET["n_envs"],
        num_steps=PPO_SET["n_steps"], num_epochs=PPO_SET["num_epochs"],
        num_minibatches=PPO_SET["num_minibatches"], learning_rate=PPO_SET["lr"],
        max_grad_norm=0.5, gamma=GAMMA, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01,
        vf_coef=0.5, total_timesteps=steps, eval_freq=steps, skip_initial_evaluation=True,
        agent_kwargs={"activation": "tanh"},
    )  # fmt: skip
    return steps / _time_compiled(algo.replace(eval_callback=_one_episode_eval(env)).train)


# --------------------------------------------------------------------------- DQN, PQN, CrossQ
# DQN on CartPole-v1: 1 env, one update per env step, batch 64, 64 x 64 ReLU, Adam 1e-3, clip
# 10, double-DQN target, target EMA 0.01 after every update, epsilon 1 -> 0.05 over 10% of the run.
DQN_BATCH, DQN_LR, DQN_TAU = 64, 1e-3, 0.01


def ajax_dqn(steps: int) -> float:
    from ajax.agents.dqn import DQN, DQNConfig

    config = DQNConfig(
        learning_rate=DQN_LR, batch_size=DQN_BATCH, hidden=64, buffer_size=steps,
        learning_starts=LEARNING_STARTS, train_freq=1, gradient_steps=1,
        target_update_interval=1, tau=DQN_TAU, exploration_steps=steps // 10, eval_freq=steps,
        eval_episodes=1,
    )  # fmt: skip
    return steps / _time_compiled(DQN(env="CartPole-v1", config=config).make_train(steps))


def _one_episode_eval(env):
    from rejax.evaluate import evaluate

    def one_episode(algo, ts, rng):  # rejax evaluates 128 episodes by default; Ajax one
        return evaluate(algo.make_act(ts), rng, env, algo.env_params, 1, None)

    return one_episode


def rejax_dqn(steps: int) -> float:
    from rejax import DQN

    env = FiveTupleCartPole()
    algo = DQN.create(
        env=env, env_params=env.default_params, num_envs=1, num_epochs=1, total_timesteps=steps,
        eval_freq=steps, skip_initial_evaluation=True, buffer_size=steps,
        fill_buffer=LEARNING_STARTS, batch_size=DQN_BATCH, learning_rate=DQN_LR,
        max_grad_norm=10.0, gamma=GAMMA, target_update_freq=1, polyak=1.0 - DQN_TAU, ddqn=True,
        eps_start=1.0, eps_end=0.05, exploration_fraction=0.1, agent_kwargs={"activation": "relu"},
    )  # fmt: skip
    return steps / _time_compiled(algo.replace(eval_callback=_one_episode_eval(env)).train)


# PQN on CartPole-v1: 32 envs x 64 steps per rollout, 4 epochs x 16 minibatches, 64 x 64
# Dense-LayerNorm-ReLU, Adam 3e-4 (constant, as rejax; Ajax's default is RAdam), clip 10, gamma 0.99, lambda 0.9.
PQN = dict(n_envs=32, n_steps=64, num_epochs=4, num_minibatches=16, lr=3e-4, lam=0.9)


def ajax_pqn(steps: int) -> float:
    from ajax.agents.pqn import PQN as AjaxPQN
    from ajax.agents.pqn import PQNConfig

    config = PQNConfig(
        n_envs=PQN["n_envs"], n_steps=PQN["n_steps"], num_epochs=PQN["num_epochs"],
        num_minibatches=PQN["num_minibatches"], optimizer="adam", learning_rate=PQN["lr"],
        anneal_lr=False, q_lambda=PQN["lam"], hidden=64, exploration_fraction=0.1, eval_freq=steps,
        eval_episodes=1,
    )  # fmt: skip
    return steps / _time_compiled(AjaxPQN(env="CartPole-v1", config=config).make_train(steps))


def rejax_pqn(steps: int) -> float:
    from rejax import PQN as RejaxPQN

    env = FiveTupleCartPole()
    algo = RejaxPQN.create(
        env=env, env_params=env.default_params, num_envs=PQN["n_envs"], num_steps=PQN["n_steps"],
        num_epochs=PQN["num_epochs"], num_minibatches=PQN["num_minibatches"],
        learning_rate=PQN["lr"], td_lambda=PQN["lam"], gamma=GAMMA, max_grad_norm=10.0,
        total_timesteps=steps, eval_freq=steps, skip_initial_evaluation=True,
        eps_start=1.0, eps_end=0.05, exploration_fraction=0.1,
    )  # fmt: skip
    return steps / _time_compiled(algo.replace(eval_callback=_one_episode_eval(env)).train)


# CrossQ on Pendulum-v1: 1 env, UTD 1, batch 256, actor 256 x 256 without BatchRenorm, critics
# CROSSQ_CRITIC x CROSSQ_CRITIC with BatchRenorm, Adam 1e-3 beta_1 0.5, policy delay 3.
CROSSQ_CRITIC = 1024  # sbx's default (the paper's 2048 is too slow for a 2-core benchmark)


def ajax_crossq(steps: int, make_only: bool = False):
    from ajax.agents.crossq import CrossQ, CrossQConfig

    config = CrossQConfig(
        hidden=HIDDEN, critic_hidden=CROSSQ_CRITIC, batch_size=BATCH, buffer_size=steps,
        learning_starts=LEARNING_STARTS, eval_freq=steps, eval_episodes=1,
    )  # fmt: skip
    train = CrossQ(env="Pendulum-v1", config=config).make_train(steps)
    return train if make_only else steps / _time_compiled(train)


def sbx_crossq(steps: int) -> float:
    import gymnasium as gym
    from sbx import CrossQ

    def model():
        return CrossQ(
            "MlpPolicy", gym.make("Pendulum-v1"), learning_rate=1e-3, batch_size=BATCH,
            buffer_size=steps, learning_starts=LEARNING_STARTS, policy_delay=3, seed=0,
            policy_kwargs={"net_arch": {"pi": [HIDDEN, HIDDEN], "qf": [CROSSQ_CRITIC] * 2},
                           "batch_norm_actor": False},
        )  # fmt: skip

    model().learn(LEARNING_STARTS + 2 * BATCH)  # compiles the update (reused by the next model)
    m = model()
    t0 = time.perf_counter()
    m.learn(steps)
    return steps / (time.perf_counter() - t0)


BENCHES = {
    "sac": (("ajax", ajax_sac), ("rejax", rejax_sac), ("sbx", sbx_sac)),
    "td3": (("ajax", ajax_td3), ("rejax", rejax_td3)),
    "ppo": (("ajax", ajax_ppo), ("rejax", rejax_ppo)),
    "dqn": (("ajax", ajax_dqn), ("rejax", rejax_dqn)),
    "pqn": (("ajax", ajax_pqn), ("rejax", rejax_pqn)),
    "crossq": (("ajax", ajax_crossq), ("sbx", sbx_crossq)),
}
DEFAULT_STEPS = {
    "sac": 5_000,
    "td3": 10_000,
    "ppo": 262_144,
    "dqn": 20_000,
    "pqn": 262_144,
    "crossq": 3_000,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(BENCHES), help="comma-separated subset")
    parser.add_argument("--steps", type=int, default=None, help="env steps (default per agent)")
    args = parser.parse_args()
    agents = args.agents.split(",")
    unknown = sorted(set(agents) - set(BENCHES))
    if unknown:
        parser.error(f"unknown agents {unknown}; choose from {', '.join(BENCHES)}")
    print(f"{jax.devices()[0].platform}, load {os.getloadavg()[0]:.1f}")
    print(f"{'agent':8s} {'framework':10s} {'steps':>8s} {'env steps/s':>12s} {'ajax / it':>10s}")
    for agent in agents:
        steps = args.steps or DEFAULT_STEPS[agent]
        if steps <= LEARNING_STARTS + BATCH:
            parser.error(f"--steps must exceed {LEARNING_STARTS + BATCH} so that updates are timed")
        rows = {}
        for name, fn in BENCHES[agent]:
            try:
                rows[name] = fn(steps)
            except Exception as err:  # not installed, or incompatible with the pinned stack
                rows[name] = None
                print(f"{agent}/{name}: failed ({type(err).__name__}: {err})")
        for name, sps in rows.items():
            ratio = "n/a" if sps is None or rows["ajax"] is None else f"{rows['ajax'] / sps:.2f}"
            rate = "n/a" if sps is None else f"{sps:.1f}"
            print(f"{agent:8s} {name:10s} {steps:8d} {rate:>12s} {ratio:>10s}", flush=True)
        if agent == "crossq":
            from crossq_roofline import crossq_roofline

            crossq_roofline(rows, steps, HIDDEN, CROSSQ_CRITIC, BATCH, LEARNING_STARTS)


if __name__ == "__main__":
    main()
