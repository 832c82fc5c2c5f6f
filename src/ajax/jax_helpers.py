"""Small JAX helpers every layer uses (a leaf module: it imports nothing of Ajax).

- :func:`lockstep`: a value every vmapped seed shares, unbatched under ``vmap``;
- :func:`zeros_like_shapes`, :func:`cond`, :func:`when`: branch helpers of the loops;
- :func:`known`: whether a builder's arguments are concrete (its Python checks apply);
- :func:`tree_select`, :func:`where_batch`, :func:`strong_types`: pytree selection and typing
  of env states.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap


@custom_vmap
def lockstep(x: jax.Array) -> jax.Array:
    """``x`` itself; under ``jax.vmap`` the first seed's value, unbatched.

    Only for values every vmapped seed shares because all seeds step together: step counters
    and what depends on them alone, never on a seed's data (episode ends, buffer contents),
    since the other seeds' values are dropped. A ``lax.cond`` on a batched predicate becomes a select that
    computes both branches, so without this every seed would run the update (and TD-MPC2 its
    planner) during the random-action warm-up and discard the result.
    """
    return x


@lockstep.def_vmap
def _lockstep_vmap(axis_size, in_batched, x):
    del axis_size
    return (x[0] if in_batched[0] else x), False


def known(*values: Any) -> bool:
    """Whether every value is concrete (no JAX tracer): a builder's Python checks of its
    arguments apply to those only. A sweep's traced settings (:mod:`ajax.training.sweep`) were
    checked as the grid's concrete values before the program was traced."""
    return not any(isinstance(v, jax.core.Tracer) for v in values)


def zeros_like_shapes(fn: Callable, *args) -> Any:
    """Zeros shaped like ``fn(*args)``'s output (without running it)."""
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(fn, *args))


def cond(pred: jax.Array, fn: Callable[[Any], Any], operand: Any) -> Any:
    """``fn(operand)`` if ``pred`` else ``operand`` (a ``lax.cond``)."""
    return jax.lax.cond(pred, fn, lambda x: x, operand)


def when(pred: jax.Array, fn: Callable[[Any], Any], operand: Any) -> Any:
    """:func:`cond` for an unbatched (lockstep) ``pred`` around IO callbacks.

    ``vmap`` refuses a ``lax.cond`` around an IO callback (a host replay's,
    :mod:`ajax.buffers.host_store`) even on an unbatched predicate; a loop of 0 or 1 trips is
    the same branch and vmaps. (Not used otherwise: XLA compiles the two differently, so the
    device-replay runs keep their cond and their numbers.)
    """
    trips = pred.astype(jnp.int32)
    return jax.lax.fori_loop(0, trips, lambda _, x: fn(x), operand)


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
