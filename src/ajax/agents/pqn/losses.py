"""PQN's target and loss (Gallici et al. 2024, arXiv:2407.04811), one pure function per rule."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax.returns import lambda_returns


def q_lambda_targets(r_t, terminated_t, done_t, q_t_max, gamma, lam):
    """Peng's Q(lambda) returns over a rollout [T, N] (Gallici et al. 2024, Alg. 1, Eq. 6):
    G_t = r_t + gamma (1 - term_t) [(1 - lambda) max_a Q(s_{t+1}, a) + lambda G_{t+1}], with the
    lambda-trace cut at every episode end (terminal or truncated) and G_T := max_a Q(s_T, a).

    ``q_t_max[t]`` is max_a Q at the true arrival state of step t (the env's last observation on
    an episode end), so truncated episodes bootstrap where purejaxql's would not.
    """
    discount = gamma * (1.0 - terminated_t.astype(jnp.float32))
    trace = lam * (1.0 - done_t.astype(jnp.float32))
    return lambda_returns(r_t, discount, q_t_max, trace)


def q_regression_loss(q_tm1_a, target):
    """0.5 mean (Q(s, a) - G)^2 (purejaxql pqn: the squared error against the lambda return)."""
    td = q_tm1_a - jax.lax.stop_gradient(target)
    loss = 0.5 * jnp.mean(td**2)
    return loss, {"q_loss": loss, "q_mean": q_tm1_a.mean()}
