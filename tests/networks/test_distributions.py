"""Tests of ajax.networks.distributions (spec 002, section ajax.networks.distributions)."""

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.stats import norm

from ajax.networks.distributions import (
    Deterministic,
    GuardedTanh,
    Squash,
    entropy,
    latent,
    log_prob_from_raw,
    sample_with_raw,
    squash,
)

LOC = jnp.array([[0.3, -1.2], [2.0, 0.1], [-0.5, 0.7]])  # (B=3, A=2)
SCALE = jnp.array([[0.5, 1.5], [0.8, 0.2], [1.0, 2.5]])


def diag_normal():
    return distrax.MultivariateNormalDiag(LOC, SCALE)


def change_of_variables(action, eps=0.0):
    """log p(a) = sum_a [log N(atanh a; loc, scale) - log(1 - a^2 + eps)], written by hand."""
    x = np.arctanh(np.asarray(action, np.float64))
    log_n = norm.logpdf(x, np.asarray(LOC, np.float64), np.asarray(SCALE, np.float64))
    return np.sum(log_n - np.log(1.0 - np.asarray(action, np.float64) ** 2 + eps), axis=-1)


@pytest.mark.parametrize("eps", [0.0, 1e-6, 0.1])
def test_squash_log_prob_change_of_variables(eps):
    pi = Squash(diag_normal(), log_det_eps=eps)
    action = jnp.array([[0.1, -0.9], [0.95, 0.2], [-0.4, 0.6]])
    np.testing.assert_allclose(pi.log_prob(action), change_of_variables(action, eps), rtol=1e-5)
    assert pi.log_prob(action).shape == (3,)
    assert pi.event_shape == (2,) and pi.batch_shape == (3,)


def test_squash_scalar_event_needs_no_block():
    pi = Squash(distrax.Normal(0.5, 2.0))
    a = jnp.array(0.3)
    expected = norm.logpdf(np.arctanh(0.3), 0.5, 2.0) - np.log(1 - 0.3**2)
    np.testing.assert_allclose(pi.log_prob(a), expected, rtol=1e-5)
    assert pi.event_shape == ()


def test_squash_log_prob_from_raw_finite_at_saturation():
    pi = Squash(distrax.MultivariateNormalDiag(jnp.zeros(2), jnp.ones(2)))
    raw = jnp.array([20.0, 0.5])
    assert not np.isfinite(pi.log_prob(jnp.tanh(raw)))  # tanh(20) == 1 in float32
    from_raw = pi.log_prob_from_raw(raw)
    assert np.isfinite(from_raw)
    # log N(raw) - sum log(1 - tanh(raw)^2), the log-det in its stable float64 form.
    r = np.array([20.0, 0.5])
    log_det = 2 * (np.log(2) - r - np.logaddexp(0, -2 * r))
    np.testing.assert_allclose(from_raw, np.sum(norm.logpdf(r) - log_det), rtol=1e-6)


def test_squash_log_prob_from_raw_matches_log_prob_off_the_rails():
    pi = Squash(diag_normal(), log_det_eps=1e-6)
    raw = jnp.array([[0.2, -1.0], [1.5, 0.0], [-2.0, 0.4]])
    np.testing.assert_allclose(pi.log_prob_from_raw(raw), pi.log_prob(jnp.tanh(raw)), rtol=1e-5)


@pytest.mark.parametrize("eps", [1e-6, 0.01])
def test_guarded_tanh_log_det(eps):
    bij = GuardedTanh(eps)
    # Saturated points (where eps is the whole argument) and points where float32 keeps
    # 1 - tanh^2 to 1e-6; atol covers 1 + 1e-6 rounding at x = 0.
    x = jnp.array([-25.0, -2.0, -0.5, 0.0, 0.7, 1.5, 25.0])
    expected = np.log(1.0 - np.tanh(np.asarray(x, np.float64)) ** 2 + eps)
    np.testing.assert_allclose(bij.forward_log_det_jacobian(x), expected, rtol=1e-5, atol=1e-6)
    y, fldj = bij.forward_and_log_det(x)
    np.testing.assert_allclose(y, np.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(fldj, expected, rtol=1e-5, atol=1e-6)
    y_in = jnp.array([-0.9, 0.0, 0.5])
    x_back, ildj = bij.inverse_and_log_det(y_in)
    np.testing.assert_allclose(x_back, np.arctanh(y_in), rtol=1e-6)
    np.testing.assert_allclose(ildj, -np.log(1.0 - np.asarray(y_in) ** 2 + eps), rtol=1e-5)
    assert bij.same_as(GuardedTanh(eps)) and not bij.same_as(GuardedTanh(2 * eps))
    assert not bij.same_as(distrax.Tanh())


def test_guarded_tanh_and_squash_refuse_negative_eps():
    with pytest.raises(ValueError, match="eps"):
        GuardedTanh(-1e-6)
    with pytest.raises(ValueError, match="log_det_eps"):
        Squash(diag_normal(), log_det_eps=-0.1)
    with pytest.raises(ValueError, match="log_det_eps"):
        squash(Deterministic(jnp.zeros(2)), log_det_eps=-0.1)


def test_squash_picks_exact_or_guarded_log_det():
    assert type(Squash(diag_normal()).bijector.bijector) is distrax.Tanh
    assert type(Squash(diag_normal(), 1e-6).bijector.bijector) is GuardedTanh


def test_squash_refuses_double_squash():
    with pytest.raises(ValueError, match="once"):
        Squash(Squash(diag_normal()))


def test_squash_entropy_unbiased_against_monte_carlo():
    """Mean of entropy(seed) over many seeds = -E[log p(a)], within 4 standard errors."""
    pi = Squash(distrax.MultivariateNormalDiag(jnp.array([0.4, -1.0]), jnp.array([1.2, 0.6])))
    n = 20000
    seeds = jax.random.split(jax.random.key(0), n)
    sampled = jax.vmap(lambda k: pi.entropy(seed=k))(seeds)
    actions_raw = distrax.MultivariateNormalDiag(
        jnp.array([0.4, -1.0]), jnp.array([1.2, 0.6])
    ).sample(seed=jax.random.key(1), sample_shape=n)
    neg_log_p = -jax.vmap(pi.log_prob_from_raw)(actions_raw)
    se = np.sqrt(np.var(sampled) / n + np.var(neg_log_p) / n)
    assert abs(np.mean(sampled) - np.mean(neg_log_p)) < 4 * se
    # tanh contracts, so the squashed entropy is well below the latent's.
    assert np.mean(sampled) < float(pi.distribution.entropy()) - 0.5


def test_squash_entropy_needs_a_seed():
    with pytest.raises(ValueError, match="seed"):
        Squash(diag_normal()).entropy()


def test_squash_entropy_gradient_reaches_the_mean():
    def h(loc):
        pi = Squash(distrax.MultivariateNormalDiag(loc, jnp.ones(2)))
        return pi.entropy(seed=jax.random.key(3))

    assert np.all(np.abs(jax.grad(h)(jnp.array([0.5, -0.5]))) > 1e-3)


def test_squash_sample_with_raw_consistent():
    pi = Squash(diag_normal())
    key = jax.random.key(7)
    action, log_prob, raw = pi.sample_with_raw(key)
    assert action.shape == raw.shape == (3, 2) and log_prob.shape == (3,)
    np.testing.assert_allclose(action, jnp.tanh(raw), rtol=1e-6)
    np.testing.assert_allclose(raw, pi.distribution.sample(seed=key), rtol=1e-6)
    np.testing.assert_allclose(action, pi.sample(seed=key), rtol=1e-6)
    np.testing.assert_allclose(log_prob, pi.log_prob_from_raw(raw), rtol=1e-6)
    np.testing.assert_allclose(log_prob, pi.log_prob(action), rtol=1e-4)
    _, lp_distrax = pi.sample_and_log_prob(seed=key)
    np.testing.assert_allclose(log_prob, lp_distrax, rtol=1e-6)


def test_squash_mean_is_tanh_of_latent_mean():
    pi = Squash(diag_normal())
    np.testing.assert_allclose(pi.mean(), np.tanh(LOC), rtol=1e-6)


def test_squash_crosses_jit():
    pi = Squash(diag_normal(), 1e-6)
    out = jax.jit(lambda p, a: p.log_prob(a))(pi, jnp.full((3, 2), 0.2))
    np.testing.assert_allclose(out, pi.log_prob(jnp.full((3, 2), 0.2)), rtol=1e-6)


def test_deterministic_behaviour():
    a = jnp.array([[0.5, -0.2], [0.1, 0.9]])
    pi = Deterministic(a)
    np.testing.assert_array_equal(pi.mean(), a)
    np.testing.assert_array_equal(pi.mode(), a)
    np.testing.assert_array_equal(pi.sample(seed=jax.random.key(0)), a)
    assert pi.sample(seed=jax.random.key(0), sample_shape=(4,)).shape == (4, 2, 2)
    x = jnp.array([[0.0, 0.0], [0.1, 1.0]])
    np.testing.assert_allclose(pi.log_prob(x), [[-0.25, -0.04], [0.0, -0.01]], rtol=1e-5, atol=1e-7)
    # A pytree of its action: a bootstrap gathers its steps, jit passes it through.
    assert len(jax.tree.leaves(pi)) == 1
    np.testing.assert_array_equal(jax.tree.map(lambda v: v[1], pi).action, a[1])
    np.testing.assert_array_equal(jax.jit(lambda p: p.mean())(pi), a)
    # maximising the proxy log-prob is MSE regression of the action onto the target.
    grad = jax.grad(lambda act: Deterministic(act).log_prob(x).sum())(a)
    np.testing.assert_allclose(grad, 2 * (x - a), rtol=1e-6)


def test_squash_function_on_deterministic_and_stochastic():
    a = jnp.array([0.5, -3.0])
    sq = squash(Deterministic(a))
    assert isinstance(sq, Deterministic)
    np.testing.assert_allclose(sq.action, np.tanh(a), rtol=1e-6)
    assert isinstance(squash(diag_normal()), Squash)
    assert squash(diag_normal(), 1e-6).log_det_eps == 1e-6


def test_module_functions_on_squashed_pi():
    pi = squash(diag_normal())
    key = jax.random.key(11)
    assert latent(pi) is pi.distribution
    action, log_prob, raw = sample_with_raw(pi, key)
    np.testing.assert_allclose(action, np.tanh(raw), rtol=1e-6)
    np.testing.assert_allclose(log_prob_from_raw(pi, raw), log_prob, rtol=1e-6)
    np.testing.assert_allclose(entropy(pi, key), pi.entropy(seed=key), rtol=1e-6)


def test_module_functions_on_unsquashed_pi():
    pi = diag_normal()
    key = jax.random.key(11)
    assert latent(pi) is pi
    action, log_prob, raw = sample_with_raw(pi, key)
    np.testing.assert_array_equal(action, raw)
    np.testing.assert_allclose(log_prob, pi.log_prob(action), rtol=1e-6)
    np.testing.assert_allclose(log_prob_from_raw(pi, raw), pi.log_prob(raw), rtol=1e-6)
    expected = np.sum(0.5 * np.log(2 * np.pi * np.e) + np.log(np.asarray(SCALE)), axis=-1)
    np.testing.assert_allclose(entropy(pi), expected, rtol=1e-6)
    np.testing.assert_allclose(entropy(pi, key), expected, rtol=1e-6)


def test_module_functions_on_deterministic_pi():
    pi = Deterministic(jnp.array([0.2, -0.4]))
    assert latent(pi) is pi
    action, log_prob, raw = sample_with_raw(pi, jax.random.key(0))
    np.testing.assert_array_equal(action, pi.action)
    np.testing.assert_array_equal(raw, pi.action)
    np.testing.assert_array_equal(log_prob, np.zeros(2))
    np.testing.assert_allclose(log_prob_from_raw(pi, jnp.zeros(2)), [-0.04, -0.16], rtol=1e-5)
    with pytest.raises(TypeError, match="no entropy"):
        entropy(pi)
