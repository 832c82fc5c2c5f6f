"""SAC's update step (Haarnoja et al. 2018; stable-baselines3 sac.py order).

State, networks, acting and the actor/temperature step are the soft actor-critic family's
(:mod:`ajax.agents.shared.soft_actor_critic`), shared with REDQ, CrossQ and ASAC.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax.agents.sac.config import SACConfig
from ajax.agents.shared import guidance
from ajax.agents.shared import soft_actor_critic_losses as losses
from ajax.agents.shared.soft_actor_critic import (
    SACState,
    act,
    actor_network,
    alpha_tx,
    critic_mlp,
    init,
    init_state,
    min_q,
    network_config,
    policy_step,
    target_entropy_of,
)
from ajax.networks.networks import action_value_input, predict_value
from ajax.training.api import Transition

__all__ = [
    "SACState",
    "act",
    "actor_network",
    "alpha_tx",
    "critic_mlp",
    "init",
    "init_state",
    "min_q",
    "network_config",
    "policy_step",
    "target_entropy_of",
    "update",
]


def update(config: SACConfig, state: SACState, batch: Transition, key):
    """One SAC gradient step: temperature, critics, actor, then the target EMA."""
    k_next, k_pi = jax.random.split(key)
    actor, critic = state.actor_state, state.critic_state
    alpha = jnp.exp(state.log_alpha)
    action_dim = batch.action.shape[-1]

    pi_next = actor.apply_fn({"params": actor.params}, batch.next_obs)
    a_next, logp_next = losses.sample_action(pi_next, k_next)
    q_next = predict_value(critic, critic.target_params, action_value_input(batch.next_obs, a_next))
    target = losses.soft_td_target(
        batch.reward,
        config.gamma * (1.0 - batch.terminated),
        q_next.min(0)[..., 0],
        logp_next,
        alpha,
    )
    target, g_metrics = guidance.expert_bounded_target(state, critic, batch, target)

    def critic_fn(params):
        q = predict_value(critic, params, action_value_input(batch.obs, batch.action))
        return losses.critic_loss(q[..., 0], target)

    (_, c_metrics), grads = jax.value_and_grad(critic_fn, has_aux=True)(critic.params)
    critic = critic.apply_gradients(grads)
    state, r_metrics = guidance.refresh_expert_critic(config.pretrain, state, critic, batch,
                                                      config.gamma)  # fmt: skip
    c_metrics = {**c_metrics, **g_metrics, **r_metrics}

    state, p_metrics = policy_step(config, state, critic, batch.obs, action_dim, k_pi, min_q)
    state = state.replace(critic_state=critic.soft_update(config.tau))
    return state, {**c_metrics, **p_metrics}
