"""Spec 000 B6: BlockLinear (DreamerV3's block-diagonal Linear in the GRU core)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.dreamerv3.networks import BlockLinear

# Keys use the "rbg" generator: on CPU, threefry recompiles for every new shape at ~6 s of CPU each,
# which would dominate these tests. The functions under test take any key.
KEY = functools.partial(jax.random.key, impl="rbg")


def _init(features, blocks, width, seed=0):
    layer = BlockLinear(features, blocks)
    params = layer.init(KEY(seed), jnp.zeros((1, width)))["params"]
    # A nonzero bias so that the dense comparison also checks the bias layout.
    params = dict(
        params, bias=jnp.asarray(np.random.default_rng(seed).normal(size=features), jnp.float32)
    )
    return layer, params


def test_b6_jacobian_is_block_diagonal():
    layer, params = _init(12, 3, 9)
    x = jnp.asarray(np.random.default_rng(2).normal(size=9), jnp.float32)
    jac = jax.jacobian(lambda v: layer.apply({"params": params}, v))(x)  # [12, 9]
    blocks = np.asarray(jac).reshape(3, 4, 3, 3)
    for k in range(3):
        for j in range(3):
            if j == k:
                assert np.abs(blocks[k, :, j]).min() > 0
            else:
                np.testing.assert_array_equal(blocks[k, :, j], 0.0)


def test_b6_equals_dense_with_block_diagonal_kernel():
    layer, params = _init(12, 3, 9)
    x = jnp.asarray(np.random.default_rng(3).normal(size=(2, 5, 9)), jnp.float32)
    dense = jax.scipy.linalg.block_diag(*params["kernel"])  # [9, 12]
    assert dense.shape == (9, 12)
    np.testing.assert_allclose(
        layer.apply({"params": params}, x), x @ dense + params["bias"], rtol=1e-6, atol=1e-6
    )


def test_b6_shapes_at_12m():
    """dynhid: I = 8 (256 + 3 * 256) = 8192 -> D = 2048; dyngru: 2048 -> 3D = 6144."""
    dynhid = jax.eval_shape(BlockLinear(2048, 8).init, KEY(0), jnp.zeros((1, 8192)))
    dyngru = jax.eval_shape(BlockLinear(6144, 8).init, KEY(0), jnp.zeros((1, 2048)))
    assert dynhid["params"]["kernel"].shape == (8, 1024, 256)
    assert dynhid["params"]["bias"].shape == (2048,)
    assert dyngru["params"]["kernel"].shape == (8, 256, 768)
    assert dyngru["params"]["bias"].shape == (6144,)


def test_b6_init_std_uses_full_fan_in():
    """fan_in = I = 8192 (not I / g = 1024): std = 1 / sqrt(8192) = 0.011048."""
    params = BlockLinear(2048, 8).init(KEY(4), jnp.zeros((1, 8192)))["params"]
    kernel = np.asarray(params["kernel"])
    np.testing.assert_allclose(kernel.std(), 0.011048, rtol=5e-3)
    np.testing.assert_allclose(1.0 / np.sqrt(8192.0), 0.011048, rtol=1e-4)
    assert np.abs(kernel).max() <= 2.0 / np.sqrt(8192.0) / 0.87962566 * (1 + 1e-6)  # cut at 2 sigma
    np.testing.assert_array_equal(params["bias"], 0.0)


@pytest.mark.parametrize(("features", "blocks", "width"), [(12, 5, 10), (12, 3, 10), (12, 0, 9)])
def test_b6_indivisible_sizes_raise(features, blocks, width):
    with pytest.raises(ValueError, match="blocks"):
        BlockLinear(features, blocks).init(KEY(0), jnp.zeros((1, width)))


def test_b6_shared_input_equals_broadcast_concat():
    """``shared`` is every block's input [x_k | shared] without the broadcast: same values and
    gradients as the block-major call on the concatenated input (the GRU core's first layer)."""
    g, own, s, n = 4, 3, 5, 6
    layer, params = _init(8, g, g * (own + s))
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.normal(size=(g, n, own)), jnp.float32)
    shared = jnp.asarray(rng.normal(size=(n, s)), jnp.float32)

    def split(p, x, shared):
        return layer.apply({"params": p}, x, blocks_first=True, shared=shared)

    def concat(p, x, shared):
        full = jnp.concatenate([x, jnp.broadcast_to(shared, (g, n, s))], axis=-1)
        return layer.apply({"params": p}, full, blocks_first=True)

    np.testing.assert_allclose(split(params, x, shared), concat(params, x, shared), atol=1e-6)
    loss = lambda f: lambda *a: jnp.sum(jnp.sin(f(*a)))  # noqa: E731
    for a, b in zip(jax.grad(loss(split), (0, 1, 2))(params, x, shared),
                    jax.grad(loss(concat), (0, 1, 2))(params, x, shared), strict=True):  # fmt: skip
        for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="block-major"):
        layer.apply({"params": params}, x[0], shared=shared)
