"""Training on host (non-JAX) environments: gymnasium and dm_control.

The simulator steps on the host in Python; everything else is the same jitted code as the JAX
loops (the agent's ``act``/``sample``/``update`` and the off-policy loop's ``explore`` and
``store_and_learn``), vmapped over seeds. Seeds share one vectorised host env of
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
from ajax.training.algorithm import Algorithm, Chunks, n_chunks_for
from ajax.training.loop import Policy, ReplayAgent, Tick, tick_steps
from ajax.training.memory import replay_bytes
from ajax.training.off_policy import OffPolicyLoop, Transition, make_off_policy
from ajax.training.on_policy import Rollout, RolloutEnd, make_on_policy
from ajax.training.rollout import EpisodeTracker, to_env_action
from ajax.training.sharding import per_seed


class HostLearnerState(flax.struct.PyTreeNode):
    """What a host run checkpoints: the learner of every seed (leading seed axis)."""

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
    n = env.spec.n_envs
    for s in range(n_seeds):
        agent_s = jax.tree.map(lambda x: x[s], agent_states)
        ts = env.reset(seed=10_000 + s)
        obs, ret, reward = ts.obs, np.zeros(n), np.zeros(n, np.float32)
        alive, first = np.ones(n, bool), np.ones(n, bool)
        key, carry = keys[s], policy.init(n)
        for _ in range(env.spec.max_episode_steps):
            key, k = jax.random.split(key)
            no = jnp.zeros((n,), bool)
            tick = Tick(jnp.asarray(obs), jnp.asarray(reward), jnp.asarray(first), no, no)
            action, carry = act(agent_s, carry, tick, k, True)
            ts = env.step(np.asarray(to_env_action(env, action)))
            ret += np.where(alive, ts.reward, 0.0)
            alive &= ~(ts.terminated | ts.truncated)
            obs, reward, first = ts.obs, ts.reward.astype(np.float32), ts.terminated | ts.truncated
            if not alive.any():
                break
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
        self.keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(seeds))
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


class HostOffPolicyRun(HostRun):
    """:class:`HostRun` of an off-policy agent (SAC, TD3)."""

    def __init__(self, algo, loop: OffPolicyLoop, seeds: list[int]):
        super().__init__(algo, seeds, loop.steps_per_chunk)
        agent, buffer = self.algo.jit(per_seed(loop.init_learner))(self.keys, self.obs[:, 0])
        self.state = HostLearnerState(
            agent,
            buffer,
            jax.vmap(lambda _: EpisodeTracker.create(self.n))(self.keys),
            self.keys,
            jnp.zeros((self.n_seeds,), jnp.int32),
        )
        self._explore = self.algo.jit(per_seed(loop.explore))
        self._learn = self.algo.jit(per_seed(loop.store_and_learn))

    def run_chunk(self) -> dict:
        s, metrics = self.state, {}
        for _ in range(self.steps_per_chunk // self.n):
            keys = jax.vmap(lambda k: jax.random.split(k, 3))(s.key)
            action = self._explore(s.agent, self.obs, s.step, keys[:, 1])
            obs, reward, term, trunc, final = self._host_step(action)
            transition = Transition(self.obs, action, reward, term.astype(jnp.float32), final)
            agent, buffer, metrics = self._learn(
                s.agent, s.buffer, transition, s.step + self.n, keys[:, 2]
            )
            s = s.replace(
                agent=agent,
                buffer=buffer,
                key=keys[:, 0],
                step=s.step + self.n,
                episodes=jax.vmap(EpisodeTracker.update)(s.episodes, reward, term | trunc),
            )
            self.obs = obs
        key = jax.vmap(jax.random.split)(s.key)
        self.state = s.replace(key=key[:, 0])
        return self._record(s, metrics, key[0, 1])

    def _record(self, s, metrics, key) -> dict:
        return {
            "step": np.asarray(s.step),
            "eval_return": self.evaluate(s.agent, key),
            "train_return": np.asarray(jax.vmap(EpisodeTracker.last_return_mean)(s.episodes)),
            **{k: np.asarray(v) for k, v in metrics.items()},
        }


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
        no = jnp.zeros(self.obs.shape[:2], bool)
        return Tick(self.obs, jnp.asarray(self.reward), jnp.asarray(self.is_first), no, no)

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
        return HostOffPolicyRun._record(self, s, metrics, key[0, 1])


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
        return HostOffPolicyRun._record(self, s, s.metrics, key[0, 1])


class ReplayAlgorithm(Algorithm):
    """Base of the shared-loop agents (TD-MPC2, DreamerV3): subclasses give
    :meth:`replay_agent` and, for JAX envs, :meth:`make_chunks`; host runs and the replay's
    size come from the same agent. ``host_wrap`` wraps the host simulators (DreamerV3:
    :class:`~ajax.environments.host.HostExplicitReset`)."""

    host_wrap: Callable[[HostEnv], HostEnv] | None = None
    data_parallel = True
    host_replay = True

    def replay_agent(self, total_steps: int) -> ReplayAgent:
        """The agent's :class:`~ajax.training.loop.ReplayAgent` for a run of that length."""
        raise NotImplementedError

    def require_jax_env(self) -> None:
        """:meth:`make_chunks` is for JAX envs; host envs go through :meth:`host_run`."""
        if not self.is_jax:
            raise ValueError(
                f"{self.env_id!r} is a host env: its runs go through host_run ({self.name}'s "
                "train and `ajax train` pick it)"
            )

    def host_run(self, total_steps: int, seeds: list[int]):
        c = self.config
        per_chunk = max(1, c.eval_freq // c.n_envs) * c.n_envs
        agent = self.replay_agent(total_steps)
        return HostReplayRun(self, agent, seeds, per_chunk, wrap=self.host_wrap)

    def replay_bytes(self, total_steps: int) -> tuple[int, int]:
        return replay_bytes(self.replay_agent(total_steps), self.env.spec, self.config.n_envs)


class OffPolicyAlgorithm(Algorithm):
    """Base of the off-policy agents: subclasses give :meth:`agent`, the loop does the rest."""

    data_parallel = True

    def agent(self):
        """The agent's :class:`~ajax.training.off_policy.OffPolicyAgent` functions."""
        raise NotImplementedError

    def agent_act(self):
        return self.agent().act

    def _loop(self) -> OffPolicyLoop:
        return make_off_policy(self.config, self.env, self.eval_env, self.agent())

    def host_run(self, total_steps: int, seeds: list[int]):
        return HostOffPolicyRun(self, self._loop(), seeds)

    def make_chunks(self, total_steps: int) -> Chunks:
        loop = self._loop()
        n_chunks = n_chunks_for(total_steps, loop.steps_per_chunk)
        return Chunks(loop.init, loop.run_chunk, loop.steps_per_chunk, n_chunks)


class OnPolicyAlgorithm(Algorithm):
    """Base of the rollout agents (PPO, PQN): subclasses give :meth:`agent` over a config with
    ``n_steps``; the on-policy loop (JAX or host env) does the rest."""

    def agent(self, total_steps: int):
        """The agent's :class:`~ajax.training.on_policy.OnPolicyAgent` for a run of that length."""
        raise NotImplementedError

    def agent_act(self):
        """The act of a feedforward policy on an observation (its carry, if any, fresh)."""
        policy = self.agent(1).policy

        def act(agent_state, obs, key, deterministic):
            n = obs.shape[0]
            no = jnp.zeros((n,), bool)
            tick = Tick(obs, jnp.zeros((n,)), jnp.ones((n,), bool), no, no)
            return policy.act(agent_state, policy.init(n), tick, key, deterministic)[0]

        return act

    def policy(self):
        return self.agent(1).policy

    def make_chunks(self, total_steps: int) -> Chunks:
        c = self.config
        init, run_chunk, per = make_on_policy(
            c, c.n_steps, self.env, self.eval_env, self.agent(total_steps)
        )
        return Chunks(init, run_chunk, per, n_chunks_for(total_steps, per))

    def host_run(self, total_steps: int, seeds: list[int]):
        c = self.config
        per = max(1, c.eval_freq // (c.n_envs * c.n_steps)) * c.n_envs * c.n_steps
        return HostOnPolicyRun(self, self.agent(total_steps), c.n_steps, per, seeds)
