"""The one collect / learn / evaluate loop of the replay agents (SAC, TD3, TD-MPC2, DreamerV3).

A run is chunks of ``eval_freq // n_envs`` vector ticks under one ``lax.scan``, each chunk ending
with a deterministic evaluation; :func:`make_loop` returns ``init(key)`` and
``run_chunk(state) -> (state, record)``, so ``train(key)`` jits and vmaps over seeds and the
command line runs the same chunks one call at a time to log, checkpoint and resume bitwise.

An agent plugs in with a :class:`ReplayAgent`, i.e. three plug points and a learner:

- a :class:`Policy` that carries state, ``act(agent, carry, tick, key, deterministic) ->
  (action, carry)``: TD-MPC2's planner warm start, DreamerV3's RSSM latent, ``()`` for SAC;
  the policy resets its own carry where ``tick.is_first`` is set;
- a :class:`Clock`, ``tick(clock_state, step) -> (count, clock_state)``: how many updates this
  tick runs, computed from the env-step count alone (never from a seed's data), so it is
  :func:`~ajax.training.rollout.lockstep` and the update ``cond`` stays a branch under vmap;
- a row writer, ``write(replay, tick, action, carry, ts) -> replay``: what one tick stores
  (SARS' transitions, TD-MPC2's transition rows, DreamerV3's rows with hold ticks);
- ``learn(agent, replay, count, key) -> (agent, replay, metrics)`` runs ``count`` updates.

The record of a chunk holds ``step``, ``eval_return``, ``train_return`` and the metrics of the
chunk's last update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp

from ajax.buffers.host_store import host_stores
from ajax.environments.normalize import obs_moments, pooled_moments, reset_for_eval
from ajax.jax_helpers import cond, lockstep, when, zeros_like_shapes  # noqa: F401
from ajax.training.rollout import EpisodeTracker, random_actions, to_env_action
from ajax.training.sharding import constrain_data
from ajax.training.types import Clock, Policy, ReplayAgent, Tick, stateless  # noqa: F401
from ajax.training.unroll import unroll


class LoopState(flax.struct.PyTreeNode):
    """Everything a run needs to continue: checkpointing this resumes it exactly."""

    agent: Any
    carry: Any
    replay: Any
    clock: Any
    metrics: dict  # the last update's metrics (zeros before the first update)
    env_state: Any
    tick: Tick
    episodes: EpisodeTracker
    key: jax.Array
    step: jax.Array  # env steps so far, all envs together


class Loop(NamedTuple):
    init: Callable
    run_chunk: Callable
    steps_per_chunk: int


class TickSteps(NamedTuple):
    """The halves of one vector tick around the env step, shared by :func:`make_loop` (JAX env,
    inside the scan) and :class:`~ajax.training.host_loop.HostReplayRun` (host env, one jitted
    call each): ``init_state(key, tick, env_state)``, ``act(state, key) -> (action, carry)``
    and ``absorb(state, action, carry, ts, key, k_update) -> state`` (row, clock, learn)."""

    init_state: Callable
    act: Callable
    absorb: Callable


def tick_steps(n: int, env, agent: ReplayAgent) -> TickSteps:
    """:class:`TickSteps` of ``agent`` on ``n`` envs of ``env`` (only its spec is read)."""
    policy = agent.policy

    def init_state(key, tick: Tick, env_state) -> LoopState:
        k_learn, k_run = key
        agent_state, replay = agent.init(k_learn, tick)
        metrics = zeros_like_shapes(
            lambda a, r: agent.learn(a, r, jnp.ones((), jnp.int32), k_run)[2], agent_state, replay
        )
        return LoopState(
            agent=agent_state,
            carry=policy.init(n),
            replay=replay,
            clock=agent.clock.init(),
            metrics=metrics,
            env_state=env_state,
            tick=tick,
            episodes=EpisodeTracker.create(n),
            key=k_run,
            step=jnp.zeros((), jnp.int32),
        )

    def act(state: LoopState, key):
        k_pol, k_rand = jax.random.split(key)
        on_policy = lambda: policy.act(state.agent, state.carry, state.tick, k_pol, False)
        if agent.random_steps <= 0:
            return on_policy()
        return jax.lax.cond(
            lockstep(state.step < agent.random_steps),
            lambda: (random_actions(env, k_rand, n), state.carry),
            on_policy,
        )

    def absorb(state: LoopState, action, carry, ts, key, k_upd) -> LoopState:
        replay = agent.write(state.replay, state.tick, action, carry, ts)
        step = state.step + n
        count, clock = agent.clock.tick(state.clock, step)
        count = lockstep(count)
        # host replay rows are reached by IO callbacks, which vmap refuses inside a cond
        branch = when if host_stores(replay) else cond
        agent_state, replay, metrics = branch(
            count > 0,
            lambda c: agent.learn(c[0], c[1], count, k_upd),
            (state.agent, replay, state.metrics),
        )
        return state.replace(
            agent=agent_state,
            carry=carry,
            replay=replay,
            clock=clock,
            metrics=metrics,
            env_state=ts.state,
            tick=Tick.of(ts),
            episodes=state.episodes.update(ts.reward, ts.done),
            key=key,
            step=step,
        )

    return TickSteps(init_state, act, absorb)


def make_loop(config, env, eval_env, agent: ReplayAgent) -> Loop:
    """The loop of ``agent`` on ``env``; ``config`` gives ``n_envs``, ``eval_freq`` and
    ``eval_episodes`` (a :class:`~ajax.training.config.LoopConfig`)."""
    n = config.n_envs
    per_chunk = max(1, config.eval_freq // n)
    steps = tick_steps(n, env, agent)

    def init(key) -> LoopState:
        k_learn, k_env, k_run = jax.random.split(key, 3)
        ts = constrain_data(jax.vmap(env.reset)(jax.random.split(k_env, n)))
        return steps.init_state((k_learn, k_run), Tick.reset(ts), ts.state)

    def vector_step(state: LoopState, _):
        key, k_act, k_env, k_upd = jax.random.split(state.key, 4)
        action, carry = steps.act(state, k_act)
        ts = jax.vmap(env.step)(
            jax.random.split(k_env, n), state.env_state, to_env_action(env, action)
        )
        # the env batch splits over a data mesh's devices (a no-op otherwise)
        ts = constrain_data(ts)
        return steps.absorb(state, action, carry, ts, key, k_upd), None

    def run_chunk(state: LoopState):
        state, _ = jax.lax.scan(vector_step, state, None, length=per_chunk)
        return end_of_chunk(state, state.metrics, eval_env, agent.policy, config.eval_episodes)

    return Loop(init, run_chunk, per_chunk * n)


def evaluate(env, policy: Policy, agent_state, key, episodes: int, train_env_state=None):
    """Mean undiscounted return of ``episodes`` parallel deterministic episodes.

    Each env copy runs until its first episode ends (or ``max_episode_steps``); rewards after
    that are masked, so auto-reset never leaks a second episode into the score. When the
    training env normalises observations, ``train_env_state`` (its state) gives the moments
    evaluation normalises with, frozen (:func:`~ajax.environments.normalize.reset_for_eval`).
    """
    if env.spec.max_episode_steps is None:
        raise ValueError(f"{env.spec.env_id} has no time limit: evaluation needs max_episode_steps")
    moments = obs_moments(train_env_state)
    moments = None if moments is None else pooled_moments(moments)

    def observe(ret, step):
        return ret + jnp.where(step.alive, step.out.reward, 0.0), None

    ret, _ = unroll(env, policy, agent_state, key, episodes, env.spec.max_episode_steps, observe,
                    jnp.zeros((episodes,), jnp.float32),
                    reset=lambda k: reset_for_eval(env, k, moments))  # fmt: skip
    return ret.mean()


def random_return(env, key, episodes: int = 10) -> jax.Array:
    """Mean return of ``episodes`` parallel episodes of uniformly random actions
    (:func:`~ajax.training.rollout.random_actions`), scored as :func:`evaluate` scores: the
    floor a normalised score (R - R_random) / (R_expert - R_random) starts from."""
    act = lambda agent, obs, k, det: random_actions(env, k, obs.shape[0])  # noqa: E731
    return evaluate(env, stateless(act), None, key, episodes)


def end_of_chunk(state, metrics: dict, eval_env, policy: Policy, episodes: int):
    """Close a chunk of a loop: evaluate ``state.agent`` deterministically and build the record
    (``step``, ``eval_return``, ``train_return`` and ``metrics``, one value each)."""
    key, k_eval = jax.random.split(state.key)
    record = {
        "step": state.step,
        "eval_return": evaluate(
            eval_env, policy, state.agent, k_eval, episodes, getattr(state, "env_state", None)
        ),
        "train_return": state.episodes.last_return_mean(),
        **metrics,
    }
    return state.replace(key=key), record
