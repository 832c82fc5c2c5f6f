"""AVG's networks, acting and incremental update (Vasan et al. 2024, Alg. 1).

Each update sees one env step (per env): the observation moments and the TD scale take it in,
the critic steps on its TD error with the same critic on both sides, then the actor steps on
the action-value gradient of a fresh reparameterised sample, read from the updated critic.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.avg import losses
from ajax.agents.avg.config import AVGConfig
from ajax.agents.shared.soft_actor_critic import actor_network
from ajax.agents.shared.soft_actor_critic_losses import sample_action
from ajax.environments.normalize import ObsMoments, initial_moments, normalize_obs, update_moments
from ajax.networks.config import NetworkConfig, OptimizerConfig
from ajax.networks.networks import action_value_input, get_initialized_actor_critic, predict_value
from ajax.networks.train_state import LoadedTrainState
from ajax.training.api import Rollout, env_config_of


class AVGState(flax.struct.PyTreeNode):
    """Actor and critic (no target), the observation moments, the moments of (r, gamma_t, G^2)
    behind the TD scale, each env's discounted return so far ``ret`` (N,), and the env's
    ``raw_obs_prefix`` (PID error terms the normaliser leaves raw)."""

    actor_state: LoadedTrainState
    critic_state: LoadedTrainState
    obs_moments: ObsMoments
    td_moments: ObsMoments
    ret: jax.Array
    raw_prefix: int = flax.struct.field(pytree_node=False, default=0)


def init(config: AVGConfig, key, env) -> AVGState:
    """Two ``hidden`` layers then penultimate normalisation in actor and critic (or the config's
    PID actor); squashed Gaussian actor with a Dense log-std head; one Q critic without a
    target copy."""
    arch = (str(config.hidden), config.activation) * 2 + ("l2norm",)
    net = NetworkConfig(**actor_network(config, arch), critic_architecture=arch,
                        kernel_init="lecun_normal", critic_kernel_init="lecun_normal",
                        log_std_init=0.0, log_std_bounds=config.log_std_bounds)  # fmt: skip
    opt = lambda lr: OptimizerConfig(learning_rate=lr, eps=1e-8, beta_1=config.beta_1)
    env_config = env_config_of(env, config.n_envs)
    actor_state, critic_state = get_initialized_actor_critic(
        key, env_config, opt(config.actor_lr), opt(config.critic_lr), net, continuous=True,
        action_value=True, squash=True, num_critics=1,
    )  # fmt: skip
    return AVGState(
        actor_state=actor_state,
        critic_state=critic_state.replace(target_params=None),
        obs_moments=initial_moments(env_config.obs_dim),
        td_moments=initial_moments(3),
        ret=jnp.zeros((config.n_envs,), jnp.float32),
        raw_prefix=env.spec.raw_obs_prefix,
    )


def _obs(config: AVGConfig, state: AVGState, moments: ObsMoments, obs):
    if not config.normalize_obs:
        return obs
    return normalize_obs(moments, obs, state.raw_prefix)


def _pi(state: AVGState, params, obs):
    return state.actor_state.apply_fn({"params": params}, obs)


def _q(state: AVGState, params, obs, action):
    return predict_value(state.critic_state, params, action_value_input(obs, action))[0, ..., 0]


def make_act(config: AVGConfig):
    def act(state: AVGState, obs, key, deterministic: bool):
        """tanh of the mean when deterministic, else a squashed sample, on normalised obs."""
        pi = _pi(state, state.actor_state.params, _obs(config, state, state.obs_moments, obs))
        return pi.mean() if deterministic else pi.sample(seed=key)

    return act


def make_sample(config: AVGConfig):
    def sample(state: AVGState, obs, key):
        pi = _pi(state, state.actor_state.params, _obs(config, state, state.obs_moments, obs))
        action, log_prob = sample_action(pi, key)
        return action, log_prob, jnp.zeros_like(log_prob)

    return sample


def update(config: AVGConfig, state: AVGState, rollout: Rollout, last_obs, key):
    """One AVG step on the rollout's single step ([1, N]): moments, TD scale, critic, actor."""
    k_next, k_pi = jax.random.split(key)
    step = jax.tree.map(lambda x: x[0], rollout)
    done = step.terminated | step.truncated
    next_obs = jnp.where(done[:, None], step.final_obs, last_obs)
    moments = (
        update_moments(state.obs_moments, step.obs) if config.normalize_obs else state.obs_moments
    )
    s, s_next = _obs(config, state, moments, step.obs), _obs(config, state, moments, next_obs)

    discount = config.gamma * (1.0 - step.terminated.astype(jnp.float32))
    ret = step.reward + config.gamma * state.ret * (1.0 - step.is_first.astype(jnp.float32))
    td_moments = update_moments(state.td_moments, jnp.stack([step.reward, discount, ret**2], -1))
    sigma = losses.td_scale(td_moments.var[0], td_moments.var[1], td_moments.mean[2])
    reward = step.reward / sigma if config.scale_td else step.reward

    actor, critic = state.actor_state, state.critic_state
    a_next, logp_next = sample_action(_pi(state, actor.params, s_next), k_next)
    q_next = _q(state, critic.params, s_next, a_next)

    def critic_fn(params):
        q = _q(state, params, s, step.action)
        return losses.avg_critic_loss(q, reward, discount, q_next, logp_next, config.alpha)

    (_, c_metrics), grads = jax.value_and_grad(critic_fn, has_aux=True)(critic.params)
    critic = critic.apply_gradients(grads)

    def actor_fn(params):
        a, logp = sample_action(_pi(state, params, s), k_pi)
        return losses.avg_actor_loss(_q(state, critic.params, s, a), logp, config.alpha)

    (_, a_metrics), grads = jax.value_and_grad(actor_fn, has_aux=True)(actor.params)
    state = state.replace(actor_state=actor.apply_gradients(grads), critic_state=critic,
                          obs_moments=moments, td_moments=td_moments, ret=ret)  # fmt: skip
    return state, {**c_metrics, **a_metrics, "td_sigma": sigma}
