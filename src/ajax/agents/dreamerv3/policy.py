"""DreamerV3's continuous policy head (bounded_normal) and continue-head target (spec 000 B12, B16).

- bounded_normal: danijar/dreamerv3@e3f0224 embodied/jax/heads.py:146-155 and outs.py:161-179
  (Normal); configs.yaml:100 (minstd 0.1, maxstd 1.0, outscale 0.01). The mean is tanh-bounded and
  the std sigmoid-bounded, but the distribution itself is an unsquashed Normal: samples can leave
  [-1, 1] (the environment clips them), the log-density is the plain Normal one of the unclipped
  sample with no change-of-variables term, and the entropy is the Normal's. It is not a SAC-style
  tanh-Gaussian. The actor is trained by REINFORCE on sg(action) (agent.py imag_loss).
- continue target: dreamerv3/agent.py:174-177, c = (1 - 1/horizon) (1 - is_terminal), a soft
  label (contdisc), never is_last; trained with the Bernoulli cross-entropy of
  :func:`ajax.distributional.bernoulli_loss`.
"""

from __future__ import annotations

import math

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.dreamerv3.latents import categorical_index, is_noise, unimix_logits
from ajax.distributional import bernoulli_loss
from ajax.networks.blocks import linear

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class BoundedNormal(flax.struct.PyTreeNode):
    """A diagonal Normal(mean, std) over the last axis, with densities summed over that axis."""

    mean: jax.Array
    std: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        """mean + std * eps, unclipped (outs.py:170-172); ``key`` is a PRNG key or eps itself."""
        eps = key if is_noise(key) else jax.random.normal(key, self.mean.shape, jnp.float32)
        return eps * self.std + self.mean

    def mode(self) -> jax.Array:
        """The mean (outs.py:167-168)."""
        return self.mean

    def log_prob(self, x: jax.Array) -> jax.Array:
        """Normal log-density of ``x`` summed over the action axis, no squash term (outs.py:174-176)."""
        x = jnp.asarray(x, jnp.float32)
        return jnp.sum(jax.scipy.stats.norm.logpdf(x, self.mean, self.std), axis=-1)

    def entropy(self) -> jax.Array:
        """sum over the action axis of 0.5 log(2 pi std^2) + 0.5 (outs.py:178-179)."""
        return jnp.sum(jnp.log(self.std) + _HALF_LOG_2PI + 0.5, axis=-1)


def bounded_normal(
    mean_raw: jax.Array, std_raw: jax.Array, minstd: float = 0.1, maxstd: float = 1.0
) -> BoundedNormal:
    """Normal(tanh(m), (maxstd - minstd) sigmoid(s + 2) + minstd) from raw outputs (heads.py:146-155).

    The +2 makes a zero raw output give std = 0.9 sigmoid(2) + 0.1 = 0.8927.
    """
    if not 0.0 < minstd <= maxstd:
        raise ValueError(f"need 0 < minstd <= maxstd, got minstd={minstd}, maxstd={maxstd}.")
    mean_raw = jnp.asarray(mean_raw, jnp.float32)
    std_raw = jnp.asarray(std_raw, jnp.float32)
    if mean_raw.shape != std_raw.shape:
        raise ValueError(
            f"mean and std outputs differ in shape: {mean_raw.shape}, {std_raw.shape}."
        )
    std = (maxstd - minstd) * jax.nn.sigmoid(std_raw + 2.0) + minstd
    return BoundedNormal(mean=jnp.tanh(mean_raw), std=std)


class BoundedNormalHead(nn.Module):
    """The policy's output layers: two Linears (mean, std) at outscale 0.01 -> :func:`bounded_normal`.

    heads.py:146-151 with configs.yaml:100. Compose it after ``NormedMLP.dreamerv3(3, units)``.
    """

    action_dim: int
    minstd: float = 0.1
    maxstd: float = 1.0
    outscale: float = 0.01

    @nn.compact
    def __call__(self, x: jax.Array) -> BoundedNormal:
        """The action distribution for features ``x [..., F]`` (action axis last)."""
        mean = linear(self.action_dim, "trunc_normal_fan_in", outscale=self.outscale, name="mean")
        std = linear(self.action_dim, "trunc_normal_fan_in", outscale=self.outscale, name="std")
        return bounded_normal(mean(x), std(x), self.minstd, self.maxstd)


def continue_target(is_terminal: jax.Array, horizon: float = 333.0) -> jax.Array:
    """Soft continue label c = (1 - 1/horizon) (1 - is_terminal) (agent.py:174-176, contdisc).

    The discount 1 - 1/333 = 0.996997 is folded into the label, so the imagined continue
    probability is the per-step discount. Truncation (is_last) does not enter.
    """
    if horizon <= 1:
        raise ValueError(f"horizon must be > 1, got {horizon}.")
    return (1.0 - 1.0 / horizon) * (1.0 - jnp.asarray(is_terminal, jnp.float32))


def continue_loss(logits: jax.Array, is_terminal: jax.Array, horizon: float = 333.0) -> jax.Array:
    """Bernoulli cross-entropy of the continue head against :func:`continue_target`, elementwise.

    arXiv:2301.04104v2 Eq. 4 (continue predictor); agent.py:177. No reduction.
    """
    return bernoulli_loss(logits, jax.lax.stop_gradient(continue_target(is_terminal, horizon)))


class Categorical(flax.struct.PyTreeNode):
    """A categorical over the last axis of ``logits``, optionally mixed with a uniform.

    outs.py:208-240 (Categorical). DreamerV3's discrete policy is the plain one (heads.py:101-110:
    ``Head.categorical`` never passes its ``unimix``; only the ``onehot`` output mixes), so
    :meth:`create` defaults to ``unimix = 0``, which keeps the raw logits as the reference does.
    Samples and modes are integer action indices.
    """

    logits: jax.Array

    @classmethod
    def create(cls, raw: jax.Array, unimix: float = 0.0) -> Categorical:
        raw = jnp.asarray(raw, jnp.float32)
        return cls(unimix_logits(raw, unimix) if unimix else raw)

    def sample(self, key: jax.Array) -> jax.Array:
        """An index drawn with a PRNG key, or from given Gumbel noise (outs.py:222-224)."""
        return categorical_index(key, self.logits).astype(jnp.int32)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    def log_prob(self, index: jax.Array) -> jax.Array:
        """log softmax(logits)[index] (outs.py:226-228)."""
        index = jnp.asarray(index, jnp.int32)
        logp = jax.nn.log_softmax(self.logits, axis=-1)
        return jnp.take_along_axis(logp, index[..., None], axis=-1)[..., 0]

    def entropy(self) -> jax.Array:
        """-sum softmax log softmax (outs.py:230-234)."""
        logp = jax.nn.log_softmax(self.logits, axis=-1)
        return -jnp.sum(jax.nn.softmax(self.logits, axis=-1) * logp, axis=-1)
