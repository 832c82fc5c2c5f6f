"""Spec 000 B7 (DreamerV3 side) and B8: unimix categorical latents, straight-through, KL, free bits."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.dreamerv3.latents import (
    categorical_entropy,
    categorical_index,
    categorical_kl,
    dyn_loss,
    free_bits,
    onehot_st_sample,
    rep_loss,
    unimix_logits,
)

RTOL = 1e-6
# Keys use the "rbg" generator: on CPU, threefry recompiles for every new shape at ~6 s of CPU each,
# which would dominate these tests. The functions under test take any key.
KEY = functools.partial(jax.random.key, impl="rbg")


def _normal(seed, shape, scale=1.0):
    return jnp.asarray(scale * np.random.default_rng(seed).normal(size=shape), jnp.float32)


def test_b8_unimix_probs_pinned():
    probs = jax.nn.softmax(unimix_logits(jnp.array([10.0, 0.0, 0.0, 0.0])))
    np.testing.assert_allclose(
        probs, [0.9923651, 0.00254494, 0.00254494, 0.00254494], rtol=RTOL, atol=0
    )
    uniform = jax.nn.softmax(unimix_logits(jnp.full((3, 5), 0.7)))
    np.testing.assert_allclose(uniform, np.full((3, 5), 0.2), rtol=RTOL)


def test_b8_unimix_zero_passes_logits_through():
    logits = jnp.array([1.0, -2.0, 0.5])
    np.testing.assert_array_equal(unimix_logits(logits, 0.0), logits)


def test_b8_kl_free_bits_pinned_and_zero_gradient():
    post = jnp.array([[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    prior = jnp.zeros((2, 4))
    np.testing.assert_allclose(categorical_kl(post, prior).sum(), 0.5745868, rtol=RTOL)
    for loss in (dyn_loss, rep_loss):
        np.testing.assert_allclose(loss(post, prior), 1.0, rtol=0)
        g_post, g_prior = jax.grad(loss, argnums=(0, 1))(post, prior)
        np.testing.assert_array_equal(g_post, 0.0)
        np.testing.assert_array_equal(g_prior, 0.0)


def test_b8_kl_above_free_bits_pinned_and_gradient_passes():
    post = jnp.array([[8.0, 0.0, 0.0, 0.0], [0.0, 8.0, 0.0, 0.0]])
    prior = jnp.zeros((2, 4))
    np.testing.assert_allclose(categorical_kl(post, prior).sum(), 2.6559892, rtol=RTOL)
    np.testing.assert_allclose(dyn_loss(post, prior), 2.6559892, rtol=RTOL)
    np.testing.assert_allclose(rep_loss(post, prior), 2.6559892, rtol=RTOL)
    assert np.abs(jax.grad(dyn_loss, argnums=1)(post, prior)).max() > 1e-3
    assert np.abs(jax.grad(rep_loss, argnums=0)(post, prior)).max() > 1e-3


def test_b8_losses_sum_over_latents_per_batch_time():
    post, prior = _normal(0, (2, 2, 3, 2, 4), 3.0)  # two [B=2, T=3, S=2, C=4]
    out = dyn_loss(post, prior)
    assert out.shape == (2, 3)
    expected = np.maximum(categorical_kl(post, prior).sum(-1), 1.0)
    np.testing.assert_allclose(out, expected, rtol=RTOL)


def test_b8_straight_through_value_is_exact_onehot():
    """Exact only as sg(onehot) + (p - sg(p)); (sg(onehot) + p) - sg(p) rounds away from 0/1."""
    logits = _normal(1, (8, 32, 16), 3.0)
    sample = onehot_st_sample(jax.random.key(2), logits)  # the default (threefry) key
    assert sample.shape == (8, 32, 16)
    assert set(np.unique(np.asarray(sample)).tolist()) <= {0.0, 1.0}
    np.testing.assert_array_equal(sample.sum(-1), 1.0)


def test_b8_straight_through_jacobian_pinned():
    """d sample[0] / d logits at [10, 0, 0, 0] is the Jacobian of the mixed softmax."""
    jac = jax.jacobian(lambda l: onehot_st_sample(KEY(0), l)[0])(jnp.array([10.0, 0.0, 0.0, 0.0]))
    np.testing.assert_allclose(
        jac, [1.3480149e-4, -4.4933695e-5, -4.4933695e-5, -4.4933695e-5], rtol=RTOL
    )


def test_b8_samples_follow_mixed_probabilities():
    logits = jnp.broadcast_to(jnp.array([10.0, 0.0, 0.0, 0.0]), (20000, 4))
    freq = onehot_st_sample(KEY(3), logits).mean(0)
    np.testing.assert_allclose(freq, [0.99236506, 0.00254494, 0.00254494, 0.00254494], atol=2e-3)
    assert freq[1:].sum() > 0  # unimix: rare classes are sampled


def test_b8_categorical_index_key_and_noise():
    """A key draws Cat(softmax(l)) by inverting the CDF (one uniform per categorical): class
    frequencies over 200k draws within 4 standard errors, a -inf class never drawn; given Gumbel
    noise it is argmax(l + g), the draw the official jax.random.categorical makes."""
    probs = np.array([0.5, 0.0, 0.2, 0.25, 0.05])
    logits = jnp.broadcast_to(jnp.log(jnp.asarray(probs, jnp.float32)), (200_000, 5))
    for key in (KEY(8), jax.random.key(8)):
        index = np.asarray(categorical_index(key, logits))
        assert index.shape == (200_000,) and index.min() >= 0 and index.max() <= 4
        freq = np.bincount(index, minlength=5) / index.size
        assert freq[1] == 0.0
        se = np.sqrt(probs * (1 - probs) / index.size)
        assert np.all(np.abs(freq - probs) <= 4 * se + 1e-12), freq
    noise = jax.random.gumbel(jax.random.key(9), (64, 5))
    small = jnp.asarray(_normal(10, (64, 5), 2.0))
    np.testing.assert_array_equal(categorical_index(noise, small), jnp.argmax(small + noise, -1))


def test_b8_stop_gradient_placement():
    """dyn trains only the prior, rep only the posterior."""
    post, prior = _normal(4, (2, 5, 2, 4), 4.0)
    dyn = lambda p, q: dyn_loss(p, q, nats=0.0).sum()  # free bits off: every KL passes gradients
    rep = lambda p, q: rep_loss(p, q, nats=0.0).sum()
    np.testing.assert_array_equal(jax.grad(dyn, argnums=0)(post, prior), 0.0)
    np.testing.assert_array_equal(jax.grad(rep, argnums=1)(post, prior), 0.0)
    assert np.abs(jax.grad(dyn, argnums=1)(post, prior)).min() > 0
    assert np.abs(jax.grad(rep, argnums=0)(post, prior)).min() > 0


def test_b8_unimix_reapplied_after_stop_gradient():
    """KL of raw logits applies the mixture to both sides (zero KL at equal logits, bounded KL)."""
    post = jnp.array([[50.0, 0.0, 0.0, 0.0]])
    prior = jnp.array([[0.0, 50.0, 0.0, 0.0]])
    kl = float(dyn_loss(post, prior, nats=0.0))
    # The mixture bounds the prior's probability of class 0 below by 0.01 / 4: KL <= log(400).
    assert kl < np.log(400.0)
    np.testing.assert_allclose(kl, float(categorical_kl(post, prior).sum()), rtol=RTOL)
    np.testing.assert_allclose(categorical_kl(post, post), 0.0, atol=1e-7)


def test_b8_entropy():
    np.testing.assert_allclose(categorical_entropy(jnp.zeros((3, 16))), np.log(16.0), rtol=RTOL)
    probs = np.array([0.9923651, 0.00254494, 0.00254494, 0.00254494])
    np.testing.assert_allclose(
        categorical_entropy(jnp.array([10.0, 0.0, 0.0, 0.0])),
        -(probs * np.log(probs)).sum(),
        rtol=1e-5,
    )


def test_b8_free_bits():
    x = jnp.array([0.2, 0.999, 1.001, 3.0])
    np.testing.assert_array_equal(free_bits(x), np.float32([1.0, 1.0, 1.001, 3.0]))
    np.testing.assert_array_equal(jax.grad(lambda v: free_bits(v).sum())(x), [0, 0, 1, 1])


def test_b7_d3_latents_are_sampled_not_simnorm():
    """Unlike SimNorm, the latent is a random one-hot, not the group's softmax."""
    logits = jnp.zeros((4, 32, 16))
    a = onehot_st_sample(KEY(5), logits)
    b = onehot_st_sample(KEY(6), logits)
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a.sum(-1), 1.0)


@pytest.mark.parametrize("bad", [-0.1, 1.0])
def test_b8_bad_unimix_raises(bad):
    with pytest.raises(ValueError, match="unimix"):
        unimix_logits(jnp.zeros(4), bad)


def test_b8_bad_shapes_raise():
    with pytest.raises(ValueError, match="equal shapes"):
        categorical_kl(jnp.zeros((2, 4)), jnp.zeros((2, 5)))
    with pytest.raises(ValueError, match="S, C"):
        dyn_loss(jnp.zeros(4), jnp.zeros(4))
    with pytest.raises(ValueError, match="free nats"):
        free_bits(jnp.zeros(2), -1.0)
