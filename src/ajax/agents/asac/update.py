"""ASAC's update step: SAC's order (critics, actor, temperature, target EMA) on the differential
soft target, with the reward rate stepped from the same batch's TD errors.

Networks, acting and the actor/temperature step are SAC's
(:mod:`ajax.agents.shared.soft_actor_critic`); the critics' optimiser clips each member's
gradient on its own.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from ajax.agents.asac import losses
from ajax.agents.asac.config import ASACConfig
from ajax.agents.shared import soft_actor_critic_losses as sac_losses
from ajax.agents.shared.soft_actor_critic import (
    SACState,
    act,
    critic_mlp,
    init_state,
    min_q,
    network_config,
    policy_step,
)
from ajax.networks.config import OptimizerConfig
from ajax.networks.networks import action_value_input, predict_value
from ajax.training.api import Transition

__all__ = ["ASACState", "act", "init", "update"]


class ASACState(SACState):
    """SAC's state and the reward-rate estimate ``rho`` (a scalar, starting at 0)."""

    rho: jax.Array


def init(config: ASACConfig, key, env) -> ASACState:
    """SAC's networks; the critics' Adam clips each member to ``max_grad_norm``."""
    actor_opt = OptimizerConfig(learning_rate=config.learning_rate, eps=1e-8)
    critic_opt = dataclasses.replace(actor_opt, max_grad_norm=config.max_grad_norm,
                                     per_member=config.max_grad_norm is not None)  # fmt: skip
    sac = init_state(
        config, key, env, network_config(config, critic_mlp(config)), actor_opt, critic_opt
    )
    fields = {f.name: getattr(sac, f.name) for f in dataclasses.fields(sac)}
    return ASACState(**fields, rho=jnp.zeros((), jnp.float32))


def update(config: ASACConfig, state: ASACState, batch: Transition, key):
    """One ASAC step: reward rate and critics on the differential target, then SAC's actor and
    temperature step and the target EMA."""
    k_next, k_pi = jax.random.split(key)
    actor, critic = state.actor_state, state.critic_state
    alpha = jnp.exp(state.log_alpha)

    pi_next = actor.apply_fn({"params": actor.params}, batch.next_obs)
    a_next, logp_next = sac_losses.sample_action(pi_next, k_next)
    q_next = predict_value(critic, critic.target_params, action_value_input(batch.next_obs, a_next))
    target = losses.differential_soft_target(
        batch.reward, state.rho, 1.0 - batch.terminated, min_q(q_next), logp_next, alpha
    )

    def critic_fn(params):
        q = predict_value(critic, params, action_value_input(batch.obs, batch.action))[..., 0]
        loss, metrics = sac_losses.critic_loss(q, target)
        return loss, (metrics, q)

    (_, (c_metrics, q_t)), grads = jax.value_and_grad(critic_fn, has_aux=True)(critic.params)
    q_tp1 = predict_value(critic, critic.params, action_value_input(batch.next_obs, a_next))
    v_tp1 = (1.0 - batch.terminated) * (min_q(q_tp1) - alpha * logp_next)
    rho, r_metrics = losses.reward_rate_update(state.rho, batch.reward, v_tp1, q_t.min(0),
                                               config.rho_lr)  # fmt: skip
    state = state.replace(critic_state=critic.apply_gradients(grads), rho=rho)

    state, p_metrics = policy_step(config, state, state.critic_state, batch.obs,
                                   batch.action.shape[-1], k_pi, min_q)  # fmt: skip
    state = state.replace(critic_state=state.critic_state.soft_update(config.tau))
    return state, {**c_metrics, **r_metrics, **p_metrics}
