"""The parallel memory kinds of :mod:`ajax.networks.memory`: sliding-window attention and mamba.

Both run batch-first over a whole chunk in one pass (the transformer over its cached inputs
plus the chunk, mamba through :func:`selective_scan`); :func:`parallel_stack` embeds the input,
stacks the layers and ends with the optional LayerNorm. The contract and the citations are in
:mod:`ajax.networks.memory`'s docstring.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.networks.memory_config import Carry, MemoryConfig, SSMState, WindowCache, dense


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
        q = dense(cfg, d, "query")(n[:, c:]).reshape(b, t, nh, d // nh)
        k = dense(cfg, d, "key")(n).reshape(b, c + t, nh, d // nh)
        v = dense(cfg, d, "value")(n).reshape(b, c + t, nh, d // nh)
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
        h = h + dense(cfg, d, "attn_out")(att.reshape(b, t, d))
        m = dense(cfg, 4 * d, "mlp_in")(nn.LayerNorm(name="mlp_norm")(h))
        h = h + dense(cfg, d, "mlp_out")(nn.gelu(m))
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
        xs, z = jnp.split(dense(cfg, 2 * e, "in_proj", False)(nn.LayerNorm(name="norm")(h)), 2, -1)
        # Causal depthwise conv over [tail, chunk]; taps from an earlier episode read as zeros.
        ctx, ctx_seg = _history(state.conv, xs, seg)
        taps = jnp.stack([ctx[:, i : i + t] for i in range(k)], axis=2)  # (B, T, K, E)
        same = jnp.stack([ctx_seg[:, i : i + t] for i in range(k)], axis=2) == seg[..., None]
        w = self.param("conv_kernel", _conv_init, (k, e))
        bias = self.param("conv_bias", nn.initializers.zeros, (e,))
        u = nn.silu(jnp.einsum("btke,ke->bte", taps * same[..., None], w) + bias)
        tail = ctx[:, t:] * (ctx_seg[:, t:] == seg[:, -1:])[..., None]
        dt_low, b_t, c_t = jnp.split(
            dense(cfg, rank + 2 * n, "x_proj", False)(u), [rank, rank + n], -1
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
        h = h + dense(cfg, d, "out_proj", False)(y * nn.silu(z))
        return SSMState(states[:, -1], tail), h


def parallel_stack(config: MemoryConfig, carry: Carry, x, resets):
    """Embed, run the attention or mamba layers batch-first, end with the optional LayerNorm."""
    h = dense(config, config.hidden_size, "embed")(jnp.swapaxes(x, 0, 1))
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
