"""DreamerV3's plug-ins for the shared loop: hold-tick rows, the train-ratio clock, learning.

danijar/dreamerv3@e3f0224 embodied/run/train.py and embodied/core/driver.py, under one
``jax.jit``:

- Collection: the env is wrapped in :class:`~ajax.environments.wrappers.ExplicitReset`, so an
  episode's last observation is its own row (is_last, is_terminal) and the next tick is a hold
  tick that emits the new first observation (DESIGN.md 5.2). The policy acts from the first step
  (no random prefill) and its posterior latent is stored in the row (replay_context).
- Clock: ``elements.when.Ratio(train_ratio / (batch_size * batch_length))`` over env steps,
  hold ticks included, as the driver counts them (embodied/run/train.py:24-25, :59). The driver
  calls it only once the replay holds batch_size x batch_length windows (train.py:71-73), at
  step ``DreamerV3Config.first_train_step``; that first call gives one update and starts its
  count there (elements/when.py:38-40: nothing accrues while waiting, no catch-up), later
  calls the whole updates of the credit since (when.py:41-43).
- Learning: each update pops the online queue first, samples the rest uniformly over windows
  (:func:`ajax.buffers.sequence.sample_dreamerv3`), trains, and writes the posterior latents
  back into the rows it replayed (``write_back`` at offset 1).
"""

from __future__ import annotations

import math

import flax.struct
import jax
import jax.numpy as jnp

import ajax.agents.dreamerv3.update as update_lib
from ajax.agents.dreamerv3.config import DreamerV3Config
from ajax.agents.dreamerv3.model import Nets
from ajax.buffers import sequence
from ajax.training.api import Clock, Policy, ReplayAgent, zeros_like_shapes


class RatioClock(flax.struct.PyTreeNode):
    """Fractional update credit (elements.when.Ratio); ``started`` once the replay is ready."""

    credit: jax.Array
    started: jax.Array


def ratio_clock(cfg: DreamerV3Config) -> Clock:
    """Updates per tick from the env-step count alone (every seed agrees: lockstep).

    By the end of env step s the official driver has trained U(s) = 1 + floor((s - s0) x r)
    times, s0 = ``cfg.first_train_step`` and r = ``cfg.updates_per_step`` (0 before s0), since
    Ratio's first call returns 1 and sets its origin to s0; a tick of n envs ends at a multiple
    of n and runs U(end) - U(previous end) updates. The credit is exact when r is a dyadic
    fraction (every official protocol: train_ratio / 1024)."""
    n, ratio, start = cfg.n_envs, cfg.updates_per_step, cfg.first_train_step

    def init():
        return RatioClock(jnp.zeros((), jnp.float32), jnp.zeros((), bool))

    def tick(clock: RatioClock, step):
        ready = step >= start
        # the first ready tick: Ratio's origin is s0, so the steps since it within this tick
        since = (step - start).astype(jnp.float32) * ratio
        credit = jnp.where(clock.started, clock.credit + n * ratio, since)
        whole = jnp.floor(credit)
        count = jnp.where(ready, whole + jnp.where(clock.started, 0.0, 1.0), 0.0)
        new = RatioClock(
            credit=jnp.where(ready, credit - whole, 0.0),
            started=clock.started | ready,
        )
        return count.astype(jnp.int32), new

    return Clock(init=init, tick=tick)


def policy(cfg: DreamerV3Config, nets: Nets, action_dim: int, discrete: bool) -> Policy:
    mode = cfg.eval_policy == "mode"  # "sample": evaluation samples, as training does

    def act(learner, carry, tick, key, deterministic):
        obs = tick.obs.reshape(tick.obs.shape[0], -1)
        take_mode = deterministic and mode
        return update_lib.act(nets, learner.params, carry, obs, tick.is_first, key, take_mode)

    return Policy(init=lambda n: update_lib.init_carry(cfg, n, action_dim, discrete), act=act)


def replay_agent(cfg: DreamerV3Config, env, total_steps: int) -> ReplayAgent:
    """The loop's pieces for DreamerV3 on ``env`` (already wrapped in ExplicitReset)."""
    spec = env.spec
    n, discrete, action_dim = cfg.n_envs, spec.discrete, spec.action_dim
    obs_dim = int(math.prod(spec.observation_shape))
    nets = Nets.create(cfg, obs_dim, action_dim, discrete, spec.image_shape)
    capacity = max(min(cfg.buffer_size // n, math.ceil(total_steps / n) + 1), cfg.window)

    def row(tick, action, carry):
        return {
            "obs": nets.enc.stored(tick.obs.reshape(n, obs_dim)),
            "action": action,
            "reward": tick.reward.astype(jnp.float32),
            "is_first": tick.is_first,
            "is_last": tick.is_last,
            "is_terminal": tick.is_terminal,
            "deter": carry.latent.deter,
            # The one-hot latent stored as class indices (4 C times smaller than one-hot f32).
            "stoch": jnp.argmax(carry.latent.stoch, axis=-1).astype(jnp.uint8),
        }

    def init(key, tick):
        learner = update_lib.init_state(cfg, nets, key, obs_dim)
        carry = update_lib.init_carry(cfg, n, action_dim, discrete)
        action = carry.prev_action
        example = jax.tree.map(lambda x: x[0], row(tick, action, carry))
        return learner, sequence.init(example, n, capacity, cfg.replay_on == "host", key)

    def write(replay, tick, action, carry, ts):
        del ts  # the row is the observation acted on, with the action chosen there
        return sequence.add(replay, row(tick, action, carry))

    def learn_one(learner, replay, key):
        k_sample, k_train = jax.random.split(key)
        rows, index, replay = sequence.sample_dreamerv3(
            replay, k_sample, cfg.batch_size, cfg.window, online=True
        )
        batch, start = update_lib.split_window(cfg, rows, discrete)
        learner, post, metrics = update_lib.train_step(
            cfg, nets, learner, batch, start, key=k_train
        )
        if cfg.replay_context:
            fields = {
                "deter": post.deter,
                "stoch": jnp.argmax(post.stoch, axis=-1).astype(jnp.uint8),
            }
            replay = sequence.write_back(replay, index, fields, offset=cfg.replay_context)
        return learner, replay, metrics

    def learn(learner, replay, count, key):
        metrics0 = zeros_like_shapes(learn_one, learner, replay, key)[2]

        def body(i, c):
            return learn_one(c[0], c[1], jax.random.fold_in(key, i))

        return jax.lax.fori_loop(0, count, body, (learner, replay, metrics0))

    return ReplayAgent(
        init=init,
        policy=policy(cfg, nets, action_dim, discrete),
        write=write,
        clock=ratio_clock(cfg),
        learn=learn,
        random_steps=0,
    )
