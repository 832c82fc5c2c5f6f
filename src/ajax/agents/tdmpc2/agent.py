"""TD-MPC2's training loop: collect with the planner, store transitions, update, evaluate.

nicklashansen/tdmpc2 trainer/online_trainer.py (HEAD e9f5932), under one ``jax.jit``:
``seed_steps`` agent steps of uniform random actions, then at the first step past them as many
pretraining updates, then one update per agent step (n_envs per vector step, so the
update-to-data ratio stays 1). Replay holds whole episodes and samples H-transition windows that
never cross an episode start and only from completed episodes (:func:`sample_batch`).

Replay layout. The shared ring (:mod:`ajax.buffers.sequence`) stores one row per transition,
``(obs o_t, action a_t, reward r_t, is_terminal = terminated_t, next_obs o'_t, is_first,
is_last = done_t)`` with ``o'_t`` the true final observation on done, so every env adds exactly
one row per vector step under auto-reset (the reference's extra terminal-observation row would
break lockstep). An (H + 1)-row TD-MPC2 slice is then H consecutive transitions of one episode:
obs o_t..o_{t+H-1}, o'_{t+H-1}; the set of windows is the reference's.

When a round of episodes becomes sampleable (DESIGN.md 4.4, open item O1, closed): the reference
adds a finished episode at the top of the next loop iteration (online_trainer.py), after the
update of the step that ended it. The replay (:class:`T2Replay`) therefore keeps the commit
pointer from before each tick's rows, and that tick's updates sample below it: a round becomes
visible to the updates of the tick after the one that ends it.
"""

from __future__ import annotations

import math

import flax.struct
import jax
import jax.numpy as jnp

import ajax.agents.tdmpc2.act as act_lib
import ajax.agents.tdmpc2.update as update_lib
from ajax.agents.tdmpc2.config import TDMPC2Config
from ajax.agents.tdmpc2.networks import WorldModel
from ajax.buffers import sequence
from ajax.buffers.windows import TDMPC2Slice
from ajax.environments.utils import tree_select
from ajax.networks.pixels import to_bytes
from ajax.training.api import Clock, Loop, Policy, ReplayAgent, zeros_like_shapes
from ajax.training.api import make_loop as shared_loop


class T2Replay(flax.struct.PyTreeNode):
    """TD-MPC2's replay: the shared ring and ``visible`` [N_env], the ring's ``committed``
    before the latest tick's rows, below which that tick's updates sample (module docstring)."""

    buffer: sequence.SequenceReplayState
    visible: jax.Array

    def for_updates(self) -> sequence.SequenceReplayState:
        """The ring as the latest tick's updates see it (episodes it completed held back)."""
        return self.buffer.replace(committed=self.visible)


def can_sample(buffer: sequence.SequenceReplayState, horizon: int) -> jax.Array:
    """Whether a completed episode holds H transitions (bool scalar)."""
    return jnp.any(sequence.tdmpc2_valid(buffer, horizon - 1)[1])


def sample_batch(buffer, key, batch_size: int, horizon: int) -> TDMPC2Slice:
    """B windows of H transitions inside completed episodes, as a batch-major TD-MPC2 slice:
    uniform over episodes, then over starts (the reference's SliceSampler). A window of H
    transition rows is the shared ring's window of H rows (``horizon - 1`` there)."""
    index = sequence.tdmpc2_index(buffer, key, batch_size, horizon - 1)
    rows = sequence.gather_windows(buffer, index, horizon)
    obs = jnp.concatenate([rows["obs"], rows["next_obs"][:, -1:]], axis=1)
    return TDMPC2Slice(
        obs=obs, action=rows["action"], reward=rows["reward"], terminated=rows["is_terminal"]
    )


def episode_length(env) -> int:
    """Agent steps per episode of ``env``, built with the config's ``action_repeat`` (an option
    of the env id, so the time limit counts agent steps)."""
    limit = env.spec.max_episode_steps
    if limit is None:
        raise ValueError(f"{env.spec.env_id} has no time limit; TD-MPC2's discount needs one")
    return max(1, limit)


def planning_policy(cfg: TDMPC2Config, model: WorldModel, discount, task: int | None = None):
    """Planning with per-env planner state; a new episode (``tick.is_first``) plans from t0.
    ``task`` is the task id a multi-task model plans for (its mask and embedding)."""
    horizon, action_dim = cfg.planner.horizon, model.action_dim

    def act(learner, planner, tick, key, eval_mode):
        planner = planner.replace(t0=tick.is_first)
        obs = tick.obs.reshape(tick.obs.shape[0], -1).astype(jnp.float32)
        ids = None if task is None else jnp.full(obs.shape[:1], task, jnp.int32)
        return act_lib.act(cfg, model, discount, learner.params, planner, obs, key, eval_mode, ids)

    return Policy(init=lambda n: act_lib.ActState.create(n, horizon, action_dim), act=act)


def policy(cfg: TDMPC2Config, env) -> Policy:
    """:func:`planning_policy` of a single-task model on ``env`` (built with the config's
    ``action_repeat``)."""
    model = WorldModel(cfg, env.spec.action_dim, env.spec.image_shape)
    return planning_policy(cfg, model, cfg.discount(episode_length(env)))


def replay_agent(cfg: TDMPC2Config, env, total_steps: int) -> ReplayAgent:
    """TD-MPC2's plug-ins for :func:`ajax.training.loop.make_loop` (see the module docstring)."""
    n, horizon = cfg.n_envs, cfg.planner.horizon
    action_dim = env.spec.action_dim
    model = WorldModel(cfg, action_dim, env.spec.image_shape)
    discount = cfg.discount(episode_length(env))
    seed_steps = cfg.seed_steps_for(episode_length(env))
    capacity = max(min(cfg.buffer_size // n, math.ceil(total_steps / n) + 1), horizon + 1)
    obs_dim = int(math.prod(env.spec.observation_shape))
    # images stay bytes in the replay (4x smaller); the encoder reads either
    stored = to_bytes if env.spec.image_shape is not None else (lambda x: x.astype(jnp.float32))
    flat = lambda x: stored(x.reshape(n, obs_dim))

    def init(key, tick):
        obs = flat(tick.obs)
        row = {
            "obs": obs[0],
            "action": jnp.zeros((action_dim,), jnp.float32),
            "reward": jnp.zeros((), jnp.float32),
            "is_first": True,
            "is_last": False,
            "is_terminal": False,
            "next_obs": obs[0],
        }
        learner = update_lib.init_state(cfg, model, key, obs_dim)
        buffer = sequence.init(row, n, capacity, cfg.replay_on == "host", seed_key=key)
        return learner, T2Replay(buffer=buffer, visible=buffer.committed)

    def write(replay: T2Replay, tick, action, carry, ts) -> T2Replay:
        del carry
        row = {
            "obs": flat(tick.obs),
            "action": action,
            "reward": ts.reward.astype(jnp.float32),
            "is_first": tick.is_first,
            "is_last": ts.done,
            "is_terminal": ts.terminated,
            "next_obs": flat(ts.final_obs),
        }
        return T2Replay(buffer=sequence.add(replay.buffer, row), visible=replay.buffer.committed)

    def updates_due(clock, step):
        """n updates per vector step once past seed_steps (``step`` counts this vector step);
        seed_steps pretraining updates at the step that passes them."""
        before = step - n
        first = (before <= seed_steps) & (seed_steps < step)
        count = jnp.where(step <= seed_steps, 0, jnp.where(first, seed_steps, n))
        return count.astype(jnp.int32), clock

    def learn(learner, replay: T2Replay, count, key):
        # Per seed, not lockstep: episodes of a terminating task end at different steps in
        # different seeds. A seed with no completed episode yet keeps its learner.
        buffer = replay.for_updates()
        ready = can_sample(buffer, horizon)

        def update_one(learner, k):
            k_sample, k_update = jax.random.split(k)
            batch = update_lib.time_major(sample_batch(buffer, k_sample, cfg.batch_size, horizon))
            return update_lib.update(cfg, model, discount, learner, batch, k_update)

        def one(i, carry):
            new, metrics = update_one(carry[0], jax.random.fold_in(key, i))
            return tree_select(ready, new, carry[0]), metrics

        metrics0 = zeros_like_shapes(update_one, learner, key)[1]
        learner, metrics = jax.lax.fori_loop(0, count, one, (learner, metrics0))
        return learner, replay, metrics

    return ReplayAgent(
        init=init,
        policy=policy(cfg, env),
        write=write,
        clock=Clock(init=lambda: (), tick=updates_due),
        learn=learn,
        random_steps=seed_steps + 1,  # online_trainer plans once past seed_steps
    )


def make_loop(cfg: TDMPC2Config, env, eval_env, total_steps: int) -> Loop:
    """``init(key)`` and ``run_chunk(state)`` of a TD-MPC2 run on JAX envs built with the
    config's ``action_repeat``."""
    return shared_loop(cfg, env, eval_env, replay_agent(cfg, env, total_steps))
