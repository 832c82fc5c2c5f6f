"""Spec 000 B12 (DreamerV3 bounded_normal policy head) and B16 (continue head, Bernoulli loss)."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.dreamerv3.policy import (
    BoundedNormalHead,
    bounded_normal,
    continue_loss,
    continue_target,
)
from ajax.distributional import bernoulli_loss

RTOL = 1e-6
# Keys use the "rbg" generator: on CPU, threefry recompiles for every new shape at ~6 s of CPU each,
# which would dominate these tests. The functions under test take any key.
KEY = functools.partial(jax.random.key, impl="rbg")

# ---------------------------------------------------------------------------------------- B12


def test_b12_d3_sigma_and_entropy_at_raw_zero_pinned():
    dist = bounded_normal(jnp.zeros((2, 3)), jnp.zeros((2, 3)))
    np.testing.assert_allclose(dist.std, 0.8927173, rtol=RTOL)
    np.testing.assert_array_equal(dist.mean, 0.0)
    np.testing.assert_allclose(dist.entropy(), 3 * 1.3054532, rtol=RTOL)  # summed over A = 3


def test_b12_d3_bounds():
    dist = bounded_normal(jnp.array([-50.0, 50.0]), jnp.array([-50.0, 50.0]))
    np.testing.assert_allclose(dist.mean, [-1.0, 1.0], rtol=RTOL)
    np.testing.assert_allclose(dist.std, [0.1, 1.0], rtol=RTOL)


def test_b12_d3_head_at_init():
    """Output Linears at outscale 0.01: std ~ 0.8927, entropy per dim ~ 1.3054532 at init."""
    head = BoundedNormalHead(action_dim=4)
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 32)), jnp.float32)
    params = head.init(KEY(1), x)["params"]
    for name in ("mean", "std"):
        np.testing.assert_allclose(
            np.asarray(params[name]["kernel"]).std(), 0.01 / np.sqrt(32), rtol=0.2
        )
        np.testing.assert_array_equal(params[name]["bias"], 0.0)
    dist = head.apply({"params": params}, x)
    assert dist.mean.shape == dist.std.shape == (8, 4)
    np.testing.assert_allclose(dist.entropy() / 4, 1.3054532, atol=5e-3)
    assert np.abs(dist.mean).max() < 0.05


def test_b12_d3_logpdf_out_of_bounds_is_plain_normal():
    """An out-of-[-1, 1] sample has a finite log-density with no tanh Jacobian term."""
    dist = bounded_normal(jnp.array([0.3, -0.2]), jnp.array([0.0, 1.0]))
    x = jnp.array([3.0, -2.5])
    mean, std = np.asarray(dist.mean, np.float64), np.asarray(dist.std, np.float64)
    expected = np.sum(
        -0.5 * ((3.0, -2.5) - mean) ** 2 / std**2 - np.log(std) - 0.5 * math.log(2 * math.pi)
    )
    lp = dist.log_prob(x)
    assert np.isfinite(lp)
    np.testing.assert_allclose(lp, expected, rtol=RTOL)


def test_b12_d3_samples_are_unclipped():
    dist = bounded_normal(jnp.full((4000, 1), 10.0), jnp.full((4000, 1), 10.0))  # mean 1, std 1
    sample = dist.sample(KEY(2))
    assert sample.max() > 2.0  # not squashed into [-1, 1]
    np.testing.assert_allclose(sample.mean(), 1.0, atol=0.1)


def test_b12_d3_bad_std_bounds_raise():
    with pytest.raises(ValueError, match="minstd"):
        bounded_normal(jnp.zeros(2), jnp.zeros(2), minstd=0.0)
    with pytest.raises(ValueError, match="shape"):
        bounded_normal(jnp.zeros(2), jnp.zeros(3))


# ---------------------------------------------------------------------------------------- B16


def test_b16_zero_logit_gives_log_two_for_any_label():
    labels = jnp.array([0.0, 0.3, 0.997, 1.0])
    np.testing.assert_allclose(bernoulli_loss(jnp.zeros(4), labels), 0.6931472, rtol=RTOL)


def test_b16_soft_label_minimum_pinned():
    """The loss at the minimum is the entropy of Bernoulli(0.997), 0.02042292 in float64 (pinned to
    6 digits, 1.2e-6 relative). In float32 the label 0.997 makes 1 - c off by 7e-6 relative, and
    the loss by 7.1e-6 (measured), so it is checked at rtol 1e-5."""
    c = 0.997
    entropy = -(c * math.log(c) + (1 - c) * math.log(1 - c))
    np.testing.assert_allclose(entropy, 0.0204229, rtol=2e-6)
    opt = math.log(c / (1 - c))  # in float64: 1 - float32(0.997) loses 4 digits
    np.testing.assert_allclose(opt, 5.8061385, rtol=RTOL)
    loss = lambda l: bernoulli_loss(l, jnp.float32(c))
    np.testing.assert_allclose(loss(jnp.float32(5.8061385)), 0.0204229, rtol=1e-5)
    assert abs(float(jax.grad(loss)(jnp.float32(5.8061385)))) < 1e-6
    assert float(loss(jnp.float32(5.5))) > 0.0204229 and float(loss(jnp.float32(6.1))) > 0.0204229


def test_b16_continue_target_is_discounted_soft_label():
    """c = (1 - 1/333) (1 - is_terminal) = 0.996997 (the spec rounds it to 0.997)."""
    target = continue_target(jnp.array([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(target, [0.996997, 0.0, 0.996997], rtol=RTOL)
    logits = jnp.array([5.0, -3.0, 0.0])
    np.testing.assert_allclose(
        continue_loss(logits, jnp.array([0.0, 1.0, 0.0])),
        bernoulli_loss(logits, target),
        rtol=RTOL,
    )
    grad = jax.grad(lambda t: continue_loss(logits, t).sum())(jnp.array([0.0, 1.0, 0.0]))
    np.testing.assert_array_equal(grad, 0.0)
    with pytest.raises(ValueError, match="horizon"):
        continue_target(jnp.zeros(2), horizon=1.0)
