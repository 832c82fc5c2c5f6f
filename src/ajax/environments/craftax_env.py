"""Craftax (1.6.1) as a :class:`~ajax.environments.core.Simulator`: Crafter in JAX.

Craftax-Classic reimplements Crafter (one of DreamerV3's benchmarks) in JAX, so a pixel run
keeps the environment inside ``jax.jit``. The ids are craftax's own, behind ``craftax:``:
``Craftax-Classic-Pixels-v1`` (63 x 63 RGB in [0, 1]; DreamerV3's CNN wants an even side, so
resize it: ``resize=(64, 64)`` / ``--resize 64``), ``Craftax-Classic-Symbolic-v1`` and the full
game's ``Craftax-Pixels-v1`` / ``Craftax-Symbolic-v1``. Craftax folds its time limit into
``done``; Ajax lifts it out (``max_timesteps`` pushed out of reach) so that :class:`SimEnv`
counts the limit (``params.max_timesteps``, 10,000) as truncation and ``done`` is death only.
The first pixel env built on a machine renders Craftax's textures once (about a minute; cached
by craftax).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from ajax.environments.core import SimEnv, SimStep
from ajax.environments.types import Discrete, EnvSpec
from ajax.environments.utils import flat_f32

CRAFTAX_IDS = (
    "Craftax-Classic-Pixels-v1",
    "Craftax-Classic-Symbolic-v1",
    "Craftax-Pixels-v1",
    "Craftax-Symbolic-v1",
)


class CraftaxSimulator:
    """A craftax env (no auto-reset) with fixed params; observations flattened to float32."""

    def __init__(self, env: Any, params: Any):
        self.env, self.params = env, params

    def init(self, key: jax.Array) -> SimStep:
        obs, state = self.env.reset_env(key, self.params)
        return SimStep(state, flat_f32(obs), jnp.zeros((), jnp.float32), jnp.zeros((), bool))

    def transition(self, key: jax.Array, state: Any, action: jax.Array) -> SimStep:
        obs, state, reward, done, _ = self.env.step_env(key, state, action, self.params)
        return SimStep(state, flat_f32(obs), jnp.asarray(reward, jnp.float32), done)


def make_craftax(name: str, max_episode_steps: int | None = None) -> SimEnv:
    """The craftax env ``name`` as a :class:`SimEnv` (pixel ids set ``spec.image_shape``)."""
    from craftax.craftax_env import make_craftax_env_from_name

    env = make_craftax_env_from_name(name, auto_reset=False)
    params = env.default_params
    limit = max_episode_steps or int(params.max_timesteps)
    params = params.replace(max_timesteps=2**30)  # the limit is SimEnv's (truncation)
    obs_shape = jax.eval_shape(lambda k: env.reset_env(k, params)[0], jax.random.key(0)).shape
    spec = EnvSpec(
        env_id=f"craftax:{name}",
        family="craftax",
        observation_shape=(math.prod(obs_shape),),
        action_space=Discrete(int(env.action_space(params).n)),
        max_episode_steps=limit,
        image_shape=tuple(obs_shape) if len(obs_shape) == 3 else None,
    )
    return SimEnv(CraftaxSimulator(env, params), spec)
