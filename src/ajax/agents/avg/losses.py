"""AVG's losses and its TD scale (Vasan et al. 2024, Alg. 1; Schaul et al. 2021)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def avg_actor_loss(q_pi, log_pi, alpha: float):
    """E[alpha log pi(a|s) - Q(s, a)] with a ~ pi(.|s) reparameterised (AVG Alg. 1, the
    action-value gradient through the sampled action)."""
    loss = jnp.mean(alpha * log_pi - q_pi)
    return loss, {"actor_loss": loss, "entropy": -log_pi.mean()}


def avg_critic_loss(q_t, r_t, discount_t, q_tp1, log_pi_tp1, alpha: float):
    """0.5 E[(Q(s, a) - y)^2], y = r + gamma (1 - terminated) (Q(s', a') - alpha log pi(a'|s'))
    with a' ~ pi(.|s') and the same critic on both sides (no target network, AVG Alg. 1)."""
    y = jax.lax.stop_gradient(r_t + discount_t * (q_tp1 - alpha * log_pi_tp1))
    td = q_t - y
    loss = 0.5 * jnp.mean(td**2)
    return loss, {"critic_loss": loss, "q_mean": q_t.mean(), "td_abs": jnp.abs(td).mean()}


def td_scale(var_r, var_gamma, mean_g2, eps: float = 1e-8):
    """sigma = sqrt(Var[r] + Var[gamma_t] E[G^2]), the scale of the TD error (Schaul et al.
    2021, Eq. 6; AVG's scaled TD), floored at ``sqrt(eps)``."""
    return jnp.sqrt(jnp.maximum(var_r + var_gamma * mean_g2, eps))
