"""PPO's networks, acting and update (clipped surrogate, GAE, minibatch epochs)."""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.ppo import losses
from ajax.agents.ppo.config import PPOConfig
from ajax.networks.config import NetworkConfig, OptimizerConfig
from ajax.networks.networks import get_initialized_actor_critic, predict_value
from ajax.networks.train_state import LoadedTrainState
from ajax.training.on_policy import Rollout
from ajax.training.rollout import env_config_of


class PPOState(flax.struct.PyTreeNode):
    actor_state: LoadedTrainState
    critic_state: LoadedTrainState


def init(config: PPOConfig, key, env, total_updates: int | None = None) -> PPOState:
    """Actor (Gaussian with a state-independent log-std, or Categorical) and a V critic."""
    arch = (str(config.hidden), config.activation, str(config.hidden), config.activation)
    env_config = env_config_of(env, config.n_envs)
    net = NetworkConfig(
        actor_architecture=arch,
        critic_architecture=arch,
        kernel_init="orthogonal(1.4142135623730951)",
        actor_kernel_init="orthogonal(0.01)",
        critic_kernel_init="orthogonal(1.0)",
        state_independent_log_std=True,
        log_std_init=0.0,
        log_std_bounds=None,
    )
    opt = OptimizerConfig(
        learning_rate=config.learning_rate, max_grad_norm=config.max_grad_norm, eps=1e-5
    )
    actor_state, critic_state = get_initialized_actor_critic(
        key,
        env_config,
        opt,
        opt,
        net,
        continuous=env_config.continuous,
        action_value=False,
        num_critics=1,
        max_timesteps=total_updates if config.anneal_lr else None,
    )
    return PPOState(actor_state, critic_state)


def _pi(state: PPOState, params, obs):
    return state.actor_state.apply_fn({"params": params}, obs)


def _v(state: PPOState, params, obs):
    return predict_value(state.critic_state, params, obs)[0, ..., 0]


def act(state: PPOState, obs, key, deterministic: bool):
    """The policy's mode when deterministic, else a sample (clipped to the box by the loop)."""
    pi = _pi(state, state.actor_state.params, obs)
    return pi.mode() if deterministic else pi.sample(seed=key)


def sample(state: PPOState, obs, key):
    pi = _pi(state, state.actor_state.params, obs)
    action, log_prob = pi.sample_and_log_prob(seed=key)
    return action, log_prob, _v(state, state.critic_state.params, obs)


def _minibatch_loss(config: PPOConfig, state: PPOState, params, mb):
    actor_params, critic_params = params
    obs, action, old_logp, old_v, adv, ret = mb
    pi = _pi(state, actor_params, obs)
    if config.normalize_advantages:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg, m_pg = losses.clipped_surrogate_loss(pi.log_prob(action), old_logp, adv, config.clip_eps)
    vl, m_v = losses.value_loss(_v(state, critic_params, obs), old_v, ret, config.value_clip_eps)
    entropy = pi.entropy().mean()
    loss = pg + config.vf_coef * vl - config.ent_coef * entropy
    return loss, {**m_pg, **m_v, "entropy": entropy, "loss": loss}


def update(config: PPOConfig, state: PPOState, rollout: Rollout, last_obs, key):
    """GAE over the rollout, then ``num_epochs`` passes of ``num_minibatches`` Adam steps."""
    v_final = _v(state, state.critic_state.params, rollout.final_obs)
    # bootstrap from the true last obs on truncation; from the next state's value otherwise
    v_next = jnp.concatenate(
        [rollout.value[1:], _v(state, state.critic_state.params, last_obs)[None]]
    )
    done = rollout.terminated | rollout.truncated
    v_tp1 = jnp.where(done, v_final, v_next)
    discount = config.gamma * (1.0 - rollout.terminated.astype(jnp.float32))
    adv = losses.gae_advantages(
        rollout.reward, rollout.value, v_tp1, discount, done.astype(jnp.float32), config.gae_lambda
    )
    data = (rollout.obs, rollout.action, rollout.log_prob, rollout.value, adv, adv + rollout.value)
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), data)
    n = flat[0].shape[0]
    mb_size = n // config.num_minibatches

    def epoch(state, k):
        perm = jax.random.permutation(k, n)
        batches = jax.tree.map(
            lambda x: x[perm].reshape((config.num_minibatches, mb_size) + x.shape[1:]), flat
        )

        def step(state, mb):
            params = (state.actor_state.params, state.critic_state.params)
            grads, metrics = jax.grad(
                lambda p: _minibatch_loss(config, state, p, mb), has_aux=True
            )(params)
            state = state.replace(
                actor_state=state.actor_state.apply_gradients(grads[0]),
                critic_state=state.critic_state.apply_gradients(grads[1]),
            )
            return state, metrics

        return jax.lax.scan(step, state, batches)

    state, metrics = jax.lax.scan(epoch, state, jax.random.split(key, config.num_epochs))
    return state, jax.tree.map(lambda m: m.mean(), metrics)


def total_updates(config: PPOConfig, total_steps: int) -> int:
    """Optimizer steps over a run of ``total_steps`` env steps (for the lr annealing)."""
    iterations = max(1, total_steps // (config.n_envs * config.n_steps))
    return iterations * config.num_epochs * config.num_minibatches
