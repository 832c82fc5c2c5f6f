"""PPO losses and GAE, one pure function per rule (Schulman et al. 2017; 2015 GAE).

The PPO family's: PPO's, and APO's beside its own rules."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae_advantages(r_t, v_t, v_tp1, discount_t, done_t, lam: float):
    """Generalised advantage estimation (Schulman et al. 2015, Eq. 16), time-major [T, N].

    delta_t = r_t + discount_t V(s_{t+1}) - V(s_t); A_t = delta_t + discount_t lam (1 - done_t)
    A_{t+1}. ``discount_t`` is gamma (1 - terminated_t); ``done_t`` also cuts at truncation,
    whose bootstrap ``v_tp1`` is the value of the true last observation.
    """

    def step(next_adv, xs):
        delta, disc, done = xs
        adv = delta + disc * lam * (1.0 - done) * next_adv
        return adv, adv

    delta = r_t + discount_t * v_tp1 - v_t
    _, adv = jax.lax.scan(step, jnp.zeros_like(delta[0]), (delta, discount_t, done_t), reverse=True)
    return adv


def clipped_surrogate_loss(log_prob, old_log_prob, advantages, clip_eps: float):
    """-E[min(rho A, clip(rho, 1 - eps, 1 + eps) A)] (Eq. 7)."""
    ratio = jnp.exp(log_prob - old_log_prob)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    loss = -jnp.mean(jnp.minimum(unclipped, clipped))
    clip_frac = jnp.mean(jnp.abs(ratio - 1.0) > clip_eps)
    return loss, {
        "policy_loss": loss,
        "clip_frac": clip_frac,
        "approx_kl": jnp.mean(old_log_prob - log_prob),
    }


def value_loss(v, old_v, returns, clip_eps: float | None):
    """0.5 E[(V - R)^2], or the max of clipped and unclipped errors (PPO2/CleanRL)."""
    err = (v - returns) ** 2
    if clip_eps is not None:
        v_clipped = old_v + jnp.clip(v - old_v, -clip_eps, clip_eps)
        err = jnp.maximum(err, (v_clipped - returns) ** 2)
    loss = 0.5 * jnp.mean(err)
    return loss, {"value_loss": loss}
