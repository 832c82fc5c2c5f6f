"""SAC losses, one pure function per rule (Haarnoja et al. 2018, arXiv:1812.05905).

The soft actor-critic family's: SAC's, and the parts REDQ, CrossQ, ASAC and AVG reuse."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax.networks.distributions import sample_with_raw


def soft_td_target(r_t, discount_t, q_next_min, log_pi_next, alpha):
    """y = r + gamma (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s')) (Eq. 3, 5)."""
    return r_t + discount_t * (q_next_min - alpha * log_pi_next)


def critic_loss(q_t, target):
    """0.5 sum over members of the mean squared TD error (Eq. 5); q_t (N, B), target (B,)."""
    td = q_t - jax.lax.stop_gradient(target)[None]
    loss = 0.5 * jnp.mean(td**2, axis=-1).sum()
    return loss, {"critic_loss": loss, "q_mean": q_t.mean()}


def actor_loss(q_pi_min, log_pi, alpha):
    """E[alpha log pi(a|s) - min_i Q_i(s, a)] with a ~ pi reparameterised (Eq. 7)."""
    loss = jnp.mean(jax.lax.stop_gradient(alpha) * log_pi - q_pi_min)
    return loss, {"actor_loss": loss, "entropy": -log_pi.mean()}


def temperature_loss(log_alpha, log_pi, target_entropy):
    """-log(alpha) (log pi + H_target), SB3's parameterisation in log alpha (Eq. 18)."""
    loss = -jnp.mean(log_alpha * jax.lax.stop_gradient(log_pi + target_entropy))
    return loss, {"alpha_loss": loss, "alpha": jnp.exp(log_alpha)}


def sample_action(pi, key):
    """(action, log_prob) of a squashed policy, its log-prob read from the latent sample."""
    action, log_prob, _ = sample_with_raw(pi, key)
    return action, log_prob
