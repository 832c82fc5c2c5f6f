"""Acceptance tests of ``ajax.networks.memory`` (spec 002, section ``ajax.networks.memory``).

The step-versus-sequence tests are the harness the module docstring names: for every kind, a
sequence with resets in the middle must equal stepping it one step at a time (T = 1).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.networks.memory import (
    KINDS,
    MemoryCell,
    MemoryConfig,
    flat_carry_dim,
    flatten_carry,
    gate_block_orthogonal,
    init_carry,
    parse_memory_config,
    selective_scan,
    tree_where_reset,
    unflatten_carry,
    with_default_init,
    zeros_carry_like,
)

T, B, F, H = 7, 3, 5, 8
KEY = jax.random.PRNGKey(0)


def _config(kind, **kwargs):
    small = dict(hidden_size=H, window=3, num_heads=2, d_state=4, d_conv=3, expand=2)
    return MemoryConfig(kind=kind, **(small | kwargs))


@functools.partial(jax.jit, static_argnums=0)
def _apply(config, params, carry, x, resets):
    return MemoryCell(config).apply(params, carry, x, resets)


def _setup(config, seed=0):
    """Inputs, resets and random parameters (numpy-drawn: no XLA compile for the init)."""
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(T, B, F)), jnp.float32)
    # Env 0 restarts mid-sequence, env 1 at t = 0, env 2 twice (two resets inside one window).
    resets = np.zeros((T, B), bool)
    resets[3, 0] = resets[0, 1] = resets[2, 2] = resets[4, 2] = True
    carry = init_carry(config, None, B)
    shapes = jax.eval_shape(MemoryCell(config).init, jax.random.PRNGKey(0), carry, x, resets)
    params = jax.tree.map(lambda s: (0.5 * rng.normal(size=s.shape)).astype(np.float32), shapes)
    return params, carry, x, jnp.asarray(resets)


def _random_carry(config, seed):
    """A non-zero carry (transformer validity flags all set), built with unflatten_carry."""
    template = init_carry(config, None, B)
    flat = jax.random.normal(jax.random.PRNGKey(seed), (B, flat_carry_dim(config)))
    return unflatten_carry(flat, template)


def _step(config, params, carry, x, resets):
    ys = []
    for t in range(x.shape[0]):
        carry, y = _apply(config, params, carry, x[t : t + 1], resets[t : t + 1])
        ys.append(y)
    return carry, jnp.concatenate(ys)


def _assert_trees_close(a, b, atol):
    for la, lb in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert la.shape == lb.shape and la.dtype == lb.dtype
        np.testing.assert_allclose(np.asarray(la, float), np.asarray(lb, float), atol=atol)


STEP_CASES = [(k, 1) for k in KINDS] + [("lstm", 2), ("transformer", 2)]


@pytest.mark.parametrize("kind,num_layers", STEP_CASES)
def test_memory_sequence_equals_steps_with_resets(kind, num_layers):
    config = _config(kind, num_layers=num_layers)
    params, _, x, resets = _setup(config)
    carry0 = _random_carry(config, seed=1)  # resets must also wipe a non-trivial start
    seq_carry, seq_y = _apply(config, params, carry0, x, resets)
    step_carry, step_y = _step(config, params, carry0, x, resets)
    assert seq_y.shape == (T, B, H)
    np.testing.assert_allclose(seq_y, step_y, atol=1e-5)
    _assert_trees_close(seq_carry, step_carry, atol=1e-5)


@pytest.mark.parametrize(
    "kind,num_layers", [("gru", 1), ("lstm", 2), ("transformer", 2), ("mamba", 1)]
)
def test_memory_reset_isolates_episodes(kind, num_layers):
    config = _config(kind, num_layers=num_layers)
    params, _, x, _ = _setup(config)
    t_r = 4
    resets = jnp.zeros((T, B), bool).at[t_r].set(True)
    _, y = _apply(config, params, _random_carry(config, 1), x, resets)
    # Other inputs and another start before the reset: nothing after it may change.
    x_other = x.at[:t_r].set(jax.random.normal(jax.random.PRNGKey(9), (t_r, B, F)))
    _, y_other = _apply(config, params, _random_carry(config, 2), x_other, resets)
    assert not np.allclose(y[:t_r], y_other[:t_r])
    np.testing.assert_array_equal(y[t_r:], y_other[t_r:])
    # ... and it is the output of a fresh episode starting at t_r (padded to keep the shape).
    x_fresh = jnp.concatenate([x[t_r:], x[:t_r]])
    _, y_fresh = _apply(config, params, init_carry(config, None, B), x_fresh, resets)
    np.testing.assert_allclose(y[t_r:], y_fresh[: T - t_r], atol=1e-5)


def test_memory_transformer_acting_carry_is_constant_size_and_windowed():
    config = _config("transformer", window=3)
    params, carry, x, _ = _setup(config)
    no_resets = jnp.zeros((T, B), bool)
    short, _ = _step(config, params, carry, x[:2], no_resets[:2])
    long, y = _step(config, params, carry, x, no_resets)
    assert jax.tree.map(jnp.shape, short) == jax.tree.map(jnp.shape, long)
    assert flatten_carry(long).shape == (B, 1 * (3 - 1) * (H + 1))
    # One layer sees exactly its last `window` inputs: full attention over just those.
    for t in range(config.window - 1, T):
        window = slice(t - config.window + 1, t + 1)
        _, y_window = _apply(config, params, carry, x[window], no_resets[window])
        np.testing.assert_allclose(y[t], y_window[-1], atol=1e-5)


def test_memory_mamba_associative_scan_equals_recurrence():
    rng = np.random.default_rng(3)
    a = rng.uniform(size=(T, B, 4, 2)).astype(np.float32)
    a[3, 1] = 0.0  # a reset: the recurrence restarts from b alone
    b = rng.normal(size=(T, B, 4, 2)).astype(np.float32)
    h0 = rng.normal(size=(B, 4, 2)).astype(np.float32)
    h, expected = h0, []
    for t in range(T):
        h = a[t] * h + b[t]
        expected.append(h)
    np.testing.assert_allclose(selective_scan(a, b, h0), np.stack(expected), atol=1e-6)
    batch_first = selective_scan(a.swapaxes(0, 1), b.swapaxes(0, 1), h0, axis=1)
    np.testing.assert_allclose(np.swapaxes(batch_first, 0, 1), np.stack(expected), atol=1e-6)


def test_memory_flatten_unflatten_round_trip_with_bool_leaves():
    config = _config("transformer", num_layers=2)
    carry = _random_carry(config, seed=4)
    carry = tuple(c._replace(valid=c.valid.at[0].set(False)) for c in carry)  # mixed flags
    flat = flatten_carry(carry)
    assert flat.shape == (B, flat_carry_dim(config)) and flat.dtype == jnp.float32
    back = unflatten_carry(flat, zeros_carry_like(carry, B))
    assert back[0].valid.dtype == jnp.bool_
    _assert_trees_close(back, carry, atol=0.0)
    with pytest.raises(ValueError, match="width"):
        unflatten_carry(flat[:, 1:], carry)


@pytest.mark.parametrize("kind", KINDS)
def test_memory_flat_carry_dim_and_zero_init(kind):
    config = _config(kind, num_layers=2)
    e = config.expand * H
    expected = {
        "gru": H,
        "lstm": 2 * H,
        "transformer": (config.window - 1) * (H + 1),
        "mamba": e * config.d_state + (config.d_conv - 1) * e,
    }[kind] * 2
    carry = init_carry(config, jax.random.PRNGKey(0), 4)
    assert isinstance(carry, tuple) and len(carry) == 2
    assert flat_carry_dim(config) == expected == flatten_carry(carry).shape[1]
    assert all(not np.any(leaf) and leaf.shape[0] == 4 for leaf in jax.tree.leaves(carry))
    _assert_trees_close(MemoryCell(config).initialize_carry(None, 4), carry, atol=0.0)


def test_memory_zeros_carry_like_ensemble_axis():
    config = _config("transformer")
    member = _random_carry(config, seed=5)
    stacked = jax.tree.map(lambda leaf: jnp.stack([leaf, leaf]), member)  # (num=2, B, ...)
    fresh = zeros_carry_like(stacked, 6, batch_axis=1)
    for old, new in zip(jax.tree.leaves(stacked), jax.tree.leaves(fresh), strict=True):
        assert new.shape == (2, 6, *old.shape[2:]) and new.dtype == old.dtype
        assert not np.any(new)
    assert jax.tree.leaves(zeros_carry_like(member, 6))[0].shape[0] == 6


def test_memory_tree_where_reset():
    tree = {"h": jnp.ones((3, 2)), "c": (jnp.ones((3,)), jnp.ones((3, 2, 2), bool))}
    fresh = jax.tree.map(jnp.zeros_like, tree)
    for resets in (jnp.array([True, False, True]), jnp.array([[1.0], [0.0], [1.0]])):
        out = tree_where_reset(resets, fresh, tree)
        for leaf in jax.tree.leaves(out):
            assert not np.any(leaf[0]) and np.all(leaf[1]) and not np.any(leaf[2])
    with pytest.raises(ValueError, match="resets"):
        tree_where_reset(jnp.ones((3, 2)), fresh, tree)


def test_memory_gate_block_orthogonal_std_and_joint_columns():
    n_gates, h = 3, 8
    init = gate_block_orthogonal(n_gates)
    # One compile: fan_in 512 > 3H (tall joint matrix), fan_in 6 < 3 * 512 (wide joint matrix).
    tall, wide = map(np.asarray, jax.jit(lambda k: (init(k, (512, h)), init(k, (6, 512))))(KEY))
    assert tall.shape == (512, h) and wide.shape == (6, 512)
    # Tall: the joint (fan_in, 3H) matrix has orthonormal columns, so the block's are too.
    np.testing.assert_allclose(tall.T @ tall, np.eye(h), atol=1e-5)
    np.testing.assert_allclose(tall.std(), 1 / np.sqrt(512), rtol=0.02)
    # Wide: std 1/sqrt(3H), where a plain (fan_in, H) orthogonal kernel has 1/sqrt(H) ...
    np.testing.assert_allclose(wide.std(), 1 / np.sqrt(n_gates * 512), rtol=0.04)
    # ... and, as a column block of a matrix with orthonormal rows, singular values <= 1.
    assert np.linalg.svd(wide, compute_uv=False).max() <= 1 + 1e-5
    assert gate_block_orthogonal(3) == gate_block_orthogonal(3)  # configs holding it stay equal
    with pytest.raises(ValueError, match="n_gates"):
        gate_block_orthogonal(0)


def test_memory_config_init_reaches_kernels():
    x, resets = jnp.ones((1, B, 32)), jnp.zeros((1, B), bool)
    kernels = {"gru": ("cell", "hr"), "transformer": ("query",), "mamba": ("in_proj",)}
    configs = {k: with_default_init(_config(k), {k: "zeros"}) for k in kernels}
    configs["gate"] = with_default_init(_config("gru"), {"gru": "gate_block_orthogonal"})

    @jax.jit
    def init_all(key):  # one compile for every kind
        return {
            k: MemoryCell(c).init(key, init_carry(c, None, B), x, resets)
            for k, c in configs.items()
        }

    params = init_all(jax.random.PRNGKey(0))
    for kind, path in kernels.items():
        module = params[kind]["params"]["layer_0"]
        for name in path:
            module = module[name]
        assert not np.any(module["kernel"]), kind
    kernel = np.asarray(params["gate"]["params"]["layer_0"]["cell"]["iz"]["kernel"])
    np.testing.assert_allclose(kernel.T @ kernel, np.eye(H), atol=1e-5)  # fan_in 32 > 3H


def test_memory_with_default_init():
    inits = {"gru": "orthogonal(1.0)"}
    assert with_default_init(MemoryConfig(), inits).init == "orthogonal(1.0)"
    explicit = MemoryConfig(init="zeros")
    assert with_default_init(explicit, inits) is explicit
    assert with_default_init(MemoryConfig(kind="lstm"), inits).init is None
    assert with_default_init({"kind": "gru"}, inits).init == "orthogonal(1.0)"
    assert with_default_init(None, inits) is None


def test_memory_parse_memory_config():
    assert parse_memory_config(None) is None
    config = parse_memory_config({"kind": "mamba", "hidden_size": 16})
    assert config == MemoryConfig(kind="mamba", hidden_size=16)
    assert parse_memory_config(config) is config
    hash(config)  # frozen: usable as a flax field and jit-static argument
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.kind = "gru"
    with pytest.raises(ValueError, match="one of 'gru', 'lstm', 'transformer', 'mamba'"):
        parse_memory_config({"kind": "rnn"})
    with pytest.raises(ValueError, match="hidden"):
        parse_memory_config({"kind": "gru", "hiden_size": 3})
    with pytest.raises(ValueError, match="num_heads"):
        MemoryConfig(kind="transformer", hidden_size=6, num_heads=4)
    MemoryConfig(kind="gru", hidden_size=6, num_heads=4)  # other kinds' knobs are ignored
    with pytest.raises(ValueError, match="window"):
        MemoryConfig(kind="transformer", window=0)
    with pytest.raises(TypeError):
        parse_memory_config("gru")
    with pytest.raises(ValueError, match="unknown initializer"):
        MemoryConfig(init="not_an_init(1.0)")  # caught when configured, not at first call
    with pytest.raises(ValueError, match="gate count"):
        MemoryConfig(kind="mamba", init="gate_block_orthogonal")
    assert MemoryConfig(kind="mamba", init="gate_block_orthogonal(2)").init


def test_memory_ends_normalised():
    assert _config("transformer").ends_normalised and _config("mamba").ends_normalised
    assert not _config("gru").ends_normalised and not _config("lstm").ends_normalised
    assert not _config("mamba", final_norm=False).ends_normalised
    config = _config("mamba")
    params, carry, x, resets = _setup(config)
    norm = params["params"]["final_norm"]
    params["params"]["final_norm"] = {
        "scale": np.ones_like(norm["scale"]),
        "bias": 0 * norm["bias"],
    }
    _, y = _apply(config, params, carry, x, resets)
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.std(-1), 1.0, atol=1e-2)
    bare = _config("mamba", final_norm=False)
    assert "final_norm" not in _setup(bare)[0]["params"]


def test_memory_bad_inputs():
    config = _config("gru")
    params, carry, x, resets = _setup(config)
    cell = MemoryCell(config)
    with pytest.raises(ValueError, match="time-major"):
        cell.apply(params, carry, x[0], resets[0])
    with pytest.raises(ValueError, match="resets"):
        cell.apply(params, carry, x, resets[:, :2])
    with pytest.raises(ValueError, match="tuple of 1"):
        cell.apply(params, carry + carry, x, resets)


@pytest.mark.parametrize("kind", KINDS)
def test_memory_jit_and_grad(kind):
    # lstm and mamba run rematerialised: the scanned-cell and the parallel-layer remat paths.
    config = _config(kind, gradient_checkpoint=kind in ("lstm", "mamba"))
    params, carry, x, resets = _setup(config)

    @functools.partial(jax.jit, static_argnums=1)
    @jax.grad
    def grad(p, cfg):
        new_carry, y = MemoryCell(cfg).apply(p, carry, x, resets)
        leaves = jax.tree.leaves(new_carry)
        return jnp.sum(y**2) + sum(jnp.sum(jnp.asarray(c, float)) for c in leaves)

    grads = grad(params, config)
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        assert np.all(np.isfinite(g)) and np.any(g), jax.tree_util.keystr(path)  # all connected
    if kind == "gru":  # remat changes memory, not gradients
        remat = dataclasses.replace(config, gradient_checkpoint=True)
        _assert_trees_close(grad(params, remat), grads, atol=1e-5)
