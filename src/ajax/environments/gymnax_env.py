"""gymnax (1.0.1) as a :class:`~ajax.environments.core.Simulator`: the default family.

gymnax's own ``step`` already auto-resets and applies its time limit; Ajax calls the
underlying ``reset_env``/``step_env`` instead so that :class:`SimEnv` owns both rules for
every family. gymnax's ``step_env`` reports natural termination only (its time limit is the
separate ``is_truncated``), and the limit is read from ``params.max_steps_in_episode``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from ajax.environments.core import SimEnv, SimStep
from ajax.environments.types import Box, Discrete, EnvSpec
from ajax.environments.utils import flat_f32


class GymnaxSimulator:
    """A gymnax environment with fixed params; observations flattened to float32."""

    def __init__(self, env: Any, params: Any):
        self.env = env
        self.params = params

    def init(self, key: jax.Array) -> SimStep:
        obs, state = self.env.reset_env(key, self.params)
        return SimStep(state, flat_f32(obs), jnp.zeros((), jnp.float32), jnp.zeros((), bool))

    def transition(self, key: jax.Array, state: Any, action: jax.Array) -> SimStep:
        obs, state, reward, terminated, _ = self.env.step_env(key, state, action, self.params)
        return SimStep(state, flat_f32(obs), reward, terminated)


def gymnax_ids() -> tuple[str, ...]:
    """The ids gymnax registers (imports gymnax only)."""
    import gymnax

    return tuple(gymnax.registered_envs)


def _action_space(space: Any) -> Box | Discrete:
    from gymnax.environments import spaces

    if isinstance(space, spaces.Discrete):
        return Discrete(int(space.n))
    if isinstance(space, spaces.Box):
        return Box.from_arrays(space.low, space.high, tuple(space.shape))
    raise ValueError(f"unsupported gymnax action space {type(space).__name__}")


def make_gymnax(name: str, max_episode_steps: int | None = None, **env_kwargs) -> SimEnv:
    """The gymnax env ``name`` with its default params, as a :class:`SimEnv`.

    ``max_episode_steps`` overrides ``params.max_steps_in_episode`` (200 for Pendulum-v1,
    500 for CartPole-v1).
    """
    import gymnax

    env, params = gymnax.make(name, **env_kwargs)
    obs_shape = jax.eval_shape(lambda k: env.reset_env(k, params)[0], jax.random.key(0)).shape
    limit = max_episode_steps or int(params.max_steps_in_episode)
    spec = EnvSpec(
        env_id=name,
        family="gymnax",
        observation_shape=(math.prod(obs_shape),),
        action_space=_action_space(env.action_space(params)),
        max_episode_steps=limit,
        dt=float(params.dt) if hasattr(params, "dt") else None,
        # MinAtar's (10, 10, C) channel images; flat_f32 keeps their NHWC order.
        image_shape=tuple(obs_shape) if len(obs_shape) == 3 else None,
    )
    return SimEnv(GymnaxSimulator(env, params), spec)
