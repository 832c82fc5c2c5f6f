"""The soft actor-critic family's state, networks, acting and actor/temperature step.

SAC's (Haarnoja et al. 2018; stable-baselines3 sac.py order), shared by SAC, REDQ, CrossQ and
ASAC; AVG builds its actor with :func:`actor_network`. Each agent's own ``update`` lives in its
package.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from ajax.agents.shared import guidance
from ajax.agents.shared import soft_actor_critic_losses as losses
from ajax.agents.shared.soft_actor_critic_config import SoftActorCriticBase
from ajax.networks.config import NetworkConfig, OptimizerConfig
from ajax.networks.networks import action_value_input, get_initialized_actor_critic, predict_value
from ajax.networks.train_state import LoadedTrainState
from ajax.training.api import env_config_of


class SACState(flax.struct.PyTreeNode):
    """Actor, twin critics with their target, the temperature, and the frozen expert critic
    phi's parameters (``None`` unless :class:`~ajax.agents.shared.guidance.MCPretrain` keeps it,
    ``expert_critic=True``)."""

    actor_state: LoadedTrainState
    critic_state: LoadedTrainState
    log_alpha: jax.Array
    alpha_opt_state: optax.OptState
    expert_critic_params: Any


def init(config: SoftActorCriticBase, key, env) -> SACState:
    """Fresh SAC state: 2 x ``hidden`` ReLU MLPs, squashed Gaussian actor, Q ensemble; fitted
    to the config's expert first when it sets ``pretrain``."""
    opt = OptimizerConfig(learning_rate=config.learning_rate, eps=1e-8)
    state = init_state(config, key, env, network_config(config, critic_mlp(config)), opt, opt)
    if config.pretrain is not None:
        state, _ = guidance.pretrain(config.pretrain, state, env, key, config.gamma)
    return state


def critic_mlp(config: SoftActorCriticBase) -> tuple:
    """``hidden`` x 2 ReLU, with the config's ``critic_norm`` after each hidden layer."""
    norm = () if config.critic_norm is None else (config.critic_norm,)
    return (str(config.hidden), *norm, "relu") * 2


def network_config(config: SoftActorCriticBase, critic_architecture: tuple) -> NetworkConfig:
    """SAC's networks (lecun-normal layers, Dense log-std head at bias 0) around the given
    critic MLP; the actor is ``hidden`` x 2 ReLU or the config's PID."""
    arch = (str(config.hidden), "relu", str(config.hidden), "relu")
    return NetworkConfig(
        **actor_network(config, arch),
        critic_architecture=critic_architecture,
        kernel_init="lecun_normal",
        critic_kernel_init="lecun_normal",
        log_std_init=0.0,
        log_std_bounds=config.log_std_bounds,
    )


def init_state(config: SoftActorCriticBase, key, env, net: NetworkConfig,
               actor_opt: OptimizerConfig, critic_opt: OptimizerConfig) -> SACState:  # fmt: skip
    """A SAC-family state on ``net``: squashed actor, ``num_critics`` Qs with a target copy,
    and the temperature at ``init_alpha`` (SAC, REDQ, CrossQ, ASAC)."""
    actor_state, critic_state = get_initialized_actor_critic(
        key,
        env_config_of(env),
        actor_opt,
        critic_opt,
        net,
        continuous=True,
        action_value=True,
        squash=True,
        num_critics=config.num_critics,
    )
    log_alpha = jnp.log(jnp.asarray(config.init_alpha, jnp.float32))
    return SACState(actor_state, critic_state, log_alpha, alpha_tx(config).init(log_alpha), None)


def actor_network(config, arch: tuple) -> dict:
    """The actor's :class:`NetworkConfig` fields: the MLP with a Dense log-std head, or the
    config's :class:`PIDPolicy` (its log-std is a parameter, so it has no head kernel); any
    config with an ``actor_architecture`` (the family's, and AVG's)."""
    if config.actor_architecture is not None:
        return {"actor_architecture": config.actor_architecture, "log_std_kernel_init": None}
    return {"actor_architecture": arch, "actor_kernel_init": "lecun_normal",
            "log_std_kernel_init": "lecun_normal"}  # fmt: skip


def alpha_tx(config: SoftActorCriticBase):
    return optax.adam(config.learning_rate, eps=1e-8)


def target_entropy_of(config: SoftActorCriticBase, action_dim: int) -> float:
    return -float(action_dim) if config.target_entropy is None else config.target_entropy


def min_q(q):
    """The ensemble's minimum, (N, B, 1) -> (B,): SAC's and CrossQ's actor objective."""
    return q.min(0)[..., 0]


def policy_step(config, state: SACState, critic: LoadedTrainState, obs, action_dim: int, key,
                reduce_q):  # fmt: skip
    """One actor step on E[alpha log pi - reduce_q(Q(s, a))] (Eq. 7), then one temperature step
    (Eq. 18) on the same samples' log-probs; ``critic`` is the one the actor reads.

    Shared by SAC (min, updated critics), REDQ (mean, critics before their update), CrossQ
    (min, evaluation-mode BatchRenorm critics) and ASAC; the config's ``imitation`` adds its
    fading pull toward an expert (:func:`~ajax.agents.shared.guidance.imitation_loss`).
    """
    actor, alpha = state.actor_state, jnp.exp(state.log_alpha)

    def actor_fn(params):
        pi = actor.apply_fn({"params": params}, obs)
        a, logp = losses.sample_action(pi, key)
        q_pi = reduce_q(predict_value(critic, critic.params, action_value_input(obs, a)))
        loss, metrics = losses.actor_loss(q_pi, logp, alpha)
        bc, bc_metrics = guidance.imitation_loss(config.imitation, actor.step, pi, obs, q_pi)
        return loss + bc, ({**metrics, **bc_metrics}, logp)

    (_, (a_metrics, logp)), grads = jax.value_and_grad(actor_fn, has_aux=True)(actor.params)
    alpha_grad, t_metrics = jax.grad(losses.temperature_loss, has_aux=True)(
        state.log_alpha, logp, target_entropy_of(config, action_dim)
    )
    updates, alpha_opt_state = alpha_tx(config).update(alpha_grad, state.alpha_opt_state)
    state = state.replace(
        actor_state=actor.apply_gradients(grads),
        log_alpha=optax.apply_updates(state.log_alpha, updates),
        alpha_opt_state=alpha_opt_state,
    )
    return state, {**a_metrics, **t_metrics}


def act(state: SACState, obs, key, deterministic: bool):
    """A squashed-Gaussian action in [-1, 1]: tanh of the mean when deterministic."""
    pi = state.actor_state.apply_fn({"params": state.actor_state.params}, obs)
    return pi.mean() if deterministic else pi.sample(seed=key)
