"""The on-policy loop: collect ``n_steps`` x ``n_envs`` -> update, under ``jax.jit`` + ``lax.scan``.

Same chunk structure as :mod:`ajax.training.off_policy`: ``init(key)`` and
``run_chunk(state) -> (state, record)``, a chunk being the rollouts that fill ``eval_freq`` env
steps followed by a deterministic evaluation. The rollout keeps each step's true last
observation (``final_obs``) so the agent can bootstrap through time-limit truncations.

The policy may carry state (a recurrent actor and critic, :mod:`ajax.agents.ppo.recurrent`):
``sample`` reads the :class:`~ajax.training.loop.Tick` (observation and episode-start flag) and
the carry and returns the next carry; the rollout records each step's flag and carry, and the
update gets the carry the rollout started from, so it can replay the sequences. Agents without
state plug in through :func:`feedforward`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from ajax.training.config import LoopConfig
from ajax.training.loop import end_of_chunk
from ajax.training.rollout import EpisodeTracker, to_env_action
from ajax.training.types import (  # noqa: F401  (re-exported: the agents' old imports)
    OnPolicyAgent,
    Rollout,
    RolloutEnd,
    Tick,
    feedforward,
)


def values_at_cuts(value_fn: Callable[[jax.Array], jax.Array], rollout: Rollout) -> jax.Array:
    """``value_fn`` at the true last observation of every step a time limit cut, ``[T, N]``
    (0 at the other steps, which a bootstrap reads from the next step's recorded value or not
    at all).

    A rollout shorter than the time limit cuts each env at most once, and then ``value_fn``
    sees one row per env, the cut's; only a rollout that cuts some env twice evaluates every
    step's (a real branch for one seed; vmapped seeds compute both sides). ``value_fn`` maps
    observations with any leading dimensions to values with those dimensions.
    """
    cut = rollout.truncated
    n = cut.shape[1]

    def one_per_env():
        t = jnp.argmax(cut, axis=0)  # each env's only cut, 0 where it has none
        return jnp.where(cut, value_fn(rollout.final_obs[t, jnp.arange(n)]), 0.0)

    def every_step():
        return jnp.where(cut, value_fn(rollout.final_obs), 0.0)

    return jax.lax.cond(cut.sum(0).max() <= 1, one_per_env, every_step)


def next_values(rollout: Rollout, v_cut: jax.Array, v_last: jax.Array) -> jax.Array:
    """The value of each step's arrival state, ``[T, N]``: the next step's recorded value
    (``rollout.value[t + 1]``, ``v_last`` after the last step), or ``v_cut`` (from
    :func:`values_at_cuts`) where the episode ended, since the next observation then belongs
    to a new episode. Terminal steps read ``v_cut``'s 0, which their discount zeroes anyway."""
    v_next = jnp.concatenate([rollout.value[1:], v_last[None]])
    return jnp.where(rollout.terminated | rollout.truncated, v_cut, v_next)


class OnPolicyState(flax.struct.PyTreeNode):
    agent: Any
    carry: Any
    env_state: Any
    tick: Tick
    episodes: EpisodeTracker
    key: jax.Array
    step: jax.Array


def make_on_policy(config: LoopConfig, n_steps: int, env, eval_env, agent: OnPolicyAgent):
    """``(init, run_chunk, env_steps_per_chunk)`` for ``agent`` on ``env``."""
    n = config.n_envs
    per_chunk = max(1, config.eval_freq // (n * n_steps))

    def init(key) -> OnPolicyState:
        k_agent, k_env, k_run = jax.random.split(key, 3)
        ts = jax.vmap(env.reset)(jax.random.split(k_env, n))
        return OnPolicyState(
            agent=agent.init(k_agent, env),
            carry=agent.policy.init(n),
            env_state=ts.state,
            tick=Tick.reset(ts),
            episodes=EpisodeTracker.create(n),
            key=k_run,
            step=jnp.zeros((), jnp.int32),
        )

    def collect(state: OnPolicyState, _):
        key, k_act, k_env = jax.random.split(state.key, 3)
        action, log_prob, value, carry = agent.sample(state.agent, state.carry, state.tick, k_act)
        out = jax.vmap(env.step)(
            jax.random.split(k_env, n), state.env_state, to_env_action(env, action)
        )
        data = Rollout(
            state.tick.obs,
            action,
            log_prob,
            value,
            out.reward.astype(jnp.float32),
            out.terminated,
            out.truncated,
            out.final_obs,
            state.tick.is_first,
            carry,
        )
        state = state.replace(
            carry=carry,
            env_state=out.state,
            tick=Tick.of(out),
            episodes=state.episodes.update(out.reward, out.terminated | out.truncated),
            key=key,
            step=state.step + n,
        )
        return state, data

    def iteration(state: OnPolicyState, _):
        carry0 = state.carry
        state, rollout = jax.lax.scan(collect, state, None, length=n_steps)
        key, k_upd = jax.random.split(state.key)
        end = RolloutEnd(state.tick, carry0)
        agent_state, metrics = agent.update(state.agent, rollout, end, k_upd)
        return state.replace(agent=agent_state, key=key), metrics

    def run_chunk(state: OnPolicyState):
        state, metrics = jax.lax.scan(iteration, state, None, length=per_chunk)
        last = {k: v[-1] for k, v in metrics.items()}
        return end_of_chunk(state, last, eval_env, agent.policy, config.eval_episodes)

    return init, run_chunk, per_chunk * n * n_steps
