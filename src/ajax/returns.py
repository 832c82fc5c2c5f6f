"""λ-returns and discount heuristics shared by the world-model agents (spec 000 B11, B19)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def lambda_returns(rew: jax.Array, disc: jax.Array, boot: jax.Array, lam) -> jax.Array:
    """TD(λ) returns G [T, ...], time-major: G_t = r_t + d_t [(1 - λ_t) v_t + λ_t G_{t+1}].

    rlax.lambda_returns' convention (spec 000 B11): index t is the transition t -> t+1, so
    ``boot[t]`` is the value of the arrival state and the recursion starts from G_T := boot[-1],
    i.e. G_{T-1} = r_{T-1} + d_{T-1} v_{T-1}. ``disc`` is the discount times the continuation and
    may be soft (DreamerV3's predicted ĉ); it is never cast to bool. ``lam`` is a scalar or [T, ...]
    (λ times "not cut" for truncations).

    DreamerV3's lambda_return (2411f7d:dreamerv3/agent.py:480-488) over arrays of length L maps
    onto this with rew_t = rew[t+1], disc_t = disc (1 - term[t+1]), lam_t = λ (1 - last[t+1]) and
    boot_t = boot[t+1]; its products are associated differently (equal up to float32 rounding).
    TD-MPC2's one-step TD target is λ = 0 with T = 1, its planner value λ = 1 with disc = γ.
    """
    rew = jnp.asarray(rew, jnp.float32)
    disc = jnp.asarray(disc, jnp.float32)
    boot = jnp.asarray(boot, jnp.float32)
    if rew.ndim == 0 or rew.shape[0] == 0:
        raise ValueError(f"rew must be time-major [T, ...] with T >= 1, got shape {rew.shape}.")
    if disc.shape != rew.shape or boot.shape != rew.shape:
        raise ValueError(
            f"rew, disc and boot must share one [T, ...] shape, got {rew.shape}, {disc.shape}, "
            f"{boot.shape}; broadcast a scalar discount with jnp.full_like(rew, gamma)."
        )
    if isinstance(lam, int | float) and not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must lie in [0, 1], got {lam}.")
    lam = jnp.asarray(lam, jnp.float32)
    if lam.ndim != 0 and lam.shape != rew.shape:
        raise ValueError(f"lam must be a scalar or of shape {rew.shape}, got {lam.shape}.")
    lam = jnp.broadcast_to(lam, rew.shape)

    def step(g_next, xs):
        r_t, d_t, v_t, lam_t = xs
        g_t = r_t + d_t * ((1.0 - lam_t) * v_t + lam_t * g_next)
        return g_t, g_t

    _, returns = jax.lax.scan(step, boot[-1], (rew, disc, boot, lam), reverse=True)
    return returns


def discount_from_horizon(h: float, lo: float | None = None, hi: float | None = None) -> float:
    """γ = 1 - 1/h, optionally clipped to [lo, hi] (spec 000 B19).

    DreamerV3: h = 333 (horizon in configs.yaml; agent.py:316 writes 1 - 1 / horizon), γ = 0.996997.
    TD-MPC2: h = episode_length / 5 clipped to [0.95, 0.995] (5f6fade:tdmpc2/tdmpc2.py:36-49 writes
    (h - 1) / h, equal up to float64 rounding); see :func:`tdmpc2_discount`.
    """
    if not h > 0:
        raise ValueError(f"horizon h must be positive, got {h}.")
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"lo ({lo}) must not exceed hi ({hi}).")
    gamma = 1.0 - 1.0 / h
    if lo is not None:
        gamma = max(gamma, lo)
    if hi is not None:
        gamma = min(gamma, hi)
    return gamma


def tdmpc2_discount(
    episode_length: int, denom: float = 5.0, lo: float = 0.95, hi: float = 0.995
) -> float:
    """TD-MPC2's discount heuristic clip(1 - denom / T, lo, hi) (tdmpc2.py:36-49, config.yaml).

    Gives 0.95 for T = 50 and 100, 0.99 for T = 500 and 0.995 for T = 1000.
    """
    return discount_from_horizon(episode_length / denom, lo, hi)
