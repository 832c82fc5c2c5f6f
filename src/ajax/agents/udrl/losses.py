"""UDRL's loss (Srivastava et al. 2019, arXiv:1912.02877), one pure function."""

from __future__ import annotations

import jax.numpy as jnp


def behaviour_loss(log_prob_a, weight):
    """-E[log B(a_t | s_t, d_r, d_h)] over hindsight segments (Srivastava et al. 2019, Alg. 1:
    supervised learning of the behaviour function, cross-entropy for discrete actions; the
    Gaussian log-likelihood of the squashed policy for continuous ones). ``weight`` is 0 while
    the store is still empty, so the first update cannot fit padding."""
    nll = -jnp.mean(log_prob_a)
    return weight * nll, {"behaviour_nll": nll}
