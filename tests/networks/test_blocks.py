"""Tests of ajax.networks.blocks: NormedMLP and linear (spec 000 B4, B5)."""

from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ajax.networks.blocks import NormedMLP, RowDense, linear
from ajax.networks.train_state import LoadedTrainState

KEY = jax.random.key(0)
X4 = jnp.array([[1.0, 2.0, 3.0, 4.0]])


def n_params(tree) -> int:
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(tree))


def _norm_only(mlp: NormedMLP, x: jax.Array) -> jax.Array:
    """The trunk's first norm on ``x``: identity Dense kernel, zero bias, identity activation."""
    params = jax.jit(mlp.init)(KEY, x)["params"]
    params["dense_0"] = {"kernel": jnp.eye(x.shape[-1]), "bias": jnp.zeros(x.shape[-1])}
    return jax.jit(mlp.apply)({"params": params}, x)


# --------------------------------------------------------------------------- B4


def test_b4_1_norm_values_table():
    """RMSNorm eps 1e-4 (D3) and LayerNorm eps 1e-5 (T2), as the presets configure them."""
    rms = _norm_only(NormedMLP.dreamerv3(1, 4, act="identity"), X4)
    np.testing.assert_allclose(rms[0], [0.36514595, 0.7302919, 1.0954379, 1.4605838], rtol=1e-6)
    ln = _norm_only(NormedMLP.tdmpc2(1, 4, act="identity"), X4)
    expected = [-1.3416355, -0.44721183, 0.44721183, 1.3416355]
    np.testing.assert_allclose(ln[0], expected, rtol=1e-6)
    flax_default = nn.LayerNorm().apply({"params": nn.LayerNorm().init(KEY, X4)["params"]}, X4)
    np.testing.assert_allclose(flax_default[0, 0], -1.3416403, rtol=1e-6)
    assert not np.allclose(ln[0, 0], -1.3416403, rtol=1e-6, atol=0)


def test_b4_1_activation_values():
    x = jnp.array([[1.0, -1.0]])
    silu = NormedMLP.dreamerv3(0, 2).act
    mish = NormedMLP.tdmpc2(0, 2).act
    assert (silu, mish) == ("silu", "mish")
    from ajax.networks.utils import parse_activation

    np.testing.assert_allclose(parse_activation(silu)(x)[0], [0.7310586, -0.2689414], rtol=1e-6)
    np.testing.assert_allclose(parse_activation(mish)(x)[0], [0.8650984, -0.3034015], rtol=1e-6)


def test_b4_false_friend_layernorm_fast_variance():
    """Mean-1000 unit-variance rows: our LayerNorm within 1e-4 of a float64 two-pass reference."""
    x = 1000.0 + jax.random.normal(KEY, (64, 256))
    ours = _norm_only(NormedMLP.tdmpc2(1, 256, act="identity"), x)
    x64 = np.asarray(x, np.float64)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    assert np.max(np.abs(np.asarray(ours) - ref)) < 1e-4
    fast = nn.LayerNorm(epsilon=1e-5)  # flax's default E[x^2] - E[x]^2
    fast_out = fast.apply(fast.init(KEY, x), x)
    assert np.max(np.abs(np.asarray(fast_out) - ref)) > 1e-3


def test_b4_2_parameter_counts_single_layers():
    """T2 NormedLinear(i, o): i*o + 3o parameters; D3 RMS layer: i*o + 2o."""
    x = jnp.zeros((1, 24))
    t2 = jax.eval_shape(NormedMLP.tdmpc2(1, 256).init, KEY, x)
    d3 = jax.eval_shape(NormedMLP.dreamerv3(1, 256).init, KEY, x)
    assert n_params(t2) == 24 * 256 + 3 * 256
    assert n_params(d3) == 24 * 256 + 2 * 256
    assert set(t2["params"]) == {"dense_0", "norm_0"}


class _T2Encoder(nn.Module):
    """T2 encoder: [enc] x max(n - 1, 1) NormedLinear, then Linear(latent) -> LayerNorm."""

    num_enc_layers: int = 2

    @nn.compact
    def __call__(self, x):
        h = NormedMLP.tdmpc2(max(self.num_enc_layers - 1, 1), 256)(x)
        h = linear(512, "normal(0.02)")(h)
        return nn.LayerNorm(epsilon=1e-5, use_fast_variance=False)(h)  # SimNorm: no parameters


class _T2Dynamics(nn.Module):
    @nn.compact
    def __call__(self, za):
        h = linear(512, "normal(0.02)")(NormedMLP.tdmpc2(2, 512)(za))
        return nn.LayerNorm(epsilon=1e-5, use_fast_variance=False)(h)


class _T2Head(nn.Module):
    """Reward / Q / pi: two NormedLinear layers and a plain Linear output."""

    out: int
    outscale: float = 1.0
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x, deterministic=True):
        h = NormedMLP.tdmpc2(2, 512, dropout=self.dropout)(x, deterministic)
        return linear(self.out, "normal(0.02)", outscale=self.outscale)(h)


_QEnsemble = nn.vmap(
    _T2Head,
    variable_axes={"params": 0},
    split_rngs={"params": True, "dropout": True},
    in_axes=None,
    out_axes=0,
    axis_size=5,
)


def test_b4_2_parameter_counts_t2_walker():
    """T2 5M preset on ST walker (S = 24, A = 6): the pinned per-network counts."""
    s, a, latent = 24, 6, 512
    counts = {
        "encoder": n_params(jax.eval_shape(_T2Encoder().init, KEY, jnp.zeros((1, s)))),
        "dynamics": n_params(jax.eval_shape(_T2Dynamics().init, KEY, jnp.zeros((1, latent + a)))),
        "reward": n_params(jax.eval_shape(_T2Head(101).init, KEY, jnp.zeros((1, latent + a)))),
        "pi": n_params(jax.eval_shape(_T2Head(2 * a).init, KEY, jnp.zeros((1, latent)))),
        "Q": n_params(
            jax.eval_shape(_QEnsemble(101, 0.0, 0.01).init, KEY, jnp.zeros((1, latent + a)))
        ),
    }
    assert counts == {
        "encoder": 139_520,
        "dynamics": 794_112,
        "reward": 582_245,
        "pi": 533_516,
        "Q": 2_911_225,
    }
    assert sum(counts.values()) == 4_960_618


def test_b4_2_parameter_counts_t2_multitask_reference():
    """T2 5M multitask reference total 5,389,930 (spec 000 B4 test 2; T2 section 1.24).

    The mt80 layout: observations zero-padded to 39 dims and actions to 6, a learned task
    embedding of 80 tasks x 96 dims concatenated to the encoder, dynamics, reward, pi and Q
    inputs. Ajax's agent is single-task (deviation T29); this checks that the shared trunk
    reproduces the reference's multitask shapes too.
    """
    obs, a, latent, task_dim, n_tasks = 39, 6, 512, 96, 80
    za_t = jnp.zeros((1, latent + task_dim + a))
    counts = {
        "encoder": n_params(jax.eval_shape(_T2Encoder().init, KEY, jnp.zeros((1, obs + task_dim)))),
        "dynamics": n_params(jax.eval_shape(_T2Dynamics().init, KEY, za_t)),
        "reward": n_params(jax.eval_shape(_T2Head(101).init, KEY, za_t)),
        "pi": n_params(jax.eval_shape(_T2Head(2 * a).init, KEY, jnp.zeros((1, latent + task_dim)))),
        "Q": n_params(jax.eval_shape(_QEnsemble(101, 0.0, 0.01).init, KEY, za_t)),
        "task_embedding": n_tasks * task_dim,
    }
    assert sum(counts.values()) == 5_389_930


def test_b4_3_dropout_before_norm_order():
    """Dropout between the first Dense and its LayerNorm: normalised rows survive dropout."""
    x = jax.random.normal(KEY, (16, 32))
    mlp = NormedMLP.tdmpc2(2, 64, dropout=0.3, act="identity")
    params = jax.jit(partial(mlp.init, deterministic=True))(KEY, x)["params"]
    first = NormedMLP.tdmpc2(1, 64, dropout=0.3, act="identity")  # its output: the first LN's
    subset = {"params": {k: params[k] for k in ("dense_0", "norm_0")}}
    rngs = {"dropout": jax.random.key(5)}
    out = jax.jit(first.apply, static_argnames="deterministic")(
        subset, x, deterministic=False, rngs=rngs
    )
    np.testing.assert_allclose(jnp.mean(out, -1), 0.0, atol=1e-5)
    # var/(var + 1e-5) with pre-norm row variances ~0.01 (N(0, 0.02^2) kernels): within 2e-3 of 1.
    np.testing.assert_allclose(jnp.var(out, -1), 1.0, atol=2e-3)
    apply = jax.jit(mlp.apply, static_argnames="deterministic")
    on = apply({"params": params}, x, deterministic=False, rngs=rngs)
    off = apply({"params": params}, x, deterministic=True)
    assert not np.allclose(on, off)
    plain = jax.jit(NormedMLP.tdmpc2(2, 64, act="identity").apply)({"params": params}, x)
    np.testing.assert_array_equal(off, plain)


def test_b4_dropout_needs_deterministic():
    mlp = NormedMLP.tdmpc2(2, 8, dropout=0.01)
    with pytest.raises(ValueError, match="deterministic"):
        mlp.init(KEY, jnp.zeros((1, 4)))


def test_b4_4_layout_btf_equals_flattened():
    mlp = NormedMLP.dreamerv3(3, 32)
    x = jax.random.normal(KEY, (4, 5, 12))
    params = jax.jit(mlp.init)(KEY, x)
    apply = jax.jit(mlp.apply)
    y = apply(params, x)
    flat = apply(params, x.reshape(20, 12)).reshape(4, 5, 32)
    assert y.shape == (4, 5, 32) and y.dtype == jnp.float32
    np.testing.assert_allclose(y, flat, rtol=1e-6, atol=1e-7)


def test_b4_bad_config():
    with pytest.raises(ValueError, match="norm"):
        NormedMLP(1, 4, norm="batch").init(KEY, jnp.zeros((1, 2)))
    with pytest.raises(ValueError, match="dropout"):
        NormedMLP(1, 4, dropout=1.0).init(KEY, jnp.zeros((1, 2)), deterministic=True)


# --------------------------------------------------------------------------- B5


def test_b5_4_zero_heads_decode_to_zero():
    x = jax.random.normal(KEY, (3, 16))
    head = linear(255, "trunc_normal_fan_in", outscale=0.0)
    params = head.init(KEY, x)["params"]
    assert not np.any(np.asarray(params["kernel"])) and not np.any(np.asarray(params["bias"]))
    logits = head.apply({"params": params}, x)
    distributional = pytest.importorskip("ajax.distributional")
    np.testing.assert_array_equal(distributional.TwoHot.dreamerv3().decode(logits), 0.0)
    t2_logits = jnp.zeros((3, 101))
    np.testing.assert_array_equal(distributional.TwoHot.tdmpc2().decode(t2_logits), 0.0)


def test_b5_outscale_scales_kernel_not_bias():
    """D3's policy head (outscale 0.01) is 0.01 times the outscale-1 draw at the same key."""
    x = jnp.ones((1, 64))
    base = linear(8, "trunc_normal_fan_in").init(KEY, x)["params"]
    small = linear(8, "trunc_normal_fan_in", outscale=0.01).init(KEY, x)["params"]
    np.testing.assert_allclose(small["kernel"], 0.01 * base["kernel"], rtol=1e-6)
    assert not np.any(np.asarray(small["bias"]))
    with pytest.raises(ValueError, match="outscale"):
        linear(8, "normal(0.02)", outscale=-1.0)


def test_row_dense_is_nn_dense_on_any_leading_shape():
    """Same parameter tree, init draw, values and gradients as ``nn.Dense`` on [T, B, in],
    [in] and [B, in] inputs (RowDense only merges the leading dimensions around the matmul)."""
    x = jax.random.normal(KEY, (3, 4, 6))
    kw = dict(kernel_init=nn.initializers.normal(0.5), bias_init=nn.initializers.normal(0.5))
    row, dense = RowDense(5, **kw), nn.Dense(5, **kw)
    params = row.init(KEY, x)
    assert jax.tree.map(jnp.shape, params) == {"params": {"bias": (5,), "kernel": (6, 5)}}
    np.testing.assert_array_equal(
        params["params"]["kernel"], dense.init(KEY, x)["params"]["kernel"]
    )
    for inp in (x, x[0, 0], x[0]):
        y = row.apply(params, inp)
        assert y.shape == inp.shape[:-1] + (5,)
        np.testing.assert_allclose(y, dense.apply(params, inp), rtol=1e-6, atol=1e-6)
    loss = lambda module: lambda p: jnp.sum(jnp.sin(module.apply(p, x)))
    g_row, g_dense = jax.grad(loss(row))(params), jax.grad(loss(dense))(params)
    for a, b in zip(jax.tree.leaves(g_row), jax.tree.leaves(g_dense), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert isinstance(linear(5, "normal(0.02)"), RowDense)


def test_row_dense_narrow_output_takes_the_out_in_weight_gradient():
    """A kernel with a narrow output (40 -> 8) runs through rows_matmul on CPU: the same values,
    gradients (weight, bias and input) and seed-vmapped gradients as nn.Dense; a square kernel
    (8 -> 8) and a wide one (8 -> 40) keep lax's dot."""
    from ajax.networks.blocks import narrow_out

    assert narrow_out((640, 64)) and narrow_out((128, 64)) and narrow_out((64, 2))
    assert not narrow_out((64, 64)) and not narrow_out((2560, 256)) and not narrow_out((64, 255))
    x = jax.random.normal(KEY, (3, 4, 40))
    kw = dict(kernel_init=nn.initializers.normal(0.5), bias_init=nn.initializers.normal(0.5))
    row, dense = RowDense(8, **kw), nn.Dense(8, **kw)
    params = row.init(KEY, x)
    loss = lambda module: lambda p, x: jnp.sum(jnp.sin(module.apply(p, x)))  # noqa: E731
    assert "custom_vjp_call" in str(jax.make_jaxpr(loss(row))(params, x))
    g_row = jax.grad(loss(row), (0, 1))(params, x)
    g_dense = jax.grad(loss(dense), (0, 1))(params, x)
    for a, b in zip(jax.tree.leaves(g_row), jax.tree.leaves(g_dense), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    seeds = jnp.stack([x, 2 * x])
    v_row = jax.vmap(jax.grad(loss(row)), (None, 0))(params, seeds)
    v_dense = jax.vmap(jax.grad(loss(dense)), (None, 0))(params, seeds)
    for a, b in zip(jax.tree.leaves(v_row), jax.tree.leaves(v_dense), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    for features, width in ((8, 8), (40, 8)):
        module = RowDense(features, **kw)
        z = jnp.ones((4, width))
        jaxpr = str(jax.make_jaxpr(loss(module))(module.init(KEY, z), z))
        assert "custom_vjp_call" not in jaxpr


def test_b5_5_members_differ_and_target_copies_online():
    x = jnp.zeros((1, 518))
    variables = jax.jit(_QEnsemble(101, 0.0, 0.01).init)(KEY, x)
    kernels = np.asarray(variables["params"]["NormedMLP_0"]["dense_0"]["kernel"])
    assert kernels.shape[0] == 5
    for i in range(5):
        for j in range(i + 1, 5):
            assert not np.array_equal(kernels[i], kernels[j])
    state = LoadedTrainState.create(
        apply_fn=_QEnsemble(101, 0.0, 0.01).apply,
        params=variables["params"],
        tx=optax.adam(3e-4),
        target=True,
    )
    online, target = jax.tree.leaves(state.params), jax.tree.leaves(state.target_params)
    assert len(online) == len(target)
    for a, b in zip(online, target, strict=True):
        np.testing.assert_array_equal(a, b)
