"""Batch Renormalization as CrossQ runs it (re-exported by :mod:`ajax.networks.utils`)."""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

Initializer = Callable[..., jax.Array]


def _safe_sqrt(v: jax.Array) -> jax.Array:
    """sqrt(v) with gradient 0 instead of inf (and NaN downstream) where v == 0."""
    positive = v > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, v, 1.0)), 0.0)


def renormalised_moments(
    batch_mean: jax.Array,
    batch_var: jax.Array,
    running_mean: jax.Array,
    running_var: jax.Array,
    epsilon: float,
    r_max: float,
    d_max: float,
) -> tuple[jax.Array, jax.Array]:
    """The mean and variance that make batch normalisation a batch renormalisation.

    Ioffe (2017) Alg. 1 in CrossQ's form (adityab/CrossQ@a318a26 sbx/sac/policies.py:150-162):
    r = clip(sigma_B / sigma, 1/r_max, r_max) and d = clip((mu_B - mu) / sigma, -d_max, d_max)
    with sigma = sqrt(var + eps), both held constant; normalising by mean mu_B - d sqrt(var_B) / r
    and variance var_B / r^2 (eps added later) is (x - mu_B) r / sqrt(var_B) + d up to eps.
    """
    std = jnp.sqrt(batch_var + epsilon)
    running_std = jnp.sqrt(running_var + epsilon)
    r = jax.lax.stop_gradient(jnp.clip(std / running_std, 1.0 / r_max, r_max))
    d = jax.lax.stop_gradient(jnp.clip((batch_mean - running_mean) / running_std, -d_max, d_max))
    return batch_mean - d * _safe_sqrt(batch_var) / r, batch_var / r**2


class BatchRenorm(nn.Module):
    """Batch Renormalization (Ioffe, NeurIPS 2017) as CrossQ runs it over the last axis.

    adityab/CrossQ@a318a26, sbx/sac/policies.py:37-186. For its first ``warmup_steps`` training
    passes it is batch norm; afterwards the batch moments are corrected towards the running ones
    (:func:`renormalised_moments`). It trains, normalising by the batch and updating ``mean``,
    ``var`` and ``steps`` in ``batch_stats``, exactly when that collection is mutable; otherwise it
    normalises by the running moments. ``init`` normalises by the batch and updates nothing.
    Running moments start at 0 and 1 and move by ``1 - momentum`` towards the biased batch moments
    (CrossQ's train.py passes momentum 0.99). Variances are E[x^2] - E[x]^2 by default, as in
    CrossQ; a feature with zero batch variance gets gradient 0 where CrossQ's gets NaN.
    """

    momentum: float = 0.99
    epsilon: float = 1e-3
    warmup_steps: int = 100_000
    r_max: float = 3.0
    d_max: float = 5.0
    use_scale: bool = True
    use_bias: bool = True
    use_fast_variance: bool = True
    scale_init: Initializer = nn.initializers.ones
    bias_init: Initializer = nn.initializers.zeros

    def _check(self, x: jax.Array) -> None:
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")
        if self.epsilon <= 0 or self.warmup_steps < 0:
            raise ValueError(
                f"need epsilon > 0, warmup_steps >= 0: {self.epsilon}, {self.warmup_steps}"
            )
        if self.r_max < 1.0 or self.d_max < 0.0:
            raise ValueError(f"need r_max >= 1 and d_max >= 0, got {self.r_max}, {self.d_max}")
        if x.ndim < 1:
            raise ValueError("BatchRenorm needs an input with a feature axis, got a scalar")

    def _batch_moments(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        if x.ndim < 2:
            raise ValueError(f"training BatchRenorm needs a batch axis, got shape {x.shape}")
        axes = tuple(range(x.ndim - 1))
        mean = jnp.mean(x, axes)
        if self.use_fast_variance:
            return mean, jnp.maximum(0.0, jnp.mean(x * x, axes) - mean * mean)
        return mean, jnp.mean(jnp.square(x - mean), axes)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Normalise ``x [..., F]`` feature-wise; leading axes form the batch when training."""
        self._check(x)
        x = jnp.asarray(x, jnp.float32)
        shape = x.shape[-1:]
        ra_mean = self.variable("batch_stats", "mean", lambda: jnp.zeros(shape, jnp.float32))
        ra_var = self.variable("batch_stats", "var", lambda: jnp.ones(shape, jnp.float32))
        steps = self.variable("batch_stats", "steps", lambda: jnp.zeros((), jnp.int32))
        if not self.is_mutable_collection("batch_stats"):
            mean, var = ra_mean.value, ra_var.value
        else:
            mean, var = batch_mean, batch_var = self._batch_moments(x)
            if not self.is_initializing():
                renorm = renormalised_moments(
                    batch_mean, batch_var, ra_mean.value, ra_var.value,
                    self.epsilon, self.r_max, self.d_max,
                )  # fmt: skip
                warm = steps.value >= self.warmup_steps
                mean, var = jnp.where(warm, renorm[0], mean), jnp.where(warm, renorm[1], var)
                m = self.momentum
                ra_mean.value = m * ra_mean.value + (1.0 - m) * batch_mean
                ra_var.value = m * ra_var.value + (1.0 - m) * batch_var
                steps.value = steps.value + 1
        mul = jax.lax.rsqrt(var + self.epsilon)
        if self.use_scale:
            mul = mul * self.param("scale", self.scale_init, shape, jnp.float32)
        y = (x - mean) * mul
        if self.use_bias:
            y = y + self.param("bias", self.bias_init, shape, jnp.float32)
        return y
