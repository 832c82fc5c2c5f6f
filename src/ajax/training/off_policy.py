"""The off-policy loop: collect -> store -> update, the whole run under ``jax.jit`` + ``lax.scan``.

SAC, TD3, DQN, REDQ and CrossQ plug into the shared loop (:mod:`ajax.training.loop`) with a stateless policy,
an update clock of ``gradient_steps`` every ``train_freq`` steps after ``learning_starts``, and a
writer of transitions. Replay is a flashbax item buffer of SARS' transitions whose ``next_obs`` is the true last
observation on done (the env's auto-reset keeps it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flashbax as fbx
import jax
import jax.numpy as jnp

from ajax.training.config import OffPolicyConfig
from ajax.training.loop import Clock, ReplayAgent, make_loop, stateless, zeros_like_shapes
from ajax.training.rollout import lockstep, random_actions
from ajax.training.sharding import constrain_data


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


class OffPolicyLoop(NamedTuple):
    """The loop's pieces: ``init``/``run_chunk`` drive a JAX env (:func:`ajax.training.loop.make_loop`);
    ``explore`` and ``store_and_learn`` are what a host-env loop calls around its simulator steps."""

    init: Callable
    run_chunk: Callable
    steps_per_chunk: int
    explore: Callable
    store_and_learn: Callable
    init_learner: Callable


def make_off_policy(config: OffPolicyConfig, env, eval_env, agent: OffPolicyAgent) -> OffPolicyLoop:
    """The off-policy loop of ``agent`` on ``env``; see the module docstring."""
    n = config.n_envs
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
        buffer_state = buffer.init(example)
        demos = agent.demonstrations(k_agent, env)
        if demos is not None:
            buffer_state = buffer.add(buffer_state, demos)
        return agent.init(k_agent, env), buffer_state

    def explore(agent_state, obs, step, key):
        """Uniform random actions before ``learning_starts``, the policy's samples after."""
        k_act, k_rand = jax.random.split(key)
        return jax.lax.cond(
            lockstep(step < config.learning_starts),
            lambda: random_actions(env, k_rand, obs.shape[0]),
            lambda: agent.act(agent_state, obs, k_act, False),
        )

    def learn(agent_state, buffer_state, count, key):
        """One update phase of ``gradient_steps`` updates (``count`` is that or 0)."""
        del count

        def one(agent_state, k):
            k_sample, k_update = jax.random.split(k)
            # the update batch splits over a data mesh's devices (a no-op otherwise)
            batch = constrain_data(buffer.sample(buffer_state, k_sample).experience)
            return agent.update(agent_state, batch, k_update)

        keys = jax.random.split(key, config.gradient_steps)
        agent_state, metrics = jax.lax.scan(one, agent_state, keys)
        return agent_state, buffer_state, jax.tree.map(lambda m: m[-1], metrics)

    def due(step) -> jax.Array:
        """Updates this vector step: ``gradient_steps`` every ``train_freq`` steps per env once
        past ``learning_starts`` (``step`` counts this vector step), else 0."""
        on = (step >= config.learning_starts) & ((step // n) % config.train_freq == 0)
        return jnp.where(on, config.gradient_steps, 0).astype(jnp.int32)

    def write(buffer_state, tick, action, carry, ts):
        del carry
        transition = Transition(
            obs=tick.obs,
            action=action,
            reward=ts.reward.astype(jnp.float32),
            terminated=ts.terminated.astype(jnp.float32),
            next_obs=ts.final_obs,
        )
        return buffer.add(buffer_state, transition)

    def store_and_learn(agent_state, buffer_state, transition: Transition, step, key):
        """Add one vector step of transitions; update when due. ``step``: env steps so far,
        counting this one."""
        buffer_state = buffer.add(buffer_state, transition)
        count = lockstep(due(step))
        agent_state, _, metrics = jax.lax.cond(
            count > 0,
            lambda: learn(agent_state, buffer_state, count, key),
            lambda: (
                agent_state,
                buffer_state,
                zeros_like_shapes(learn, agent_state, buffer_state, count, key)[2],
            ),
        )
        return agent_state, buffer_state, metrics

    replay_agent = ReplayAgent(
        init=lambda key, tick: init_learner(key, tick.obs[0]),
        policy=stateless(agent.act),
        write=write,
        clock=Clock(init=lambda: (), tick=lambda c, step: (due(step), c)),
        learn=learn,
        random_steps=config.learning_starts,
    )
    loop = make_loop(config, env, eval_env, replay_agent)
    return OffPolicyLoop(
        loop.init, loop.run_chunk, loop.steps_per_chunk, explore, store_and_learn, init_learner
    )
