"""REDQ's update step (Chen et al. 2021, Alg. 1; watchernyu/REDQ redq_sac.py train order).

Networks, acting and the state are SAC's (:mod:`ajax.agents.shared.soft_actor_critic`). Each call is one of
the ``gradient_steps`` critic steps; on every ``policy_update_delay``-th one the actor and the
temperature also step, their loss read from the critics before this step's critic update, as
the authors' code computes both losses before stepping either optimiser.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax.agents.redq import losses
from ajax.agents.redq.config import REDQConfig
from ajax.agents.shared import guidance
from ajax.agents.shared import soft_actor_critic_losses as sac_losses
from ajax.agents.shared.soft_actor_critic import SACState, act, init, policy_step
from ajax.networks.networks import action_value_input, predict_value
from ajax.training.api import Transition, lockstep, zeros_like_shapes

__all__ = ["act", "init", "update"]


def update(config: REDQConfig, state: SACState, batch: Transition, key):
    """One critic step on the subset-min target; the actor and temperature every
    ``policy_update_delay`` calls."""
    k_subset, k_next, k_pi = jax.random.split(key, 3)
    actor, critic = state.actor_state, state.critic_state
    alpha = jnp.exp(state.log_alpha)

    pi_next = actor.apply_fn({"params": actor.params}, batch.next_obs)
    a_next, logp_next = sac_losses.sample_action(pi_next, k_next)
    q_next = predict_value(critic, critic.target_params, action_value_input(batch.next_obs, a_next))
    subset = jax.random.choice(k_subset, config.num_critics, (config.num_min,), replace=False)
    target = losses.subset_min_target(
        batch.reward, config.gamma * (1.0 - batch.terminated), q_next[..., 0], logp_next, alpha,
        subset,
    )  # fmt: skip
    target, g_metrics = guidance.expert_bounded_target(state, critic, batch, target)
    state, r_metrics = guidance.refresh_expert_critic(config.pretrain, state, critic, batch,
                                                      config.gamma)  # fmt: skip

    def step(state: SACState):
        return policy_step(config, state, critic, batch.obs, batch.action.shape[-1], k_pi,
                           lambda q: q.mean(0)[..., 0])  # fmt: skip

    # the critic step count is the same in every vmapped seed: a real branch, not a select
    due = lockstep((critic.step + 1) % config.policy_update_delay == 0)
    state, p_metrics = jax.lax.cond(due, step, lambda s: (s, zeros_like_shapes(step, s)[1]), state)

    def critic_fn(params):
        q = predict_value(critic, params, action_value_input(batch.obs, batch.action))
        return losses.ensemble_mse_loss(q[..., 0], target)

    (_, c_metrics), grads = jax.value_and_grad(critic_fn, has_aux=True)(critic.params)
    critic = critic.apply_gradients(grads).soft_update(config.tau)
    return state.replace(critic_state=critic), {**c_metrics, **g_metrics, **r_metrics, **p_metrics}
