"""ASAC's losses: SAC's, with the discounted target replaced by the differential one."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def differential_soft_target(r_t, rho, continues_t, q_next_min, log_pi_next, alpha):
    """y = r - rho + (1 - terminated) (min_i Q'_i(s', a') - alpha log pi(a'|s')).

    The differential soft Bellman equation (Adamczyk et al. 2025, Eq. 5; SAC's Eq. 3 with
    gamma = 1 and the reward rate rho subtracted from every reward).
    """
    return r_t - rho + continues_t * (q_next_min - alpha * log_pi_next)


def reward_rate_update(rho, r_t, v_next, q_t, rho_lr):
    """rho + rho_lr * (mean(r + V(s') - Q(s, a)) - rho), both values from the online critic.

    Under the stationary distribution E[V(s')] = E[V(s)], so the batch mean of r + V(s') - Q(s, a)
    telescopes to the soft average reward E[r - alpha log pi] whatever the critic's error
    (differential Q-learning's reward-rate rule, Wan, Naik & Sutton 2021, Eq. 6, written as an
    exponential average). Both values must come from the same (online) critic: with the lagging
    target in V(s') the differential target is consistent at any rho, the critics drifting by
    the error instead (measured: rho stayed at 0.06 where the reward rate was 1.0).
    """
    estimate = jax.lax.stop_gradient(jnp.mean(r_t + v_next - q_t))
    rho_next = rho + rho_lr * (estimate - rho)
    return rho_next, {"rho": rho_next, "rho_estimate": estimate}
