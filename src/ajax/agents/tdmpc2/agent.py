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
"""

from __future__ import annotations

import math
from typing import Any

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
from ajax.training.rollout import EpisodeTracker, lockstep, random_actions, to_env_action


class LoopState(flax.struct.PyTreeNode):
    """Everything a run needs to continue; checkpointing it resumes the run exactly."""

    learner: update_lib.TDMPC2State
    planner: act_lib.ActState
    env_state: Any
    obs: jax.Array
    is_first: jax.Array
    buffer: sequence.SequenceReplayState
    episodes: EpisodeTracker
    key: jax.Array
    step: jax.Array  # agent steps so far, all envs together


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


def _repeat_step(env, action_repeat: int):
    """``step(key, state, action)`` repeated ``action_repeat`` times, rewards summed, stopping
    at the end of an episode (the auto-reset state is kept from there on)."""
    if action_repeat == 1:
        return env.step

    def step(key, state, action):
        ts = env.step(key, state, action)
        for k in jax.random.split(key, action_repeat - 1):
            nxt = env.step(k, ts.state, action)
            done = ts.terminated | ts.truncated
            nxt = nxt.replace(reward=ts.reward + nxt.reward)
            ts = tree_select(done, ts, nxt)
        return ts

    return step


class Loop(flax.struct.PyTreeNode):
    """The pure functions of one run (see :func:`make_loop`)."""

    init: Any = flax.struct.field(pytree_node=False)
    run_chunk: Any = flax.struct.field(pytree_node=False)
    steps_per_chunk: int = flax.struct.field(pytree_node=False)
    act: Any = flax.struct.field(pytree_node=False)


def episode_length(cfg: TDMPC2Config, env) -> int:
    """Agent steps per episode: the env's time limit over the action repeat."""
    limit = env.spec.max_episode_steps
    if limit is None:
        raise ValueError(f"{env.spec.env_id} has no time limit; TD-MPC2's discount needs one")
    return max(1, math.ceil(limit / cfg.action_repeat))


def make_loop(cfg: TDMPC2Config, env, eval_env, total_steps: int) -> Loop:
    """``init(key)`` and ``run_chunk(state)`` of a TD-MPC2 run on a JAX env."""
    n, horizon = cfg.n_envs, cfg.planner.horizon
    action_dim = env.spec.action_dim
    model = WorldModel(cfg, action_dim)
    length = episode_length(cfg, env)
    discount = cfg.discount(length)
    seed_steps = cfg.seed_steps_for(length)
    per_chunk = max(1, cfg.eval_freq // n)
    capacity = max(min(cfg.buffer_size // n, math.ceil(total_steps / n) + 1), horizon + 1)
    env_step, eval_step = (
        _repeat_step(env, cfg.action_repeat),
        _repeat_step(eval_env, cfg.action_repeat),
    )
    obs_dim = int(math.prod(env.spec.observation_shape))

    def agent_act(learner, planner, obs, key, eval_mode):
        return act_lib.act(cfg, model, discount, learner.params, planner, obs, key, eval_mode)

    def init(key) -> LoopState:
        k_model, k_env, k_run = jax.random.split(key, 3)
        ts = jax.vmap(env.reset)(jax.random.split(k_env, n))
        obs = ts.obs.reshape(n, obs_dim).astype(jnp.float32)
        row = {
            "obs": obs[0],
            "action": jnp.zeros((action_dim,), jnp.float32),
            "reward": jnp.zeros((), jnp.float32),
            "is_first": True,
            "is_last": False,
            "is_terminal": False,
            "next_obs": obs[0],
        }
        return LoopState(
            learner=update_lib.init_state(cfg, model, k_model, obs_dim),
            planner=act_lib.ActState.create(n, horizon, action_dim),
            env_state=ts.state,
            obs=obs,
            is_first=jnp.ones((n,), bool),
            buffer=sequence.init(row, n, capacity),
            episodes=EpisodeTracker.create(n),
            key=k_run,
            step=jnp.zeros((), jnp.int32),
        )

    def learn(learner, buffer, step, key):
        """n updates per vector step from agent step ``step`` on (counted before this vector
        step) once past seed_steps; seed_steps pretraining updates when it is reached."""
        first = (step <= seed_steps) & (seed_steps < step + n)
        count = lockstep(jnp.where(step + n <= seed_steps, 0, jnp.where(first, seed_steps, n)))
        # Per seed, not lockstep: episodes of a terminating task end at different steps in
        # different seeds. A seed with no completed episode yet keeps its learner.
        ready = can_sample(buffer, horizon)

        def one(i, learner):
            k_sample, k_update = jax.random.split(jax.random.fold_in(key, i))
            batch = sample_batch(buffer, k_sample, cfg.batch_size, horizon)
            batch = update_lib.time_major(batch)
            new = update_lib.update(cfg, model, discount, learner, batch, k_update)[0]
            return tree_select(ready, new, learner)

        return jax.lax.fori_loop(0, count, one, learner)

    def vector_step(state: LoopState, _):
        key, k_act, k_rand, k_env, k_learn = jax.random.split(state.key, 5)
        exploring = lockstep(state.step <= seed_steps)  # online_trainer: plan once past them
        action, planner = jax.lax.cond(
            exploring,
            lambda: (random_actions(env, k_rand, n), state.planner),
            lambda: agent_act(state.learner, state.planner, state.obs, k_act, False),
        )
        ts = jax.vmap(env_step)(
            jax.random.split(k_env, n), state.env_state, to_env_action(env, action)
        )
        done = ts.terminated | ts.truncated
        row = {
            "obs": state.obs,
            "action": action,
            "reward": ts.reward.astype(jnp.float32),
            "is_first": state.is_first,
            "is_last": done,
            "is_terminal": ts.terminated,
            "next_obs": ts.final_obs.reshape(n, obs_dim).astype(jnp.float32),
        }
        buffer = sequence.add(state.buffer, row)
        step = state.step + n
        learner = learn(state.learner, buffer, state.step, k_learn)
        planner = planner.replace(t0=done)
        state = state.replace(
            learner=learner,
            planner=planner,
            env_state=ts.state,
            obs=ts.obs.reshape(n, obs_dim).astype(jnp.float32),
            is_first=done,
            buffer=buffer,
            episodes=state.episodes.update(ts.reward, done),
            key=key,
            step=step,
        )
        return state, None

    def evaluate(learner, key):
        """Mean return of eval_episodes planned episodes (eval mode), one per env copy."""
        m = cfg.eval_episodes
        k_reset, k_run = jax.random.split(key)
        ts = jax.vmap(eval_env.reset)(jax.random.split(k_reset, m))
        planner = act_lib.ActState.create(m, horizon, action_dim)

        def step(carry, k):
            obs, env_state, planner, ret, alive = carry
            k_act, k_env = jax.random.split(k)
            action, planner = agent_act(learner, planner, obs, k_act, True)
            out = jax.vmap(eval_step)(
                jax.random.split(k_env, m), env_state, to_env_action(eval_env, action)
            )
            ret = ret + jnp.where(alive, out.reward, 0.0)
            alive = alive & ~(out.terminated | out.truncated)
            obs = out.obs.reshape(m, obs_dim).astype(jnp.float32)
            return (obs, out.state, planner, ret, alive), None

        obs = ts.obs.reshape(m, obs_dim).astype(jnp.float32)
        init = (obs, ts.state, planner, jnp.zeros((m,)), jnp.ones((m,), bool))
        (_, _, _, ret, _), _ = jax.lax.scan(step, init, jax.random.split(k_run, length))
        return ret.mean()

    def run_chunk(state: LoopState):
        state, _ = jax.lax.scan(vector_step, state, None, length=per_chunk)
        key, k_eval = jax.random.split(state.key)
        record = {
            "step": state.step,
            "eval_return": evaluate(state.learner, k_eval),
            "train_return": state.episodes.last_return_mean(),
            "pi_scale": state.learner.scale.value,
        }
        return state.replace(key=key), record

    return Loop(init=init, run_chunk=run_chunk, steps_per_chunk=per_chunk * n, act=agent_act)
