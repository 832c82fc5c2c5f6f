"""The off-policy loop: collect -> store -> update, the whole run under ``jax.jit`` + ``lax.scan``.

SAC, TD3, DQN, REDQ, CrossQ and ASAC plug into the shared loop (:mod:`ajax.training.loop`, and
its host half for host envs) through :func:`replay_agent`: a stateless policy, an update clock
of ``gradient_steps`` every ``train_freq`` steps after ``learning_starts``, and a writer of
transitions. Replay is a flashbax item buffer of SARS' transitions whose ``next_obs`` is the true last
observation on done (the env's auto-reset keeps it).
"""

from __future__ import annotations

import flashbax as fbx
import jax
import jax.numpy as jnp

from ajax.training.config import OffPolicyConfig
from ajax.training.loop import Loop, make_loop
from ajax.training.rollout import random_actions
from ajax.training.sharding import constrain_data
from ajax.training.types import (  # noqa: F401  (Transition, OffPolicyAgent: re-exported)
    Clock,
    OffPolicyAgent,
    ReplayAgent,
    Transition,
    stateless,
)


def replay_agent(config: OffPolicyConfig, env, agent: OffPolicyAgent) -> ReplayAgent:
    """``agent`` on the shared replay loop (:func:`ajax.training.loop.make_loop` for JAX envs,
    :class:`~ajax.training.host_loop.HostReplayRun` for host envs); see the module docstring."""
    n = config.n_envs
    buffer = fbx.make_item_buffer(
        max_length=max(config.buffer_size // n, 1) * n,
        min_length=config.batch_size,
        sample_batch_size=config.batch_size,
        add_batches=True,
    )

    def init(key, tick):
        """Agent state and an empty replay buffer shaped after one observation (the
        demonstrations, if any, already in it)."""
        obs_example = tick.obs[0]
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

    return ReplayAgent(
        init=init,
        policy=stateless(agent.act),
        write=write,
        clock=Clock(init=lambda: (), tick=lambda c, step: (due(step), c)),
        learn=learn,
        random_steps=config.learning_starts,
    )


def make_off_policy(config: OffPolicyConfig, env, eval_env, agent: OffPolicyAgent) -> Loop:
    """The off-policy loop of ``agent`` on the JAX env ``env``."""
    return make_loop(config, env, eval_env, replay_agent(config, env, agent))
