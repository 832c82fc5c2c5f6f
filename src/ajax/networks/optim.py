"""Optimizer builders of the toolbox (re-exported by :mod:`ajax.networks.utils`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from ajax.jax_helpers import known


def clip_by_member_norm(max_norm: float) -> optax.GradientTransformation:
    """``optax.clip_by_global_norm`` on each ensemble member alone; leaf axis 0 indexes members.

    Each member is its own network in the references and is clipped alone (ASAC: BobMak/asac
    @4b68862, darer/Models.py:299-301). The clipped member is g / ||g|| * max_norm, as optax does.
    """
    if known(max_norm) and max_norm <= 0:  # a sweep's traced value was checked concrete
        raise ValueError(f"max_norm must be positive, got {max_norm}")

    def update_fn(updates, state, params=None):
        del params
        leaves = jax.tree.leaves(updates)
        sizes = {leaf.shape[0] if leaf.ndim else None for leaf in leaves}
        if len(sizes) > 1 or None in sizes:
            raise ValueError(
                "clip_by_member_norm needs every leaf to have the same leading (member) axis, got "
                f"shapes {[leaf.shape for leaf in leaves]}"
            )
        sq = sum(jnp.sum(jnp.square(leaf).reshape(leaf.shape[0], -1), axis=1) for leaf in leaves)
        norm = jnp.sqrt(sq)

        def clip(leaf):
            g = norm.reshape((-1,) + (1,) * (leaf.ndim - 1)).astype(leaf.dtype)
            return jnp.where(g < max_norm, leaf, (leaf / g) * max_norm)

        return jax.tree.map(clip, updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def _update_rule(optimizer: str, beta_1: float, beta_2: float, eps: float):
    if optimizer == "adam":
        return optax.scale_by_adam(b1=beta_1, b2=beta_2, eps=eps)
    if optimizer == "radam":
        return optax.scale_by_radam(b1=beta_1, b2=beta_2, eps=eps)
    if optimizer == "centered_rmsprop":
        return optax.scale_by_stddev(decay=beta_2, eps=eps)
    raise ValueError(
        f"unknown optimizer {optimizer!r}; valid ones: 'adam', 'radam', 'centered_rmsprop'"
    )


def get_adam_tx(
    learning_rate: float | optax.Schedule = 1e-3,
    max_grad_norm: float | None = None,
    eps: float = 1e-5,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    weight_decay: float = 0.0,
    per_member: bool = False,
    optimizer: str = "adam",
) -> optax.GradientTransformation:
    """Adam (or "radam", "centered_rmsprop"), optionally after clipping the gradient norm.

    Clipping is off unless ``max_grad_norm`` is given: global, or per ensemble member with
    ``per_member`` (:func:`clip_by_member_norm`; without ``max_grad_norm`` it has nothing to do).
    ``weight_decay`` is decoupled, added between the rule and the learning rate as optax.adamw
    does; 0 leaves it out, so "adam" is optax.adam. "centered_rmsprop" is optax.rmsprop(
    centered=True) with decay ``beta_2`` (``beta_1`` unused).
    """
    check = lambda ok, message: ok or _raise(message)  # noqa: E731
    # a sweep's traced values (ajax.training.sweep) were checked as the grid's concrete values
    if not callable(learning_rate) and known(learning_rate):
        check(learning_rate > 0, f"learning_rate must be positive, got {learning_rate}")
    if max_grad_norm is not None and known(max_grad_norm):
        check(max_grad_norm > 0, f"max_grad_norm must be positive or None, got {max_grad_norm}")
    if known(eps, weight_decay):
        check(eps >= 0 and weight_decay >= 0,
              f"eps and weight_decay must be >= 0, got {eps}, {weight_decay}")  # fmt: skip
    if known(beta_1, beta_2):
        check(0.0 <= beta_1 < 1.0 and 0.0 <= beta_2 < 1.0,
              f"beta_1 and beta_2 must be in [0, 1), got {beta_1}, {beta_2}")  # fmt: skip
    chain = [_update_rule(optimizer, beta_1, beta_2, eps)]
    if max_grad_norm is not None:
        clip = clip_by_member_norm if per_member else optax.clip_by_global_norm
        chain.insert(0, clip(max_grad_norm))
    if not known(weight_decay) or weight_decay > 0:  # traced: a grid that may hold 0 adds 0
        chain.append(optax.add_decayed_weights(weight_decay))
    chain.append(optax.scale_by_learning_rate(learning_rate))
    return optax.chain(*chain)


def _raise(message: str):
    raise ValueError(message)
