"""REDQ's update step (Chen et al. 2021, Alg. 1; watchernyu/REDQ redq_sac.py train order).

Networks, acting and the state are SAC's (:mod:`ajax.agents.sac.update`). Each call is one of
the ``gradient_steps`` critic steps; on every ``policy_update_delay``-th one the actor and the
temperature also step, their loss read from the critics before this step's critic update, as
the authors' code computes both losses before stepping either optimiser.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from ajax.agents.redq import losses
from ajax.agents.redq.config import REDQConfig
from ajax.agents.sac import losses as sac_losses
from ajax.agents.sac.update import SACState, act, alpha_tx, init, target_entropy_of
from ajax.networks.networks import action_value_input, predict_value
from ajax.training.loop import zeros_like_shapes
from ajax.training.off_policy import Transition
from ajax.training.rollout import lockstep

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

    def policy_step(state: SACState):
        def actor_fn(params):
            pi = actor.apply_fn({"params": params}, batch.obs)
            a, logp = sac_losses.sample_action(pi, k_pi)
            q = predict_value(critic, critic.params, action_value_input(batch.obs, a))
            loss, metrics = sac_losses.actor_loss(q.mean(0)[..., 0], logp, alpha)
            return loss, (metrics, logp)

        (_, (a_metrics, logp)), grads = jax.value_and_grad(actor_fn, has_aux=True)(actor.params)
        alpha_grad, t_metrics = jax.grad(sac_losses.temperature_loss, has_aux=True)(
            state.log_alpha, logp, target_entropy_of(config, batch.action.shape[-1])
        )
        updates, alpha_opt = alpha_tx(config).update(alpha_grad, state.alpha_opt_state)
        state = state.replace(
            actor_state=actor.apply_gradients(grads),
            log_alpha=optax.apply_updates(state.log_alpha, updates),
            alpha_opt_state=alpha_opt,
        )
        return state, {**a_metrics, **t_metrics}

    # the critic step count is the same in every vmapped seed: a real branch, not a select
    due = lockstep((critic.step + 1) % config.policy_update_delay == 0)
    state, p_metrics = jax.lax.cond(
        due, policy_step, lambda s: (s, zeros_like_shapes(policy_step, s)[1]), state
    )

    def critic_fn(params):
        q = predict_value(critic, params, action_value_input(batch.obs, batch.action))
        return losses.ensemble_mse_loss(q[..., 0], target)

    (_, c_metrics), grads = jax.value_and_grad(critic_fn, has_aux=True)(critic.params)
    critic = critic.apply_gradients(grads).soft_update(config.tau)
    return state.replace(critic_state=critic), {**c_metrics, **p_metrics}
