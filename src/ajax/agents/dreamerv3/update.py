"""DreamerV3's learner state, its one train step and its acting step.

danijar/dreamerv3@e3f0224 dreamerv3/agent.py: ``train`` (replay context, one optimiser step
over every module, slow-critic update, latent write-back) and ``policy`` (encode, one posterior
step, sample the actor). One LaProp/AGC optimiser (:func:`~ajax.agents.dreamerv3.optim.laprop_agc`)
trains enc, dyn, dec, rew, con, pol and val together; the slow critic follows the critic by an
EMA of rate 0.02 after every step and only regularises it (never a bootstrap target).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from ajax.agents.dreamerv3.config import DreamerV3Config
from ajax.agents.dreamerv3.losses import Batch, total_loss
from ajax.agents.dreamerv3.model import Nets, feat
from ajax.agents.dreamerv3.optim import laprop_agc
from ajax.agents.dreamerv3.rssm import RSSMState, initial_state, observe_step, split_draw
from ajax.networks.train_state import ema_update
from ajax.normalizers import ReturnNormalizer


class DreamerV3State(flax.struct.PyTreeNode):
    """The learner: parameters of every module, the slow critic, optimiser and normaliser."""

    params: dict
    slow_val: Any
    opt: Any
    retnorm: ReturnNormalizer
    updates: jax.Array  # train steps so far


class ActCarry(flax.struct.PyTreeNode):
    """The acting policy's memory per env: the posterior latent and the previous action."""

    latent: RSSMState
    prev_action: jax.Array


def optimiser(cfg: DreamerV3Config) -> optax.GradientTransformation:
    return laprop_agc(
        cfg.learning_rate, cfg.warmup, cfg.agc, beta1=cfg.beta1, beta2=cfg.beta2, eps=cfg.eps
    )


def init_state(cfg: DreamerV3Config, nets: Nets, key, obs_dim: int) -> DreamerV3State:
    params = nets.init(key, obs_dim)
    return DreamerV3State(
        params=params,
        slow_val=params["val"],
        opt=optimiser(cfg).init(params),
        retnorm=ReturnNormalizer.create(cfg.retnorm_rate, cfg.retnorm_limit),
        updates=jnp.zeros((), jnp.int32),
    )


def split_window(cfg: DreamerV3Config, rows: dict, discrete: bool) -> tuple[Batch, RSSMState]:
    """A sampled window [B, context + T] as the replayed batch [B, T] and its start carry.

    agent.py _apply_replay_context with replay_context = 1: the carry is the latent stored at
    row 0, the batch is rows 1..T and its previous actions are the actions of rows 0..T-1. With
    replay_context = 0 the carry is zeros and the previous action of row 0 is zero.
    """
    k = cfg.replay_context
    b = rows["reward"].shape[0]
    stoch = lambda idx: jax.nn.one_hot(idx, cfg.arch.classes, dtype=jnp.float32)
    if k:
        start = RSSMState(rows["deter"][:, 0], stoch(rows["stoch"][:, 0]))
        prev = rows["action"][:, :-1]
    else:
        start = initial_state(cfg.rssm(1, False), b)
        zero = jnp.zeros_like(rows["action"][:, :1])
        prev = jnp.concatenate([zero, rows["action"][:, :-1]], axis=1)
    batch = Batch(
        # as stored: float32 features, uint8 pixels, or a mixed observation's dict of both
        obs=jax.tree.map(lambda x: x[:, k:], rows["obs"]),
        prev_action=prev if discrete else prev.astype(jnp.float32),
        reward=rows["reward"][:, k:],
        is_first=rows["is_first"][:, k:],
        is_last=rows["is_last"][:, k:],
        is_terminal=rows["is_terminal"][:, k:],
    )
    return batch, start


def train_step(cfg: DreamerV3Config, nets: Nets, state: DreamerV3State, batch: Batch, start, key):
    """One optimiser step on every module; returns (state, posterior [B, T], metrics)."""
    new, aux, metrics = train_step_with_aux(cfg, nets, state, batch, start, key)
    return new, aux["post"], metrics


def train_step_with_aux(cfg: DreamerV3Config, nets: Nets, state: DreamerV3State, batch: Batch,
                        start, key):  # fmt: skip
    """:func:`train_step` returning the whole of :func:`total_loss`'s aux (returns, weights,
    normaliser, posterior) in place of the posterior alone."""
    grad_fn = jax.value_and_grad(total_loss, argnums=2, has_aux=True)
    (_, aux), grads = grad_fn(
        nets, cfg, state.params, state.slow_val, state.retnorm, batch, start, key
    )
    updates, opt = optimiser(cfg).update(grads, state.opt, state.params)
    params = optax.apply_updates(state.params, updates)
    new = state.replace(
        params=params,
        slow_val=ema_update(state.slow_val, params["val"], cfg.slow_rate),
        opt=opt,
        retnorm=aux["retnorm"],
        updates=state.updates + 1,
    )
    metrics = {**aux["metrics"], "grad_norm": optax.global_norm(grads)}
    return new, aux, metrics


def act(nets: Nets, params, carry: ActCarry, obs, is_first, key, deterministic: bool):
    """One acting step for N envs: encode, posterior step (reset where ``is_first``), actor.

    agent.py policy. ``deterministic`` takes the actor's mode (evaluation); training samples.
    ``key`` is a PRNG key or the pair (posterior Gumbel noise [N, S, C], action noise).
    Returns (action [N, ...], new carry).
    """
    k_z, k_a = split_draw(key)
    tokens = nets.apply("enc", params, obs)
    latent, _ = observe_step(
        nets.rssm, params["dyn"], carry.latent, tokens, carry.prev_action, is_first, k_z
    )
    dist = nets.apply("pol", params, feat(latent))
    action = dist.mode() if deterministic else dist.sample(k_a)
    return action, ActCarry(latent=latent, prev_action=action)


def init_carry(cfg: DreamerV3Config, n: int, action_dim: int, discrete: bool) -> ActCarry:
    prev = jnp.zeros((n,), jnp.int32) if discrete else jnp.zeros((n, action_dim), jnp.float32)
    return ActCarry(latent=initial_state(cfg.rssm(action_dim, discrete), n), prev_action=prev)
