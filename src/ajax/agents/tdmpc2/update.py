"""One TD-MPC2 update: the world-model step, then the policy step, then the target-Q EMA.

arXiv:2310.16828v2 Sec. 3.1 and Algorithm 1; nicklashansen/tdmpc2 tdmpc2.py ``_update`` and
``update_pi`` (HEAD e9f5932). Order, as the reference:

1. TD targets from the pre-step parameters: the encoded next observations, a policy sample there
   and the 'min' of a random pair of target Qs (eval mode: no dropout).
2. World-model loss (consistency, reward, value, termination when episodic) on the latent
   rollout of the buffer actions; Q dropout on; one grouped-Adam step (encoder lr x 0.3, one
   global clip of 20) on everything but the policy.
3. Policy loss on the stop-gradiented rollout latents with the post-step Qs ('avg' of a random
   pair, dropout on); the RunningScale is updated from the t = 0 values first; own Adam.
4. Target Qs <- EMA(online Qs, tau) after both steps.

Multi-task (HEAD world_model.py:20, tdmpc2.py:22-31, :214-231): the batch's task-embedding rows
are renormalised in place at the first lookup of each step (``nn.Embedding(max_norm=1)``), and
the policy loss's gradient reaches the embedding (pi and the detached Qs both read it) but no
optimiser steps it there: torch keeps it in ``.grad`` (the world model's ``zero_grad`` ran
before ``update_pi``), so it joins the next update's world-model gradient, clip and norm
included. :attr:`TDMPC2State.emb_grad` carries it.

Every random draw is an input (:class:`UpdateNoise`), so an update can be replayed exactly.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
import optax

from ajax.agents.tdmpc2 import losses
from ajax.agents.tdmpc2.config import TDMPC2Config
from ajax.agents.tdmpc2.ensemble import keep_masks, reduce_pair
from ajax.agents.tdmpc2.networks import (
    TASK_EMB,
    Q_members,
    WorldModel,
    latent_rollout,
    renorm_task_emb,
    task_embedding,
)
from ajax.agents.tdmpc2.optim import adam_grouped, pi_adam
from ajax.agents.tdmpc2.pixels import draw_shifts, shift_images
from ajax.agents.tdmpc2.policy import head_scaled_entropy, sample_squashed
from ajax.buffers.windows import TDMPC2Slice
from ajax.networks.train_state import ema_update
from ajax.normalizers import RunningScale


class TDMPC2State(flax.struct.PyTreeNode):
    """Learner state: all world-model params (policy included), the target Qs, both optimiser
    states and the Q scale; a multi-task model also carries ``emb_grad``, the last policy
    loss's gradient of the task embedding, which the next world-model step adds to its own
    (module docstring; None for a single task)."""

    params: dict
    target_Qs: dict
    wm_opt: optax.OptState
    pi_opt: optax.OptState
    scale: RunningScale
    emb_grad: jax.Array | None = None


class UpdateNoise(flax.struct.PyTreeNode):
    """The random draws of one update.

    Attributes:
        td_eps: policy noise at the next latents [H, B, A] (TD target).
        td_pair: target-Q pair of the TD target [2].
        pi_eps: policy noise at z_0..z_H [H + 1, B, A] (policy loss).
        pi_pair: online-Q pair of the policy loss [2].
        value_dropout: PRNG key of the Q dropout masks in the value loss.
        pi_dropout: PRNG key of the Q dropout masks in the policy loss.
        value_mask: optional keep-mask [num_q, H, B, mlp_dim] (1 = kept) used instead of
            ``value_dropout``'s draw, to replay a recorded update.
        pi_mask: optional keep-mask [num_q, H + 1, B, mlp_dim] used instead of ``pi_dropout``'s.
        obs_shift: pixels: the integer crop offsets (dy, dx) [H + 1, B, 2] of every frame of the
            batch (:func:`~ajax.agents.tdmpc2.pixels.shift_images`); the official encoder
            shifts each frame once per update, obs[1:] for the targets and obs[0] for the
            rollout (layers.py:36-59 inside world_model.py:103-112). None: frames unshifted.
    """

    td_eps: jax.Array
    td_pair: jax.Array
    pi_eps: jax.Array
    pi_pair: jax.Array
    value_dropout: jax.Array
    pi_dropout: jax.Array
    value_mask: jax.Array | None = None
    pi_mask: jax.Array | None = None
    obs_shift: jax.Array | None = None


def draw_update_noise(key: jax.Array, cfg: TDMPC2Config, action_dim: int) -> UpdateNoise:
    """Draw every random input of one update (shapes from ``cfg`` and ``action_dim``)."""
    horizon, batch, num_q = cfg.planner.horizon, cfg.batch_size, cfg.arch.num_q
    k = jax.random.split(key, 6)
    return UpdateNoise(
        td_eps=jax.random.normal(k[0], (horizon, batch, action_dim)),
        td_pair=jax.random.permutation(k[1], num_q)[:2],
        pi_eps=jax.random.normal(k[2], (horizon + 1, batch, action_dim)),
        pi_pair=jax.random.permutation(k[3], num_q)[:2],
        value_dropout=k[4],
        pi_dropout=k[5],
    )


def _wm_params(params: dict) -> dict:
    return {name: sub for name, sub in params.items() if name != "pi"}


def optimisers(cfg: TDMPC2Config) -> tuple[optax.GradientTransformation, ...]:
    """(world model, policy) optimisers of tdmpc2.py:22-31."""
    scales = {"encoder": cfg.enc_lr_scale}
    return adam_grouped(cfg.learning_rate, scales, clip_norm=cfg.grad_clip_norm), pi_adam(
        cfg.learning_rate, cfg.grad_clip_norm
    )


def init_state(cfg: TDMPC2Config, model: WorldModel, key: jax.Array, obs_dim: int) -> TDMPC2State:
    """Fresh parameters, target Qs as an exact copy, zeroed optimisers and S = 1. A
    multi-task model's task embedding joins the world-model optimiser (tdmpc2.py:22-28)."""
    obs = jnp.zeros((1, obs_dim), jnp.float32)
    params = model.init(key, obs, jnp.zeros((1, model.action_dim), jnp.float32))["params"]
    wm_tx, pi_tx = optimisers(cfg)
    return TDMPC2State(
        params=params,
        target_Qs=params["Qs"],
        wm_opt=wm_tx.init(_wm_params(params)),
        pi_opt=pi_tx.init(params["pi"]),
        scale=RunningScale.create(cfg.tau),
        emb_grad=None if model.tasks is None else jnp.zeros_like(params[TASK_EMB]["embedding"]),
    )


def _q_pair(cfg, qs_params, z, a, pair, how, dropout_key=None, dropout_mask=None, emb=None):
    """'min'/'avg' of the decoded Q pair at (z, a), evaluating the two members only.

    Dropout is on when a key is given (each member's mask from
    :func:`~ajax.agents.tdmpc2.ensemble.keep_masks`) or a recorded keep-mask of every member
    [num_q, ..., mlp_dim]; either way the pair sees its rows of the whole ensemble's masks.
    """
    mask = None
    if cfg.dropout > 0 and dropout_mask is not None:
        mask = dropout_mask[pair]
    elif cfg.dropout > 0 and dropout_key is not None:
        shape = z.shape[:-1] + (cfg.arch.mlp_dim,)
        mask = keep_masks(dropout_key, pair, shape, cfg.dropout)
    logits = Q_members(cfg, qs_params, z, a, pair, mask, emb)
    return reduce_pair(cfg.two_hot().decode(logits), how)


def _td_targets(cfg, model, discount, state, batch, noise, task):
    params = state.params
    next_z = model.apply({"params": params}, batch.obs[1:], task, method="encode")
    dist = model.apply({"params": params}, next_z, task, method="pi")
    a_next = sample_squashed(dist, noise.td_eps).action
    emb = task_embedding(model, params, task)
    q_next = _q_pair(cfg, state.target_Qs, next_z, a_next, noise.td_pair, "min", emb=emb)
    return next_z, losses.td_target(batch.reward, batch.terminated, discount, q_next)


def _world_model_loss(wm_params, pi_params, cfg, model, batch, next_z, targets, noise, task):
    params = {**wm_params, "pi": pi_params}
    two_hot = cfg.two_hot()

    def call(*args, method, **kwargs):
        return model.apply({"params": params}, *args, method=method, **kwargs)

    z0 = call(batch.obs[0], task, method="encode")
    zs = latent_rollout(lambda z, a: call(z, a, task, method="next"), z0, batch.action)
    q_logits = call(
        zs[:-1],
        batch.action,
        task,
        deterministic=False,
        dropout_mask=noise.value_mask,
        method="Q",
        rngs={"dropout": noise.value_dropout},
    )
    reward_logits = call(zs[:-1], batch.action, task, method="reward")
    parts = {
        "consistency_loss": losses.consistency_loss(zs[1:], next_z, cfg.rho),
        "reward_loss": losses.reward_loss(reward_logits, batch.reward, two_hot, cfg.rho),
        "value_loss": losses.value_loss(q_logits, targets, two_hot, cfg.rho),
    }
    total = (
        cfg.consistency_coef * parts["consistency_loss"]
        + cfg.reward_coef * parts["reward_loss"]
        + cfg.value_coef * parts["value_loss"]
    )
    if cfg.episodic:
        term_logits = call(zs[1:], method="termination")
        parts["termination_loss"] = losses.termination_loss(term_logits, batch.terminated)
        total = total + cfg.termination_coef * parts["termination_loss"]
    return total, (zs, parts)


def _policy_loss(pi_params, emb_params, cfg, model, wm_params, zs, scale, noise, task):
    """The policy step's loss. The world model is a constant here, except a multi-task model's
    task embedding ``emb_params``, whose gradient the caller keeps (module docstring)."""
    wm_params = jax.lax.stop_gradient(wm_params)
    if emb_params is not None:
        wm_params = {**wm_params, TASK_EMB: emb_params}
    dist = model.apply({"params": {**wm_params, "pi": pi_params}}, zs, task, method="pi")
    sample = sample_squashed(dist, noise.pi_eps)
    q = _q_pair(
        cfg,
        wm_params["Qs"],
        zs,
        sample.action,
        noise.pi_pair,
        "avg",
        noise.pi_dropout,
        noise.pi_mask,
        task_embedding(model, wm_params, task),
    )
    scale = scale.update(jax.lax.stop_gradient(q[0]))
    entropy = head_scaled_entropy(sample, dist.log_std, dist.num_dims())
    loss = losses.policy_loss(q, entropy, scale.scale(), cfg.entropy_coef, cfg.rho)
    return loss, (scale, jnp.mean(entropy))


def update_with_noise(
    cfg: TDMPC2Config,
    model: WorldModel,
    discount: float,
    state: TDMPC2State,
    batch: TDMPC2Slice,
    noise: UpdateNoise,
    task: jax.Array | None = None,
) -> tuple[TDMPC2State, dict]:
    """One full update on a time-major batch (obs [H + 1, B, O], the rest [H, B, ...]).

    Multi-task: ``task`` [B] are the task ids of the batch's slices and ``discount`` their
    discounts [B] (``TaskSet.discounts``), as tdmpc2.py's ``self.discount[task]``.
    """
    wm_tx, pi_tx = optimisers(cfg)
    if noise.obs_shift is not None:
        batch = batch.replace(obs=shift_images(batch.obs, noise.obs_shift, model.image_shape))
    multitask = model.tasks is not None
    if multitask:  # the TD target's first lookup renormalises the batch's rows
        state = state.replace(params=renorm_task_emb(state.params, task))
    next_z, targets = _td_targets(cfg, model, discount, state, batch, noise, task)
    wm_params, pi_params = _wm_params(state.params), state.params["pi"]
    grad_fn = jax.value_and_grad(_world_model_loss, has_aux=True)
    (total, (zs, parts)), grads = grad_fn(
        wm_params, pi_params, cfg, model, batch, next_z, targets, noise, task
    )
    if multitask:  # the previous policy loss's gradient, left in .grad (module docstring)
        emb = grads[TASK_EMB]["embedding"] + state.emb_grad
        grads = {**grads, TASK_EMB: {"embedding": emb}}
    updates, wm_opt = wm_tx.update(grads, state.wm_opt, wm_params)
    wm_params = optax.apply_updates(wm_params, updates)
    if multitask:  # update_pi's first lookup renormalises the stepped rows again
        wm_params = renorm_task_emb(wm_params, task)

    pi_grad_fn = jax.value_and_grad(_policy_loss, argnums=(0, 1), has_aux=True)
    (pi_loss, (scale, entropy)), (pi_grads, emb_grads) = pi_grad_fn(
        pi_params, wm_params.get(TASK_EMB), cfg, model, wm_params, jax.lax.stop_gradient(zs),
        state.scale, noise, task,
    )  # fmt: skip
    pi_updates, pi_opt = pi_tx.update(pi_grads, state.pi_opt, pi_params)
    pi_params = optax.apply_updates(pi_params, pi_updates)

    new = state.replace(
        params={**wm_params, "pi": pi_params},
        target_Qs=ema_update(state.target_Qs, wm_params["Qs"], cfg.tau),
        wm_opt=wm_opt,
        pi_opt=pi_opt,
        scale=scale,
        emb_grad=emb_grads["embedding"] if multitask else None,
    )
    metrics = {
        **parts,
        "total_loss": total,
        "grad_norm": optax.global_norm(grads),
        "pi_loss": pi_loss,
        "pi_grad_norm": optax.global_norm(pi_grads),
        "pi_scaled_entropy": entropy,
        "pi_scale": scale.value,
    }
    return new, metrics


def time_major(batch: TDMPC2Slice) -> TDMPC2Slice:
    """A batch-major slice (B, T, ...) from the replay as time-major (T, B, ...)."""
    return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch)


def update(cfg, model, discount, state, batch, key, task=None) -> tuple[TDMPC2State, dict]:
    """:func:`update_with_noise` with fresh draws from ``key``; ``batch`` time-major. On
    pixels every frame of the batch is shifted at random (``UpdateNoise.obs_shift``)."""
    shifts = None
    if model.image_shape is not None:
        key, k_shift = jax.random.split(key)
        shifts = draw_shifts(k_shift, batch.obs.shape[:-1])
    noise = draw_update_noise(key, cfg, model.action_dim).replace(obs_shift=shifts)
    return update_with_noise(cfg, model, discount, state, batch, noise, task)
