"""The PPO family's state, networks, acting, loss and minibatch fit (PPO and APO).

PPO's (Schulman et al. 2017: clipped surrogate, GAE, minibatch epochs; CleanRL's networks);
APO runs the same epochs on its differential advantages. Each agent's own ``init`` (its
optimiser) and ``update`` live in its package.
"""

from __future__ import annotations

from typing import NamedTuple

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.shared import proximal_policy_losses as losses
from ajax.agents.shared.minibatch import minibatch_epochs
from ajax.agents.shared.proximal_policy_config import ProximalPolicyBase
from ajax.networks.config import NetworkConfig, OptimizerConfig
from ajax.networks.networks import get_initialized_actor_critic, predict_value
from ajax.networks.train_state import LoadedTrainState
from ajax.training.api import Rollout, env_config_of, next_values


class PPOState(flax.struct.PyTreeNode):
    actor_state: LoadedTrainState
    critic_state: LoadedTrainState


def network_config(config: ProximalPolicyBase) -> NetworkConfig:
    """CleanRL's PPO networks: orthogonal init (sqrt 2 hidden, 0.01 policy, 1.0 value heads),
    a state-independent log-std at 0, two ``hidden`` layers of ``activation``."""
    arch = (str(config.hidden), config.activation, str(config.hidden), config.activation)
    return NetworkConfig(
        actor_architecture=arch if config.actor_architecture is None else config.actor_architecture,
        critic_architecture=arch,
        kernel_init="orthogonal(1.4142135623730951)",
        actor_kernel_init="orthogonal(0.01)",
        critic_kernel_init="orthogonal(1.0)",
        state_independent_log_std=True,
        log_std_init=0.0,
        log_std_bounds=None,
        memory=config.memory_config,
    )


def init_state(config: ProximalPolicyBase, key, env, total_updates: int | None,
               opt: OptimizerConfig, actor=None) -> PPOState:  # fmt: skip
    """A PPO-family state on :func:`network_config` with ``opt`` for both networks; ``actor``
    (a wrapped :func:`~ajax.networks.networks.actor_module`) replaces the plain actor."""
    env_config = env_config_of(env, config.n_envs)
    actor_state, critic_state = get_initialized_actor_critic(
        key,
        env_config,
        opt,
        opt,
        network_config(config),
        continuous=env_config.continuous,
        action_value=False,
        num_critics=1,
        max_timesteps=total_updates if config.anneal_lr else None,
        actor=actor,
    )
    return PPOState(actor_state, critic_state)


def _pi(state: PPOState, params, obs):
    return state.actor_state.apply_fn({"params": params}, obs)


def value_of(state: PPOState, params, obs):
    """V(obs) of a feedforward critic under ``params``, the leading member dropped: (...,)."""
    return predict_value(state.critic_state, params, obs)[0, ..., 0]


def act(state: PPOState, obs, key, deterministic: bool):
    """The policy's mode when deterministic, else a sample (clipped to the box by the loop)."""
    pi = _pi(state, state.actor_state.params, obs)
    return pi.mode() if deterministic else pi.sample(seed=key)


def sample(state: PPOState, obs, key):
    pi = _pi(state, state.actor_state.params, obs)
    action, log_prob = pi.sample_and_log_prob(seed=key)
    return action, log_prob, value_of(state, state.critic_state.params, obs)


class Batch(NamedTuple):
    """The per-sample data of PPO's loss (any leading shape)."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    adv: jax.Array
    ret: jax.Array


def ppo_loss(config: ProximalPolicyBase, pi, v, mb: Batch):
    """Clipped surrogate + clipped value loss - entropy bonus, given the current policy ``pi``
    and values ``v`` at ``mb.obs`` (feedforward or replayed through memory)."""
    adv = mb.adv
    if config.normalize_advantages:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg, m_pg = losses.clipped_surrogate_loss(pi.log_prob(mb.action), mb.log_prob, adv,
                                             config.clip_eps)  # fmt: skip
    vl, m_v = losses.value_loss(v, mb.value, mb.ret, config.value_clip_eps)
    entropy = pi.entropy().mean()
    loss = pg + config.vf_coef * vl - config.ent_coef * entropy
    return loss, {**m_pg, **m_v, "entropy": entropy, "loss": loss}


def advantages(config: ProximalPolicyBase, rollout: Rollout, v_cut, v_last, gamma: float):
    """GAE over ``rollout`` given V at the true last obs of every step a time limit cut
    (``v_cut``, [T, N], :func:`~ajax.training.on_policy.values_at_cuts`) and at the obs after
    the rollout (``v_last``, [N]): a truncation bootstraps from its true last obs, any other
    step from the next state's value; ``gamma`` is the discount (1 for APO)."""
    done = rollout.terminated | rollout.truncated
    discount = gamma * (1.0 - rollout.terminated.astype(jnp.float32))
    return losses.gae_advantages(
        rollout.reward,
        rollout.value,
        next_values(rollout, v_cut, v_last),
        discount,
        done.astype(jnp.float32),
        config.gae_lambda,
    )


def actor_critic_epochs(config: ProximalPolicyBase, state: PPOState, data, loss_fn, key,
                        clip_grads=lambda grads: grads):  # fmt: skip
    """``num_epochs`` passes of ``num_minibatches`` Adam steps on ``loss_fn(state, params, mb)``
    (:func:`~ajax.agents.shared.minibatch.minibatch_epochs`), ``params`` the (actor, critic)
    pair.

    Every leaf of ``data`` leads with the axis minibatches split: samples (feedforward) or envs
    (recurrent: each minibatch holds whole sequences). ``clip_grads`` maps the (actor, critic)
    gradient pair before the optimisers see it (APO clips the pair's joint norm)."""

    def step(state, mb):
        params = (state.actor_state.params, state.critic_state.params)
        grads, metrics = jax.grad(lambda p: loss_fn(state, p, mb), has_aux=True)(params)
        grads = clip_grads(grads)
        state = state.replace(
            actor_state=state.actor_state.apply_gradients(grads[0]),
            critic_state=state.critic_state.apply_gradients(grads[1]),
        )
        return state, metrics

    return minibatch_epochs(config, state, data, step, key)


def fit(config: ProximalPolicyBase, state: PPOState, rollout: Rollout, adv, key,
        loss=ppo_loss, clip_grads=lambda grads: grads):  # fmt: skip
    """The minibatch epochs of a feedforward rollout with its advantages ``adv`` ([T, N]) on
    ``loss(config, pi, v, mb)``: returns are ``adv + value``, samples flattened and shuffled."""
    data = Batch(rollout.obs, rollout.action, rollout.log_prob, rollout.value, adv,
                 adv + rollout.value)  # fmt: skip
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), data)

    def loss_fn(state, params, mb: Batch):
        pi = _pi(state, params[0], mb.obs)
        return loss(config, pi, value_of(state, params[1], mb.obs), mb)

    return actor_critic_epochs(config, state, flat, loss_fn, key, clip_grads)
