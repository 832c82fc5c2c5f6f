"""The expert's action in the observation: SAC's expert-action augmentation (spec 002).

:class:`ExpertActionWrapper` puts ``expert(obs)`` in front of every observation (and of
``final_obs``), so actor and critic read what the expert would do beside what they see and can
learn when to follow it, while the policy itself stays unconstrained (spec 002, ``Actor``:
guidance acts on inputs and losses, never on the architecture). The spec declares the prefix
raw (``raw_obs_prefix``): observation normalisers leave the expert's action in the agent's
[-1, 1] units. The networks are initialised on the widened observation, which is what spec
002's ``extra_obs_dim`` provides for agents that append inputs themselves.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ajax.environments.types import JaxEnv, TimeStep, Wrapper


class ExpertActionWrapper(Wrapper):
    """Prepend ``expert(obs)`` (agent units, ``(action_dim,)`` per env) to the observation.

    Args:
      env: a JAX env, unbatched or batched, with continuous actions (wrap it before observation
        normalisation: the expert reads the raw observation).
      expert: maps one raw observation ``(obs_dim,)`` to an action in [-1, 1]; pure, jittable.
    """

    def __init__(self, env: JaxEnv, expert: Callable[[jax.Array], jax.Array]):
        super().__init__(env)
        if env.spec.discrete:
            raise ValueError("the expert-action augmentation needs a continuous action space")
        n_act = env.spec.action_dim
        obs = jax.ShapeDtypeStruct(env.spec.observation_shape, jnp.float32)
        out = jax.eval_shape(expert, obs)
        if out.shape != (n_act,):
            raise ValueError(
                f"expert must map one observation {env.spec.observation_shape} to an action of "
                f"shape ({n_act},), got {out.shape}"
            )
        per_env = lambda o: jnp.asarray(expert(o), jnp.float32)
        self._expert = per_env if env.spec.n_envs is None else jax.vmap(per_env)
        self.spec = env.spec.replace(
            observation_shape=(n_act + env.spec.obs_dim,),
            raw_obs_prefix=n_act + env.spec.raw_obs_prefix,
            image_shape=None,
        )

    def _augment(self, obs: jax.Array) -> jax.Array:
        return jnp.concatenate([self._expert(obs), obs], axis=-1)

    def reset(self, key: jax.Array) -> TimeStep:
        ts = self.env.reset(key)
        obs = self._augment(ts.obs)
        return ts.replace(obs=obs, final_obs=obs)

    def step(self, key: jax.Array, state, action: jax.Array) -> TimeStep:
        ts = self.env.step(key, state, action)
        return ts.replace(obs=self._augment(ts.obs), final_obs=self._augment(ts.final_obs))
