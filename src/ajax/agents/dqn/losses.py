"""DQN targets and loss, one pure function per rule."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def q_learning_target(r_t, discount_t, q_t_target):
    """y = r + gamma (1 - terminated) max_a' Q_target(s', a') (Mnih et al. 2015, Methods, Eq. 3)."""
    return r_t + discount_t * q_t_target.max(-1)


def double_q_learning_target(r_t, discount_t, q_t_target, q_t_online):
    """y = r + gamma (1 - terminated) Q_target(s', argmax_a' Q(s', a'))
    (van Hasselt et al. 2016, arXiv:1509.06461, Eq. 4)."""
    a_star = jnp.argmax(q_t_online, axis=-1)
    return r_t + discount_t * jnp.take_along_axis(q_t_target, a_star[..., None], -1)[..., 0]


def huber_td_loss(q_tm1_a, target):
    """mean Huber(Q(s, a) - y), delta 1 (SB3's ``smooth_l1_loss``; Mnih et al. 2015 clip the error)."""
    td = q_tm1_a - jax.lax.stop_gradient(target)
    loss = optax.huber_loss(td, delta=1.0).mean()
    return loss, {"q_loss": loss, "q_mean": q_tm1_a.mean(), "td_abs": jnp.abs(td).mean()}
