"""TD3 losses and targets, one pure function per rule (Fujimoto et al. 2018, Alg. 1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def smoothed_target_action(mu_next, key, noise: float, noise_clip: float):
    """a' = clip(mu'(s') + clip(eps, -c, c), -1, 1), eps ~ N(0, noise^2) (Eq. 14)."""
    eps = jnp.clip(noise * jax.random.normal(key, mu_next.shape), -noise_clip, noise_clip)
    return jnp.clip(mu_next + eps, -1.0, 1.0)


def clipped_double_q_target(r_t, discount_t, q_next):
    """y = r + gamma (1 - terminated) min_i Q'_i(s', a') (Eq. 10); q_next (N, B)."""
    return r_t + discount_t * q_next.min(0)


def critic_loss(q_t, target):
    """Sum over critics of the mean squared TD error; q_t (N, B), target (B,)."""
    td = q_t - jax.lax.stop_gradient(target)[None]
    loss = jnp.mean(td**2, axis=-1).sum()
    return loss, {"critic_loss": loss, "q_mean": q_t.mean()}


def actor_loss(q1_pi):
    """Deterministic policy gradient through the first critic: -E[Q_1(s, mu(s))]."""
    loss = -q1_pi.mean()
    return loss, {"actor_loss": loss}
