"""The contract between an agent and the training loops: what an agent gives and what it gets.

A leaf of the training layer (it imports no loop), re-exported with the base classes by
:mod:`ajax.training.api`, the one module agents import the training layer from.

- :class:`Tick`: what a policy sees at one vector tick; :class:`Policy`: ``init``/``act``
  with a carry (:func:`stateless` wraps a policy without one);
- replay agents: :class:`ReplayAgent` (policy, row writer, :class:`Clock`, learner), and
  :class:`OffPolicyAgent`, the SARS' :class:`Transition` agents' four functions, which
  :func:`ajax.training.off_policy.replay_agent` turns into one;
- rollout agents: :class:`OnPolicyAgent` over a :class:`Rollout` and its :class:`RolloutEnd`
  (:func:`feedforward` for agents without carry).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp


class Tick(flax.struct.PyTreeNode):
    """The observation an agent acts on at one vector tick, with its flags (leading [N]).

    ``reward`` is the reward received on arriving at ``obs``; ``is_last``/``is_terminal`` say that
    ``obs`` ends its episode, which only an env with explicit resets
    (:class:`~ajax.environments.wrappers.ExplicitReset`) shows: under auto-reset a done step
    already returns the next episode's first observation.
    """

    obs: jax.Array
    reward: jax.Array
    is_first: jax.Array
    is_last: jax.Array
    is_terminal: jax.Array

    @classmethod
    def of(cls, ts) -> Tick:
        """The tick a TimeStep leads to (explicit flags when the env reports them)."""
        if "is_first" in ts.info:
            info = ts.info
            return cls(ts.obs, ts.reward, info["is_first"], info["is_last"], info["is_terminal"])
        no = jnp.zeros_like(ts.done)
        return cls(ts.obs, ts.reward, ts.done, no, no)

    @classmethod
    def from_obs(cls, obs, reward=None, is_first=None) -> Tick:
        """A tick without explicit end flags (host envs, acting on bare observations):
        ``reward`` 0 and ``is_first`` set unless given; the flags lead like ``is_first``
        (``[N]`` by default, ``[S, N]`` for a host run's seeds)."""
        if is_first is None:
            is_first = jnp.ones(obs.shape[:1], bool)
        if reward is None:
            reward = jnp.zeros(is_first.shape, jnp.float32)
        no = jnp.zeros(is_first.shape, bool)
        return cls(obs, reward, is_first, no, no)

    @classmethod
    def reset(cls, ts) -> Tick:
        """The first tick of a run (every env starts an episode)."""
        tick = cls.of(ts)
        return tick.replace(is_first=jnp.ones_like(tick.is_first))


class Policy(NamedTuple):
    """``init(n) -> carry`` for n envs; ``act(agent, carry, tick, key, deterministic) ->
    (action [N, ...] in agent units, carry)``."""

    init: Callable[[int], Any]
    act: Callable[..., tuple[jax.Array, Any]]


def stateless(act: Callable) -> Policy:
    """A :class:`Policy` of ``act(agent, obs, key, deterministic) -> action`` (no carry)."""
    return Policy(init=lambda n: (), act=lambda a, c, tick, k, d: (act(a, tick.obs, k, d), c))


class Clock(NamedTuple):
    """``init() -> clock_state``; ``tick(clock_state, step) -> (count, clock_state)`` with
    ``step`` the env steps so far, counting this tick (all envs together)."""

    init: Callable[[], Any]
    tick: Callable[[Any, jax.Array], tuple[jax.Array, Any]]


class ReplayAgent(NamedTuple):
    """What an agent gives :func:`make_loop` (see the module docstring).

    ``init(key, tick) -> (agent, replay)`` sees the first tick (leading [N]) to shape the replay.
    ``random_steps``: env steps of uniform random actions before the policy acts (the policy's
    carry is left alone meanwhile).
    """

    init: Callable[[jax.Array, Tick], tuple[Any, Any]]
    policy: Policy
    write: Callable[..., Any]
    clock: Clock
    learn: Callable[..., tuple[Any, Any, dict]]
    random_steps: int = 0


class Transition(NamedTuple):
    """One replayed step: ``discount`` is 0 on termination (not on truncation)."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    next_obs: jax.Array


class OffPolicyAgent(NamedTuple):
    """The pure functions an off-policy agent gives the loop.

    ``init(key, env) -> agent_state``; ``act(agent_state, obs [N, O], key, deterministic) ->
    action [N, A]`` in agent units ([-1, 1] for boxes, int ids for discrete);
    ``update(agent_state, batch: Transition, key) -> (agent_state, metrics dict)``;
    ``demonstrations(key, env) -> Transition`` (rows on a leading axis, or None): transitions
    the replay starts with, drawn with the same key ``init`` gets (an expert's rollout).
    """

    init: Callable[..., Any]
    act: Callable[..., jax.Array]
    update: Callable[..., tuple[Any, dict]]
    demonstrations: Callable[..., Transition | None] = lambda key, env: None


class Rollout(NamedTuple):
    """Time-major ``[T, N, ...]`` collected data.

    ``is_first[t]``: ``obs[t]`` starts an episode; ``carry[t]``: the policy's carry after acting
    on ``obs[t]`` (``()`` for a policy without state).
    """

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    is_first: jax.Array
    carry: Any = ()


class RolloutEnd(NamedTuple):
    """What follows a rollout and what preceded it: the next tick (its observation is the
    bootstrap state) and the carry the rollout's first step acted from."""

    tick: Tick
    carry0: Any = ()


class OnPolicyAgent(NamedTuple):
    """``init(key, env)``; ``policy``: the acting :class:`~ajax.training.loop.Policy`
    (evaluation, ``ajax eval``); ``sample(state, carry, tick, key) -> (action, log_prob, value,
    carry)``; ``update(state, rollout, end: RolloutEnd, key) -> (state, metrics)``."""

    init: Callable[..., Any]
    policy: Policy
    sample: Callable[..., tuple]
    update: Callable[..., tuple[Any, dict]]


def feedforward(init, act, sample, update) -> OnPolicyAgent:
    """The :class:`OnPolicyAgent` of an agent without carry: ``act(state, obs, key,
    deterministic)``, ``sample(state, obs, key) -> (action, log_prob, value)``, ``update(state,
    rollout, last_obs, key)``."""
    return OnPolicyAgent(
        init=init,
        policy=stateless(act),
        sample=lambda a, carry, tick, k: (*sample(a, tick.obs, k), carry),
        update=lambda a, rollout, end, k: update(a, rollout, end.tick.obs, k),
    )
