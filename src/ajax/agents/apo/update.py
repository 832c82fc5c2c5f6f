"""APO's networks and update: PPO's minibatch epochs on differential advantages.

Acting, sampling and the clipped surrogate are PPO's (:mod:`ajax.agents.shared.proximal_policy`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from ajax.agents.apo import losses
from ajax.agents.apo.config import APOConfig
from ajax.agents.shared import proximal_policy as ppo
from ajax.networks.config import OptimizerConfig
from ajax.networks.networks import TanhMean, actor_module
from ajax.training.api import Rollout, env_config_of, values_at_cuts

__all__ = ["APOState", "act", "init", "sample", "update"]

act, sample = ppo.act, ppo.sample


class APOState(ppo.PPOState):
    """PPO's actor and critic and the reward-rate estimate ``rho`` (a scalar, from 0)."""

    rho: jax.Array


def init(config: APOConfig, key, env, total_updates: int | None = None) -> APOState:
    """PPO's networks with a tanh-mean actor (continuous actions); both Adams unclipped, the
    joint clip is in :func:`update`."""
    env_config = env_config_of(env, config.n_envs)
    net = ppo.network_config(config)
    actor = None
    if env_config.continuous:
        actor = TanhMean(actor_module(env_config, net, True, env_config.action_dim))
    opt = OptimizerConfig(learning_rate=config.learning_rate, eps=1e-5)
    s = ppo.init_state(config, key, env, total_updates, opt, actor)
    return APOState(s.actor_state, s.critic_state, rho=jnp.zeros((), jnp.float32))


def apo_loss(config: APOConfig, pi, v, mb: ppo.Batch):
    """PPO's loss plus the average value constraint on the critic's values ``v``."""
    loss, metrics = ppo.ppo_loss(config, pi, v, mb)
    penalty, c_metrics = losses.average_value_constraint(v, config.value_constraint)
    return loss + penalty, {**metrics, **c_metrics, "loss": loss + penalty}


def update(config: APOConfig, state: APOState, rollout: Rollout, last_obs, key):
    """rho from this rollout, GAE (gamma 1) on r - rho, PPO's epochs on :func:`apo_loss`."""
    rho = losses.reward_rate_estimate(state.rho, rollout.reward, config.rho_step)
    v = lambda obs: ppo.value_of(state, state.critic_state.params, obs)
    differential = rollout._replace(reward=rollout.reward - rho)
    adv = ppo.advantages(config, differential, values_at_cuts(v, rollout), v(last_obs), 1.0)
    clip = optax.clip_by_global_norm(config.max_grad_norm)
    state, metrics = ppo.fit(config, state.replace(rho=rho), differential, adv, key, apo_loss,
                             lambda g: clip.update(g, optax.EmptyState())[0])  # fmt: skip
    return state, {**metrics, "rho": rho}
