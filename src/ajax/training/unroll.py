"""The one acting loop outside training: a policy's steps on copies of an env, or on the env.

Evaluation, ``ajax collect``, ``ajax eval --video`` and the expert rollout of MC pretraining
(``agents/shared/guidance.collect_expert``) are short callers of two unrolls, in the manner of
brax's ``acting.generate_unroll``.

- :func:`unroll` for JAX envs: one ``lax.scan`` of ``length`` vector steps from a reset, on
  ``n`` copies of the env, or (``n=None``) on the env as given, batched or not (the expert
  rollout: the agent's own env). Each copy is alive until its first episode ends; the env
  auto-resets, so rows after it are the caller's to mask (evaluation, collect) or to keep
  (the expert rollout, fixed-length). The caller's ``observe(acc, step) -> (acc, row)`` folds
  each :class:`Step` into an accumulator and/or a stacked row.
- :func:`host_unroll` for host envs: the same steps as a Python generator around the host
  simulators, stopping when every copy has ended once.

The policy's carry starts fresh and follows the ticks, so planners and recurrent policies act
as in training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ajax.training.rollout import to_env_action
from ajax.training.types import Policy, Tick


class Step(NamedTuple):
    """One vector step of an unroll: the tick acted on, the action (agent units), the env's
    TimeStep after it, and which copies were still in their first episode when acting."""

    tick: Tick
    action: jax.Array
    out: Any
    alive: jax.Array


def _copies(env, n: int | None, reset: Callable | None):
    """``(reset(key), step(key, state, action))`` of ``n`` copies of ``env`` (one key each, split
    from the given one), or of ``env`` itself when ``n`` is None."""
    reset = reset or env.reset
    if n is None:
        return reset, env.step

    def reset_n(k):
        return jax.vmap(reset)(jax.random.split(k, n))

    def step_n(k, state, action):
        return jax.vmap(env.step)(jax.random.split(k, n), state, action)

    return reset_n, step_n


def unroll(env, policy: Policy, agent_state, key, n: int | None, length: int,
           observe: Callable[[Any, Step], tuple[Any, Any]], acc: Any = None, *,
           reset: Callable | None = None, perturb: Callable | None = None):  # fmt: skip
    """``(acc, rows)``: ``length`` steps of ``policy``, acting deterministically, on ``n`` copies
    of the JAX ``env`` (``None``: on ``env`` itself, whose batch, if any, the policy sees).

    ``reset(key)`` resets one copy, or the env (default ``env.reset``); ``perturb(action,
    key)`` maps each action before the env sees it (``ajax collect``'s noise). Each step's key
    splits in two (act, env), or in three (act, perturb, env) with ``perturb``; a behaviour
    policy with noise of its own (the expert rollout's) draws it from the act key.
    """
    k_reset, k_run = jax.random.split(key)
    reset_env, step_env = _copies(env, n, reset)
    ts = reset_env(k_reset)

    def step(c, k):
        (tick, carry, env_state, alive), acc = c
        if perturb is None:
            k_act, k_env = jax.random.split(k)
        else:
            k_act, k_noise, k_env = jax.random.split(k, 3)
        action, carry = policy.act(agent_state, carry, tick, k_act, True)
        if perturb is not None:
            action = perturb(action, k_noise)
        out = step_env(k_env, env_state, to_env_action(env, action))
        acc, row = observe(acc, Step(tick, action, out, alive))
        return ((Tick.of(out), carry, out.state, alive & ~out.done), acc), row

    c = (Tick.reset(ts), policy.init(ts.done.size), ts.state, jnp.ones_like(ts.done))
    (_, acc), rows = jax.lax.scan(step, (c, acc), jax.random.split(k_run, length))
    return acc, rows


def host_unroll(env, act: Callable, policy: Policy, agent_state, key, seed: int,
                max_steps: int, split: int = 2) -> Iterator[tuple[np.ndarray, Step]]:  # fmt: skip
    """The steps of ``act`` (the jitted ``policy.act``) on the host ``env``'s copies from
    ``env.reset(seed=seed)``, deterministic, until every copy has ended once or ``max_steps``:
    yields ``(obs acted on, Step)`` with numpy ``Step.out`` (the host TimeStep). Each step's
    key splits in ``split`` and the first part acts (evaluation: 2, ``--video``: 3)."""
    n = env.spec.n_envs
    ts = env.reset(seed=seed)
    reward, alive, first = np.zeros(n, np.float32), np.ones(n, bool), np.ones(n, bool)
    carry = policy.init(n)
    for _ in range(max_steps):
        key, k_act, *_ = jax.random.split(key, split)
        tick = Tick.from_obs(jnp.asarray(ts.obs), jnp.asarray(reward), jnp.asarray(first))
        action, carry = act(agent_state, carry, tick, k_act, True)
        out = env.step(np.asarray(to_env_action(env, action)))
        yield ts.obs, Step(tick, action, out, alive.copy())
        alive &= ~(out.terminated | out.truncated)
        ts, reward, first = out, out.reward.astype(np.float32), out.terminated | out.truncated
        if not alive.any():
            return
