"""Composable JAX env wrappers: action rescaling, action repeat, episode statistics, vmap.

Each wrapper is a :class:`~ajax.environments.types.Wrapper` (pure ``reset``/``step``) and
keeps any state of its own in a typed dataclass around the inner env's state. All of them
work on one env or on a batch (a leading ``n_envs`` axis on every field, per-env flags).
The order :func:`~ajax.environments.make_env` uses, innermost first::

    SimEnv (batched) -> ActionRepeat -> PIDTermsWrapper -> EpisodeStatistics
        -> RescaleAction -> NormalizeObservation

:class:`VmapEnv` vectorises any unbatched env instead; ``make_env`` batches the base
:class:`~ajax.environments.core.SimEnv` itself, which skips the reset draw on steps where
no episode ends.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax.environments.types import Box, JaxEnv, TimeStep, Wrapper
from ajax.environments.utils import agent_action_to_env, tree_select


class RescaleAction(Wrapper):
    """Actions in agent units [-1, 1], clipped, then mapped onto the env box.

    The env sees ``c + h * clip(a, -1, 1)`` (:func:`~ajax.environments.utils.agent_action_to_env`);
    the spec's action space becomes the unit box.
    """

    def __init__(self, env: JaxEnv):
        super().__init__(env)
        space = env.spec.action_space
        if not isinstance(space, Box):
            raise ValueError(
                f"RescaleAction needs a Box action space, {env.spec.env_id} has {space}"
            )
        if not space.is_bounded:
            raise ValueError(
                f"RescaleAction needs finite bounds, {env.spec.env_id} has {space}; "
                "drop rescale_actions for this env"
            )
        self.low = np.asarray(space.low, np.float32)
        self.high = np.asarray(space.high, np.float32)
        n = len(space.low)
        self.spec = env.spec.replace(action_space=Box((-1.0,) * n, (1.0,) * n))

    def reset(self, key: jax.Array) -> TimeStep:
        return self.env.reset(key)

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> TimeStep:
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        return self.env.step(key, state, agent_action_to_env(action, self.low, self.high))


class ActionRepeat(Wrapper):
    """Repeat each action ``repeat`` times, summing rewards and stopping at the episode's end.

    After a step that ends the episode the remaining repeats are discarded, so the returned
    TimeStep is the one of the ending step (its ``final_obs``, its flags, the reset ``obs``)
    with the rewards summed up to it. The time limit and ``dt`` of the spec are rescaled to
    agent steps (limit rounded up).
    """

    def __init__(self, env: JaxEnv, repeat: int):
        super().__init__(env)
        if not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"action repeat must be an int >= 1, got {repeat!r}")
        self.repeat = repeat
        limit, dt = env.spec.max_episode_steps, env.spec.dt
        self.spec = env.spec.replace(
            max_episode_steps=None if limit is None else math.ceil(limit / repeat),
            dt=None if dt is None else dt * repeat,
        )

    def reset(self, key: jax.Array) -> TimeStep:
        return self.env.reset(key)

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> TimeStep:
        keys = jax.random.split(key, self.repeat)
        first = self.env.step(keys[0], state, action)

        def repeat_once(ts: TimeStep, k: jax.Array) -> tuple[TimeStep, None]:
            nxt = self.env.step(k, ts.state, action)
            # Once the episode has ended, the carry stays that step's TimeStep.
            return tree_select(ts.done, ts, nxt.replace(reward=ts.reward + nxt.reward)), None

        ts, _ = jax.lax.scan(repeat_once, first, keys[1:])
        return ts


@struct.dataclass
class EpisodeStatsState:
    """Running and last-finished episode return and length, around the inner state."""

    env_state: Any
    episode_return: jax.Array
    episode_length: jax.Array
    last_return: jax.Array
    last_length: jax.Array


class EpisodeStatistics(Wrapper):
    """Adds the return and length of the last finished episode to ``info``.

    ``info["episode_return"]`` and ``info["episode_length"]`` (agent steps) hold the last
    finished episode's values (0 before the first one ends); ``info["episode_done"]`` is True
    on the step that finished it, so a logger averages the returns where it is set.
    """

    def reset(self, key: jax.Array) -> TimeStep:
        ts = self.env.reset(key)
        zero_f, zero_i = jnp.zeros_like(ts.reward), jnp.zeros_like(ts.reward, jnp.int32)
        state = EpisodeStatsState(ts.state, zero_f, zero_i, zero_f, zero_i)
        return self._emit(ts, state, jnp.zeros_like(ts.terminated))

    def step(self, key: jax.Array, state: EpisodeStatsState, action: jax.Array) -> TimeStep:
        ts = self.env.step(key, state.env_state, action)
        ret = state.episode_return + ts.reward
        length = state.episode_length + 1
        done = ts.done
        new = EpisodeStatsState(
            env_state=ts.state,
            episode_return=jnp.where(done, 0.0, ret),
            episode_length=jnp.where(done, 0, length),
            last_return=jnp.where(done, ret, state.last_return),
            last_length=jnp.where(done, length, state.last_length),
        )
        return self._emit(ts, new, done)

    @staticmethod
    def _emit(ts: TimeStep, state: EpisodeStatsState, done: jax.Array) -> TimeStep:
        info = {
            **ts.info,
            "episode_return": state.last_return,
            "episode_length": state.last_length,
            "episode_done": done,
        }
        return ts.replace(state=state, info=info)


class VmapEnv(Wrapper):
    """``n_envs`` independent copies of an unbatched env; every TimeStep field gains axis 0.

    ``reset(key)`` and ``step(key, state, action)`` take one key, split into one per env;
    ``action`` has a leading ``n_envs`` axis. Generic (any JaxEnv), but under ``vmap`` an
    auto-reset is computed on every step; :meth:`SimEnv.batched` avoids that.
    """

    def __init__(self, env: JaxEnv, n_envs: int):
        super().__init__(env)
        if env.spec.n_envs is not None:
            raise ValueError(f"{env.spec.env_id} is already vectorised over {env.spec.n_envs} envs")
        if not isinstance(n_envs, int) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        self.n_envs = n_envs
        self.spec = env.spec.replace(n_envs=n_envs)

    def reset(self, key: jax.Array) -> TimeStep:
        return jax.vmap(self.env.reset)(jax.random.split(key, self.n_envs))

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> TimeStep:
        keys = jax.random.split(key, self.n_envs)
        return jax.vmap(self.env.step)(keys, state, action)


@struct.dataclass
class ExplicitResetState:
    """The inner state plus, per env, a pending reset: its first observation waits one tick."""

    env_state: Any
    pending: jax.Array
    first_obs: jax.Array


class ExplicitReset(Wrapper):
    """Episodes end on their own tick and restart on the next one (DESIGN.md 5.2, option (a)).

    For DreamerV3's row stream (embodied driver): the tick that ends an episode returns its
    true last observation (``obs == final_obs``) with ``info["is_last"]`` and, when terminal,
    ``info["is_terminal"]``; the next tick is a hold tick: its action is ignored, the inner env
    does not advance, and it returns the new episode's first observation with
    ``info["is_first"]``, reward 0 and no flags. Every env still emits one observation per tick,
    so vectorised envs stay in lockstep; an episode of T transitions takes T + 1 ticks. The inner
    env's auto-reset supplies the first observation (drawn on the ending tick).
    """

    def reset(self, key: jax.Array) -> TimeStep:
        ts = self.env.reset(key)
        no = jnp.zeros_like(ts.terminated)
        state = ExplicitResetState(ts.state, no, ts.obs)
        return self._emit(ts.replace(state=state), ~no, no, no)

    def step(self, key: jax.Array, state: ExplicitResetState, action: jax.Array) -> TimeStep:
        inner = self.env.step(key, state.env_state, action)
        done = inner.done
        hold = state.pending
        zeros = jnp.zeros_like(inner.reward)
        # A hold tick keeps the inner state (already reset on the ending tick).
        env_state = tree_select(hold, state.env_state, inner.state)
        obs = jnp.where(_col(hold, inner.obs), state.first_obs, inner.final_obs)
        ts = inner.replace(
            state=ExplicitResetState(
                env_state=env_state,
                pending=~hold & done,
                first_obs=jnp.where(_col(~hold & done, inner.obs), inner.obs, state.first_obs),
            ),
            obs=obs,
            final_obs=obs,
            reward=jnp.where(hold, zeros, inner.reward),
            terminated=~hold & inner.terminated,
            truncated=~hold & inner.truncated,
        )
        return self._emit(ts, hold, ts.terminated | ts.truncated, ts.terminated)

    @staticmethod
    def _emit(ts: TimeStep, is_first, is_last, is_terminal) -> TimeStep:
        info = {**ts.info, "is_first": is_first, "is_last": is_last, "is_terminal": is_terminal}
        return ts.replace(info=info)


def _col(flag: jax.Array, x: jax.Array) -> jax.Array:
    """``flag`` [...] broadcast against ``x`` [..., obs_dim]."""
    return jnp.reshape(flag, flag.shape + (1,) * (x.ndim - flag.ndim))


class PadSpaces(Wrapper):
    """A continuous env seen through wider spaces: observations zero-padded to ``obs_dim``,
    actions of ``action_dim`` entries in agent units [-1, 1], of which the env reads its own
    first ones, mapped onto its box.

    Multi-task models act on every task with one shape (nicklashansen/tdmpc2
    envs/wrappers/multitask.py pads observations and truncates actions the same way).
    """

    def __init__(self, env: JaxEnv, obs_dim: int, action_dim: int):
        super().__init__(env)
        own_obs = env.spec.obs_dim
        if env.spec.discrete or obs_dim < own_obs or action_dim < env.spec.action_dim:
            raise ValueError(
                f"PadSpaces widens a continuous env's spaces: {env.spec.env_id} has obs "
                f"{own_obs} and actions {env.spec.action_dim}, asked for {obs_dim} and {action_dim}"
            )
        space = env.spec.action_space
        self.low = np.asarray(space.low, np.float32)
        self.high = np.asarray(space.high, np.float32)
        self.pad = obs_dim - own_obs
        unit = Box((-1.0,) * action_dim, (1.0,) * action_dim)
        self.spec = env.spec.replace(observation_shape=(obs_dim,), action_space=unit)

    def _widen(self, ts: TimeStep) -> TimeStep:
        pad = lambda x: jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, self.pad)])
        return ts.replace(obs=pad(ts.obs), final_obs=pad(ts.final_obs))

    def reset(self, key: jax.Array) -> TimeStep:
        return self._widen(self.env.reset(key))

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> TimeStep:
        own = jnp.clip(jnp.asarray(action, jnp.float32)[..., : len(self.low)], -1.0, 1.0)
        return self._widen(self.env.step(key, state, agent_action_to_env(own, self.low, self.high)))
