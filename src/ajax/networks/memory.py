"""Pluggable, reset-aware memory blocks for recurrent actors and critics.

One interface for every kind: ``MemoryCell(config)(carry, x, resets) -> (new_carry, y)`` with
time-major ``x`` (T, B, F), episode-start flags ``resets`` (T, B) and outputs ``y`` (T, B, H).
Where ``resets[t, b]`` is set, env ``b``'s carry is zeroed before ``x[t]`` is read, so no
information crosses an episode boundary. Acting is the same code with T = 1, which is what the
step-versus-sequence tests check for every kind. Every carry is a tuple with one entry per layer,
and every carry starts at zeros (so :func:`zeros_carry_like` builds a fresh one from any other).

- ``"gru"`` / ``"lstm"``: flax's cells under ``nn.scan``; carry O(H) per env.
- ``"transformer"``: pre-norm sliding-window causal self-attention (Beltagy et al. 2020,
  arXiv:2004.05150 Sec. 3.1) with a learned per-head bias on the query-key distance (Raffel et al.
  2020, arXiv:1910.10683 Sec. 2.1) as the only position signal, so nothing depends on the
  absolute step. Each layer attends over its cached last ``window - 1`` inputs plus the chunk in
  one parallel pass; the cache (with bool validity flags) is the carry, O(window * H) per env.
- ``"mamba"``: pre-norm selective SSM block (Gu & Dao 2023, arXiv:2312.00752 Alg. 2 and Fig. 3):
  causal depthwise conv, input-dependent dt/B/C, diagonal A, and a parallel
  ``jax.lax.associative_scan`` over T (:func:`selective_scan`). Carry: SSM state + conv tail.

The transformer and mamba stacks embed the input to H first and end with a LayerNorm
(``final_norm``), as pre-norm stacks do; GRU and LSTM outputs are the cells' hidden states.
Their layers live in :mod:`ajax.networks.memory_layers`; the config, carry types and
initialisers in :mod:`ajax.networks.memory_config`. This module holds the carries' helpers, the
recurrent stack and :class:`MemoryCell`, and re-exports the public names.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.networks.memory_config import (
    KINDS,
    N_GATES,
    Carry,
    MemoryConfig,
    SSMState,
    WindowCache,
    gate_block_orthogonal,
    kernel_init,
    parse_memory_config,
    with_default_init,
)
from ajax.networks.memory_layers import parallel_stack, selective_scan
from ajax.networks.orthogonal import orthogonal

__all__ = [
    "KINDS",
    "Carry",
    "MemoryCell",
    "MemoryConfig",
    "SSMState",
    "WindowCache",
    "flat_carry_dim",
    "flatten_carry",
    "gate_block_orthogonal",
    "init_carry",
    "parse_memory_config",
    "selective_scan",
    "tree_where_reset",
    "unflatten_carry",
    "with_default_init",
    "zeros_carry_like",
]


def init_carry(config: MemoryConfig, rng: jax.Array | None, batch_size: int) -> Carry:
    """All-zero carry for ``config``, one entry per layer; shapes from the config alone.

    ``rng`` is unused (every kind starts at zeros) and kept for the cell interface.
    """
    config = parse_memory_config(config)
    if config is None:
        raise ValueError("init_carry needs a MemoryConfig, got None (a network without memory)")
    if batch_size < 0:
        raise ValueError(f"batch_size must be >= 0, got {batch_size}")
    b, h = batch_size, config.hidden_size
    if config.kind == "gru":
        layer = jnp.zeros((b, h))
    elif config.kind == "lstm":
        layer = (jnp.zeros((b, h)), jnp.zeros((b, h)))  # flax's (c, h)
    elif config.kind == "transformer":
        c = config.window - 1
        layer = WindowCache(jnp.zeros((b, c, h)), jnp.zeros((b, c), bool))
    else:
        e = config.expand * h
        layer = SSMState(jnp.zeros((b, e, config.d_state)), jnp.zeros((b, config.d_conv - 1, e)))
    return tuple(layer for _ in range(config.num_layers))


def zeros_carry_like(carry, batch_size: int, batch_axis: int = 0):
    """A fresh (zero) carry shaped like ``carry`` with its batch axis resized to ``batch_size``.

    ``batch_axis=1`` for an ensemble's carry stacked on a leading member axis.
    """

    def fresh(leaf):
        leaf = jnp.asarray(leaf)
        if leaf.ndim <= batch_axis:
            raise ValueError(f"carry leaf of shape {leaf.shape} has no batch axis {batch_axis}")
        shape = list(leaf.shape)
        shape[batch_axis] = batch_size
        return jnp.zeros(shape, leaf.dtype)

    return jax.tree.map(fresh, carry)


def flatten_carry(carry) -> jax.Array:
    """Pack a carry into one (batch, D) float array, leaves concatenated in ``jax.tree`` order.

    Bool leaves become 0.0 / 1.0; :func:`unflatten_carry` restores them from a template.
    """
    leaves = jax.tree.leaves(carry)
    if not leaves:
        raise ValueError("cannot flatten an empty carry")
    batch = leaves[0].shape[0]
    parts = []
    for leaf in leaves:
        if leaf.shape[:1] != (batch,):
            raise ValueError(f"carry leaves disagree on the batch axis: {leaf.shape} vs {batch}")
        dtype = leaf.dtype if jnp.issubdtype(leaf.dtype, jnp.floating) else jnp.float32
        parts.append(jnp.reshape(leaf, (batch, -1)).astype(dtype))
    return jnp.concatenate(parts, axis=-1)


def unflatten_carry(flat: jax.Array, template):
    """Inverse of :func:`flatten_carry`: ``template`` gives structure, trailing shapes and dtypes."""
    leaves, treedef = jax.tree.flatten(template)
    sizes = [math.prod(jnp.shape(leaf)[1:]) for leaf in leaves]
    if flat.shape[-1] != sum(sizes):
        raise ValueError(f"flat carry has width {flat.shape[-1]}, the template needs {sum(sizes)}")
    out, start = [], 0
    for leaf, size in zip(leaves, sizes, strict=True):
        piece = flat[:, start : start + size].reshape((flat.shape[0], *jnp.shape(leaf)[1:]))
        out.append(piece.astype(leaf.dtype))
        start += size
    return jax.tree.unflatten(treedef, out)


def flat_carry_dim(config: MemoryConfig) -> int:
    """Per-env width D of :func:`flatten_carry` for ``config``."""
    shapes = jax.eval_shape(lambda: init_carry(config, None, 1))
    return sum(math.prod(leaf.shape[1:]) for leaf in jax.tree.leaves(shapes))


def tree_where_reset(resets: jax.Array, fresh, tree):
    """``tree`` with ``fresh`` in every batch entry whose ``resets`` flag (B,) or (B, 1) is set."""
    resets = jnp.asarray(resets)
    if resets.ndim == 2 and resets.shape[1] == 1:
        resets = resets[:, 0]
    if resets.ndim != 1:
        raise ValueError(f"resets must have shape (B,) or (B, 1), got {resets.shape}")
    resets = resets.astype(bool)

    def select(new, old):
        flag = resets.reshape(resets.shape + (1,) * (jnp.ndim(old) - 1))
        return jnp.where(flag, new, old)

    return jax.tree.map(select, fresh, tree)


class _ResetRNNStep(nn.Module):
    """One time step of a flax cell whose carry is zeroed first where the episode restarts."""

    config: MemoryConfig

    @nn.compact
    def __call__(self, carry, inputs):
        x, reset = inputs
        carry = tree_where_reset(reset, jax.tree.map(jnp.zeros_like, carry), carry)
        init = kernel_init(self.config)
        # flax's default recurrent init is jax's orthogonal, whose batched QR can deadlock
        kwargs = {"recurrent_kernel_init": orthogonal()}
        if init is not None:
            kwargs = {"kernel_init": init, "recurrent_kernel_init": init}
        cell = nn.GRUCell if self.config.kind == "gru" else nn.LSTMCell
        return cell(self.config.hidden_size, name="cell", **kwargs)(carry, x)


def _rnn_stack(config: MemoryConfig, carry: Carry, x, resets):
    step = nn.remat(_ResetRNNStep) if config.gradient_checkpoint else _ResetRNNStep
    scan = nn.scan(step, variable_broadcast="params", split_rngs={"params": False})
    new_carry = []
    for i, layer_carry in enumerate(carry):
        layer_carry, x = scan(config, name=f"layer_{i}")(layer_carry, (x, resets))
        new_carry.append(layer_carry)
    return tuple(new_carry), x


class MemoryCell(nn.Module):
    """Reset-aware memory block of ``config.kind``; see the module docstring for the contract."""

    config: MemoryConfig

    def initialize_carry(self, rng: jax.Array | None, batch_size: int) -> Carry:
        """The all-zero carry (:func:`init_carry`)."""
        return init_carry(self.config, rng, batch_size)

    @nn.compact
    def __call__(self, carry: Carry, x: jax.Array, resets: jax.Array):
        """x (T, B, F), resets (T, B) -> (carry after x[T-1], y (T, B, hidden_size))."""
        cfg = self.config
        if x.ndim != 3:
            raise ValueError(f"x must be time-major (T, B, features), got shape {x.shape}")
        if jnp.shape(resets) != x.shape[:2]:
            raise ValueError(f"resets must have shape (T, B) = {x.shape[:2]}, got {resets.shape}")
        if not isinstance(carry, tuple) or len(carry) != cfg.num_layers:
            raise ValueError(f"carry must be a tuple of {cfg.num_layers} layer carries")
        resets = jnp.asarray(resets).astype(bool)
        if cfg.kind in N_GATES:
            return _rnn_stack(cfg, carry, x, resets)
        return parallel_stack(cfg, carry, x, resets)
