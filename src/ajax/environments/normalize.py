"""Observation normalisation with running moments carried in the env state.

The statistics follow the parallel mean/variance merge of Chan et al. (1979), the
``RunningMeanStd`` rule of Stable-Baselines3's ``VecNormalize`` and gymnasium's
``NormalizeObservation``: moments start at mean 0, variance 1 and a pseudo-count of 1e-4,
each batch of observations is merged in, and the observation is then normalised with the
updated moments and clipped to ``[-clip, clip]``. The rule functions use array methods only,
so the host path applies them to numpy arrays unchanged.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ajax.environments.types import JaxEnv, TimeStep, Wrapper

INITIAL_COUNT = 1e-4


@struct.dataclass
class ObsMoments:
    """Running per-entry mean and variance of the observations, and how many were seen."""

    mean: Any
    var: Any
    count: Any


def initial_moments(obs_dim: int, xp=jnp) -> ObsMoments:
    """Mean 0, variance 1, pseudo-count 1e-4 (SB3's epsilon), in ``xp`` arrays."""
    return ObsMoments(
        mean=xp.zeros(obs_dim, xp.float32),
        var=xp.ones(obs_dim, xp.float32),
        count=xp.asarray(INITIAL_COUNT, xp.float32),
    )


def update_moments(moments: ObsMoments, obs) -> ObsMoments:
    """Merge a batch ``obs`` (..., obs_dim) into the moments (Chan et al. parallel update)."""
    batch = obs.reshape(-1, obs.shape[-1])
    batch_count = batch.shape[0]
    batch_mean, batch_var = batch.mean(axis=0), batch.var(axis=0)
    delta = batch_mean - moments.mean
    total = moments.count + batch_count
    m2 = (
        moments.var * moments.count
        + batch_var * batch_count
        + delta**2 * moments.count * batch_count / total
    )
    return ObsMoments(mean=moments.mean + delta * batch_count / total, var=m2 / total, count=total)


def normalize_obs(moments: ObsMoments, obs, raw_prefix: int = 0, clip: float = 10.0, eps=1e-8):
    """``clip((obs - mean) / sqrt(var + eps))``, leaving the first ``raw_prefix`` entries raw."""
    scaled = ((obs - moments.mean) / (moments.var + eps) ** 0.5).clip(-clip, clip)
    if raw_prefix == 0:
        return scaled.astype(obs.dtype)
    return _concat(obs[..., :raw_prefix], scaled[..., raw_prefix:]).astype(obs.dtype)


def _concat(a, b):
    if isinstance(a, jax.Array) or isinstance(b, jax.Array):
        return jnp.concatenate([a, b], axis=-1)
    import numpy as np

    return np.concatenate([a, b], axis=-1)


@struct.dataclass
class ObsNormState:
    """The inner env's state, the running moments, and whether they are frozen."""

    env_state: Any
    moments: ObsMoments
    frozen: jax.Array


class NormalizeObservation(Wrapper):
    """Normalise ``obs`` and ``final_obs`` with running moments kept in the env state.

    Put it outside the batching (a batched env, or :class:`~ajax.environments.wrappers.VmapEnv`):
    the moments are then shared by all envs and updated with the whole batch each step (as
    in SB3's ``VecNormalize``).
    The leading ``spec.raw_obs_prefix`` entries (PID error terms) stay raw. For evaluation,
    :meth:`reset_frozen` starts from given moments (e.g. the training env's, read with
    :func:`obs_moments`) and never updates them.
    """

    def __init__(self, env: JaxEnv, clip: float = 10.0, eps: float = 1e-8):
        super().__init__(env)
        if clip <= 0 or eps <= 0:
            raise ValueError(f"clip and eps must be > 0, got clip={clip}, eps={eps}")
        self.clip, self.eps = float(clip), float(eps)

    def reset(self, key: jax.Array) -> TimeStep:
        moments = initial_moments(self.spec.obs_dim)
        return self._reset(key, moments, jnp.zeros((), bool))

    def reset_frozen(self, key: jax.Array, moments: ObsMoments) -> TimeStep:
        """Reset with fixed ``moments`` that later steps leave unchanged (evaluation)."""
        return self._reset(key, moments, jnp.ones((), bool))

    def _reset(self, key: jax.Array, moments: ObsMoments, frozen: jax.Array) -> TimeStep:
        ts = self.env.reset(key)
        return self._normalize(ts, ObsNormState(ts.state, moments, frozen))

    def step(self, key: jax.Array, state: ObsNormState, action: jax.Array) -> TimeStep:
        ts = self.env.step(key, state.env_state, action)
        return self._normalize(ts, state.replace(env_state=ts.state))

    def _normalize(self, ts: TimeStep, state: ObsNormState) -> TimeStep:
        # The moments see what the agent will act on (the reset obs on done), as in SB3.
        updated = update_moments(state.moments, ts.obs)
        moments = jax.tree.map(
            lambda old, new: jnp.where(state.frozen, old, new), state.moments, updated
        )
        norm = lambda x: normalize_obs(moments, x, self.spec.raw_obs_prefix, self.clip, self.eps)
        return ts.replace(
            state=state.replace(moments=moments), obs=norm(ts.obs), final_obs=norm(ts.final_obs)
        )


def pooled_moments(moments: ObsMoments) -> ObsMoments:
    """One set of moments from per-env ones stacked on leading axes (a vmapped wrapper keeps
    one per env): their merge, mean = sum_i w_i m_i and var = sum_i w_i (v_i + (m_i - mean)^2)
    with w_i the count shares (Chan et al.'s merge of all of them at once)."""
    lead = tuple(range(moments.mean.ndim - 1))
    if not lead:
        return moments
    w = (moments.count / moments.count.sum(lead))[..., None]
    mean = (w * moments.mean).sum(lead)
    var = (w * (moments.var + (moments.mean - mean) ** 2)).sum(lead)
    return ObsMoments(mean=mean, var=var, count=moments.count.sum(lead))


def reset_for_eval(env: JaxEnv, key: jax.Array, moments: ObsMoments | None) -> TimeStep:
    """``env.reset``, or, for a :class:`NormalizeObservation` env given the training moments,
    :meth:`NormalizeObservation.reset_frozen` with them: evaluation normalises as training
    did at that point and leaves the moments alone."""
    if moments is not None and isinstance(env, NormalizeObservation):
        return env.reset_frozen(key, moments)
    return env.reset(key)


def obs_moments(state: Any) -> ObsMoments | None:
    """The moments of the (outermost) :class:`NormalizeObservation` in an env state, if any."""
    is_norm = lambda node: isinstance(node, ObsNormState)
    nodes = [node for node in jax.tree.leaves(state, is_leaf=is_norm) if is_norm(node)]
    return nodes[0].moments if nodes else None
