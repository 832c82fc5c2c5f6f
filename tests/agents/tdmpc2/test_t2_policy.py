"""Spec 000 B12, TD-MPC2 rows: bounded log std, squashed sample, HEAD and paper-era log-probs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.tdmpc2.config import TDMPC2Config
from ajax.agents.tdmpc2.networks import WorldModel
from ajax.agents.tdmpc2.policy import (
    SquashedGaussian,
    bounded_log_std,
    gaussian_logprob,
    head_log_prob,
    head_scaled_entropy,
    pe_log_pi,
    sample_squashed,
    tanh_squash_logdet,
)

RTOL = 1e-6
EPS = jnp.array([0.5, -1.0])
MU = jnp.array([0.1, -0.2])
RAW = jnp.array([0.0, 1.0])


def _worked_example():
    log_std = bounded_log_std(RAW)
    return log_std, sample_squashed(SquashedGaussian(MU, log_std), EPS)


def test_b12_t2_log_std_bounds():
    out = bounded_log_std(jnp.array([0.0, jnp.inf, -jnp.inf]))
    np.testing.assert_array_equal(np.asarray(out), [-4.0, 2.0, -10.0])
    # Parametrised bounds: the midpoint at raw 0 and the limits move with them.
    out = bounded_log_std(jnp.array([0.0, jnp.inf, -jnp.inf]), -5.0, 1.0)
    np.testing.assert_array_equal(np.asarray(out), [-2.0, 1.0, -5.0])


def test_b12_t2_worked_example():
    log_std, sample = _worked_example()
    np.testing.assert_allclose(log_std, [-4.0, 0.5695648], rtol=RTOL)
    np.testing.assert_allclose(sample.u, [0.10915782, -1.9674977], rtol=RTOL)
    np.testing.assert_allclose(sample.action, [0.10872632, -0.9616578], rtol=RTOL)
    np.testing.assert_allclose(gaussian_logprob(EPS, log_std), 0.967558, rtol=RTOL)
    np.testing.assert_allclose(tanh_squash_logdet(sample.u), -2.5992928, rtol=RTOL)


def test_b12_t2_head_and_pe_log_probs():
    """Which formula gives which pinned number (read from both references).

    HEAD e9f5932 world_model.py:166-182: log_prob = lp_g - squash = 3.5668507 and
    scaled_entropy = -log_prob * n lp_g / (log_prob + 1e-8) = -1.935116 (= -n lp_g to 1e-8).
    5f6fade math.py:27-45: log_pi = n (sum(-eps^2/2 - log_std) - ln(2 pi)/2) - squash = 6.372286.
    """
    log_std, sample = _worked_example()
    np.testing.assert_allclose(head_log_prob(sample, log_std), 3.5668507, rtol=RTOL)
    np.testing.assert_allclose(head_scaled_entropy(sample, log_std), -1.935116, rtol=RTOL)
    np.testing.assert_allclose(pe_log_pi(sample, log_std), 6.372286, rtol=RTOL)
    # The two versions differ: PE counts ln(2 pi)/2 once and scales the Gaussian part by n.
    lp_g = gaussian_logprob(EPS, log_std)
    np.testing.assert_allclose(head_scaled_entropy(sample, log_std), -2 * lp_g, rtol=1e-6)
    # An explicit n (valid action dims in multi-task runs) replaces the action dimension.
    np.testing.assert_allclose(
        pe_log_pi(sample, log_std, n=2.0), pe_log_pi(sample, log_std), rtol=RTOL
    )
    assert abs(float(pe_log_pi(sample, log_std, n=1.0)) - 6.372286) > 1.0


def test_b12_t2_reparameterised_gradients():
    """da/dmu = 1 - tanh(u)^2 and da/dlog_std = (1 - tanh(u)^2) sigma eps: the noise is fixed."""
    log_std, sample = _worked_example()

    def action(mu, ls):
        return sample_squashed(SquashedGaussian(mu, ls), EPS).action.sum()

    g_mu, g_ls = jax.grad(action, argnums=(0, 1))(MU, log_std)
    jac = 1.0 - jnp.tanh(sample.u) ** 2
    np.testing.assert_allclose(g_mu, jac, rtol=1e-6)
    np.testing.assert_allclose(g_ls, jac * jnp.exp(log_std) * EPS, rtol=1e-6)


def test_b12_t2_squash_logdet_is_flat_at_saturation():
    """False friend 2: +1e-6 inside the log makes the correction constant log(1e-6) for |u| > 9."""
    u = jnp.array([[9.0], [12.0]])
    np.testing.assert_allclose(tanh_squash_logdet(u), np.log(1e-6), rtol=1e-6)
    assert float(jax.grad(lambda x: tanh_squash_logdet(x).sum())(u).max()) == 0.0


def test_b12_t2_world_model_pi_head():
    """WorldModel.pi returns the bounded log std of its head (world_model.py:154-155)."""
    cfg = TDMPC2Config(enc_dim=16, mlp_dim=16, latent_dim=16)
    model = WorldModel(cfg, action_dim=3)
    z = jnp.zeros((4, cfg.latent_dim))
    params = jax.jit(lambda k: model.init(k, z, method="pi"))(jax.random.key(0))
    assert set(params["params"]) == {"pi"}
    dist = jax.jit(lambda p: model.apply(p, z, method="pi"))(params)
    assert dist.mean.shape == dist.log_std.shape == (4, 3)
    # z = 0 gives a zero trunk input: the head's output is its bias (0), so log std = -4.
    np.testing.assert_allclose(dist.log_std, -4.0, rtol=1e-6)
    bad = SquashedGaussian(dist.mean, dist.log_std)
    with pytest.raises(ValueError, match="eps shape"):
        sample_squashed(bad, jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match="log_std_min < log_std_max"):
        bounded_log_std(RAW, 2.0, -10.0)
