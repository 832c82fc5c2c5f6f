"""APO's rules beside PPO's surrogate (Ma et al. 2021, arXiv:2106.03442)."""

from __future__ import annotations

import jax.numpy as jnp


def reward_rate_estimate(rho, r_t, rho_step: float):
    """rho + rho_step * (mean_t,n r_t - rho): the exponential average of the rollouts' reward
    rate, the average reward the policy earns (Ma et al. 2021, Alg. 1)."""
    return rho + rho_step * (jnp.mean(r_t) - rho)


def average_value_constraint(v, nu: float):
    """nu * mean(V(s))^2 over the minibatch: the differential value's average under the
    state distribution is 0, which fixes the constant the average-reward Bellman equation
    leaves free (Ma et al. 2021, the average value constraint)."""
    penalty = nu * jnp.mean(v) ** 2
    return penalty, {"value_mean": jnp.mean(v), "value_constraint": penalty}
