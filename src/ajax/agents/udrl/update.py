"""UDRL's behaviour function, its command-following policy and its update.

Srivastava et al. 2019 (arXiv:1912.02877), Alg. 1-3. The command (d_r, d_h) is the policy's
carry: drawn from the best stored episodes where an episode starts (Alg. 2), then
d_r <- d_r - r_t, d_h <- max(d_h - 1, 1) after every step (Alg. 3). It joins the observation
after the encoder, scaled by (return_scale, horizon_scale).
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.udrl import losses
from ajax.agents.udrl.config import UDRLConfig
from ajax.agents.udrl.store import (
    Episodes,
    Recorder,
    best_command_stats,
    is_stored,
    record_step,
    sample_segments,
)
from ajax.networks.actor_critic import Squashed
from ajax.networks.config import NetworkConfig
from ajax.networks.distributions import Squash
from ajax.networks.networks import actor_module, init_network_state
from ajax.networks.train_state import LoadedTrainState
from ajax.networks.utils import get_adam_tx
from ajax.training.api import Policy, Rollout, RolloutEnd, Tick, env_config_of

COMMAND_DIM = 2  # (d_r, d_h)
_EDGE = 1.0 - 1e-6  # squashed log-probs are finite only inside (-1, 1)


class UDRLState(flax.struct.PyTreeNode):
    """The behaviour function B, the best episodes and each env's episode in progress."""

    actor_state: LoadedTrainState
    store: Episodes
    recorder: Recorder


def max_episode_steps(config: UDRLConfig, env) -> int:
    """The recorder's length: the config's, else the env's time limit."""
    limit = config.max_episode_steps or env.spec.max_episode_steps
    if limit is None:
        raise ValueError(
            f"udrl records whole episodes and {env.spec.env_id!r} has no time limit; set "
            "max_episode_steps (e.g. --max-episode-steps 1000)"
        )
    return int(limit)


def init(config: UDRLConfig, key, env) -> UDRLState:
    """B as the toolbox actor on (obs, command): Categorical, or a tanh-squashed Normal."""
    env_config = env_config_of(env, config.n_envs)
    arch = (str(config.hidden), config.activation) * config.num_layers
    net = actor_module(env_config, NetworkConfig(actor_architecture=arch), env_config.continuous,
                       env_config.action_dim)  # fmt: skip
    if env_config.continuous:
        net = Squashed(net)
    tx = get_adam_tx(config.learning_rate, None, eps=1e-8)
    obs = jnp.zeros((1, env_config.obs_dim + COMMAND_DIM))
    shape = (env_config.action_dim,) if env_config.continuous else ()
    dtype = jnp.float32 if env_config.continuous else jnp.int32
    length, o = max_episode_steps(config, env), env_config.obs_dim
    return UDRLState(
        actor_state=init_network_state(obs, net, key, tx),
        store=Episodes.empty(config.store_size, length, o, shape, dtype),
        recorder=Recorder.empty(config.n_envs, length, o, shape, dtype),
    )


def _pi(config: UDRLConfig, state: UDRLState, params, obs, d_r, d_h):
    scale = jnp.stack([d_r * config.return_scale, d_h * config.horizon_scale], -1)
    return state.actor_state.apply_fn({"params": params}, jnp.concatenate([obs, scale], -1))


def command(config: UDRLConfig, state: UDRLState, carry, tick: Tick, key, deterministic: bool):
    """The command each env follows at ``tick``: a fresh one where an episode starts (horizon
    the best episodes' mean length, return uniform in [mean, mean + std] of their returns, the
    std floored at ``command_spread`` |mean|; when deterministic, the config's evaluation
    command, else that range's top), else the previous one less the reward just received."""
    d_r, d_h = carry
    mean, std, length = best_command_stats(state.store, config.last_few)
    spread = jnp.maximum(std, config.command_spread * jnp.abs(mean))
    u = jnp.ones_like(d_r) if deterministic else jax.random.uniform(key, d_r.shape)
    fresh_r = mean + u * spread
    if deterministic and config.eval_command_return is not None:
        fresh_r = jnp.full_like(d_r, config.eval_command_return)
        length = jnp.asarray(config.eval_command_horizon, d_h.dtype)
    d_r = jnp.where(tick.is_first, fresh_r, d_r - tick.reward)
    d_h = jnp.where(tick.is_first, length, jnp.maximum(d_h - 1.0, 1.0))
    return d_r, d_h


def greedy(pi):
    """The deterministic action: the Categorical's mode, or tanh of the latent Normal's mean."""
    return pi.mean() if isinstance(pi, Squash) else pi.mode()


def policy(config: UDRLConfig) -> Policy:
    """B following its command: the mode when deterministic, else a sample."""

    def act(state: UDRLState, carry, tick: Tick, key, deterministic: bool):
        k_cmd, k_act = jax.random.split(key)
        carry = command(config, state, carry, tick, k_cmd, deterministic)
        pi = _pi(config, state, state.actor_state.params, tick.obs, *carry)
        return (greedy(pi) if deterministic else pi.sample(seed=k_act)), carry

    def init_carry(n: int):
        return jnp.zeros((n,)), jnp.ones((n,))

    return Policy(init=init_carry, act=act)


def sample(config: UDRLConfig, state: UDRLState, carry, tick: Tick, key):
    """The on-policy loop's sample: an action, with zeros in the (log_prob, value) slots."""
    action, carry = policy(config).act(state, carry, tick, key, False)
    zeros = jnp.zeros(tick.obs.shape[:1])
    return action, zeros, zeros, carry


def update(config: UDRLConfig, state: UDRLState, rollout: Rollout, end: RolloutEnd, key):
    """Record the rollout's episodes (the best go to the store), then ``n_updates`` maximum-
    likelihood steps on hindsight segments of the stored ones (Alg. 1)."""
    del end

    def step(carry, x):
        store, rec = carry
        obs, action, reward, done = x
        return record_step(store, rec, obs, action, reward, done), None

    done = rollout.terminated | rollout.truncated
    (store, rec), _ = jax.lax.scan(
        step, (state.store, state.recorder), (rollout.obs, rollout.action, rollout.reward, done)
    )
    weight = is_stored(store.ret).any().astype(jnp.float32)
    continuous = jnp.issubdtype(store.action.dtype, jnp.floating)

    def sgd(actor, k):
        obs, action, d_r, d_h = sample_segments(store, k, config.batch_size)
        if continuous:
            action = jnp.clip(action, -_EDGE, _EDGE)

        def loss_fn(params):
            pi = _pi(config, state, params, obs, d_r, d_h)
            return losses.behaviour_loss(pi.log_prob(action), weight)

        grads, metrics = jax.grad(loss_fn, has_aux=True)(actor.params)
        return actor.apply_gradients(grads), metrics

    actor, metrics = jax.lax.scan(sgd, state.actor_state, jax.random.split(key, config.n_updates))
    mean, std, length = best_command_stats(store, config.last_few)
    metrics = {
        **jax.tree.map(lambda m: m.mean(), metrics),
        "command_return": mean,
        "command_return_std": std,
        "command_horizon": length,
        "stored_episodes": is_stored(store.ret).sum(),
    }
    return state.replace(actor_state=actor, store=store, recorder=rec), metrics
