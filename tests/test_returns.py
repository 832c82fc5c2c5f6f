"""Spec 000 B11 (λ-returns, pinned through the DreamerV3 mapping) and B19 (discount heuristics)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.returns import discount_from_horizon, lambda_returns, tdmpc2_discount

REW = np.array([0, 1, 2, 3, 4], np.float32)
BOOT = np.array([10, 20, 30, 40, 50], np.float32)
LAMBDA_RETURNS = jax.jit(lambda_returns)


def _d3_mapped(term, last, disc, lam):
    """DreamerV3 lambda_return (agent.py:480-488) inputs of length L -> time-major [L - 1] block.

    rew_t = rew[t+1], disc_t = disc (1 - term[t+1]), lam_t = λ (1 - last[t+1]), boot_t = boot[t+1].
    """
    term, last = np.asarray(term, np.float32), np.asarray(last, np.float32)
    return LAMBDA_RETURNS(
        REW[1:], disc * (1.0 - term[1:]), BOOT[1:], jnp.float32(lam) * (1.0 - last[1:])
    )


ZEROS = np.zeros(5)
ONE_AT_2 = np.array([0, 0, 1, 0, 0])
SOFT_CONT = np.array([0.997, 0.997, 0.5, 0.997, 0.997])
B11_ROWS = {
    "lambda_0.95_disc_0.99": (ZEROS, ZEROS, 0.99, 0.95, [54.179844, 55.491592, 55.29675, 53.5]),
    "term_at_2": (ONE_AT_2, ZEROS, 0.99, 0.95, [3.8710003, 2.0, 55.29675, 53.5]),
    "last_at_2": (ZEROS, ONE_AT_2, 0.99, 0.95, [31.803852, 31.7, 55.29675, 53.5]),
    "soft_cont_disc_1": (
        1.0 - SOFT_CONT,
        ZEROS,
        1.0,
        0.95,
        [29.794964, 29.349062, 55.998024, 53.85],
    ),
    "lambda_0": (ZEROS, ZEROS, 0.99, 0.0, [20.8, 31.7, 42.6, 53.5]),
    "lambda_1": (ZEROS, ZEROS, 0.99, 1.0, [57.831295, 57.40535, 55.965, 53.5]),
}


@pytest.mark.parametrize("row", list(B11_ROWS))
def test_b11_d3_pinned_rows(row):
    term, last, disc, lam, expected = B11_ROWS[row]
    np.testing.assert_allclose(_d3_mapped(term, last, disc, lam), expected, rtol=1e-6)


def test_b11_matches_python_loop_and_batch_dims():
    rng = np.random.default_rng(0)
    T, B = 7, 3
    rew, boot = rng.normal(size=(2, T, B)).astype(np.float32)
    disc = rng.uniform(0.5, 1.0, (T, B)).astype(np.float32)
    lam = rng.uniform(0.0, 1.0, (T, B)).astype(np.float32)
    g, expected = boot[-1].astype(np.float64), np.zeros((T, B))
    for t in reversed(range(T)):
        g = rew[t] + disc[t] * ((1 - lam[t]) * boot[t] + lam[t] * g)
        expected[t] = g
    np.testing.assert_allclose(LAMBDA_RETURNS(rew, disc, boot, lam), expected, rtol=1e-5)
    # a scalar lam equals the same lam broadcast over [T, B]
    np.testing.assert_array_equal(
        LAMBDA_RETURNS(rew, disc, boot, 0.95),
        LAMBDA_RETURNS(rew, disc, boot, np.full((T, B), 0.95, np.float32)),
    )


def test_b11_soft_continuation_not_cast_to_bool():
    """A soft ĉ = 0.5 halves the bootstrap; a bool cast would keep it whole."""
    g = lambda_returns(jnp.zeros(1), jnp.full(1, 0.5), jnp.full(1, 10.0), 0.95)
    np.testing.assert_allclose(g, [5.0], rtol=1e-6)


def test_b11_gradients_flow_to_all_inputs():
    grads = jax.grad(lambda *a: lambda_returns(*a, 0.5)[0], argnums=(0, 1, 2))
    g_rew, g_disc, g_boot = grads(jnp.ones(3), jnp.full(3, 0.9), jnp.ones(3))
    assert float(g_rew[0]) == 1.0 and np.all(np.asarray(g_disc) != 0)
    assert np.all(np.asarray(g_boot) != 0)


def test_b11_validation_errors():
    x = jnp.zeros((4, 2))
    with pytest.raises(ValueError, match="share"):
        lambda_returns(x, jnp.zeros((4,)), x, 0.9)
    with pytest.raises(ValueError, match="lam"):
        lambda_returns(x, x, x, jnp.zeros((3, 2)))
    with pytest.raises(ValueError, match="lam"):
        lambda_returns(x, x, x, 1.5)
    with pytest.raises(ValueError, match="time-major"):
        lambda_returns(jnp.zeros(()), jnp.zeros(()), jnp.zeros(()), 0.9)


def test_b19_d3_discount():
    np.testing.assert_allclose(discount_from_horizon(333), 0.996997, rtol=1e-6)


@pytest.mark.parametrize("T, expected", [(100, 0.95), (500, 0.99), (1000, 0.995), (50, 0.95)])
def test_b19_t2_discount(T, expected):
    np.testing.assert_allclose(discount_from_horizon(T / 5, 0.95, 0.995), expected, rtol=1e-6)
    np.testing.assert_allclose(tdmpc2_discount(T), expected, rtol=1e-6)


def test_b19_validation_errors():
    with pytest.raises(ValueError, match="positive"):
        discount_from_horizon(0)
    with pytest.raises(ValueError, match="exceed"):
        discount_from_horizon(10, lo=0.99, hi=0.9)
