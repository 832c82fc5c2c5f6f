"""TD-MPC2's tanh-Gaussian policy prior: bounded log std, squashed sample and log-probabilities.

Spec 000 B12 (T2 side); arXiv:2310.16828v2 Sec. 3.1; nicklashansen/tdmpc2 common/math.py and
common/world_model.py ``pi``. The head outputs (mu, raw); then

    log_std = log_std_min + (log_std_max - log_std_min) (tanh(raw) + 1) / 2,
    u = mu + exp(log_std) eps,  a = tanh(u),  eps ~ N(0, I)  (reparameterised).

Log-probabilities are written in terms of the noise eps, as in the reference. Both versions
subtract the squash correction sum(log(relu(1 - tanh(u)^2) + 1e-6)), flat at saturation, not the
exact log-det; they differ in how the action dimension n enters the entropy term:

- HEAD (e9f5932 world_model.py:144-184, math.py:12-29): ``log_prob = lp_g - squash`` with
  lp_g = sum(-eps^2/2 - log_std - ln(2 pi)/2), and the policy loss uses
  ``scaled_entropy = -log_prob * (n lp_g) / (log_prob + 1e-8)`` (about -n lp_g).
- paper era (5f6fade world_model.py:122-148, math.py:12-45): ``log_pi = n (sum(-eps^2/2 -
  log_std) - ln(2 pi)/2) - squash``, the Gaussian part scaled by n and ln(2 pi)/2 counted once.

n is the number of valid action dimensions (the reference masks unused ones in multi-task runs).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class SquashedGaussian(NamedTuple):
    """The policy prior at a latent: pre-tanh mean mu and bounded log std, each [..., A].

    ``mask`` [..., A] (1 = the task has this action dimension) is set in multi-task runs, where
    mu and log std are already masked and :func:`sample_squashed` masks the noise too
    (world_model.py ``pi``, HEAD :157-164), so an unused dimension acts 0.
    """

    mean: jax.Array
    log_std: jax.Array
    mask: jax.Array | None = None

    def num_dims(self) -> jax.Array | None:
        """The valid action dimensions n [...] (None: all of them)."""
        return None if self.mask is None else jnp.sum(self.mask, axis=-1)


class PolicySample(NamedTuple):
    """A reparameterised draw: the noise eps, pre-tanh u = mu + sigma eps and action tanh(u)."""

    eps: jax.Array
    u: jax.Array
    action: jax.Array


def bounded_log_std(
    raw: jax.Array, log_std_min: float = -10.0, log_std_max: float = 2.0
) -> jax.Array:
    """log_std_min + (log_std_max - log_std_min) (tanh(raw) + 1) / 2, in (min, max).

    math.py ``log_std`` (HEAD :12-13; 5f6fade :12-14); -4 at raw = 0 with the default bounds.
    """
    if not log_std_min < log_std_max:
        raise ValueError(f"need log_std_min < log_std_max, got {log_std_min}, {log_std_max}")
    return log_std_min + 0.5 * (log_std_max - log_std_min) * (jnp.tanh(raw) + 1.0)


def sample_squashed(dist: SquashedGaussian, eps: jax.Array) -> PolicySample:
    """a = tanh(mu + exp(log_std) eps): the reparameterised draw for the given noise eps.

    world_model.py ``pi`` (HEAD :173-174; 5f6fade :145-146). Gradients reach mu and log_std
    through u; eps is a constant (draw it with ``jax.random.normal``).
    """
    if eps.shape != dist.mean.shape:
        raise ValueError(f"eps shape {eps.shape} must equal the mean's {dist.mean.shape}")
    if dist.mask is not None:
        eps = eps * dist.mask
    u = dist.mean + jnp.exp(dist.log_std) * eps
    return PolicySample(eps=eps, u=u, action=jnp.tanh(u))


def gaussian_logprob(eps: jax.Array, log_std: jax.Array) -> jax.Array:
    """lp_g = sum_i(-eps_i^2 / 2 - log_std_i - ln(2 pi) / 2) over the last axis.

    The diagonal Gaussian log-density of u = mu + sigma eps; HEAD math.py:16-20.
    """
    return jnp.sum(-0.5 * jnp.square(eps) - log_std - _HALF_LOG_2PI, axis=-1)


def tanh_squash_logdet(u: jax.Array, eps: float = 1e-6) -> jax.Array:
    """sum_i log(relu(1 - tanh(u_i)^2) + eps): TD-MPC2's tanh Jacobian term, over the last axis.

    math.py ``squash`` (HEAD :23-29; 5f6fade :36-45). The +eps keeps it finite but flat for
    |u| > ~7, where the exact log-det has slope -2 (false friend 2 of spec 000 B12).
    """
    return jnp.sum(jnp.log(jax.nn.relu(1.0 - jnp.square(jnp.tanh(u))) + eps), axis=-1)


def _num_dims(sample: PolicySample, n: jax.Array | float | None) -> jax.Array | float:
    return sample.eps.shape[-1] if n is None else n


def head_log_prob(sample: PolicySample, log_std: jax.Array) -> jax.Array:
    """HEAD's log_prob = lp_g - tanh_squash_logdet(u) (world_model.py:166, :174); entropy = -it."""
    return gaussian_logprob(sample.eps, log_std) - tanh_squash_logdet(sample.u)


def head_scaled_entropy(
    sample: PolicySample, log_std: jax.Array, n: jax.Array | float | None = None
) -> jax.Array:
    """HEAD's entropy bonus -log_prob * (n lp_g) / (log_prob + 1e-8), about -n lp_g.

    world_model.py:168-182 (``scaled_entropy``), used by update_pi at tdmpc2.py:226. The ratio is
    not stop-gradiented, as in the reference. ``n`` defaults to the action dimension.
    """
    lp_g = gaussian_logprob(sample.eps, log_std)
    log_prob = lp_g - tanh_squash_logdet(sample.u)
    scaled = lp_g * _num_dims(sample, n)
    return -log_prob * (scaled / (log_prob + 1e-8))


def pe_log_pi(
    sample: PolicySample, log_std: jax.Array, n: jax.Array | float | None = None
) -> jax.Array:
    """Paper-era log_pi = n (sum(-eps^2/2 - log_std) - ln(2 pi)/2) - tanh_squash_logdet(u).

    5f6fade math.py:17-45 and world_model.py:144-146 (``gaussian_logprob(eps, log_std, size)``
    then ``squash``); its update_pi adds entropy_coef * log_pi (tdmpc2.py:193). ``n`` defaults to the action dimension.
    """
    residual = jnp.sum(-0.5 * jnp.square(sample.eps) - log_std, axis=-1)
    return (residual - _HALF_LOG_2PI) * _num_dims(sample, n) - tanh_squash_logdet(sample.u)
