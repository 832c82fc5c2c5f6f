"""The one acting loop outside training: a policy's episodes on copies of an env.

Evaluation, ``ajax collect`` and ``ajax eval --video`` are short callers of two unrolls, in the
manner of brax's ``acting.generate_unroll``. The expert rollout of MC pretraining
(``agents/shared/guidance.collect_expert``, a fixed-length auto-resetting rollout on the agent's
own, possibly batched, env) is not yet one: moved onto :func:`unroll` with its key split it drew
other noise, and ``test_pretraining_fits_the_experts_returns_and_actions`` then measured R^2
0.68 where it asks 0.9 (2026-12-07), which needs understanding first.

- :func:`unroll` for JAX envs: one ``lax.scan`` of ``length`` vector steps on ``n`` env copies
  from a reset, each copy alive until its first episode ends (rewards after it are the
  caller's to mask: auto-reset would leak a second episode). The caller's ``observe(acc,
  step) -> (acc, row)`` folds each :class:`Step` into an accumulator and/or a stacked row.
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


def unroll(env, policy: Policy, agent_state, key, n: int, length: int,
           observe: Callable[[Any, Step], tuple[Any, Any]], acc: Any = None, *,
           reset: Callable | None = None, perturb: Callable | None = None):  # fmt: skip
    """``(acc, rows)``: ``length`` deterministic steps of ``policy`` on ``n`` copies of the JAX
    ``env``.

    ``reset(key)`` resets one copy (default ``env.reset``); ``perturb(action, key)`` maps each
    action before the env sees it (``ajax collect``'s noise). Each step's key splits in two
    (act, env), or in three (act, perturb, env) with ``perturb``.
    """
    k_reset, k_run = jax.random.split(key)
    ts = jax.vmap(reset or env.reset)(jax.random.split(k_reset, n))

    def step(c, k):
        (tick, carry, env_state, alive), acc = c
        if perturb is None:
            k_act, k_env = jax.random.split(k)
        else:
            k_act, k_noise, k_env = jax.random.split(k, 3)
        action, carry = policy.act(agent_state, carry, tick, k_act, True)
        if perturb is not None:
            action = perturb(action, k_noise)
        out = jax.vmap(env.step)(jax.random.split(k_env, n), env_state, to_env_action(env, action))
        acc, row = observe(acc, Step(tick, action, out, alive))
        return ((Tick.of(out), carry, out.state, alive & ~out.done), acc), row

    c = (Tick.reset(ts), policy.init(n), ts.state, jnp.ones((n,), bool))
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
