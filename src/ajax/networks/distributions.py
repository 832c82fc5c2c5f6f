"""Policy distributions shared by the agents.

:class:`Squash` bounds any continuous policy to (-1, 1) with tanh; :func:`squash` also takes a
:class:`Deterministic` policy. The module functions below it (:func:`latent`,
:func:`sample_with_raw`, :func:`log_prob_from_raw`, :func:`entropy`) read any policy, squashed or
not, so callers need not check which kind they hold.
"""

from __future__ import annotations

import distrax
import jax
import jax.numpy as jnp
from flax import struct

Array = jax.Array


@struct.dataclass
class Deterministic:
    """A point-mass policy (TD3's) that answers the distrax calls the agents make.

    It is a pytree of its action, as distrax distributions are pytrees of their parameters, so a
    replayed bootstrap can gather its steps with ``jax.tree.map`` and it crosses ``jit``.
    """

    action: Array

    def mean(self) -> Array:
        """The action."""
        return self.action

    def mode(self) -> Array:
        """The action."""
        return self.action

    def sample(self, *, seed: Array | None = None, sample_shape: tuple[int, ...] = ()) -> Array:
        """The action (``seed`` unused), broadcast to ``sample_shape`` in front."""
        del seed
        shape = tuple(sample_shape) + self.action.shape
        return jnp.broadcast_to(self.action, shape)

    def log_prob(self, x: Array) -> Array:
        """Negative squared error to the action, per dimension: (..., A) -> (..., A).

        A point mass has density +inf at its action and -inf elsewhere; this proxy makes
        maximising ``log_prob`` the same as regressing the action onto ``x`` by MSE (behaviour
        cloning). It is not summed over the action dimensions: the caller reduces.
        """
        return -jnp.square(x - self.action)

    def sample_and_log_prob(
        self, *, seed: Array | None = None, sample_shape: tuple[int, ...] = ()
    ) -> tuple[Array, Array]:
        """The action and its (zero) proxy log-probability."""
        action = self.sample(seed=seed, sample_shape=sample_shape)
        return action, self.log_prob(action)


def _check_eps(eps, what: str) -> None:
    # Only static numbers can be checked; a traced eps is the caller's responsibility.
    if isinstance(eps, int | float) and not eps >= 0.0:
        raise ValueError(f"{what} must be >= 0 (0 for the exact tanh log-det), got {eps}")


class GuardedTanh(distrax.Tanh):
    """tanh whose log-det-Jacobian is ``log(1 - tanh(x)^2 + eps)``.

    The guarded form of stable-baselines3's squashed Gaussian (eps 1e-6) and REDQ (core.py:232):
    ``eps`` keeps the log finite once tanh saturates, at the price of a bias of about
    ``eps / (1 - tanh(x)^2)`` near the rails. distrax's :class:`distrax.Tanh` is exact.
    """

    def __init__(self, eps: float):
        _check_eps(eps, "GuardedTanh eps")
        super().__init__()
        self.eps = eps

    def forward_log_det_jacobian(self, x: Array) -> Array:
        """``log(1 - tanh(x)^2 + eps)``."""
        return jnp.log(1.0 - jnp.square(jnp.tanh(x)) + self.eps)

    def forward_and_log_det(self, x: Array) -> tuple[Array, Array]:
        """``(tanh(x), log(1 - tanh(x)^2 + eps))``."""
        y = jnp.tanh(x)
        return y, jnp.log(1.0 - jnp.square(y) + self.eps)

    def inverse_and_log_det(self, y: Array) -> tuple[Array, Array]:
        """``(arctanh(y), -log(1 - y^2 + eps))``."""
        return jnp.arctanh(y), -jnp.log(1.0 - jnp.square(y) + self.eps)

    def same_as(self, other: distrax.Bijector) -> bool:
        """Whether ``other`` is a GuardedTanh with the same eps."""
        return type(other) is GuardedTanh and other.eps == self.eps


def _tanh_bijector(event_ndims: int, log_det_eps: float) -> distrax.Bijector:
    tanh = distrax.Tanh() if log_det_eps == 0.0 else GuardedTanh(log_det_eps)
    # Transformed wants the bijector to span the latent's event dimensions exactly.
    return tanh if event_ndims == 0 else distrax.Block(tanh, ndims=event_ndims)


class Squash(distrax.Transformed):
    """tanh of a policy distribution (its latent), bounded to (-1, 1).

    The latent is any distrax distribution; a :class:`distrax.Block` makes tanh span its event
    dimensions, so ``log_prob`` sums the log-det over them. ``log_det_eps > 0`` takes
    :class:`GuardedTanh`'s log-det instead of the exact one.

    Exact (``log_det_eps`` 0): sampling and log-probabilities. ``log_prob(action)`` inverts tanh,
    so it is finite only while ``|action| < 1``, which float32 loses once the latent sample
    passes about 9; :meth:`log_prob_from_raw` reads the latent sample and stays finite.
    Not exact, having no closed form: :meth:`mean` (tanh of the latent's mean, the deterministic
    action, not the squashed action's mean) and :meth:`entropy` (sampled).
    """

    def __init__(self, distribution: distrax.DistributionLike, log_det_eps: float = 0.0):
        _check_eps(log_det_eps, "Squash log_det_eps")
        if isinstance(distribution, Squash | Deterministic):
            raise ValueError(
                f"Squash takes an unbounded latent distribution, got a {type(distribution).__name__}"
                "; squash it once (a Deterministic policy goes through ajax.networks."
                "distributions.squash)"
            )
        event_ndims = len(distrax.as_distribution(distribution).event_shape)
        super().__init__(distribution, _tanh_bijector(event_ndims, log_det_eps))
        self.log_det_eps = log_det_eps

    def mean(self) -> Array:
        """tanh of the latent's mean: the deterministic action (not E[tanh(x)])."""
        return self.bijector.forward(self.distribution.mean())

    def log_prob_from_raw(self, raw: Array) -> Array:
        """log p(tanh(raw)) from the latent sample ``raw``: no arctanh, finite at saturation."""
        return self.distribution.log_prob(raw) - self.bijector.forward_log_det_jacobian(raw)

    def sample_with_raw(self, seed: Array) -> tuple[Array, Array, Array]:
        """``(action, log_prob, raw)``: ``raw`` the latent sample, ``action = tanh(raw)``."""
        raw, log_prob_raw = self.distribution.sample_and_log_prob(seed=seed)
        action, log_det = self.bijector.forward_and_log_det(raw)
        return action, log_prob_raw - log_det, raw

    def entropy(self, seed: Array | None = None) -> Array:
        """The squashed action's entropy, sampled as brax does.

        H[tanh(x)] = H[x] + E_x[log|det J_tanh(x)|]; the expectation is estimated at one latent
        sample drawn with ``seed`` (brax training/distribution.py,
        ``ParametricDistribution.entropy``).
        Unbiased, and its gradient reaches the latent's mean; the latent's entropy alone grows
        without bound in its scale, which tanh's saturation makes worthless.
        """
        if seed is None:
            raise ValueError(
                "the entropy of a squashed policy has no closed form and is sampled: pass "
                "seed=<PRNG key> (or take entropy(latent(pi)) for the latent's own)"
            )
        raw = self.distribution.sample(seed=seed)
        return self.distribution.entropy() + self.bijector.forward_log_det_jacobian(raw)


Policy = distrax.Distribution | Deterministic


def squash(pi: Policy, log_det_eps: float = 0.0) -> Squash | Deterministic:
    """``pi`` bounded by tanh: a :class:`Squash` of it, or tanh of a :class:`Deterministic`'s
    action (a point mass has no density to correct)."""
    if isinstance(pi, Deterministic):
        _check_eps(log_det_eps, "squash log_det_eps")
        return Deterministic(jnp.tanh(pi.action))
    return Squash(pi, log_det_eps)


def latent(pi: Policy) -> Policy:
    """The distribution ``pi`` squashes, or ``pi`` itself."""
    return pi.distribution if isinstance(pi, Squash) else pi


def sample_with_raw(pi: Policy, seed: Array) -> tuple[Array, Array, Array]:
    """``(action, log_prob, raw)``: ``raw`` the latent sample, the action itself when ``pi`` is
    not squashed."""
    if isinstance(pi, Squash):
        return pi.sample_with_raw(seed)
    action, log_prob = pi.sample_and_log_prob(seed=seed)
    return action, log_prob, action


def log_prob_from_raw(pi: Policy, raw: Array) -> Array:
    """The log-probability of the action whose latent sample is ``raw``."""
    if isinstance(pi, Squash):
        return pi.log_prob_from_raw(raw)
    return pi.log_prob(raw)


def entropy(pi: Policy, seed: Array | None = None) -> Array:
    """``pi``'s entropy: sampled with ``seed`` when squashed, else exact (``seed`` unused)."""
    if isinstance(pi, Deterministic):
        raise TypeError(
            "a Deterministic policy has no entropy (a point mass's differential entropy is -inf); "
            "leave the entropy term out for deterministic agents"
        )
    if isinstance(pi, Squash):
        return pi.entropy(seed)
    return pi.entropy()
