"""DreamerV3's optimiser: per-tensor AGC, then LaProp, then a warmed-up learning rate (spec 000 B17).

danijar/dreamerv3@e3f0224 embodied/jax/opt.py:109-164 (clip_by_agc, scale_by_rms,
scale_by_momentum) and dreamerv3/agent.py:342-379 (_make_opt); configs.yaml:87 (lr 4e-5, agc 0.3,
eps 1e-20, beta1 0.9, beta2 0.999, warmup 1000). One optimiser trains every module.

LaProp normalises the gradient by the RMS of past gradients first and takes momentum of the
normalised gradient second (Adam does the reverse), so with eps = 1e-20 the updates are
invariant to the scale of the loss. The paper states beta2 = 0.99; the code uses 0.999 (kept as a
parameter).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def clip_by_agc_per_tensor(clip: float = 0.3, pmin: float = 1e-3) -> optax.GradientTransformation:
    """Adaptive gradient clipping per tensor: g / max(1, ||g|| / (clip max(pmin, ||p||))).

    opt.py:109-123. Norms are Frobenius norms of whole leaves. This is not
    ``optax.adaptive_grad_clip``, which clips each output unit separately (NFNets) and cannot
    express whole-tensor norms over a tree of mixed ranks. ``clip = 0`` disables the clipping, as in
    the reference. Needs ``params`` in ``update``.
    """
    if clip < 0 or pmin < 0:
        raise ValueError(f"need clip >= 0 and pmin >= 0, got clip={clip}, pmin={pmin}.")

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        if clip == 0:
            return updates, state
        if params is None:
            raise ValueError(
                "clip_by_agc_per_tensor needs params: call update(grads, state, params)."
            )

        def clip_leaf(g, p):
            upper = clip * jnp.maximum(pmin, jnp.sqrt(jnp.sum(jnp.square(p))))
            return g * (1.0 / jnp.maximum(1.0, jnp.sqrt(jnp.sum(jnp.square(g))) / upper))

        return jax.tree.map(clip_leaf, updates, params), state

    return optax.GradientTransformation(init_fn, update_fn)


def warmup_constant(lr: float, warmup: int) -> optax.Schedule:
    """lr * min(1, step / warmup): linear from 0 at step 0, then constant (agent.py:375-377)."""
    if lr < 0 or warmup < 0:
        raise ValueError(f"need lr >= 0 and warmup >= 0, got lr={lr}, warmup={warmup}.")
    if warmup == 0:
        return optax.constant_schedule(lr)
    ramp = optax.linear_schedule(0.0, lr, warmup)
    return optax.join_schedules([ramp, optax.constant_schedule(lr)], [warmup])


def laprop_agc(
    lr: float = 4e-5,
    warmup: int = 1000,
    agc: float = 0.3,
    pmin: float = 1e-3,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-20,
) -> optax.GradientTransformation:
    """DreamerV3's optimiser chain: AGC -> RMS scaling -> momentum -> -lr(step).

    agent.py:357-379. scale_by_rms(beta2, eps outside the sqrt, bias-corrected) is the reference's
    scale_by_rms (opt.py:126-143), and ema(beta1, debias=True) its scale_by_momentum without
    Nesterov (opt.py:146-164). The first update is exactly zero (lr(0) = 0 while warming up).
    """
    for name, beta in (("beta1", beta1), ("beta2", beta2)):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {beta}.")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}.")
    return optax.chain(
        clip_by_agc_per_tensor(agc, pmin),
        optax.scale_by_rms(decay=beta2, eps=eps, eps_in_sqrt=False, bias_correction=True),
        optax.ema(decay=beta1, debias=True),
        optax.scale_by_learning_rate(warmup_constant(lr, warmup)),
    )
