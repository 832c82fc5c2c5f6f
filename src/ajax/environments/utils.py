"""Small pure helpers shared by the environment adapters, wrappers and agents."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax.jax_helpers import strong_types, tree_select, where_batch  # noqa: F401  (re-exported)


def agent_action_to_env(action, low, high):
    """Map an action in agent units [-1, 1] onto the env box: ``c + h * a``.

    ``c = (high + low) / 2`` is the box's centre and ``h = (high - low) / 2`` its half-range
    (spec 002, ``ajax.modules.pid_actor``). Affine only: the agent squashes or clips to
    [-1, 1] first. Works on numpy and jax arrays alike (operators only).
    """
    centre = (high + low) / 2
    half_range = (high - low) / 2
    return centre + half_range * action


def env_action_to_agent(action, low, high):
    """Inverse of :func:`agent_action_to_env`: env units back to agent units [-1, 1]."""
    centre = (high + low) / 2
    half_range = (high - low) / 2
    return (action - centre) / half_range


def flat_f32(obs) -> jax.Array:
    """A single env's observation as a flat float32 vector."""
    return jnp.asarray(obs, jnp.float32).reshape(-1)
