"""The training layer as an agent sees it: the one module an agent imports it from.

An agent is a package under :mod:`ajax.agents` with a config dataclass and one class on one of
three bases here, each with one factory, ``agent(total_steps)``, returning the agent's pure
functions:

- :class:`ReplayAlgorithm`: a :class:`~ajax.training.types.ReplayAgent` (policy with carry, row
  writer, update clock, learner) on the shared replay loop (:func:`~ajax.training.loop.make_loop`
  for JAX envs, :class:`~ajax.training.host_loop.HostReplayRun` for host envs): TD-MPC2,
  DreamerV3;
- :class:`OffPolicyAlgorithm`: an :class:`~ajax.training.types.OffPolicyAgent` over SARS'
  :class:`~ajax.training.types.Transition` s, put on the same replay loop by
  :func:`~ajax.training.off_policy.replay_agent`: SAC, TD3, REDQ, CrossQ, ASAC, DQN;
- :class:`OnPolicyAlgorithm`: an :class:`~ajax.training.types.OnPolicyAgent` over
  :class:`~ajax.training.types.Rollout` s on the rollout loop
  (:func:`~ajax.training.on_policy.make_on_policy`, or host rollouts): PPO, PQN, APO, AVG, UDRL.

The contract types (:mod:`ajax.training.types`), the acting loop
(:func:`~ajax.training.unroll.unroll`: MC pretraining's expert rollout) and the small JAX
helpers agents use (:mod:`ajax.jax_helpers`) are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable

from ajax.environments.types import HostEnv
from ajax.jax_helpers import lockstep, tree_select, zeros_like_shapes
from ajax.training.algorithm import Algorithm
from ajax.training.config import (
    Discounted,
    LoopConfig,
    OffPolicyConfig,
    ReplayConfig,
    SequenceReplayConfig,
)
from ajax.training.driver import Chunks, n_chunks_for
from ajax.training.host_loop import HostOnPolicyRun, HostReplayRun
from ajax.training.loop import Loop, evaluate, make_loop
from ajax.training.memory import replay_bytes
from ajax.training.off_policy import replay_agent as off_policy_replay_agent
from ajax.training.on_policy import make_on_policy, next_values, values_at_cuts
from ajax.training.rollout import env_config_of, to_env_action
from ajax.training.sharding import SAME_ON_ANY_LAYOUT
from ajax.training.types import (
    Clock,
    OffPolicyAgent,
    OnPolicyAgent,
    Policy,
    ReplayAgent,
    Rollout,
    RolloutEnd,
    Tick,
    Transition,
    feedforward,
    stateless,
)
from ajax.training.unroll import unroll


class ReplayAlgorithm(Algorithm):
    """Base of the agents on the shared replay loop: subclasses give :meth:`agent`; JAX runs,
    host runs and the replay's size (the memory check) all come from it. ``host_wrap`` wraps
    the host simulators (DreamerV3: :class:`~ajax.environments.host.HostExplicitReset`)."""

    host_wrap: Callable[[HostEnv], HostEnv] | None = None
    data_parallel = True
    host_replay = True

    def agent(self, total_steps: int) -> ReplayAgent:
        """The agent's :class:`~ajax.training.types.ReplayAgent` for a run of that length."""
        raise NotImplementedError

    def replay_agent(self, total_steps: int) -> ReplayAgent:
        """What the replay loop runs: :meth:`agent` (adapted by subclasses whose agent is of
        another kind)."""
        return self.agent(total_steps)

    def require_jax_env(self) -> None:
        """:meth:`make_chunks` is for JAX envs; host envs go through :meth:`host_run`."""
        if not self.is_jax:
            raise ValueError(
                f"{self.env_id!r} is a host env: its runs go through host_run ({self.name}'s "
                "train and `ajax train` pick it)"
            )

    def make_chunks(self, total_steps: int) -> Chunks:
        self.require_jax_env()
        loop = make_loop(self.config, self.env, self.eval_env, self.replay_agent(total_steps))
        return Chunks.of(loop, total_steps)

    def host_run(self, total_steps: int, seeds: list[int]):
        c = self.config
        per_chunk = max(1, c.eval_freq // c.n_envs) * c.n_envs
        agent = self.replay_agent(total_steps)
        return HostReplayRun(self, agent, seeds, per_chunk, wrap=self.host_wrap)

    def replay_bytes(self, total_steps: int) -> tuple[int, int]:
        return replay_bytes(self.replay_agent(total_steps), self.env.spec, self.config.n_envs)

    def policy(self) -> Policy:
        return self.replay_agent(1).policy


class OffPolicyAlgorithm(ReplayAlgorithm):
    """Base of the SARS' transition agents: subclasses give :meth:`agent`, an
    :class:`~ajax.training.types.OffPolicyAgent`; the shared replay loop does the rest (a
    flashbax item buffer in device memory: no ``--replay-on host``)."""

    host_replay = False

    def agent(self, total_steps: int) -> OffPolicyAgent:
        """The agent's :class:`~ajax.training.types.OffPolicyAgent` functions."""
        raise NotImplementedError

    def replay_agent(self, total_steps: int) -> ReplayAgent:
        return off_policy_replay_agent(self.config, self.env, self.agent(total_steps))

    def agent_act(self):
        return self.agent(1).act

    def first_update(self) -> tuple[int, str]:
        return self.config.learning_starts, "--learning-starts"


class OnPolicyAlgorithm(Algorithm):
    """Base of the rollout agents (PPO, PQN, APO, AVG, UDRL): subclasses give :meth:`agent`
    over a config with ``n_steps``; the on-policy loop (JAX or host env) does the rest."""

    def agent(self, total_steps: int) -> OnPolicyAgent:
        """The agent's :class:`~ajax.training.types.OnPolicyAgent` for a run of that length."""
        raise NotImplementedError

    def agent_act(self):
        """The act of a feedforward policy on an observation (its carry, if any, fresh)."""
        policy = self.agent(1).policy

        def act(agent_state, obs, key, deterministic):
            tick = Tick.from_obs(obs)
            return policy.act(agent_state, policy.init(obs.shape[0]), tick, key, deterministic)[0]

        return act

    def policy(self) -> Policy:
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


__all__ = [
    "SAME_ON_ANY_LAYOUT",
    "Algorithm",
    "Chunks",
    "Clock",
    "Loop",
    "Discounted",
    "LoopConfig",
    "OffPolicyConfig",
    "ReplayConfig",
    "SequenceReplayConfig",
    "OffPolicyAgent",
    "OffPolicyAlgorithm",
    "OnPolicyAgent",
    "OnPolicyAlgorithm",
    "Policy",
    "ReplayAgent",
    "ReplayAlgorithm",
    "Rollout",
    "RolloutEnd",
    "Tick",
    "Transition",
    "env_config_of",
    "evaluate",
    "feedforward",
    "lockstep",
    "make_loop",
    "n_chunks_for",
    "next_values",
    "stateless",
    "to_env_action",
    "tree_select",
    "unroll",
    "values_at_cuts",
    "zeros_like_shapes",
]
