"""The on-policy loop: collect ``n_steps`` x ``n_envs`` -> update, under ``jax.jit`` + ``lax.scan``.

Same chunk structure as :mod:`ajax.training.off_policy`: ``init(key)`` and
``run_chunk(state) -> (state, record)``, a chunk being the rollouts that fill ``eval_freq`` env
steps followed by a deterministic evaluation. The rollout keeps each step's true last
observation (``final_obs``) so the agent can bootstrap through time-limit truncations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp

from ajax.training.config import LoopConfig
from ajax.training.loop import end_of_chunk, stateless
from ajax.training.rollout import EpisodeTracker, to_env_action


class Rollout(NamedTuple):
    """Time-major ``[T, N, ...]`` collected data."""

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array


class OnPolicyAgent(NamedTuple):
    """``init(key, env)``; ``act(state, obs, key, deterministic) -> action``;
    ``sample(state, obs, key) -> (action, log_prob, value)``;
    ``update(state, rollout, last_obs, key) -> (state, metrics)``."""

    init: Callable[..., Any]
    act: Callable[..., jax.Array]
    sample: Callable[..., tuple]
    update: Callable[..., tuple[Any, dict]]


class OnPolicyState(flax.struct.PyTreeNode):
    agent: Any
    env_state: Any
    obs: jax.Array
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
        obs, env_state = ts.obs, ts.state
        return OnPolicyState(
            agent=agent.init(k_agent, env),
            env_state=env_state,
            obs=obs,
            episodes=EpisodeTracker.create(n),
            key=k_run,
            step=jnp.zeros((), jnp.int32),
        )

    def collect(state: OnPolicyState, _):
        key, k_act, k_env = jax.random.split(state.key, 3)
        action, log_prob, value = agent.sample(state.agent, state.obs, k_act)
        out = jax.vmap(env.step)(
            jax.random.split(k_env, n), state.env_state, to_env_action(env, action)
        )
        data = Rollout(
            state.obs,
            action,
            log_prob,
            value,
            out.reward.astype(jnp.float32),
            out.terminated,
            out.truncated,
            out.final_obs,
        )
        state = state.replace(
            env_state=out.state,
            obs=out.obs,
            episodes=state.episodes.update(out.reward, out.terminated | out.truncated),
            key=key,
            step=state.step + n,
        )
        return state, data

    def iteration(state: OnPolicyState, _):
        state, rollout = jax.lax.scan(collect, state, None, length=n_steps)
        key, k_upd = jax.random.split(state.key)
        agent_state, metrics = agent.update(state.agent, rollout, state.obs, k_upd)
        return state.replace(agent=agent_state, key=key), metrics

    def run_chunk(state: OnPolicyState):
        state, metrics = jax.lax.scan(iteration, state, None, length=per_chunk)
        last = {k: v[-1] for k, v in metrics.items()}
        return end_of_chunk(state, last, eval_env, stateless(agent.act), config.eval_episodes)

    return init, run_chunk, per_chunk * n * n_steps
