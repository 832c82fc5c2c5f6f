"""CrossQ's update step (Bhatt et al. 2024, Alg. 1; adityab/CrossQ@a318a26 sbx/sac/sac.py).

Acting and the temperature are SAC's. The critics hold BatchRenorm running statistics in
``critic_state.batch_stats``: the critic step runs in training mode on the concatenated batch
[(s, a); (s', a')] and writes the new statistics back; the actor reads the critics in evaluation
mode (running statistics), as CrossQ's actor loss does.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax.agents.crossq.config import CrossQConfig
from ajax.agents.shared import soft_actor_critic_losses as losses
from ajax.agents.shared.soft_actor_critic import (
    SACState,
    act,
    init_state,
    min_q,
    network_config,
    policy_step,
)
from ajax.networks.config import OptimizerConfig
from ajax.networks.networks import action_value_input, predict_value_train
from ajax.training.api import Transition, lockstep, zeros_like_shapes

__all__ = ["act", "init", "update"]


def init(config: CrossQConfig, key, env) -> SACState:
    """Squashed-Gaussian actor (ReLU MLP) and BatchRenorm critics, no target copy."""
    width = str(config.critic_hidden)
    critic = ("batchrenorm", width, "relu", "batchrenorm", width, "relu", "batchrenorm")
    opt = OptimizerConfig(learning_rate=config.learning_rate, eps=1e-8, beta_1=config.beta_1)
    state = init_state(config, key, env, network_config(config, critic), opt, opt)
    return state.replace(critic_state=state.critic_state.replace(target_params=None))


def update(config: CrossQConfig, state: SACState, batch: Transition, key):
    """One critic step on the joint batch; the actor and temperature every ``policy_delay``."""
    k_next, k_pi = jax.random.split(key)
    actor, critic = state.actor_state, state.critic_state
    alpha = jnp.exp(state.log_alpha)
    pi_next = actor.apply_fn({"params": actor.params}, batch.next_obs)
    a_next, logp_next = losses.sample_action(pi_next, k_next)
    joint = jnp.concatenate(
        [action_value_input(batch.obs, batch.action), action_value_input(batch.next_obs, a_next)]
    )
    b = batch.obs.shape[0]

    def critic_fn(params):
        q, stats = predict_value_train(critic, params, joint)
        q_t, q_next = q[:, :b, 0], jax.lax.stop_gradient(q[:, b:, 0])
        target = losses.soft_td_target(
            batch.reward, config.gamma * (1.0 - batch.terminated), q_next.min(0), logp_next, alpha
        )
        loss, metrics = losses.critic_loss(q_t, target)
        return loss, (metrics, stats)

    (_, (c_metrics, stats)), grads = jax.value_and_grad(critic_fn, has_aux=True)(critic.params)
    critic = critic.apply_gradients(grads).replace(batch_stats=stats)

    def step(state: SACState):
        return policy_step(config, state, critic, batch.obs, batch.action.shape[-1], k_pi,
                           min_q)  # fmt: skip

    state = state.replace(critic_state=critic)
    # the critic step count is shared by every vmapped seed: a real branch, not a select
    due = lockstep(critic.step % config.policy_delay == 0)
    state, p_metrics = jax.lax.cond(due, step, lambda s: (s, zeros_like_shapes(step, s)[1]), state)
    return state, {**c_metrics, **p_metrics}
