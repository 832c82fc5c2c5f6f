"""The off-policy loop: collect -> store -> update, the whole run under ``jax.jit`` + ``lax.scan``.

A run is a sequence of chunks of ``eval_freq`` env steps, each ending with a deterministic
evaluation on separate env copies. :func:`make_off_policy` returns pure functions: ``init(key)``
and ``run_chunk(state) -> (state, record)``; ``train(key)`` scans every chunk in one jitted call
and vmaps over seeds, while the command line runs the same ``run_chunk`` one call at a time to
log, checkpoint and resume between chunks, so a resumed run is bitwise the uninterrupted one.
Replay is a flashbax item buffer of SARS' transitions whose ``next_obs`` is the true last
observation on done (the env's auto-reset keeps it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flashbax as fbx
import flax.struct
import jax
import jax.numpy as jnp

from ajax.training.config import OffPolicyConfig
from ajax.training.rollout import (
    EpisodeTracker,
    end_of_chunk,
    lockstep,
    random_actions,
    to_env_action,
)


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
    ``update(agent_state, batch: Transition, key) -> (agent_state, metrics dict)``.
    """

    init: Callable[..., Any]
    act: Callable[..., jax.Array]
    update: Callable[..., tuple[Any, dict]]


class OffPolicyState(flax.struct.PyTreeNode):
    """Everything a run needs to continue: checkpointing this resumes it exactly."""

    agent: Any
    env_state: Any
    obs: jax.Array
    buffer: Any
    episodes: EpisodeTracker
    key: jax.Array
    step: jax.Array  # env steps so far, all envs together


class OffPolicyLoop(NamedTuple):
    """The loop's pieces: ``init``/``run_chunk`` drive a JAX env; ``explore`` and
    ``store_and_learn`` are what a host-env loop calls around its simulator steps."""

    init: Callable
    run_chunk: Callable
    steps_per_chunk: int
    explore: Callable
    store_and_learn: Callable
    init_learner: Callable


def make_off_policy(config: OffPolicyConfig, env, eval_env, agent: OffPolicyAgent) -> OffPolicyLoop:
    """The off-policy loop of ``agent`` on ``env``; see the module docstring."""
    n = config.n_envs
    per_chunk = max(1, config.eval_freq // n)
    buffer = fbx.make_item_buffer(
        max_length=max(config.buffer_size // n, 1) * n,
        min_length=config.batch_size,
        sample_batch_size=config.batch_size,
        add_batches=True,
    )

    def init_learner(key, obs_example):
        """Agent state and an empty replay buffer shaped after one observation."""
        k_agent, k_act = jax.random.split(key)
        example = Transition(
            obs=obs_example,
            action=random_actions(env, k_act, 1)[0],
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), jnp.float32),
            next_obs=obs_example,
        )
        return agent.init(k_agent, env), buffer.init(example)

    def init(key) -> OffPolicyState:
        k_learn, k_env, k_run = jax.random.split(key, 3)
        ts = jax.vmap(env.reset)(jax.random.split(k_env, n))
        agent_state, buffer_state = init_learner(k_learn, ts.obs[0])
        return OffPolicyState(
            agent=agent_state,
            env_state=ts.state,
            obs=ts.obs,
            buffer=buffer_state,
            episodes=EpisodeTracker.create(n),
            key=k_run,
            step=jnp.zeros((), jnp.int32),
        )

    def explore(agent_state, obs, step, key):
        """Uniform random actions before ``learning_starts``, the policy's samples after."""
        k_act, k_rand = jax.random.split(key)
        return jax.lax.cond(
            lockstep(step < config.learning_starts),
            lambda: random_actions(env, k_rand, obs.shape[0]),
            lambda: agent.act(agent_state, obs, k_act, False),
        )

    def update_phase(agent_state, buffer_state, key):
        def one(agent_state, k):
            k_sample, k_update = jax.random.split(k)
            batch = buffer.sample(buffer_state, k_sample).experience
            return agent.update(agent_state, batch, k_update)

        keys = jax.random.split(key, config.gradient_steps)
        agent_state, metrics = jax.lax.scan(one, agent_state, keys)
        return agent_state, jax.tree.map(lambda m: m[-1], metrics)

    def store_and_learn(agent_state, buffer_state, transition: Transition, step, key):
        """Add one vector step of transitions; update when due. ``step``: env steps so far,
        counting this one."""
        buffer_state = buffer.add(buffer_state, transition)
        due = lockstep((step >= config.learning_starts) & ((step // n) % config.train_freq == 0))
        agent_state, metrics = jax.lax.cond(
            due,
            lambda: update_phase(agent_state, buffer_state, key),
            lambda: (agent_state, _zero_metrics(update_phase, agent_state, buffer_state, key)),
        )
        return agent_state, buffer_state, metrics

    def env_step(state: OffPolicyState, _):
        key, k_act, k_env, k_upd = jax.random.split(state.key, 4)
        action = explore(state.agent, state.obs, state.step, k_act)
        ts = jax.vmap(env.step)(
            jax.random.split(k_env, n), state.env_state, to_env_action(env, action)
        )
        transition = Transition(
            obs=state.obs,
            action=action,
            reward=ts.reward.astype(jnp.float32),
            terminated=ts.terminated.astype(jnp.float32),
            next_obs=ts.final_obs,
        )
        agent_state, buffer_state, metrics = store_and_learn(
            state.agent, state.buffer, transition, state.step + n, k_upd
        )
        state = state.replace(
            agent=agent_state,
            env_state=ts.state,
            obs=ts.obs,
            buffer=buffer_state,
            episodes=state.episodes.update(ts.reward, ts.terminated | ts.truncated),
            key=key,
            step=state.step + n,
        )
        return state, metrics

    def run_chunk(state: OffPolicyState):
        state, metrics = jax.lax.scan(env_step, state, None, length=per_chunk)
        return end_of_chunk(state, metrics, eval_env, agent.act, config.eval_episodes)

    return OffPolicyLoop(init, run_chunk, per_chunk * n, explore, store_and_learn, init_learner)


def _zero_metrics(update_phase, agent_state, buffer_state, key) -> dict:
    """Zeros shaped like the update's metrics, for the steps that do not update."""
    shapes = jax.eval_shape(update_phase, agent_state, buffer_state, key)[1]
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
