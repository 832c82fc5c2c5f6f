"""TD-MPC2's Q ensemble and its random-pair reductions (spec 000 B9).

arXiv:2310.16828v2 Sec. 3.1 ("an ensemble of 5 Q-functions ... the minimum of two randomly
subsampled"); nicklashansen/tdmpc2 common/layers.py ``Ensemble`` (HEAD :8-34, torch.vmap with
``randomness="different"``) and world_model.py ``Q`` (HEAD :186-216; 5f6fade :150-172).

The members are stacked along a leading axis of every parameter, all see the same input, and each
draws its own initialisation key and its own dropout mask. A 'min' or 'avg' value decodes the two
members of one random pair, shared by the whole batch and horizon, and reduces the decoded
scalars (never the logits).

Dropout is a per-call choice (``deterministic``). Which passes use it differs between the
references: HEAD keeps the target Qs and the acting/TD-target passes in eval mode, while in the
paper-era code (5f6fade) the functorch ensemble never leaves training mode, so dropout is on in
every pass, TD target and planner included (found by running 5f6fade; spec 000 status note and
"Usage map", which corrects its earlier "off" rows).
"""

from __future__ import annotations

from typing import Literal

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.distributional import TwoHot

Reduction = Literal["min", "avg"]


class Ensemble(nn.Module):
    """``num`` independent copies of ``member`` applied to the same input, outputs stacked on axis 0.

    ``nn.vmap`` with in_axes None (broadcast input), out_axes 0, parameters stacked on axis 0 and
    the "params" and "dropout" RNG streams split, so every member has its own initialisation key
    and dropout mask (torch.vmap ``randomness="different"``). ``member`` is a template: its fields
    configure every copy, and it must accept ``(x, deterministic=...)``.
    """

    member: nn.Module
    num: int

    @nn.compact
    def __call__(
        self,
        x: jax.Array,
        deterministic: bool | None = None,
        dropout_mask: jax.Array | None = None,
    ) -> jax.Array:
        """Outputs of all members for ``x [..., in]``: ``[num, ..., out]``.

        ``dropout_mask`` [num, ..., units] (1 = kept), when given, replaces the masks the members'
        dropout would draw, so a recorded draw can be replayed (it needs no "dropout" RNG).
        """
        if self.num < 1:
            raise ValueError(f"an ensemble needs num >= 1 members, got {self.num}")
        if dropout_mask is not None:
            return self._with_mask(x, dropout_mask)

        def apply_member(member: nn.Module, x: jax.Array) -> jax.Array:
            return member(x, deterministic=deterministic)

        members = nn.vmap(
            apply_member,
            in_axes=None,
            out_axes=0,
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            axis_size=self.num,
        )
        return members(self.member, x)

    def _with_mask(self, x: jax.Array, dropout_mask: jax.Array) -> jax.Array:
        if dropout_mask.shape[0] != self.num:
            raise ValueError(
                f"dropout_mask needs a leading member axis of {self.num}, got {dropout_mask.shape}"
            )
        if not getattr(self.member, "dropout", 0.0) > 0:
            raise ValueError("a dropout_mask needs members built with dropout > 0")

        def apply_member(member: nn.Module, x: jax.Array, mask: jax.Array) -> jax.Array:
            def replay(next_fun, args, kwargs, context):
                # Inverted dropout with the given mask in place of a Bernoulli draw.
                if isinstance(context.module, nn.Dropout) and context.method_name == "__call__":
                    keep = mask.astype(args[0].dtype) / (1.0 - context.module.rate)
                    return args[0] * keep
                return next_fun(*args, **kwargs)

            with nn.intercept_methods(replay):
                return member(x, deterministic=False)

        members = nn.vmap(
            apply_member,
            in_axes=(None, 0),
            out_axes=0,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            axis_size=self.num,
        )
        return members(self.member, x, dropout_mask)


def random_pair(key: jax.Array, num: int) -> jax.Array:
    """Two distinct member indices: ``permutation(key, num)[:2]`` (HEAD world_model.py:212).

    One pair per call, used for every batch element (the reference draws one per Q call).
    """
    if num < 2:
        raise ValueError(f"a random pair needs num >= 2 members, got {num}")
    return jax.random.permutation(key, num)[:2]


def keep_masks(
    key: jax.Array, members: jax.Array, shape: tuple[int, ...], rate: float
) -> jax.Array:
    """Dropout keep-masks [M, *shape] (1 = kept, probability 1 - rate) of the members ``members``.

    Member i's mask is drawn from ``fold_in(key, i)`` whatever else is drawn, so the masks of a
    pair are the pair's rows of the whole ensemble's ``keep_masks(key, arange(num), ...)``: the
    pair can be evaluated alone with the whole ensemble's draw (``networks.Q_members``).
    """
    keep = 1.0 - rate
    return jax.vmap(lambda i: jax.random.bernoulli(jax.random.fold_in(key, i), keep, shape))(
        members
    )


def reduce_pair(q_pair: jax.Array, how: Reduction) -> jax.Array:
    """min or mean over the leading pair axis of decoded values ``[2, ...]`` (world_model.py:213-216)."""
    if q_pair.shape[:1] != (2,):
        raise ValueError(f"q_pair must have a leading axis of 2, got shape {q_pair.shape}")
    if how == "min":
        return jnp.min(q_pair, axis=0)
    if how == "avg":
        return 0.5 * (q_pair[0] + q_pair[1])
    raise ValueError(f"unknown reduction {how!r}; use 'min' (TD target) or 'avg' (policy, planner)")


def pair_q(logits: jax.Array, key: jax.Array, two_hot: TwoHot, how: Reduction) -> jax.Array:
    """The 'min' or 'avg' Q value from all members' logits ``[Nq, ..., K]``: shape ``[...]``.

    Decodes the two members of :func:`random_pair` with ``two_hot`` and reduces the decoded
    scalars with :func:`reduce_pair` (world_model.py:212-216).
    """
    if logits.ndim < 2:
        raise ValueError(f"logits must be [Nq, ..., K], got shape {logits.shape}")
    idx = random_pair(key, logits.shape[0])
    return reduce_pair(two_hot.decode(logits[idx]), how)
