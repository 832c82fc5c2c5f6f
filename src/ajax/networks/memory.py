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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ajax.networks.orthogonal import orthogonal

Carry = tuple[Any, ...]
KINDS = ("gru", "lstm", "transformer", "mamba")
_N_GATES = {"gru": 3, "lstm": 4}


class WindowCache(NamedTuple):
    """One transformer layer's carry: its last ``window - 1`` inputs and which of them exist."""

    inputs: jax.Array  # (B, window - 1, H)
    valid: jax.Array  # (B, window - 1) bool


class SSMState(NamedTuple):
    """One mamba layer's carry: the SSM state and the conv's last ``d_conv - 1`` inputs."""

    ssm: jax.Array  # (B, expand * H, d_state)
    conv: jax.Array  # (B, d_conv - 1, expand * H)


@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    """Everything that chooses and sizes a memory block (frozen: a flax field and jit-static).

    ``kind`` picks the architecture; ``hidden_size`` (H) is the output width and ``num_layers``
    the stack depth; ``gradient_checkpoint`` rematerialises each layer in the backward pass.
    Transformer only: ``window`` (steps each position sees, itself included) and ``num_heads``.
    Mamba only: ``d_state`` (N), ``d_conv`` (conv width) and ``expand`` (inner width E / H).
    ``final_norm`` ends transformer and mamba stacks with a LayerNorm. ``init`` is the kernel
    initializer of the kind's weight matrices (a callable or a string for
    :func:`ajax.networks.utils.parse_initialization`; ``"gate_block_orthogonal"`` without an
    argument takes the kind's gate count); None keeps flax's defaults. Knobs of other kinds are
    ignored.
    """

    kind: str = "gru"
    hidden_size: int = 64
    num_layers: int = 1
    gradient_checkpoint: bool = False
    window: int = 32
    num_heads: int = 4
    d_state: int = 16
    d_conv: int = 4
    expand: int = 2
    final_norm: bool = True
    init: str | Callable[..., jax.Array] | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown memory kind {self.kind!r}; valid kinds: {', '.join(KINDS)}")
        sizes = {"hidden_size": self.hidden_size, "num_layers": self.num_layers}
        if self.kind == "transformer":
            sizes |= {"window": self.window, "num_heads": self.num_heads}
        if self.kind == "mamba":
            sizes |= {"d_state": self.d_state, "d_conv": self.d_conv, "expand": self.expand}
        for name, value in sizes.items():
            if not isinstance(value, int | np.integer) or value < 1:
                raise ValueError(f"MemoryConfig.{name} must be a positive int, got {value!r}")
        if self.kind == "transformer" and self.hidden_size % self.num_heads:
            raise ValueError(
                f"transformer hidden_size {self.hidden_size} is not divisible by num_heads "
                f"{self.num_heads}; pick sizes with hidden_size % num_heads == 0"
            )
        _kernel_init(self)  # a bad init string fails here, not at the network's first call

    @property
    def ends_normalised(self) -> bool:
        """True when the output passes through a final LayerNorm (transformer, mamba)."""
        return self.final_norm and self.kind in ("transformer", "mamba")


def parse_memory_config(memory: None | MemoryConfig | Mapping[str, Any]) -> MemoryConfig | None:
    """A :class:`MemoryConfig` from user input; None (no memory) passes through unchanged."""
    if memory is None or isinstance(memory, MemoryConfig):
        return memory
    if isinstance(memory, Mapping):
        fields = {f.name for f in dataclasses.fields(MemoryConfig)}
        unknown = sorted(set(memory) - fields)
        if unknown:
            raise ValueError(f"unknown MemoryConfig keys {unknown}; valid: {sorted(fields)}")
        return MemoryConfig(**memory)
    raise TypeError(
        f"memory must be None, a MemoryConfig or a dict, got {type(memory).__name__}: {memory!r}"
    )


def with_default_init(memory, inits: Mapping[str, Any]) -> MemoryConfig | None:
    """``memory`` with ``init = inits[kind]`` if it has none: the agent's reference default.

    An explicit ``init`` wins; a kind missing from ``inits`` keeps flax's initializers.
    """
    memory = parse_memory_config(memory)
    if memory is None or memory.init is not None or memory.kind not in inits:
        return memory
    return dataclasses.replace(memory, init=inits[memory.kind])


@dataclasses.dataclass(frozen=True)
class _GateBlockOrthogonal:
    """Initializer object (hashable by value, so configs holding it compare equal)."""

    n_gates: int

    def __call__(self, key, shape, dtype=jnp.float32):
        if len(shape) != 2:
            raise ValueError(f"gate_block_orthogonal makes (fan_in, H) kernels, not {shape}")
        fan_in, h = shape
        joint = orthogonal(1.0)(key, (fan_in, self.n_gates * h), dtype)
        return joint[:, :h]


def gate_block_orthogonal(n_gates: int) -> Callable[..., jax.Array]:
    """One gate's (fan_in, H) kernel cut from a random orthogonal (fan_in, n_gates * H) matrix.

    Spec 002 ``gate_block_orthogonal``: torch's ``orthogonal_`` on a GRU/LSTM's stacked weight, as
    Ni et al. initialise their recurrent cells (pomdp-baselines@e7c19c3
    policies/models/recurrent_actor.py:70-74). Entries have std 1/sqrt(max(n_gates * H, fan_in)),
    not flax's 1/sqrt(fan_in) or 1/sqrt(H). flax keeps a kernel per gate and calls this once per
    gate with its own key, so the gates are independent rather than jointly orthogonal.
    """
    if not isinstance(n_gates, int | np.integer) or n_gates < 1:
        raise ValueError(f"n_gates must be a positive int, got {n_gates!r}")
    return _GateBlockOrthogonal(int(n_gates))


def _kernel_init(config: MemoryConfig):
    """The config's kernel initializer, or None for flax's default."""
    init = config.init
    if init is None or callable(init):
        return init
    # Imported here: ajax.networks.utils may one day register this module's initializers.
    from ajax.networks.utils import parse_function_string, parse_initialization

    name, n_gates = parse_function_string(init)
    if name != "gate_block_orthogonal":
        return parse_initialization(init)
    if n_gates is None and config.kind not in _N_GATES:
        raise ValueError(f"{init!r} needs a gate count for kind {config.kind!r}, e.g. '{init}(3)'")
    return gate_block_orthogonal(_N_GATES[config.kind] if n_gates is None else n_gates)


def _dense(config: MemoryConfig, features: int, name: str, use_bias: bool = True) -> nn.Dense:
    init = _kernel_init(config)
    kwargs = {} if init is None else {"kernel_init": init}
    return nn.Dense(features, use_bias=use_bias, name=name, **kwargs)


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
        init = _kernel_init(self.config)
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


def _history(cached, chunk, seg):
    """Carried entries then the chunk along axis 1, with segment ids (the carried ones are 0)."""
    b, c = cached.shape[:2]
    ctx = jnp.concatenate([cached, chunk], axis=1)
    ctx_seg = jnp.concatenate([jnp.zeros((b, c), seg.dtype), seg], axis=1)
    return ctx, ctx_seg


class _AttentionLayer(nn.Module):
    """Pre-norm sliding-window attention + MLP over [cached inputs, chunk]; seg (B, T) ids."""

    config: MemoryConfig

    @nn.compact
    def __call__(self, cache: WindowCache, h, seg):
        cfg = self.config
        b, t, d = h.shape
        c, nh = cfg.window - 1, cfg.num_heads
        ctx, ctx_seg = _history(cache.inputs, h, seg)
        ctx_valid = jnp.concatenate([cache.valid, jnp.ones((b, t), bool)], axis=1)
        n = nn.LayerNorm(name="attn_norm")(ctx)
        q = _dense(cfg, d, "query")(n[:, c:]).reshape(b, t, nh, d // nh)
        k = _dense(cfg, d, "key")(n).reshape(b, c + t, nh, d // nh)
        v = _dense(cfg, d, "value")(n).reshape(b, c + t, nh, d // nh)
        # Query i sits at history index c + i; key j is dist steps back.
        dist = (c + jnp.arange(t))[:, None] - jnp.arange(c + t)[None, :]
        in_window = (dist >= 0) & (dist < cfg.window)
        mask = in_window & ctx_valid[:, None, :] & (ctx_seg[:, None, :] == seg[:, :, None])
        rel_bias = self.param("relative_bias", nn.initializers.zeros, (nh, cfg.window))
        logits = jnp.einsum("bthd,bshd->bhts", q, k) / math.sqrt(d // nh)
        logits = logits + rel_bias[:, jnp.clip(dist, 0, cfg.window - 1)]
        # Self is always visible, so no row is fully masked.
        logits = jnp.where(mask[:, None], logits, jnp.finfo(logits.dtype).min)
        att = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(logits, axis=-1), v)
        h = h + _dense(cfg, d, "attn_out")(att.reshape(b, t, d))
        m = _dense(cfg, 4 * d, "mlp_in")(nn.LayerNorm(name="mlp_norm")(h))
        h = h + _dense(cfg, d, "mlp_out")(nn.gelu(m))
        # Keep the last c layer inputs; those of an episode that ended in this chunk are stale.
        keep = ctx_valid[:, t:] & (ctx_seg[:, t:] == seg[:, -1:])
        return WindowCache(ctx[:, t:], keep), h


def selective_scan(a: jax.Array, b: jax.Array, h0: jax.Array, axis: int = 0) -> jax.Array:
    """Every state of h_t = a_t * h_{t-1} + b_t from h0, by a parallel associative scan.

    Gu & Dao 2023 (arXiv:2312.00752) Sec. 3.3.2; the pair (a, b) composes associatively as
    (a1, b1) then (a2, b2) = (a1 a2, a2 b1 + b2). ``a_t = 0`` restarts the recurrence at t.
    """
    a, b = jnp.moveaxis(a, axis, 0), jnp.moveaxis(b, axis, 0)
    b = b.at[0].add(a[0] * h0)

    def compose(earlier, later):
        return earlier[0] * later[0], later[0] * earlier[1] + later[1]

    _, h = jax.lax.associative_scan(compose, (a, b))
    return jnp.moveaxis(h, 0, axis)


def _dt_bias_init(key, shape, dtype=jnp.float32):
    """softplus(bias) log-uniform in [1e-3, 0.1], Mamba's dt init (mamba_simple.py)."""
    dt = jnp.exp(jax.random.uniform(key, shape, dtype, math.log(1e-3), math.log(0.1)))
    return dt + jnp.log(-jnp.expm1(-dt))  # inverse softplus


def _a_log_init(key, shape, dtype=jnp.float32):
    """S4D-real: A = -(1, ..., N) for every channel (Gu et al. 2022, arXiv:2206.11893)."""
    del key
    return jnp.log(jnp.broadcast_to(jnp.arange(1, shape[1] + 1, dtype=dtype), shape))


def _conv_init(key, shape, dtype=jnp.float32):
    """U(+-1/sqrt(K)): torch Conv1d's default for a depthwise kernel of width K."""
    bound = 1.0 / math.sqrt(shape[0])
    return jax.random.uniform(key, shape, dtype, -bound, bound)


class _MambaLayer(nn.Module):
    """Pre-norm selective-SSM block with a residual; seg (B, T) ids, resets (B, T) bool."""

    config: MemoryConfig

    @nn.compact
    def __call__(self, state: SSMState, h, seg, resets):
        cfg = self.config
        b, t, d = h.shape
        e, n, k = cfg.expand * d, cfg.d_state, cfg.d_conv
        rank = math.ceil(d / 16)
        xs, z = jnp.split(_dense(cfg, 2 * e, "in_proj", False)(nn.LayerNorm(name="norm")(h)), 2, -1)
        # Causal depthwise conv over [tail, chunk]; taps from an earlier episode read as zeros.
        ctx, ctx_seg = _history(state.conv, xs, seg)
        taps = jnp.stack([ctx[:, i : i + t] for i in range(k)], axis=2)  # (B, T, K, E)
        same = jnp.stack([ctx_seg[:, i : i + t] for i in range(k)], axis=2) == seg[..., None]
        w = self.param("conv_kernel", _conv_init, (k, e))
        bias = self.param("conv_bias", nn.initializers.zeros, (e,))
        u = nn.silu(jnp.einsum("btke,ke->bte", taps * same[..., None], w) + bias)
        tail = ctx[:, t:] * (ctx_seg[:, t:] == seg[:, -1:])[..., None]
        dt_low, b_t, c_t = jnp.split(
            _dense(cfg, rank + 2 * n, "x_proj", False)(u), [rank, rank + n], -1
        )
        dt_proj = nn.Dense(
            e,
            kernel_init=nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform"),
            bias_init=_dt_bias_init,
            name="dt_proj",
        )
        dt = nn.softplus(dt_proj(dt_low))  # (B, T, E)
        a_mat = -jnp.exp(self.param("A_log", _a_log_init, (e, n)))
        a = jnp.exp(dt[..., None] * a_mat)  # (B, T, E, N)
        a = jnp.where(resets[..., None, None], 0.0, a)
        states = selective_scan(a, (dt * u)[..., None] * b_t[:, :, None, :], state.ssm, axis=1)
        skip = self.param("D", nn.initializers.ones, (e,))
        y = jnp.einsum("bten,btn->bte", states, c_t) + skip * u
        h = h + _dense(cfg, d, "out_proj", False)(y * nn.silu(z))
        return SSMState(states[:, -1], tail), h


def _parallel_stack(config: MemoryConfig, carry: Carry, x, resets):
    """Embed, run the attention or mamba layers batch-first, end with the optional LayerNorm."""
    h = _dense(config, config.hidden_size, "embed")(jnp.swapaxes(x, 0, 1))
    resets_bt = resets.T
    seg = jnp.cumsum(resets_bt, axis=1, dtype=jnp.int32)  # episode segment of each step
    layer_type = _AttentionLayer if config.kind == "transformer" else _MambaLayer
    if config.gradient_checkpoint:
        layer_type = nn.remat(layer_type)
    new_carry = []
    for i, layer_carry in enumerate(carry):
        layer = layer_type(config, name=f"layer_{i}")
        if config.kind == "transformer":
            layer_carry, h = layer(layer_carry, h, seg)
        else:
            layer_carry, h = layer(layer_carry, h, seg, resets_bt)
        new_carry.append(layer_carry)
    if config.final_norm:
        h = nn.LayerNorm(name="final_norm")(h)
    return tuple(new_carry), jnp.swapaxes(h, 0, 1)


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
        if cfg.kind in _N_GATES:
            return _rnn_stack(cfg, carry, x, resets)
        return _parallel_stack(cfg, carry, x, resets)
