"""Small pure helpers shared by the environment adapters, wrappers and agents."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


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


def tree_select(pred, on_true: Any, on_false: Any) -> Any:
    """Leafwise ``pred ? on_true : on_false`` over two pytrees of one structure.

    ``pred`` is a bool scalar, or a batch of them matching the leading axes of every leaf
    (one flag per env): the whole-state selection of auto-reset and action repeat.
    ``lax.select`` rather than ``jnp.where`` because it also accepts the typed PRNG key
    leaves that playground states carry.
    """
    pred = jnp.asarray(pred, bool)
    return jax.tree.map(lambda a, b: _select(pred, a, b), on_true, on_false)


def _select(pred, a, b):
    # A reset state may hold Python scalars (gymnax's time=0) where a stepped one holds arrays.
    a, b = jnp.asarray(a), jnp.asarray(b)
    a = a.astype(b.dtype) if a.dtype != b.dtype else a
    if pred.ndim:
        pred = jnp.broadcast_to(pred.reshape(pred.shape + (1,) * (b.ndim - pred.ndim)), b.shape)
    return jax.lax.select(pred, a, b)


def where_batch(pred, on_true, on_false):
    """``jnp.where`` with a per-env ``pred`` broadcast over the trailing (feature) axes."""
    pred = jnp.asarray(pred, bool)
    extra = jnp.ndim(on_false) - pred.ndim
    return jnp.where(pred.reshape(pred.shape + (1,) * extra), on_true, on_false)


def strong_types(tree: Any) -> Any:
    """The same pytree with weak types made strong (PRNG keys untouched).

    Simulators return weakly typed leaves on one path and strong ones on the other (brax's
    reset ``reward`` is strong, its step's weak; gymnax's Pendulum the reverse); a state
    whose types change between reset and step makes every ``jit`` trace twice.
    """

    def strong(x):
        x = jnp.asarray(x)
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return x
        return jax.lax.convert_element_type(x, x.dtype)

    return jax.tree.map(strong, tree)


def flat_f32(obs) -> jax.Array:
    """A single env's observation as a flat float32 vector."""
    return jnp.asarray(obs, jnp.float32).reshape(-1)
