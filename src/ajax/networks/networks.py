"""Actor and critic networks of the model-free agents (SAC, TD3, PPO, ...): build, apply, read.

The modules live in :mod:`ajax.networks.actor_critic` and are re-exported here. This module
builds them into :class:`~ajax.networks.train_state.LoadedTrainState` s as a
:class:`~ajax.networks.config.NetworkConfig` describes them and reads values off a critic state.
Every critic is a :class:`MultiCritic` ensemble, so values lead with the member axis ``num``.
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from ajax.networks.actor_critic import (
    Actor,
    CNNEncoder,
    CNNSpec,
    Critic,
    MultiCritic,
    Squashed,
    TanhMean,
    Torso,
    check_log_std_head,
    reference_cnn,
)
from ajax.networks.config import EnvSpaces, NetworkConfig, OptimizerConfig
from ajax.networks.memory import Carry, MemoryConfig, init_carry
from ajax.networks.pid_actor import PIDActor, PIDPolicy, check_pid_actor
from ajax.networks.train_state import LoadedTrainState
from ajax.networks.utils import get_adam_tx

__all__ = [
    "CNNSpec", "CNNEncoder", "Actor", "Squashed", "TanhMean", "Critic", "MultiCritic", "Torso",
    "actor_module", "reference_cnn", "check_log_std_head", "action_value_input", "get_initialized_actor_critic",
    "get_initialized_critic", "init_network_carry", "init_network_state", "in_critic_units",
    "predict_value_sequence", "phi_star_critic_state", "predict_value", "predict_value_train",
    "state_value", "action_value",
]  # fmt: skip


def action_value_input(obs, action, previous_action=None):
    """A Q-critic's input: ``(obs, action)``, or, given the previous action, a recurrent critic's
    ``(obs, previous_action, action)``: its memory reads the observation and the previous action,
    the current action joins at its head (:attr:`Critic.query_dim`)."""
    parts = (obs, action) if previous_action is None else (obs, previous_action, action)
    return jnp.concatenate(parts, axis=-1)


# --------------------------------------------------------------------------- train states


def init_network_carry(network: nn.Module, memory: MemoryConfig | None, key, batch_size: int):
    """A fresh carry for ``network`` (None without memory); an ensemble (a module with ``num``)
    gets one per member, stacked on a leading ``(num,)`` axis."""
    if memory is None:
        return None
    carry = init_carry(memory, key, batch_size)
    num = getattr(network, "num", None)
    if num is None:
        return carry
    return jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (num,) + leaf.shape), carry)


def init_network_state(init_x, network, key, tx, n_envs: int = 1, memory=None):
    """Initialise ``network`` on ``init_x`` into a :class:`LoadedTrainState`.

    With a memory config the network is recurrent: it is initialised on a one-step time-major
    sequence ``(1, n_envs, F)``, and the state carries a fresh carry batch-sized to ``n_envs``.
    """
    k_params, k_dropout, k_carry = jax.random.split(key, 3)
    rngs = {"params": k_params, "dropout": k_dropout}
    carry = init_network_carry(network, memory, k_carry, n_envs)
    if memory is None:
        variables = network.init(rngs, init_x)
    else:
        x = jnp.broadcast_to(init_x, (1, n_envs) + init_x.shape[-1:])
        variables = network.init(rngs, x, carry, jnp.zeros((1, n_envs), bool))
    return LoadedTrainState.create(
        apply_fn=network.apply,
        params=variables["params"],
        tx=tx,
        batch_stats=variables.get("batch_stats"),
        hidden_state=carry,
    )


def _tx(config: OptimizerConfig, max_timesteps: int | None) -> optax.GradientTransformation:
    """``config``'s optimizer; with ``max_timesteps`` its learning rate decays linearly to 0."""
    lr = config.learning_rate
    if max_timesteps is not None:
        if max_timesteps <= 0:
            raise ValueError(f"max_timesteps must be positive or None, got {max_timesteps}")
        lr = optax.linear_schedule(config.learning_rate, 0.0, max_timesteps)
    fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return get_adam_tx(**{**fields, "learning_rate": lr})


def _critic(env_config: EnvSpaces, config: NetworkConfig, num: int, action_value: bool, extra: int):
    """The critic ensemble and the width of its input."""
    recurrent_q = action_value and config.memory is not None
    critic = Critic(
        architecture=config.critic_architecture,
        kernel_init=config.kernel_init,
        bias_init=config.bias_init,
        out_kernel_init=config.critic_kernel_init,
        n_quantiles=config.n_quantiles,
        memory=config.memory,
        cnn=config.cnn,
        image_shape=env_config.image_shape,
        query_dim=env_config.action_dim if recurrent_q else 0,
        dropout=config.critic_dropout,
    )
    width = env_config.obs_dim + extra
    if action_value:  # (obs, action), or (obs, previous action, action) when recurrent
        width += env_config.action_dim * (2 if recurrent_q else 1)
    return MultiCritic(critic, num=num), width


def actor_module(env_config: EnvSpaces, config: NetworkConfig, continuous: bool, action_dim: int):
    """The actor ``config`` describes: an :class:`Actor`, or a :class:`PIDActor` for a
    :class:`PIDPolicy` architecture (before any :class:`Squashed`/:class:`TanhMean` wrapper)."""
    policy = config.actor_architecture
    if isinstance(policy, PIDPolicy):
        check_pid_actor(continuous, config.memory)
        # Its log-std is a parameter: it needs a start and has no kernel.
        check_log_std_head(True, config.log_std_init, config.log_std_kernel_init)
        return PIDActor(policy, action_dim, config.log_std_init, config.log_std_bounds)
    return Actor(
        action_dim=action_dim,
        continuous=continuous,
        architecture=config.actor_architecture,
        kernel_init=config.kernel_init,
        bias_init=config.bias_init,
        out_kernel_init=config.actor_kernel_init,
        state_independent_log_std=config.state_independent_log_std,
        log_std_init=config.log_std_init,
        log_std_kernel_init=config.log_std_kernel_init,
        log_std_bounds=config.log_std_bounds,
        memory=config.memory,
        cnn=config.cnn,
        image_shape=env_config.image_shape,
    )


def get_initialized_actor_critic(
    key,
    env_config: EnvSpaces,
    actor_optimizer_config: OptimizerConfig,
    critic_optimizer_config: OptimizerConfig,
    network_config: NetworkConfig,
    continuous: bool = False,
    action_value: bool = False,
    squash: bool = False,
    num_critics: int = 4,
    max_timesteps: int | None = None,
    extra_obs_dim: int = 0,
    action_dim_override: int | None = None,
    actor: nn.Module | None = None,
) -> tuple[LoadedTrainState, LoadedTrainState]:
    """Actor and critic train states as ``network_config`` describes them.

    ``action_value`` makes the critic an ensemble of ``num_critics`` Q(obs, action) with a target
    copy (equal at init); otherwise V(obs). A prebuilt ``actor`` (TD3's deterministic one)
    replaces the :class:`Actor` built here; ``squash`` wraps a continuous actor in
    :class:`Squashed` (a discrete one keeps its Categorical); a :class:`PIDPolicy` architecture
    builds a :class:`PIDActor`. ``extra_obs_dim``: dimensions the agent appends to obs at run time
    (UDRL's command, SAC's expert augmentation), so both networks are initialised on the width
    they will read. ``max_timesteps`` decays both learning rates linearly to 0 over that many
    updates. With ``network_config.memory`` both networks are recurrent.
    """
    if env_config.continuous != continuous:
        kinds = {True: "continuous", False: "discrete"}
        raise ValueError(
            f"the env's actions are {kinds[env_config.continuous]} but continuous={continuous}"
        )
    if num_critics < 1 or extra_obs_dim < 0:
        raise ValueError(f"need num_critics >= 1, extra_obs_dim >= 0: {num_critics, extra_obs_dim}")
    action_dim = env_config.action_dim if action_dim_override is None else action_dim_override
    net = (
        actor
        if actor is not None
        else actor_module(env_config, network_config, continuous, action_dim)
    )
    if squash and continuous:
        net = Squashed(net)
    memory, n_envs = network_config.memory, env_config.n_envs
    k_actor, k_critic = jax.random.split(key)
    obs = jnp.zeros((1, env_config.obs_dim + extra_obs_dim))
    actor_tx = _tx(actor_optimizer_config, max_timesteps)
    actor_state = init_network_state(obs, net, k_actor, actor_tx, n_envs, memory)
    critic, width = _critic(env_config, network_config, num_critics, action_value, extra_obs_dim)
    critic_tx = _tx(critic_optimizer_config, max_timesteps)
    x = jnp.zeros((1, width))
    critic_state = init_network_state(x, critic, k_critic, critic_tx, n_envs, memory)
    return actor_state, critic_state.with_target() if action_value else critic_state


def get_initialized_critic(
    key,
    env_config: EnvSpaces,
    critic_optimizer_config: OptimizerConfig,
    network_config: NetworkConfig,
    num_critics: int = 2,
    max_timesteps: int | None = None,
    extra_obs_dim: int = 0,
) -> LoadedTrainState:
    """A standalone Q-critic ensemble (no actor), the online critic's architecture, with a target.

    Always feedforward: its one reader (MC pretraining's frozen expert critic) only calls
    :func:`predict_value`.
    """
    config = dataclasses.replace(network_config, memory=None)
    critic, width = _critic(env_config, config, num_critics, True, extra_obs_dim)
    tx = _tx(critic_optimizer_config, max_timesteps)
    return init_network_state(jnp.zeros((1, width)), critic, key, tx).with_target()


# --------------------------------------------------------------------------- reading values


def in_critic_units(critic_state: LoadedTrainState, actions: jax.Array) -> jax.Array:
    """``actions`` as the critic reads them: ``critic_state.action_units``' affine map of the
    agent's [-1, 1] actions, or the actions themselves."""
    units = critic_state.action_units
    return actions if units is None else units(actions)


def _critic_input(critic_state: LoadedTrainState, x: jax.Array) -> jax.Array:
    """``x`` with its observation standardised (``obs_stats``, the first ``len(mean)`` inputs)
    and its trailing action in the critic's units (``action_units``)."""
    units, stats = critic_state.action_units, critic_state.obs_stats
    if stats is not None:
        n_obs = stats.mean.shape[-1]
        x = jnp.concatenate([stats.normalize(x[..., :n_obs]), x[..., n_obs:]], axis=-1)
    if units is not None:
        n_act = units.low.shape[-1]
        act = in_critic_units(critic_state, x[..., -n_act:])
        x = jnp.concatenate([x[..., :-n_act], act], axis=-1)
    return x


def _check_feedforward(critic_state: LoadedTrainState, what: str) -> None:
    if critic_state.hidden_state is not None:
        raise ValueError(f"{what} reads a feedforward critic; use predict_value_sequence")


def predict_value(critic_state, critic_params, x, *, quantiles: bool = False):
    """The critic's values at ``x``, shape ``(num, ..., 1)``.

    ``x``: obs, or concat(obs, action) with the agent's [-1, 1] action, which a critic with
    ``action_units`` reads in its units (TD3's, in the env's). ``quantiles``: a distributional
    critic's quantiles (last axis, ``n_quantiles``) in place of their mean, the value.
    """
    _check_feedforward(critic_state, "predict_value")
    return critic_state.apply_fn(
        critic_state.variables(critic_params),
        _critic_input(critic_state, x),
        method="quantiles" if quantiles else "__call__",
    )


def predict_value_train(critic_state, critic_params, x):
    """:func:`predict_value` in training: the values at ``x`` and the critic's running statistics
    after this pass (None without any; :meth:`LoadedTrainState.apply_train`)."""
    _check_feedforward(critic_state, "predict_value_train")
    return critic_state.apply_train(critic_params, _critic_input(critic_state, x))


def predict_value_sequence(
    critic_state, critic_params, x, resets, initial_hidden: Carry, *, quantiles: bool = False
):
    """Run a recurrent critic over a time-major sequence; ``(values (num, T, B, 1), final_hidden)``.

    ``x`` (T, B, F) is the critic input (obs, or :func:`action_value_input`); ``resets`` (T, B)
    flags the first step of an episode (``resets[t]``: ``x[t]`` starts one); ``initial_hidden``
    is the carry valid for ``x[0]``, its leaves ``(num, B, hidden)``. ``quantiles``: the
    quantiles (last axis) in place of the values. ``final_hidden`` follows ``x[T - 1]``.
    """
    if initial_hidden is None or x.ndim != 3 or resets.shape != x.shape[:2]:
        raise ValueError(
            "predict_value_sequence needs a recurrent critic's carry, x (T, B, F) and resets "
            f"(T, B); got x {x.shape}, resets {resets.shape}"
        )
    return critic_state.apply_fn(
        critic_state.variables(critic_params),
        _critic_input(critic_state, x),
        initial_hidden,
        resets,
        method="quantiles" if quantiles else "__call__",
    )


def phi_star_critic_state(critic_state: LoadedTrainState) -> LoadedTrainState:
    """The state a frozen expert critic phi's parameters are applied with: the online critic's
    network without the agent's observation statistics, since MC pretraining and PhiRefresh fit
    phi on the observations as stored."""
    return critic_state.replace(obs_stats=None)


def state_value(agent_state, obs, action):
    """V(obs) of ``agent_state.critic_state``, its ensemble's mean, shape ``obs.shape[:-1]``
    (``action`` unused: the signature is an evaluation's value estimate's)."""
    del action
    cs = agent_state.critic_state
    return predict_value(cs, cs.params, obs).mean(0)[..., 0]


def action_value(agent_state, obs, action):
    """Q(obs, action) of ``agent_state.critic_state``, its ensemble's mean, shape
    ``obs.shape[:-1]``."""
    cs = agent_state.critic_state
    return predict_value(cs, cs.params, action_value_input(obs, action)).mean(0)[..., 0]
