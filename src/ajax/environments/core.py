"""The base JAX env: a simulator plus the two rules Ajax owns, time limit and auto-reset.

Every JAX family (gymnax, playground, brax) is adapted as a :class:`Simulator`, which knows
only its physics: initial state, transition, natural termination. :class:`SimEnv` adds the
rest in one place, so the families cannot disagree on them:

- the time limit is truncation, counted here in agent steps (the simulators' own limits are
  bypassed);
- auto-reset keeps the final observation (``TimeStep.final_obs``) and hands back the next
  episode's first observation in ``TimeStep.obs``.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import struct

from ajax.environments.types import EnvSpec, JaxEnv, TimeStep
from ajax.environments.utils import tree_select


@struct.dataclass
class SimStep:
    """What a simulator returns: its state, the flat float32 obs, reward and termination."""

    state: Any
    obs: jax.Array
    reward: jax.Array
    terminated: jax.Array


class Simulator(Protocol):
    """A family adapter: pure ``init`` and ``transition``, no time limit, no auto-reset."""

    def init(self, key: jax.Array) -> SimStep: ...

    def transition(self, key: jax.Array, state: Any, action: jax.Array) -> SimStep: ...


@struct.dataclass
class EnvState:
    """State of a :class:`SimEnv`: the simulator's state and the agent steps taken so far."""

    sim: Any
    t: jax.Array


class SimEnv(JaxEnv):
    """A :class:`Simulator` with a time limit and auto-reset: the base of every JAX family."""

    def __init__(self, sim: Simulator, spec: EnvSpec):
        if spec.max_episode_steps is not None and spec.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {spec.max_episode_steps}")
        self.sim = sim
        self.spec = spec

    def reset(self, key: jax.Array) -> TimeStep:
        first = self.sim.init(key)
        return TimeStep(
            state=EnvState(sim=first.state, t=jnp.zeros((), jnp.int32)),
            obs=first.obs,
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            final_obs=first.obs,
            info={},
        )

    def step(self, key: jax.Array, state: EnvState, action: jax.Array) -> TimeStep:
        key_step, key_reset = jax.random.split(key)
        nxt = self.sim.transition(key_step, state.sim, action)
        t = state.t + 1
        terminated = jnp.asarray(nxt.terminated, bool).reshape(())
        limit = self.spec.max_episode_steps
        time_up = jnp.zeros((), bool) if limit is None else t >= limit
        truncated = time_up & ~terminated
        done = terminated | truncated
        # Like gymnax, both branches are computed and one is selected: under vmap a cond
        # would run both anyway.
        first = self.sim.init(key_reset)
        return TimeStep(
            state=EnvState(
                sim=tree_select(done, first.state, nxt.state),
                t=jnp.where(done, 0, t).astype(jnp.int32),
            ),
            obs=jnp.where(done, first.obs, nxt.obs),
            reward=jnp.asarray(nxt.reward, jnp.float32).reshape(()),
            terminated=terminated,
            truncated=truncated,
            final_obs=nxt.obs,
            info={},
        )
