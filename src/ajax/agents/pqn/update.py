"""PQN's network, acting and update: Q(lambda) over one rollout, minibatch epochs, no replay."""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
import optax

from ajax.agents.pqn import losses
from ajax.agents.pqn.config import PQNConfig
from ajax.agents.shared.minibatch import minibatch_epochs, total_updates
from ajax.networks.networks import init_network_state
from ajax.networks.q_network import QNetwork, epsilon_greedy, linear_epsilon, q_body, q_values
from ajax.networks.train_state import LoadedTrainState
from ajax.networks.utils import get_adam_tx
from ajax.training.api import Rollout, env_config_of, next_values, values_at_cuts

__all__ = ["PQNState", "act", "epsilon", "init", "sample", "total_updates", "update"]


class PQNState(flax.struct.PyTreeNode):
    """The Q-network (no target); ``q_state.step`` counts gradient steps."""

    q_state: LoadedTrainState
    exploration_updates: int = flax.struct.field(pytree_node=False, default=1)


def init(config: PQNConfig, key, env, total_updates: int = 1) -> PQNState:
    """Dense -> LayerNorm -> ReLU body (Gallici et al. 2024, Sec. 4), a linear head; on images
    the conv stack of :func:`q_body` with LayerNorm after each layer."""
    env_config = env_config_of(env, config.n_envs)
    arch = (str(config.hidden), "layernorm", "relu") * config.num_layers
    arch, cnn = q_body(arch, env_config.image_shape, None, norm=True)
    net = QNetwork(env_config.action_dim, arch, cnn=cnn, image_shape=env_config.image_shape)
    lr = config.learning_rate
    if config.anneal_lr:
        lr = optax.linear_schedule(config.learning_rate, 0.0, total_updates)
    tx = get_adam_tx(lr, config.max_grad_norm, eps=1e-8, optimizer=config.optimizer)
    obs = jnp.zeros((1, env_config.obs_dim))
    decay = max(1, int(config.exploration_fraction * total_updates))
    return PQNState(init_network_state(obs, net, key, tx), decay)


def epsilon(config: PQNConfig, state: PQNState) -> jax.Array:
    return linear_epsilon(
        config.epsilon_start, config.epsilon_end, state.exploration_updates, state.q_state.step
    )


def act(config: PQNConfig, state: PQNState, obs, key, deterministic: bool):
    """Greedy when deterministic, else epsilon-greedy at the scheduled rate."""
    q = q_values(state.q_state, state.q_state.params, obs)
    return epsilon_greedy(q, 0.0 if deterministic else epsilon(config, state), key)


def sample(config: PQNConfig, state: PQNState, obs, key):
    """An epsilon-greedy action; the loop's (log_prob, value) slots hold 0 and max_a Q."""
    q = q_values(state.q_state, state.q_state.params, obs)
    action = epsilon_greedy(q, epsilon(config, state), key)
    return action, jnp.zeros(q.shape[:-1]), q.max(-1)


def update(config: PQNConfig, state: PQNState, rollout: Rollout, last_obs, key):
    """Q(lambda) targets from the rollout's arrival states, then ``num_epochs`` x
    ``num_minibatches`` steps on the squared error (Gallici et al. 2024, Alg. 1)."""
    q = state.q_state
    q_max = lambda obs: q_values(q, q.params, obs).max(-1)
    # the rollout's value slot holds max_a Q(obs_t) under these same parameters, so only the
    # steps a time limit cut, and the obs after the rollout, need a fresh forward pass
    q_next_max = next_values(rollout, values_at_cuts(q_max, rollout), q_max(last_obs))
    target = losses.q_lambda_targets(
        rollout.reward,
        rollout.terminated,
        rollout.terminated | rollout.truncated,
        q_next_max,
        config.gamma,
        config.q_lambda,
    )
    flat = jax.tree.map(
        lambda x: x.reshape((-1,) + x.shape[2:]), (rollout.obs, rollout.action, target)
    )

    def step(q, mb):
        obs, action, g = mb

        def loss_fn(params):
            q_a = jnp.take_along_axis(q_values(q, params, obs), action[:, None], -1)[:, 0]
            return losses.q_regression_loss(q_a, g)

        grads, metrics = jax.grad(loss_fn, has_aux=True)(q.params)
        return q.apply_gradients(grads), metrics

    q, metrics = minibatch_epochs(config, q, flat, step, key)
    return state.replace(q_state=q), {**metrics, "epsilon": epsilon(config, state)}
