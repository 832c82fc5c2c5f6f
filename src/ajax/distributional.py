"""Symlog transforms and two-hot discrete regression (DreamerV3, TD-MPC2).

Both world-model agents predict rewards and values as a categorical distribution over fixed bins,
trained with a cross-entropy against a two-hot target: the scalar target is split between its two
neighbouring bins by linear interpolation.

- DreamerV3 (arXiv:2301.04104v2 Eqs. 9-12; danijar/dreamerv3@2411f7d:dreamerv3/jaxutils.py:210-274,
  nets.py:462-466): 255 bins at symexp(linspace(-20, 20)), raw-space interpolation, raw-space
  expectation.
- TD-MPC2 (arXiv:2310.16828v2 Sec. 3.1; nicklashansen/tdmpc2@5f6fade:tdmpc2/common/math.py:5-9,
  66-95): 101 bins at linspace(-10, 10) in symlog space, the target is clip(symlog(y)), the
  prediction is symexp of the symlog-space expectation.

:class:`TwoHot` holds exactly the three parameters in which they differ (bin count, limit and the
interpolation space). Interpolation space and decode order matter: symexp(E[b]) != E[symexp(b)].

Bins are built by mirroring their negative half in float64 numpy and rounding to float32 once, so
the middle bin is exactly 0, the bins are exactly antisymmetric and they are the same constants
eagerly, under jit and on every backend. DreamerV3's own float32 jnp bins differ by up to 1.3e-6
relative, torch.linspace's by up to 4.8e-7 (deviations D22, T24).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

_TRANSFORMS = ("identity", "symlog")


def symlog(x: jax.Array) -> jax.Array:
    """sign(x) * log(1 + |x|), elementwise and dtype-preserving.

    DreamerV3 Eq. 9 (2411f7d:dreamerv3/jaxutils.py:76-77); TD-MPC2 math.py:48-54 writes
    log(1 + |x|), equal up to rounding. As in both references the derivative at exactly 0 is 0
    (the product rule meets sign(0) = 0); the one-sided limits are 1.
    """
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


def symexp(x: jax.Array) -> jax.Array:
    """sign(x) * (exp(|x|) - 1), the inverse of :func:`symlog`.

    DreamerV3 2411f7d:dreamerv3/jaxutils.py:80-81; TD-MPC2 math.py:57-63. Its derivative at exactly
    0 is 0 for the same reason as symlog's.
    """
    return jnp.sign(x) * jnp.expm1(jnp.abs(x))


def _check_bins(bins) -> None:
    """Refuse bins that are not 1-D, strictly increasing and exactly antisymmetric (if concrete)."""
    try:
        b = np.asarray(bins)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return  # traced bins cannot be inspected; the caller vouches for them
    if b.ndim != 1 or b.shape[0] < 2:
        raise ValueError(f"bins must be a 1-D array of at least 2 values, got shape {b.shape}.")
    if not np.all(np.diff(b) > 0):
        raise ValueError("bins must be strictly increasing; sort them (and drop duplicates).")
    if not np.array_equal(b, -b[::-1]):
        raise ValueError(
            "bins must be exactly antisymmetric (bins == -bins[::-1]); build them by mirroring "
            "their negative half, as TwoHot.bins() does."
        )


def _two_hot(y: jax.Array, bins) -> jax.Array:
    """Unchecked body of :func:`two_hot_weights`."""
    bins = jnp.asarray(bins, jnp.float32)
    n = bins.shape[0]
    y = jnp.asarray(y, jnp.float32)
    below = jnp.sum(bins <= y[..., None], -1, dtype=jnp.int32) - 1
    above = n - jnp.sum(bins > y[..., None], -1, dtype=jnp.int32)
    below = jnp.clip(below, 0, n - 1)
    above = jnp.clip(above, 0, n - 1)
    equal = below == above
    # Distances to both neighbours, each weight being the other's share: this is DreamerV3's
    # arithmetic op for op, so the weights are bit-identical to its log_prob targets.
    to_below = jnp.where(equal, 1.0, jnp.abs(bins[below] - y))
    to_above = jnp.where(equal, 1.0, jnp.abs(bins[above] - y))
    total = to_below + to_above
    w_below = to_above / total
    w_above = to_below / total
    return (
        jax.nn.one_hot(below, n, dtype=jnp.float32) * w_below[..., None]
        + jax.nn.one_hot(above, n, dtype=jnp.float32) * w_above[..., None]
    )


def two_hot_weights(y: jax.Array, bins) -> jax.Array:
    """Two-hot weights [..., K] of targets y [...] over sorted bins [K].

    DreamerV3's interpolation (2411f7d:dreamerv3/jaxutils.py:257-271; spec 000 B2): the target is
    split linearly between b_below <= y < b_above; a target beyond either end puts all its mass on
    the edge bin, and a target equal to a bin puts all its mass on that bin. On a uniform grid this
    is TD-MPC2's floor formula (math.py:72-77) in exact arithmetic, and in float32 the more
    accurate of the two. Concrete bins are checked (strictly increasing, exactly antisymmetric).
    """
    _check_bins(bins)
    return _two_hot(y, bins)


@functools.cache
def _mirrored_bins(num_bins: int, limit: float, transform: str) -> np.ndarray:
    """Bins from their negative half, in float64, rounded to float32 once (read-only)."""
    half = np.linspace(-limit, 0.0, (num_bins + 1) // 2, dtype=np.float64)
    if transform == "identity":
        half = np.sign(half) * np.expm1(np.abs(half))
    bins = np.concatenate([half, -half[:-1][::-1]]).astype(np.float32)
    bins.setflags(write=False)
    return bins


@dataclasses.dataclass(frozen=True)
class TwoHot:
    """Two-hot discrete regression over symlog-spaced bins.

    Frozen and hashable: usable as a jit static argument or a field of a frozen config. Prefer the
    paper constructors :meth:`dreamerv3` and :meth:`tdmpc2`. All methods compute in float32.

    Attributes:
        num_bins: number of bins n; odd and >= 3, so that the middle bin is 0 and every other bin
            has a mirror partner for the symmetric expectation.
        limit: the bins span [-limit, limit] in symlog space ([-symexp(limit), symexp(limit)] raw).
        transform: interpolation and expectation space. "identity" (DreamerV3): raw bins
            symexp(linspace(-limit, limit, n)) and raw targets. "symlog" (TD-MPC2): bins
            linspace(-limit, limit, n), target clip(symlog(y)), prediction symexp(E_p[bins]).
    """

    num_bins: int
    limit: float
    transform: Literal["identity", "symlog"]

    def __post_init__(self):
        if isinstance(self.num_bins, bool) or not isinstance(self.num_bins, int | np.integer):
            raise TypeError(f"num_bins must be an int, got {type(self.num_bins).__name__}.")
        if self.num_bins < 3 or self.num_bins % 2 == 0:
            raise ValueError(
                f"num_bins must be odd and >= 3 (the middle bin is 0), got {self.num_bins}; "
                "e.g. 255 (DreamerV3) or 101 (TD-MPC2)."
            )
        if not np.isfinite(self.limit) or self.limit <= 0:
            raise ValueError(f"limit must be a finite positive number, got {self.limit}.")
        if self.transform not in _TRANSFORMS:
            raise ValueError(f"transform must be one of {_TRANSFORMS}, got {self.transform!r}.")

    @classmethod
    def dreamerv3(cls, num_bins: int = 255) -> TwoHot:
        """DreamerV3's symexp two-hot: raw bins symexp(linspace(-20, 20, n)), raw interpolation.

        2411f7d:dreamerv3/nets.py:462-466 and jaxutils.py:210-274; bins: 255 in configs.yaml.
        """
        return cls(num_bins=num_bins, limit=20.0, transform="identity")

    @classmethod
    def tdmpc2(cls, num_bins: int = 101, limit: float = 10.0) -> TwoHot:
        """TD-MPC2's two_hot: bins linspace(-limit, limit, n) in symlog space (step 0.2).

        5f6fade:tdmpc2/common/math.py:66-95. TD-MPC2 configures vmin = -10 and vmax = 10 apart
        (config.yaml:48-50); only the symmetric range is representable here (deviation T24).
        """
        return cls(num_bins=num_bins, limit=limit, transform="symlog")

    def bins(self) -> np.ndarray:
        """The [num_bins] float32 bin locations in the interpolation space (a read-only constant).

        The negative half linspace(-limit, 0, (n + 1) // 2), mapped by symexp for "identity",
        concatenated with its negated mirror (DreamerV3 nets.py:464-466), so bins[n // 2] == 0 and
        bins == -bins[::-1] exactly.
        """
        return _mirrored_bins(int(self.num_bins), float(self.limit), self.transform)

    def _forward(self, y: jax.Array) -> jax.Array:
        y = jnp.asarray(y, jnp.float32)
        if self.transform == "symlog":
            return jnp.clip(symlog(y), -self.limit, self.limit)
        return y

    def _check_logits(self, logits: jax.Array) -> jax.Array:
        logits = jnp.asarray(logits, jnp.float32)
        if logits.ndim == 0 or logits.shape[-1] != self.num_bins:
            raise ValueError(
                f"logits must have last axis num_bins={self.num_bins}, got shape {logits.shape}."
            )
        return logits

    def encode(self, y: jax.Array) -> jax.Array:
        """Two-hot weights [..., num_bins] of scalar targets y [...] (see :func:`two_hot_weights`).

        The target is first mapped to the interpolation space (TD-MPC2: clip(symlog(y)), so a
        clipped target lands exactly on the edge bin, as its floor formula does).
        """
        return _two_hot(self._forward(y), self.bins())

    def decode(self, logits: jax.Array) -> jax.Array:
        """Predicted scalars [...] from logits [..., num_bins]: inverse_transform(E_p[bins]).

        DreamerV3's symmetric expectation (2411f7d:dreamerv3/jaxutils.py:226-243): with b_m = 0 and
        b_i = -b_j for mirror bins (i, j), its p_m b_m + sum (p_i b_i + p_j b_j) equals
        sum_j (p_j - p_i) b_j. The difference is taken before multiplying, so mirror-equal
        probabilities (a zero-initialised head) give exactly 0 even when XLA fuses the products
        into multiply-adds under jit, which breaks the reference's cancellation (deviation D22).
        """
        logits = self._check_logits(logits)
        probs = jax.nn.softmax(logits, axis=-1)
        m = self.num_bins // 2
        upper = jnp.asarray(self.bins()[m + 1 :])
        diff = probs[..., m + 1 :] - probs[..., :m][..., ::-1]
        mean = jnp.sum(diff * upper, axis=-1)
        return symexp(mean) if self.transform == "symlog" else mean

    def loss(self, logits: jax.Array, y: jax.Array) -> jax.Array:
        """Soft cross-entropy -sum(sg(encode(y)) * log_softmax(logits), -1), shape [...].

        Log-probabilities as logits - logsumexp(logits) (DreamerV3 jaxutils.py:272-274; TD-MPC2's
        F.log_softmax subtracts the max first, equal up to float32 rounding). The target weights
        carry no gradient, as in both references' callers. No reduction over the batch.
        """
        logits = self._check_logits(logits)
        y = jnp.asarray(y, jnp.float32)
        if logits.shape[:-1] != y.shape:
            raise ValueError(
                f"logits batch shape {logits.shape[:-1]} must equal target shape {y.shape}."
            )
        target = jax.lax.stop_gradient(self.encode(y))
        log_probs = logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)
        return -jnp.sum(target * log_probs, axis=-1)


def bernoulli_loss(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Binary cross-entropy -[c log sigmoid(l) + (1 - c) log sigmoid(-l)], elementwise.

    Spec 000 B16: DreamerV3's continue head (soft label c = 0.997 (1 - is_terminal), D3 2.13) and
    TD-MPC2's termination head (hard labels, T2 1.7). Soft labels in [0, 1] are allowed; labels
    carry no gradient only if the caller stops it. No reduction.
    """
    logits = jnp.asarray(logits, jnp.float32)
    labels = jnp.asarray(labels, jnp.float32)
    if logits.shape != labels.shape:
        raise ValueError(f"logits shape {logits.shape} must equal labels shape {labels.shape}.")
    return -(labels * jax.nn.log_sigmoid(logits) + (1.0 - labels) * jax.nn.log_sigmoid(-logits))
