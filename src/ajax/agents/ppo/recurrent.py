"""Recurrent PPO: actor and critic with a memory cell, replayed over whole sequences.

As stable-baselines3-contrib's RecurrentPPO (``ppo_recurrent.py``, ``shared_lstm=False,
enable_critic_lstm=True``) and purejaxrl's ``ppo_rnn.py``: each network runs its own cell of
:mod:`ajax.networks.memory` after its hidden layers; the carry resets where an episode starts
(``Tick.is_first``); the update replays each env's rollout from the carry it started with, so
minibatches split the rollout by env and keep every sequence whole. A truncated step bootstraps
from its true last observation read with the carry the critic had there.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.ppo.config import PPOConfig
from ajax.agents.shared.proximal_policy import (
    Batch,
    PPOState,
    actor_critic_epochs,
    advantages,
    ppo_loss,
)
from ajax.networks.memory import init_carry
from ajax.networks.networks import predict_value_sequence
from ajax.training.api import Policy, Rollout, RolloutEnd, Tick


class PPOCarry(flax.struct.PyTreeNode):
    """The actor's carry (leaves ``(N, ...)``) and the critic's (``(1, N, ...)``: a one-member
    ensemble)."""

    actor: Any
    critic: Any


def initial_carry(config: PPOConfig, n: int) -> PPOCarry:
    actor = init_carry(config.memory_config, None, n)
    return PPOCarry(actor, jax.tree.map(lambda x: x[None], actor))


def _pi(state: PPOState, params, obs, resets, carry):
    """The policy over a time-major ``(T, B, F)`` sequence and the carry after it."""
    return state.actor_state.apply_fn({"params": params}, obs, carry, resets)


def _v(state: PPOState, params, obs, resets, carry):
    """V over a ``(T, B, F)`` sequence, ``(T, B)``, and the critic's carry after it."""
    values, carry = predict_value_sequence(state.critic_state, params, obs, resets, carry)
    return values[0, ..., 0], carry


def _step(state: PPOState, carry: PPOCarry, tick: Tick):
    """One tick through both cells: the policy and value at ``tick.obs`` and the next carry."""
    obs, resets = tick.obs[None], tick.is_first[None]
    pi, actor = _pi(state, state.actor_state.params, obs, resets, carry.actor)
    value, critic = _v(state, state.critic_state.params, obs, resets, carry.critic)
    return pi, value[0], PPOCarry(actor, critic)


def policy(config: PPOConfig) -> Policy:
    """The acting policy: the mode when deterministic, else a sample; carries the actor's cell."""

    def act(state: PPOState, carry: PPOCarry, tick: Tick, key, deterministic: bool):
        pi, actor = _pi(state, state.actor_state.params, tick.obs[None], tick.is_first[None],
                        carry.actor)  # fmt: skip
        action = pi.mode() if deterministic else pi.sample(seed=key)
        return action[0], carry.replace(actor=actor)

    return Policy(init=lambda n: initial_carry(config, n), act=act)


def sample(state: PPOState, carry: PPOCarry, tick: Tick, key):
    pi, value, carry = _step(state, carry, tick)
    action, log_prob = pi.sample_and_log_prob(seed=key)
    return action[0], log_prob[0], value, carry


def _bootstrap_values(state: PPOState, rollout: Rollout, end: RolloutEnd):
    """V at every step's true last obs, read one step on from that step's critic carry (no
    reset: it continues the episode), and V at the obs after the rollout."""
    params = state.critic_state.params
    no_reset = jnp.zeros(rollout.is_first.shape[1:], bool)[None]

    def one(obs, carry):
        return _v(state, params, obs[None], no_reset, carry)[0][0]

    v_final = jax.vmap(one)(rollout.final_obs, rollout.carry.critic)
    last_carry = jax.tree.map(lambda x: x[-1], rollout.carry.critic)
    v_last = _v(state, params, end.tick.obs[None], end.tick.is_first[None], last_carry)[0][0]
    return v_final, v_last


class Sequences(flax.struct.PyTreeNode):
    """Env-major minibatch data: ``batch`` and ``is_first`` ``(N, T, ...)``, the start carry
    with its env axis first."""

    batch: Batch
    is_first: jax.Array
    carry0: PPOCarry


def update(config: PPOConfig, state: PPOState, rollout: Rollout, end: RolloutEnd, key):
    """GAE from the collected values, then minibatch epochs over whole env sequences, each
    replayed through both cells from the carry it started with."""
    v_final, v_last = _bootstrap_values(state, rollout, end)
    adv = advantages(config, rollout, v_final, v_last, config.gamma)
    batch = Batch(rollout.obs, rollout.action, rollout.log_prob, rollout.value, adv,
                  adv + rollout.value)  # fmt: skip
    env_major = lambda x: jnp.swapaxes(x, 0, 1)
    carry0 = end.carry0.replace(critic=jax.tree.map(env_major, end.carry0.critic))
    data = Sequences(jax.tree.map(env_major, batch), env_major(rollout.is_first), carry0)

    def loss_fn(state, params, seq: Sequences):
        mb = jax.tree.map(env_major, seq.batch)  # back to time-major (T, B, ...)
        resets = env_major(seq.is_first)
        critic0 = jax.tree.map(env_major, seq.carry0.critic)
        pi, _ = _pi(state, params[0], mb.obs, resets, seq.carry0.actor)
        v, _ = _v(state, params[1], mb.obs, resets, critic0)
        return ppo_loss(config, pi, v, mb)

    return actor_critic_epochs(config, state, data, loss_fn, key)
