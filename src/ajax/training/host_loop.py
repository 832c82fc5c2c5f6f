"""Training on host (non-JAX) environments: gymnasium and dm_control.

The simulator steps on the host in Python; everything else is the same jitted code as the JAX
loops (the replay loop's two halves of a tick, :func:`~ajax.training.loop.tick_steps`, and the
rollout agents' ``sample``/``update``), vmapped over seeds. Seeds share one vectorised host env of
``n_seeds * n_envs`` simulators. A chunk ends with a deterministic evaluation on separate env
copies, exactly as in the JAX loops. Checkpoints hold the learner (agent, replay, keys); on
resume the simulators restart their episodes, since their state lives outside JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from ajax.environments import make_env
from ajax.environments.host_wrappers import HostNormalizeObservation
from ajax.environments.types import HostEnv, TimeStep
from ajax.training.driver import seed_keys
from ajax.training.loop import tick_steps
from ajax.training.rollout import EpisodeTracker, to_env_action
from ajax.training.sharding import per_seed
from ajax.training.types import Policy, ReplayAgent, Rollout, RolloutEnd, Tick
from ajax.training.unroll import host_unroll


class HostLearnerState(flax.struct.PyTreeNode):
    """What a host rollout run checkpoints: the learner of every seed (leading seed axis)."""

    agent: Any
    buffer: Any
    episodes: EpisodeTracker
    key: jax.Array
    step: jax.Array


def host_evaluate(env, policy: Policy, act, agent_states, keys, n_seeds: int) -> np.ndarray:
    """Mean return of one deterministic episode on each of ``env``'s simulators, per seed.

    ``act`` is the jitted ``policy.act``; the policy's carry starts fresh (every simulator is at
    an episode start) and follows the ticks, so planners and recurrent policies act as in the
    JAX evaluation.
    """
    returns = []
    for s in range(n_seeds):
        agent_s = jax.tree.map(lambda x: x[s], agent_states)
        ret = np.zeros(env.spec.n_envs)
        steps = host_unroll(env, act, policy, agent_s, keys[s], 10_000 + s,
                            env.spec.max_episode_steps)  # fmt: skip
        for _, step in steps:
            ret += np.where(step.alive, step.out.reward, 0.0)
        returns.append(ret.mean())
    return np.asarray(returns, np.float32)


class HostRun:
    """A run of ``n_seeds`` seeds on a host env; ``run_chunk()`` returns a record per seed."""

    def __init__(self, algo, seeds: list[int], steps_per_chunk: int):
        self.algo, self.n_seeds = algo, len(seeds)
        config = algo.config
        self.n = config.n_envs
        opts = algo.env_options
        self.env = make_env(algo.env_id, n_envs=self.n_seeds * self.n, **opts)
        self.eval_env = make_env(algo.env_id, n_envs=config.eval_episodes, **opts)
        self.steps_per_chunk = steps_per_chunk
        self.keys = seed_keys(seeds)
        self.obs = self._split(self.env.reset(seed=seeds[0]).obs)
        self.first_seed = seeds[0]
        self.policy = algo.policy()
        self._act = algo.jit(self.policy.act, static_argnums=4)

    def _split(self, x: np.ndarray) -> jax.Array:
        return jnp.asarray(x).reshape((self.n_seeds, self.n) + x.shape[1:])

    def _merge(self, x: jax.Array) -> np.ndarray:
        x = np.asarray(x)
        return x.reshape((self.n_seeds * self.n,) + x.shape[2:])

    def _host_step(self, action):
        ts = self.env.step(np.asarray(to_env_action(self.env, jnp.asarray(self._merge(action)))))
        return jax.tree.map(
            lambda x: self._split(np.asarray(x)),
            (
                ts.obs,
                ts.reward.astype(np.float32),
                ts.terminated,
                ts.truncated,
                ts.final_obs,
            ),
        )

    def restart_episodes(self) -> None:
        """After a restore: the simulators' episodes restart (their state is not checkpointed).
        The off-policy and on-policy runs read the simulators' reset as they are."""

    def close(self) -> None:
        """Close the simulators (renderers free their GL contexts here, not at exit)."""
        self.env.close()
        self.eval_env.close()

    def _record(self, s, metrics, key) -> dict:
        """A chunk's record per seed: the JAX loops' ``step``, ``eval_return``,
        ``train_return`` and the last update's metrics."""
        return {
            "step": np.asarray(s.step),
            "eval_return": self.evaluate(s.agent, key),
            "train_return": np.asarray(jax.vmap(EpisodeTracker.last_return_mean)(s.episodes)),
            **{k: np.asarray(v) for k, v in metrics.items()},
        }

    def evaluate(self, agent_states, key) -> np.ndarray:
        if isinstance(self.eval_env, HostNormalizeObservation):  # normalise as training does
            self.eval_env.moments, self.eval_env.frozen = self.env.moments, True
        return host_evaluate(
            self.eval_env,
            self.policy,
            self._act,
            agent_states,
            jax.random.split(key, self.n_seeds),
            self.n_seeds,
        )


class HostOnPolicyRun(HostRun):
    """:class:`HostRun` of an on-policy agent (PPO, PQN, UDRL): host rollouts, jitted updates.

    The policy's carry (a recurrent state, UDRL's command) lives beside the simulators, as their
    observations do: like them it is not checkpointed, and a resumed run starts every episode
    afresh (``is_first``), where the policy resets its carry.
    """

    def __init__(self, algo, agent, n_steps: int, steps_per_chunk: int, seeds: list[int]):
        super().__init__(algo, seeds, steps_per_chunk)
        self.n_steps = n_steps
        self.state = HostLearnerState(
            self.algo.jit(per_seed(lambda k: agent.init(k, self.env)))(self.keys),
            None,
            jax.vmap(lambda _: EpisodeTracker.create(self.n))(self.keys),
            self.keys,
            jnp.zeros((self.n_seeds,), jnp.int32),
        )
        self._sample = self.algo.jit(per_seed(agent.sample))
        self._update = self.algo.jit(per_seed(agent.update))
        self.carry = jax.vmap(lambda _: agent.policy.init(self.n))(self.keys)
        self.is_first = jnp.ones(self.obs.shape[:2], bool)
        self.reward = jnp.zeros(self.obs.shape[:2])

    def _tick(self) -> Tick:
        """The tick the seeds act on (host envs report no explicit end flags)."""
        return Tick.from_obs(self.obs, jnp.asarray(self.reward), jnp.asarray(self.is_first))

    def run_chunk(self) -> dict:
        s, metrics = self.state, {}
        for _ in range(max(1, self.steps_per_chunk // (self.n * self.n_steps))):
            data, carry0 = [], self.carry
            for _ in range(self.n_steps):
                keys = jax.vmap(jax.random.split)(s.key)
                tick = self._tick()
                action, log_prob, value, self.carry = self._sample(
                    s.agent, self.carry, tick, keys[:, 1]
                )
                obs, reward, term, trunc, final = self._host_step(action)
                data.append(Rollout(self.obs, action, log_prob, value, reward, term, trunc, final,
                                    tick.is_first, self.carry))  # fmt: skip
                s = s.replace(
                    key=keys[:, 0],
                    step=s.step + self.n,
                    episodes=jax.vmap(EpisodeTracker.update)(s.episodes, reward, term | trunc),
                )
                self.obs, self.reward, self.is_first = obs, reward, term | trunc
            rollout = jax.tree.map(lambda *x: jnp.stack(x, axis=1), *data)  # [S, T, N, ...]
            keys = jax.vmap(jax.random.split)(s.key)
            end = RolloutEnd(self._tick(), carry0)
            agent, metrics = self._update(s.agent, rollout, end, keys[:, 1])
            s = s.replace(agent=agent, key=keys[:, 0])
        key = jax.vmap(jax.random.split)(s.key)
        self.state = s.replace(key=key[:, 0])
        return self._record(s, metrics, key[0, 1])


class HostReplayRun(HostRun):
    """:class:`HostRun` of a shared-loop :class:`~ajax.training.loop.ReplayAgent` (TD-MPC2,
    DreamerV3): the loop's own two halves of a tick (:func:`~ajax.training.loop.tick_steps`),
    each one jitted call vmapped over seeds, around the host step, so acting, rows, the update
    clock and learning are the JAX loop's code. ``wrap`` wraps the training simulators, e.g.
    in :class:`~ajax.environments.host.HostExplicitReset` (DreamerV3's hold ticks). The policy
    carry is checkpointed with the learner; on resume every episode restarts (``is_first``).
    """

    def __init__(self, algo, agent: ReplayAgent, seeds: list[int], steps_per_chunk: int,
                 wrap: Callable[[HostEnv], HostEnv] | None = None):  # fmt: skip
        super().__init__(algo, seeds, steps_per_chunk)
        if wrap is not None:
            self.env = wrap(self.env)
        steps = tick_steps(self.n, self.env, agent)
        tick = self._first_tick(seeds[0])
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(self.keys)  # the JAX loop's split
        init = lambda k, t: steps.init_state((k[0], k[2]), t, None)
        self.state = self.algo.jit(per_seed(init))(keys, tick)
        self._tick_act = self.algo.jit(per_seed(steps.act))
        self._absorb = self.algo.jit(per_seed(steps.absorb))

    def _first_tick(self, seed: int) -> Tick:
        return Tick.reset(self._split_ts(self.env.reset(seed=seed)))

    def _split_ts(self, ts: TimeStep) -> TimeStep:
        """A host TimeStep as jnp arrays with a leading seed axis ``[S, N, ...]``."""
        fields = (ts.obs, ts.reward.astype(np.float32), ts.terminated, ts.truncated, ts.final_obs)
        info = {k: self._split(np.asarray(v)) for k, v in ts.info.items()}
        return TimeStep(None, *(self._split(np.asarray(x)) for x in fields), info)

    def restart_episodes(self) -> None:
        """After a restore: the simulators restart, so every env's next tick opens an episode."""
        self.state = self.state.replace(tick=self._first_tick(self.first_seed))

    def run_chunk(self) -> dict:
        s = self.state
        for _ in range(self.steps_per_chunk // self.n):
            keys = jax.vmap(lambda k: jax.random.split(k, 4))(s.key)
            action, carry = self._tick_act(s, keys[:, 1])
            env_action = to_env_action(self.env, jnp.asarray(self._merge(action)))
            ts = self._split_ts(self.env.step(np.asarray(env_action)))
            s = self._absorb(s, action, carry, ts, keys[:, 0], keys[:, 3])
        key = jax.vmap(jax.random.split)(s.key)
        self.state = s.replace(key=key[:, 0])
        return self._record(s, s.metrics, key[0, 1])
