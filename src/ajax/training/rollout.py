"""Acting in an env: random and agent actions, episode returns, deterministic evaluation."""

from __future__ import annotations

from collections.abc import Callable

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from ajax.environments.utils import agent_action_to_env
from ajax.networks.config import EnvConfig


def env_config_of(env, n_envs: int = 1) -> EnvConfig:
    """The networks toolbox's :class:`EnvConfig` of ``env`` (its spec, ``n_envs`` copies)."""
    spec = env.spec
    return EnvConfig(
        obs_shape=tuple(spec.observation_shape),
        action_dim=spec.action_dim,
        continuous=not spec.discrete,
        n_envs=n_envs,
        action_low=None if spec.discrete else spec.action_space.low,
        action_high=None if spec.discrete else spec.action_space.high,
    )


@custom_vmap
def lockstep(x: jax.Array) -> jax.Array:
    """``x`` itself; under ``jax.vmap`` the first seed's value, unbatched.

    Only for values every vmapped seed shares because all seeds step together: step counters
    and what depends on them alone, never on a seed's data (episode ends, buffer contents),
    since the other seeds' values are dropped. A ``lax.cond`` on a batched predicate becomes a select that
    computes both branches, so without this every seed would run the update (and TD-MPC2 its
    planner) during the random-action warm-up and discard the result.
    """
    return x


@lockstep.def_vmap
def _lockstep_vmap(axis_size, in_batched, x):
    del axis_size
    return (x[0] if in_batched[0] else x), False


def random_actions(env, key, n: int) -> jax.Array:
    """``n`` uniformly random actions in agent units: [-1, 1] boxes, or discrete ids."""
    spec = env.spec
    if spec.discrete:
        return jax.random.randint(key, (n,), 0, spec.action_dim)
    return jax.random.uniform(key, (n, spec.action_dim), minval=-1.0, maxval=1.0)


def to_env_action(env, action: jax.Array) -> jax.Array:
    """Agent units to the env's: the affine map of [-1, 1] onto its box, ids unchanged."""
    space = env.spec.action_space
    if env.spec.discrete:
        return action
    low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    return agent_action_to_env(jnp.clip(action, -1.0, 1.0), low, high)


class EpisodeTracker(flax.struct.PyTreeNode):
    """Per-env running return and the return of each env's last finished episode."""

    running: jax.Array
    last: jax.Array
    finished: jax.Array

    @classmethod
    def create(cls, n: int) -> EpisodeTracker:
        zeros = jnp.zeros((n,), jnp.float32)
        return cls(running=zeros, last=zeros, finished=jnp.zeros((n,), jnp.int32))

    def update(self, reward: jax.Array, done: jax.Array) -> EpisodeTracker:
        running = self.running + reward.astype(jnp.float32)
        return self.replace(
            running=jnp.where(done, 0.0, running),
            last=jnp.where(done, running, self.last),
            finished=self.finished + done.astype(jnp.int32),
        )

    def last_return_mean(self) -> jax.Array:
        """Mean over envs of the last finished episode's return (NaN before any finished)."""
        has = self.finished > 0
        total = jnp.sum(jnp.where(has, self.last, 0.0))
        return jnp.where(has.any(), total / jnp.maximum(has.sum(), 1), jnp.nan)


def evaluate(
    env, policy: Callable[[jax.Array, jax.Array], jax.Array], key, episodes: int
) -> jax.Array:
    """Mean undiscounted return of ``episodes`` parallel episodes of ``policy(obs, key)``.

    Each env copy runs until its first episode ends (or ``max_episode_steps``); rewards after
    that are masked, so auto-reset never leaks a second episode into the score.
    """
    k_reset, k_run = jax.random.split(key)
    ts = jax.vmap(env.reset)(jax.random.split(k_reset, episodes))
    obs, state = ts.obs, ts.state

    def step(carry, k):
        obs, state, ret, alive = carry
        k_act, k_env = jax.random.split(k)
        action = policy(obs, k_act)
        out = jax.vmap(env.step)(
            jax.random.split(k_env, episodes), state, to_env_action(env, action)
        )
        ret = ret + jnp.where(alive, out.reward, 0.0)
        alive = alive & ~(out.terminated | out.truncated)
        return (out.obs, out.state, ret, alive), None

    init = (obs, state, jnp.zeros((episodes,), jnp.float32), jnp.ones((episodes,), bool))
    if env.spec.max_episode_steps is None:
        raise ValueError(f"{env.spec.env_id} has no time limit: evaluation needs max_episode_steps")
    keys = jax.random.split(k_run, env.spec.max_episode_steps)
    (_, _, ret, _), _ = jax.lax.scan(step, init, keys)
    return ret.mean()


def end_of_chunk(state, metrics: dict, eval_env, act, episodes: int):
    """Close a chunk of a loop: evaluate ``state.agent`` deterministically and build the record
    (``step``, ``eval_return``, ``train_return`` and the last value of each update metric)."""
    key, k_eval = jax.random.split(state.key)
    eval_return = evaluate(eval_env, lambda o, k: act(state.agent, o, k, True), k_eval, episodes)
    record = {
        "step": state.step,
        "eval_return": eval_return,
        "train_return": state.episodes.last_return_mean(),
        **{k: v[-1] for k, v in metrics.items()},
    }
    return state.replace(key=key), record
