"""DQN's network, acting and update step (SB3 dqn.py order: TD loss, clip, step, target)."""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.dqn import losses
from ajax.agents.dqn.config import DQNConfig
from ajax.networks.networks import init_network_state
from ajax.networks.q_network import QNetwork, epsilon_greedy, linear_epsilon, q_body, q_values
from ajax.networks.train_state import LoadedTrainState, ema_update
from ajax.networks.utils import get_adam_tx
from ajax.training.api import Transition, env_config_of


class DQNState(flax.struct.PyTreeNode):
    """The Q-network with its target copy; ``q_state.step`` counts gradient steps."""

    q_state: LoadedTrainState


def network(config: DQNConfig, n_actions: int, image_shape=None) -> QNetwork:
    """A ReLU MLP on vectors; on images the conv stack of :func:`q_body` (MinAtar's)."""
    arch = (str(config.hidden), "relu") * config.num_layers
    arch, cnn = q_body(arch, image_shape, None)
    return QNetwork(n_actions, arch, dueling=config.dueling, cnn=cnn, image_shape=image_shape)


def init(config: DQNConfig, key, env) -> DQNState:
    """A fresh Q-network (lecun-normal) with an exact target copy."""
    env_config = env_config_of(env)
    net = network(config, env_config.action_dim, env_config.image_shape)
    tx = get_adam_tx(config.learning_rate, config.max_grad_norm, eps=1e-8)
    obs = jnp.zeros((1, env_config.obs_dim))
    return DQNState(init_network_state(obs, net, key, tx).with_target())


def epsilon(config: DQNConfig, state: DQNState) -> jax.Array:
    """The exploration rate after ``q_state.step`` updates, read as the env steps they imply."""
    per_update = config.n_envs * config.train_freq / config.gradient_steps
    t = config.learning_starts + state.q_state.step * per_update
    return linear_epsilon(config.epsilon_start, config.epsilon_end, config.exploration_steps, t)


def act(config: DQNConfig, state: DQNState, obs, key, deterministic: bool):
    """Greedy actions when deterministic, else epsilon-greedy at the scheduled rate."""
    q = q_values(state.q_state, state.q_state.params, obs)
    eps = jnp.where(deterministic, 0.0, epsilon(config, state))
    return epsilon_greedy(q, eps, key)


def update(config: DQNConfig, state: DQNState, batch: Transition, key):
    """One gradient step on the Huber TD loss; every ``target_update_interval`` steps the target
    moves to the online net by ``tau``."""
    del key
    q = state.q_state
    discount = config.gamma * (1.0 - batch.terminated)
    q_next_target = q_values(q, q.target_params, batch.next_obs)
    if config.double:
        q_next_online = q_values(q, q.params, batch.next_obs)
        target = losses.double_q_learning_target(
            batch.reward, discount, q_next_target, q_next_online
        )
    else:
        target = losses.q_learning_target(batch.reward, discount, q_next_target)
    action = batch.action.astype(jnp.int32)

    def loss_fn(params):
        q_tm1 = q_values(q, params, batch.obs)
        q_tm1_a = jnp.take_along_axis(q_tm1, action[:, None], -1)[:, 0]
        return losses.huber_td_loss(q_tm1_a, target)

    (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(q.params)
    q = q.apply_gradients(grads)
    due = q.step % config.target_update_interval == 0
    moved = ema_update(q.target_params, q.params, config.tau)
    q = q.replace(
        target_params=jax.tree.map(lambda a, b: jnp.where(due, a, b), moved, q.target_params)
    )
    return state.replace(q_state=q), {**metrics, "epsilon": epsilon(config, state)}
