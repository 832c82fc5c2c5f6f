"""Spec 000 B17, DreamerV3 rows: per-tensor AGC and the LaProp chain (laprop_agc)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ajax.agents.dreamerv3.optim import clip_by_agc_per_tensor, laprop_agc, warmup_constant

SHAPES = {"a": (5, 3), "b": (3,), "c": (2, 4, 3)}


def _tree(rng, scale=1.0):
    return {k: scale * rng.normal(size=s) for k, s in SHAPES.items()}


def _optax_warmup_lr(lr, warmup, count):
    """(0 - lr) (1 - count / warmup) + lr in float32, then lr (optax polynomial_schedule)."""
    if count >= warmup:
        return np.float32(lr)
    frac = np.float32(1.0) - np.float32(count) / np.float32(warmup)
    return (np.float32(0.0) - np.float32(lr)) * frac + np.float32(lr)


def _reference_laprop(params, grads, lr, warmup, agc, pmin, beta1, beta2, eps):
    """DreamerV3's optimiser from its formulas, in float64 numpy (opt.py:109-164, agent.py:357-379).

    Per leaf: g <- g / max(1, |g| / (agc max(pmin, |p|))); nu <- b2 nu + (1 - b2) g^2;
    r = g / (sqrt(nu / (1 - b2^t)) + eps); mu <- b1 mu + (1 - b1) r; u = -lr_t mu / (1 - b1^t)
    with lr_t = lr min(1, (t - 1) / warmup) for the t-th update (t = 1, 2, ...). lr_t is computed
    in float32 as optax's linear_schedule computes it, in the reference (agent.py:376-377) as here.
    """
    params = {k: np.array(v, np.float64) for k, v in params.items()}
    nu = {k: np.zeros_like(v) for k, v in params.items()}
    mu = {k: np.zeros_like(v) for k, v in params.items()}
    history = []
    for t, grad in enumerate(grads, start=1):
        lr_t = float(_optax_warmup_lr(lr, warmup, t - 1))
        updates = {}
        for k, p in params.items():
            g = np.asarray(grad[k], np.float64)
            g = g / max(1.0, np.linalg.norm(g) / (agc * max(pmin, np.linalg.norm(p))))
            nu[k] = beta2 * nu[k] + (1 - beta2) * g * g
            r = g / (np.sqrt(nu[k] / (1 - beta2**t)) + eps)
            mu[k] = beta1 * mu[k] + (1 - beta1) * r
            updates[k] = -lr_t * mu[k] / (1 - beta1**t)
        params = {k: params[k] + updates[k] for k in params}
        history.append(updates)
    return history


def _run(tx, params, grads, dtype):
    params = {k: jnp.asarray(v, dtype) for k, v in params.items()}
    state, history = tx.init(params), []
    for grad in grads:
        grad = {k: jnp.asarray(v, dtype) for k, v in grad.items()}
        updates, state = tx.update(grad, state, params)
        params = optax.apply_updates(params, updates)
        history.append(updates)
    return history


def _max_diff(ours, ref, relative=False):
    """Max abs difference over steps and leaves; relative: divided by the leaf's max abs update."""
    out = 0.0
    for u, r in zip(ours, ref, strict=True):
        for k in r:
            d = np.abs(np.asarray(u[k], np.float64) - r[k]).max()
            out = max(out, float(d / np.abs(r[k]).max()) if relative else float(d))
    return out


@pytest.mark.parametrize(
    "hyper",
    [dict(lr=4e-5, warmup=1000), dict(lr=0.1, warmup=2)],
    ids=["defaults", "short_warmup"],
)
def test_b17_laprop_agc_equals_reference_chain(hyper):
    """5 steps on a {(5,3), (3,), (2,4,3)} tree, AGC active on some steps (grads of norm ~ 2-20).

    Spec: max abs difference 2.1e-14 (float64, against the copied reference). Measured here in
    float64 against the formulas: max abs 5.3e-23 (defaults) and 2.8e-17 (lr 0.1), 8e-16 of the
    largest update. In float32, 1.6e-5 of the largest update: float32(0.999) makes 1 - beta2^t off
    by 1.3e-5 relative (the reference, run in float32, shares this).
    """
    rng = np.random.default_rng(0)
    params = _tree(rng)
    grads = [_tree(rng, scale=s) for s in (0.5, 3.0, 0.01, 2.0, 5.0)]
    kw = dict(agc=0.3, pmin=1e-3, beta1=0.9, beta2=0.999, eps=1e-20, **hyper)
    ref = _reference_laprop(params, grads, **kw)
    with jax.enable_x64(True):
        ours64 = _run(laprop_agc(**kw), params, grads, jnp.float64)
        assert ours64[1]["a"].dtype == jnp.float64
        assert _max_diff(ours64, ref) < 2.1e-14
        assert _max_diff(ours64[1:], ref[1:], relative=True) < 1e-14
    ours32 = _run(laprop_agc(**kw), params, grads, jnp.float32)
    assert _max_diff(ours32[1:], ref[1:], relative=True) < 5e-5


def test_b17_first_update_is_zero():
    rng = np.random.default_rng(1)
    params, grad = _tree(rng), _tree(rng)
    (first, second) = _run(laprop_agc(), params, [grad, grad], jnp.float32)
    for k in SHAPES:
        np.testing.assert_array_equal(first[k], 0.0)
        assert np.abs(second[k]).min() > 0


def test_b17_agc_pinned_values():
    agc = clip_by_agc_per_tensor(0.3, 1e-3)
    out, _ = agc.update(3.0 * jnp.ones((2, 2)), agc.init(None), jnp.ones((2, 2)))
    np.testing.assert_allclose(out, 0.3 * np.ones((2, 2)), rtol=1e-6)  # |p| = 2, cap 0.6
    out, _ = agc.update(jnp.array([3.0, 4.0]), agc.init(None), jnp.zeros(2))
    np.testing.assert_allclose(out, [1.8e-4, 2.4e-4], rtol=1e-6)  # pmin: cap 3e-4
    small = jnp.array([1e-5, -2e-5])
    out, _ = agc.update(small, agc.init(None), jnp.ones(2))
    np.testing.assert_array_equal(out, small)  # under the cap: unchanged


def test_b17_agc_is_per_tensor_not_unit_wise():
    """p = I2, g = [[3, 0], [0, 0.1]]: one norm for the whole tensor, unlike optax's NFNet AGC."""
    p, g = jnp.eye(2), jnp.array([[3.0, 0.0], [0.0, 0.1]])
    ours, _ = clip_by_agc_per_tensor(0.3, 1e-3).update(g, optax.EmptyState(), p)
    np.testing.assert_allclose(ours, [[0.42402855, 0.0], [0.0, 0.01413429]], rtol=1e-6)
    unit = optax.adaptive_grad_clip(0.3, 1e-3)
    theirs, _ = unit.update(g, unit.init(p), p)
    np.testing.assert_allclose(theirs, [[0.3, 0.0], [0.0, 0.1]], rtol=1e-6)


def test_b17_agc_mixed_rank_tree_and_disable():
    tree = {"w": jnp.full((2, 3, 4), 10.0), "b": jnp.array([5.0])}
    params = {"w": jnp.ones((2, 3, 4)), "b": jnp.array([2.0])}
    out, _ = clip_by_agc_per_tensor().update(tree, optax.EmptyState(), params)
    for k in tree:
        np.testing.assert_allclose(
            np.linalg.norm(out[k]), 0.3 * np.linalg.norm(params[k]), rtol=1e-6
        )
    same, _ = clip_by_agc_per_tensor(0.0).update(tree, optax.EmptyState(), params)
    np.testing.assert_array_equal(same["w"], tree["w"])
    with pytest.raises(ValueError, match="params"):
        clip_by_agc_per_tensor().update(tree, optax.EmptyState(), None)


def test_b17_laprop_scale_invariance():
    """Loss x 1000 leaves the updates unchanged (eps 1e-20): without AGC for any gradients, and
    with AGC when it clips in both runs (the clipped gradient is scale-free)."""
    rng = np.random.default_rng(2)
    params = _tree(rng, scale=0.01)  # small weights: AGC clips at both scales
    grads = [_tree(rng) for _ in range(4)]
    for agc in (0.0, 0.3):
        tx = laprop_agc(lr=1e-3, warmup=2, agc=agc)
        base = _run(tx, params, grads, jnp.float32)
        scaled = _run(tx, params, [{k: 1000 * v for k, v in g.items()} for g in grads], jnp.float32)
        as_ref = [{k: np.asarray(v, np.float64) for k, v in u.items()} for u in base[1:]]
        assert _max_diff(scaled[1:], as_ref, relative=True) < 1e-6  # measured 1.4e-7, 3.1e-7
    # Adam (momentum first, then RMS, eps 1e-8 inside) is not: a sanity check of the test.
    adam = optax.adam(1e-3)
    tiny = [{k: 1e-9 * v for k, v in g.items()} for g in grads]
    a, b = _run(adam, params, tiny, jnp.float32), _run(adam, params, grads, jnp.float32)
    assert np.abs(np.asarray(a[-1]["a"]) - np.asarray(b[-1]["a"])).max() > 1e-5


def test_b17_warmup_schedule():
    sched = warmup_constant(4e-5, 1000)
    np.testing.assert_allclose([sched(0), sched(500), sched(1000), sched(5000)],
                               [0.0, 2e-5, 4e-5, 4e-5], rtol=1e-6)  # fmt: skip
    assert float(warmup_constant(1e-3, 0)(0)) == pytest.approx(1e-3)


def test_b17_bad_hyperparameters_raise():
    with pytest.raises(ValueError, match="beta2"):
        laprop_agc(beta2=1.0)
    with pytest.raises(ValueError, match="lr"):
        laprop_agc(lr=-1.0)
    with pytest.raises(ValueError, match="clip"):
        clip_by_agc_per_tensor(-0.3)
