"""Spec 000 B3: percentile scale normalisers (DreamerV3 retnorm, TD-MPC2 RunningScale), pinned."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.normalizers import ReturnNormalizer, RunningScale

SCALES = (0.001, 0.01, 1.0, 10.0)


@jax.jit
def _update_d3(norm, x):
    norm = norm.update(x)
    return norm, norm.scale()


@jax.jit
def _update_t2(norm, x):
    norm = norm.update(x)
    return norm, norm.scale()


def _batch(s):
    return jnp.arange(256, dtype=jnp.float32) * jnp.float32(s)


def _range_batch(r):
    """21 values whose linear P5 and P95 fall exactly on x[1] = 0 and x[19] = r."""
    return jnp.zeros(21, jnp.float32).at[19:].set(r)


def _run(update, norm, batches):
    scales = []
    for x in batches:
        norm, s = update(norm, x)
        scales.append(float(s))
    return norm, scales


def test_b3_ranges_of_the_batches():
    ranges = [float(jnp.percentile(_batch(s), 95) - jnp.percentile(_batch(s), 5)) for s in SCALES]
    np.testing.assert_allclose(ranges, [0.2295, 2.295, 229.5, 2295.0], rtol=1e-6)


def test_b3_d3_four_batch_table():
    norm, scales = _run(_update_d3, ReturnNormalizer.create(), [_batch(s) for s in SCALES])
    np.testing.assert_allclose(scales, [1.0, 1.0, 2.3199697, 25.246771], rtol=1e-6)
    np.testing.assert_allclose(norm.lo, 1.4025983, rtol=1e-6)
    np.testing.assert_allclose(norm.hi, 26.649368, rtol=1e-6)


def test_b3_t2_four_batch_table():
    _, scales = _run(_update_t2, RunningScale.create(), [_batch(s) for s in SCALES])
    np.testing.assert_allclose(scales, [1.0, 1.01295, 3.2978203, 26.214842], rtol=1e-6)


def test_b3_constant_range_100_updates():
    batches = [_range_batch(50.0)] * 100
    _, d3 = _run(_update_d3, ReturnNormalizer.create(), batches)
    _, t2 = _run(_update_t2, RunningScale.create(), batches)
    np.testing.assert_allclose(d3[-1], 31.698427, rtol=1e-6)
    np.testing.assert_allclose(t2[-1], 32.064415, rtol=1e-6)


def _scan_alternating(norm, n):
    def body(carry, i):
        return carry.update(_range_batch(jnp.where(i % 2 == 0, 0.0, 3.0))), None

    norm, _ = jax.lax.scan(body, norm, jnp.arange(n))
    return norm.scale()


def test_b3_alternating_ranges_clamp_before_vs_after():
    """Ranges 0, 3, 0, 3, ...: clamping after the EMA (D3) and before it (T2) differ."""
    d3 = jax.jit(_scan_alternating, static_argnums=1)(ReturnNormalizer.create(), 2000)
    t2 = jax.jit(_scan_alternating, static_argnums=1)(RunningScale.create(), 2000)
    np.testing.assert_allclose(d3, 1.50753, rtol=1e-5)  # pinned to 6 digits
    np.testing.assert_allclose(t2, 2.00502, rtol=1e-5)


def test_b3_single_scalar_form_equals_two_ema_form():
    """r <- (1 - rate) r + rate (P95 - P5) from 0, read as max(1, r), equals the lo/hi EMAs."""
    batches = [_batch(s) for s in SCALES] + [_range_batch(50.0)] * 20
    norm, scales = _run(_update_d3, ReturnNormalizer.create(), batches)
    r, single = 0.0, []
    for x in batches:
        r = 0.99 * r + 0.01 * float(jnp.percentile(x, 95) - jnp.percentile(x, 5))
        single.append(max(1.0, r))
    np.testing.assert_allclose(scales, single, rtol=1e-6)
    np.testing.assert_allclose(norm.hi - norm.lo, r, rtol=1e-6)


def test_b3_update_before_read_and_all_elements():
    """The current batch counts, and percentiles run over every element, not a leading axis."""
    x = _batch(10.0).reshape(16, 16)
    norm = ReturnNormalizer.create().update(x)
    np.testing.assert_allclose(norm.scale(), 0.01 * 2295.0, rtol=1e-6)  # 22.95 > 1
    s = RunningScale.create().update(x)
    np.testing.assert_allclose(s.scale(), 0.99 + 0.01 * 2295.0, rtol=1e-6)


@pytest.mark.parametrize("make", [ReturnNormalizer.create, RunningScale.create])
def test_b3_no_gradient(make):
    x = _batch(1.0) * 3.0

    def f(x, norm):
        return make().update(x * 2.0).scale() * 5.0 + norm.update(x).scale()

    gx, gnorm = jax.jit(jax.grad(f, argnums=(0, 1)))(x, make())
    assert np.all(np.asarray(gx) == 0.0)
    assert all(np.all(np.asarray(g) == 0.0) for g in jax.tree.leaves(gnorm))


def test_b3_pytree_and_static_fields():
    norm = ReturnNormalizer.create(rate=0.02, limit=2.0)
    assert len(jax.tree.leaves(norm)) == 2 and norm.lo is not norm.hi
    assert jax.tree.map(lambda a: a, norm).rate == 0.02
    assert len(jax.tree.leaves(RunningScale.create())) == 1
    assert float(RunningScale.create().scale()) == 1.0
    assert float(ReturnNormalizer.create(limit=2.0).scale()) == 2.0


def test_b3_validation_errors():
    for rate in (-0.01, 1.5):
        with pytest.raises(ValueError, match="rate"):
            ReturnNormalizer.create(rate=rate)
        with pytest.raises(ValueError, match="rate"):
            RunningScale.create(rate=rate)
    with pytest.raises(ValueError, match="limit"):
        ReturnNormalizer.create(limit=0.0)
    with pytest.raises(ValueError, match="empty"):
        RunningScale.create().update(jnp.zeros((0,)))
