"""Percentile-range scale normalisers (DreamerV3 retnorm, TD-MPC2 RunningScale).

Both world-model agents divide a quantity by a running estimate of the spread between its 5th and
95th percentiles, floored at 1, so that the actor's learning signal does not depend on the reward
scale and small returns are not amplified. The papers describe the same rule; the code differs:

- :class:`ReturnNormalizer` (arXiv:2301.04104v2 Eq. 7; danijar/dreamerv3@2411f7d
  dreamerv3/jaxutils.py:301-395, Moments(impl='perc', rate=0.01, limit=1.0)): EMAs of P5 and P95
  from 0, no bias correction, the floor applied when the scale is read.
- :class:`RunningScale` (arXiv:2310.16828v2 Sec. 3.1; nicklashansen/tdmpc2@5f6fade
  tdmpc2/common/scale.py:4-45): one EMA from 1 of the range floored *before* averaging.

Clamping before or after the EMA and starting at 0 or 1 give different scales on the same data
(ranges alternating 0 and 3: 1.5075 vs 2.0050). In both references the statistics are updated
before the scale is read in the same step, so the current batch counts. Percentiles use
jnp.percentile(method="linear") over all elements of the stop-gradiented float32 input (TD-MPC2's
sort-and-interpolate _percentile is the same formula on its (B, 1) batch). No gradient passes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax.jax_helpers import known


def _check_rate(rate: float) -> None:
    if known(rate) and not 0.0 <= rate <= 1.0:  # a sweep's traced rate was checked concrete
        raise ValueError(f"rate must lie in [0, 1] (an EMA step size), got {rate}.")


def _percentiles(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """P5 and P95 over all elements of sg(f32(x)), linear interpolation."""
    x = jax.lax.stop_gradient(jnp.asarray(x, jnp.float32)).reshape(-1)
    if x.size == 0:
        raise ValueError("cannot take percentiles of an empty array.")
    # Two calls, as the reference makes them (XLA shares the sort).
    return jnp.percentile(x, 5.0, method="linear"), jnp.percentile(x, 95.0, method="linear")


class ReturnNormalizer(struct.PyTreeNode):
    """DreamerV3 return normaliser state; see the module docstring.

    Use ``norm = norm.update(returns)`` then ``norm.scale()`` in the same step (update, then
    read). DreamerV3 divides advantages by the scale and does not subtract the offset ``lo``.

    Attributes:
        lo, hi: float32 scalar EMAs of the 5th and 95th percentiles, both 0 at :meth:`create`.
        rate: EMA rate (0.01, i.e. decay 0.99); static.
        limit: floor of the scale (1.0); static.
    """

    lo: jax.Array
    hi: jax.Array
    rate: float = struct.field(pytree_node=False, default=0.01)
    limit: float = struct.field(pytree_node=False, default=1.0)

    def __post_init__(self):
        _check_rate(self.rate)
        if not self.limit > 0:
            raise ValueError(f"limit (the scale's floor) must be positive, got {self.limit}.")

    @classmethod
    def create(cls, rate: float = 0.01, limit: float = 1.0) -> ReturnNormalizer:
        """Initial state lo = hi = 0 (jaxutils.py:319-321).

        Two distinct arrays rather than one aliased twice, so that a state holding the normaliser
        can be donated to a jitted function.
        """
        return cls(
            lo=jnp.zeros((), jnp.float32), hi=jnp.zeros((), jnp.float32), rate=rate, limit=limit
        )

    def update(self, x: jax.Array) -> ReturnNormalizer:
        """Fold P5 and P95 of all elements of x into the EMAs (jaxutils.py:356-359), no debias.

        optax.incremental_update adds the reference's two products in the other order, which is
        exact: floating-point addition commutes.
        """
        p_lo, p_hi = _percentiles(x)
        return self.replace(
            lo=optax.incremental_update(p_lo, self.lo, self.rate),
            hi=optax.incremental_update(p_hi, self.hi, self.rate),
        )

    def scale(self) -> jax.Array:
        """max(limit, hi - lo), stop-gradiented (jaxutils.py:382-386)."""
        return jax.lax.stop_gradient(jnp.maximum(self.limit, self.hi - self.lo))


class RunningScale(struct.PyTreeNode):
    """TD-MPC2 running Q scale state; see the module docstring.

    Use ``scale = scale.update(q)`` then ``q / scale.scale()`` in the same step (tdmpc2.py:188-189),
    with q the (B, 1) batch of t = 0 policy-loss Q values.

    Attributes:
        value: the float32 scale S, 1 at :meth:`create` and never below 1.
        rate: EMA rate tau (0.01; TD-MPC2 reuses the target-network tau); static.
    """

    value: jax.Array
    rate: float = struct.field(pytree_node=False, default=0.01)

    def __post_init__(self):
        _check_rate(self.rate)

    @classmethod
    def create(cls, rate: float = 0.01) -> RunningScale:
        """Initial state S = 1 (scale.py:9)."""
        return cls(value=jnp.ones((), jnp.float32), rate=rate)

    def update(self, x: jax.Array) -> RunningScale:
        """S <- (1 - rate) S + rate max(1, P95(x) - P5(x)) (scale.py:37-40).

        The range is floored before it enters the average, so S never drops below 1. torch's
        lerp_ computes S + rate (v - S), the same average up to float32 rounding (deviation T25).
        """
        p_lo, p_hi = _percentiles(x)
        floored = jnp.maximum(1.0, p_hi - p_lo)
        return self.replace(value=optax.incremental_update(floored, self.value, self.rate))

    def scale(self) -> jax.Array:
        """The current scale S, stop-gradiented."""
        return jax.lax.stop_gradient(self.value)
