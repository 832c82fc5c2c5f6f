"""Acting in an env: random and agent actions, unit conversion, episode returns, lockstep."""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from ajax.environments.utils import agent_action_to_env
from ajax.jax_helpers import lockstep  # noqa: F401  (re-exported: the loops' old import)
from ajax.networks.config import EnvSpaces


def env_config_of(env, n_envs: int = 1) -> EnvSpaces:
    """The networks toolbox's :class:`EnvSpaces` of ``env`` (its spec, ``n_envs`` copies)."""
    spec = env.spec
    return EnvSpaces(
        obs_shape=tuple(spec.observation_shape),
        action_dim=spec.action_dim,
        continuous=not spec.discrete,
        n_envs=n_envs,
        action_low=None if spec.discrete else spec.action_space.low,
        action_high=None if spec.discrete else spec.action_space.high,
        image_shape=spec.image_shape,
    )


def random_actions(env, key, n: int) -> jax.Array:
    """``n`` uniformly random actions in agent units: [-1, 1] boxes, or discrete ids."""
    spec = env.spec
    if spec.discrete:
        return jax.random.randint(key, (n,), 0, spec.action_dim)
    return jax.random.uniform(key, (n, spec.action_dim), minval=-1.0, maxval=1.0)


def to_env_action(env, action: jax.Array) -> jax.Array:
    """Agent units to the env's: the affine map of [-1, 1] onto its box, ids unchanged."""
    space = env.spec.action_space
    if env.spec.discrete:
        return action
    low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    return agent_action_to_env(jnp.clip(action, -1.0, 1.0), low, high)


class EpisodeTracker(flax.struct.PyTreeNode):
    """Per-env running return and the return of each env's last finished episode."""

    running: jax.Array
    last: jax.Array
    finished: jax.Array

    @classmethod
    def create(cls, n: int) -> EpisodeTracker:
        zeros = jnp.zeros((n,), jnp.float32)
        return cls(running=zeros, last=zeros, finished=jnp.zeros((n,), jnp.int32))

    def update(self, reward: jax.Array, done: jax.Array) -> EpisodeTracker:
        running = self.running + reward.astype(jnp.float32)
        return self.replace(
            running=jnp.where(done, 0.0, running),
            last=jnp.where(done, running, self.last),
            finished=self.finished + done.astype(jnp.int32),
        )

    def last_return_mean(self) -> jax.Array:
        """Mean over envs of the last finished episode's return (NaN before any finished)."""
        has = self.finished > 0
        total = jnp.sum(jnp.where(has, self.last, 0.0))
        return jnp.where(has.any(), total / jnp.maximum(has.sum(), 1), jnp.nan)
