"""PID error terms in the observation: the environment side of ``ajax.modules.pid_actor``.

:class:`PIDTermsWrapper` puts ``[e, I, D]`` (each ``n_errors`` wide) in front of the
observation (spec 002, ``ajax.modules.pid_actor``), computed from a user-given error function
of the raw observation:

- ``e_t = error_fn(obs_t)``;
- ``I_t = I_{t-1} + e_t * dt``: a backward-Euler (rectangle) integral that includes the
  current sample, as the PID head of ``ajax.modules.pid_head`` sums ``z_j`` for ``j <= k``;
- ``D_t = (e_t - e_{t-1}) / dt``: a backward difference.

At episode start (``reset`` and every auto-reset) ``I_0 = e_0 * dt`` and ``D_0 = 0``: the
previous error is taken equal to the first one so the derivative does not kick. The step that
ends an episode continues the old episode's terms in ``final_obs``; ``obs`` carries the new
episode's first terms. The spec declares the ``3 * n_errors`` terms raw
(``raw_obs_prefix``), so observation normalisers leave them in the env's units.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ajax.environments.types import JaxEnv, TimeStep, Wrapper
from ajax.environments.utils import where_batch


@struct.dataclass
class PIDTermsState:
    """The inner env's state, the running integral and the previous error (each n_errors)."""

    env_state: Any
    integral: jax.Array
    prev_error: jax.Array


def pid_errors(error_fn: Callable[[jax.Array], jax.Array], obs: jax.Array) -> jax.Array:
    """``error_fn(obs)`` as a float32 vector (a scalar error becomes length 1)."""
    return jnp.asarray(error_fn(obs), jnp.float32).reshape(-1)


def pid_first_terms(error: jax.Array, dt: float) -> tuple[jax.Array, jax.Array]:
    """Integral and derivative at an episode's first step: ``(e_0 dt, 0)``."""
    return error * dt, jnp.zeros_like(error)


def pid_next_terms(
    error: jax.Array, integral: jax.Array, prev_error: jax.Array, dt: float
) -> tuple[jax.Array, jax.Array]:
    """Integral and derivative after one step: ``(I + e dt, (e - e_prev) / dt)``."""
    return integral + error * dt, (error - prev_error) / dt


class PIDTermsWrapper(Wrapper):
    """Prepend the PID error terms ``[e, I, D]`` of ``error_fn(obs)`` to the observation.

    Args:
      env: a JAX env, unbatched or batched (wrap it before observation normalisation: the
        errors are of the raw observation).
      error_fn: maps one raw observation ``(obs_dim,)`` to the tracking errors, a scalar or an
        ``(n_errors,)`` vector; pure and jittable.
      dt: seconds per agent step for the integral and derivative; defaults to ``spec.dt``.
    """

    def __init__(
        self,
        env: JaxEnv,
        error_fn: Callable[[jax.Array], jax.Array],
        dt: float | None = None,
    ):
        super().__init__(env)
        dt = env.spec.dt if dt is None else dt
        if dt is None or not dt > 0:
            raise ValueError(
                f"PIDTermsWrapper needs a step duration dt > 0; {env.spec.env_id} gives "
                f"{env.spec.dt}, pass dt=..."
            )
        self.error_fn, self.dt = error_fn, float(dt)
        obs = jax.ShapeDtypeStruct(env.spec.observation_shape, jnp.float32)
        per_env = lambda o: pid_errors(error_fn, o)
        self.n_errors = int(jax.eval_shape(per_env, obs).shape[0])
        self._errors = per_env if env.spec.n_envs is None else jax.vmap(per_env)
        if self.n_errors == 0:
            raise ValueError("error_fn returned no errors")
        self.spec = env.spec.replace(
            observation_shape=(3 * self.n_errors + env.spec.obs_dim,),
            raw_obs_prefix=3 * self.n_errors + env.spec.raw_obs_prefix,
        )

    def reset(self, key: jax.Array) -> TimeStep:
        ts = self.env.reset(key)
        error = self._errors(ts.obs)
        integral, derivative = pid_first_terms(error, self.dt)
        obs = jnp.concatenate([error, integral, derivative, ts.obs], axis=-1)
        state = PIDTermsState(ts.state, integral, error)
        return ts.replace(state=state, obs=obs, final_obs=obs)

    def step(self, key: jax.Array, state: PIDTermsState, action: jax.Array) -> TimeStep:
        ts = self.env.step(key, state.env_state, action)
        # Terms of the step actually taken, from the obs it reached.
        error = self._errors(ts.final_obs)
        integral, derivative = pid_next_terms(error, state.integral, state.prev_error, self.dt)
        final_obs = jnp.concatenate([error, integral, derivative, ts.final_obs], axis=-1)
        # On done, ts.obs opens the next episode: its terms start afresh.
        first_error = self._errors(ts.obs)
        first_integral, first_derivative = pid_first_terms(first_error, self.dt)
        first = jnp.concatenate([first_error, first_integral, first_derivative, ts.obs], axis=-1)
        done = ts.done
        new_state = PIDTermsState(
            env_state=ts.state,
            integral=where_batch(done, first_integral, integral),
            prev_error=where_batch(done, first_error, error),
        )
        return ts.replace(
            state=new_state, obs=where_batch(done, first, final_obs), final_obs=final_obs
        )
