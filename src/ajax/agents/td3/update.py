"""TD3's update step and acting (Fujimoto et al. 2018; sfujim/TD3 TD3.py order)."""

from __future__ import annotations

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.td3 import losses
from ajax.agents.td3.config import TD3Config
from ajax.modules.pid_actor import PIDLaw, PIDPolicy, check_pid_actor
from ajax.networks.config import NetworkConfig, OptimizerConfig
from ajax.networks.distributions import Deterministic
from ajax.networks.networks import action_value_input, get_initialized_actor_critic, predict_value
from ajax.networks.train_state import LoadedTrainState
from ajax.networks.utils import parse_architecture
from ajax.training.api import Transition, env_config_of


class DeterministicActor(nn.Module):
    """mu(s) = tanh(MLP(s)): TD3's policy, a :class:`Deterministic` distribution."""

    action_dim: int
    architecture: tuple = ("256", "relu", "256", "relu")
    pid: PIDPolicy | None = None  # mu(s) = tanh(PID(s)), its parameters under "law"

    @nn.compact
    def __call__(self, obs):
        if self.pid is not None:
            check_pid_actor(True, None)
            return Deterministic(jnp.tanh(PIDLaw(self.pid, self.action_dim, name="law")(obs)))
        h = obs
        for layer in parse_architecture(self.architecture, "lecun_normal"):
            h = layer(h)
        return Deterministic(jnp.tanh(nn.Dense(self.action_dim)(h)))


class TD3State(flax.struct.PyTreeNode):
    """Actor and twin critics, each with its target copy, and the update counter."""

    actor_state: LoadedTrainState
    critic_state: LoadedTrainState
    updates: jax.Array


def init(config: TD3Config, key, env) -> TD3State:
    arch = (str(config.hidden), "relu", str(config.hidden), "relu")
    env_config = env_config_of(env)
    net = NetworkConfig(critic_architecture=arch, kernel_init="lecun_normal")
    opt = OptimizerConfig(learning_rate=config.learning_rate, eps=1e-8)
    actor_state, critic_state = get_initialized_actor_critic(
        key,
        env_config,
        opt,
        opt,
        net,
        continuous=True,
        action_value=True,
        num_critics=2,
        actor=DeterministicActor(env_config.action_dim, arch, config.actor_architecture),
    )
    actor_state = actor_state.with_target()
    return TD3State(actor_state, critic_state, jnp.zeros((), jnp.int32))


def act(config: TD3Config, state: TD3State, obs, key, deterministic: bool):
    """mu(s), plus N(0, exploration_noise^2) clipped to [-1, 1] unless deterministic."""
    mu = state.actor_state.apply_fn({"params": state.actor_state.params}, obs).mean()
    if deterministic:
        return mu
    return jnp.clip(mu + config.exploration_noise * jax.random.normal(key, mu.shape), -1.0, 1.0)


def update(config: TD3Config, state: TD3State, batch: Transition, key):
    """Critic step every call; actor step and both target EMAs every ``policy_delay`` calls."""
    actor, critic = state.actor_state, state.critic_state
    mu_next = actor.apply_fn({"params": actor.target_params}, batch.next_obs).mean()
    a_next = losses.smoothed_target_action(
        mu_next, key, config.target_noise, config.target_noise_clip
    )
    q_next = predict_value(critic, critic.target_params, action_value_input(batch.next_obs, a_next))
    target = losses.clipped_double_q_target(
        batch.reward, config.gamma * (1.0 - batch.terminated), q_next[..., 0]
    )

    def critic_fn(params):
        q = predict_value(critic, params, action_value_input(batch.obs, batch.action))
        return losses.critic_loss(q[..., 0], target)

    (_, metrics), grads = jax.value_and_grad(critic_fn, has_aux=True)(critic.params)
    critic = critic.apply_gradients(grads)

    def actor_fn(params):
        mu = actor.apply_fn({"params": params}, batch.obs).mean()
        q = predict_value(critic, critic.params, action_value_input(batch.obs, mu))
        return losses.actor_loss(q[0, ..., 0])

    def delayed(actor, critic):
        (_, a_metrics), grads = jax.value_and_grad(actor_fn, has_aux=True)(actor.params)
        actor = actor.apply_gradients(grads).soft_update(config.tau)
        return actor, critic.soft_update(config.tau), a_metrics["actor_loss"]

    def skip(actor, critic):
        return actor, critic, jnp.zeros((), jnp.float32)

    updates = state.updates + 1
    actor, critic, a_loss = jax.lax.cond(
        updates % config.policy_delay == 0, delayed, skip, actor, critic
    )
    state = TD3State(actor, critic, updates)
    return state, {**metrics, "actor_loss": a_loss}
