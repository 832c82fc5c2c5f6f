"""REDQ's target and critic loss (Chen et al. 2021, arXiv:2101.05982, Alg. 1)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax.agents.shared.soft_actor_critic_losses import soft_td_target


def subset_min_target(r_t, discount_t, q_next, log_pi_next, alpha, subset):
    """y = r + gamma (1 - d) (min_{i in M} Q'_i(s', a') - alpha log pi(a'|s')) (Alg. 1, line 7);
    ``q_next`` (N, B) every target member, ``subset`` the M sampled member ids."""
    return soft_td_target(r_t, discount_t, q_next[subset].min(0), log_pi_next, alpha)


def ensemble_mse_loss(q_t, target):
    """sum_i mean_B (Q_i(s, a) - y)^2 (Alg. 1, line 8; redq_sac.py scales the mean by N)."""
    td = q_t - jax.lax.stop_gradient(target)[None]
    loss = jnp.mean(td**2, axis=-1).sum()
    return loss, {"critic_loss": loss, "q_mean": q_t.mean()}
