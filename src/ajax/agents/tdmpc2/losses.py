"""TD-MPC2's losses and TD target, one pure function per rule, all time-major.

arXiv:2310.16828v2 Eq. 3-4 (model objective) and Eq. 6 (policy objective); nicklashansen/tdmpc2
tdmpc2.py ``_update``, ``_td_target`` and ``update_pi`` (HEAD e9f5932). Shapes: H the horizon,
B the batch, L the latent width, K the two-hot bins, Nq the ensemble size. Every H-step loss
weighs step t by rho^t and divides the sum by H (Nq H for the value loss), as the reference does;
the policy loss instead averages its H + 1 weighted terms.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from ajax.distributional import TwoHot, bernoulli_loss


def rho_weights(rho: float, length: int) -> jax.Array:
    """rho^t for t = 0..length-1: the temporal weights of the H-step losses (paper Eq. 3)."""
    if not 0.0 < rho <= 1.0:
        raise ValueError(f"rho must be in (0, 1], got {rho}")
    return jnp.power(jnp.float32(rho), jnp.arange(length, dtype=jnp.float32))


def td_target(
    r_t: jax.Array, terminated: jax.Array, discount: float, q_next: jax.Array
) -> jax.Array:
    """One-step target r_t + gamma (1 - terminated) Q_min(z', pi(z')) (HEAD ``_td_target``).

    ``q_next`` is the 'min' of a random pair of target Qs at the encoded next observation; a
    terminated step is absorbing (HEAD's episodic form; the paper's tasks never terminate, where
    terminated is always 0). Truncation is not termination: it bootstraps. No gradient.
    """
    chex.assert_equal_shape([r_t, terminated, q_next])
    target = r_t + discount * (1.0 - terminated.astype(jnp.float32)) * q_next
    return jax.lax.stop_gradient(target)


def consistency_loss(z_pred: jax.Array, z_target: jax.Array, rho: float) -> jax.Array:
    """sum_t rho^t mean((d(z_t, a_t) - sg(h(o_{t+1})))^2) / H (tdmpc2.py ``_update``).

    ``z_pred`` [H, B, L] are the rolled-out latents z_1..z_H, ``z_target`` the encoded next
    observations (stop-gradiented here, as the reference encodes them under no_grad).
    """
    chex.assert_equal_shape([z_pred, z_target])
    per_step = jnp.mean(jnp.square(z_pred - jax.lax.stop_gradient(z_target)), axis=(1, 2))
    horizon = z_pred.shape[0]
    return jnp.sum(rho_weights(rho, horizon) * per_step) / horizon


def reward_loss(logits: jax.Array, r_t: jax.Array, two_hot: TwoHot, rho: float) -> jax.Array:
    """sum_t rho^t mean_B CE(R(z_t, a_t), two_hot(r_t)) / H; logits [H, B, K], r_t [H, B]."""
    per_step = jnp.mean(two_hot.loss(logits, r_t), axis=1)
    horizon = logits.shape[0]
    return jnp.sum(rho_weights(rho, horizon) * per_step) / horizon


def value_loss(q_logits: jax.Array, targets: jax.Array, two_hot: TwoHot, rho: float) -> jax.Array:
    """sum_{t, q} rho^t mean_B CE(Q_q(z_t, a_t), two_hot(y_t)) / (H Nq).

    Every member regresses the same TD target; ``q_logits`` [Nq, H, B, K], ``targets`` [H, B].
    """
    num_q, horizon = q_logits.shape[:2]
    ce = two_hot.loss(q_logits, jnp.broadcast_to(targets, q_logits.shape[:-1]))
    per_step = jnp.sum(jnp.mean(ce, axis=2), axis=0)  # [H], summed over members
    return jnp.sum(rho_weights(rho, horizon) * per_step) / (horizon * num_q)


def termination_loss(logits: jax.Array, terminated: jax.Array) -> jax.Array:
    """mean BCE(logit(z_{t+1}), terminated_t) over [H, B] (HEAD, episodic; hard labels, no rho)."""
    chex.assert_equal_shape([logits, terminated])
    return jnp.mean(bernoulli_loss(logits, terminated.astype(jnp.float32)))


def policy_loss(
    q: jax.Array, scaled_entropy: jax.Array, scale: jax.Array, entropy_coef: float, rho: float
) -> jax.Array:
    """mean_t rho^t mean_B(-(entropy_coef H_scaled + Q / S)) (HEAD ``update_pi``, paper Eq. 6).

    ``q`` [H + 1, B] is the 'avg' of a random pair of online Qs at the policy's actions (gradient
    only through the actions), ``scaled_entropy`` [H + 1, B] the HEAD entropy bonus and ``scale``
    the RunningScale value S, updated from q[0] just before.
    """
    chex.assert_equal_shape([q, scaled_entropy])
    per_step = jnp.mean(-(entropy_coef * scaled_entropy + q / scale), axis=1)
    return jnp.mean(rho_weights(rho, q.shape[0]) * per_step)
