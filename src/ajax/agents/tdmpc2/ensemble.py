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

    Parameters are stacked on axis 0 and created by ``nn.vmap`` with the "params" RNG split, so
    every member has its own initialisation key (torch.vmap ``randomness="different"``). Applied,
    the members run one after another on their slices of the stack, each with its own dropout
    key ``fold_in(dropout_rng, i)``. That gives the same maths as the vmapped form but plain 2-D
    matmuls: XLA's CPU backend wraps a vmapped member's batched matmuls in layout copies, and
    the loop ran TD-MPC2's size-5 update 12% faster (benchmarks/tdmpc2_profile.py; the
    deviation T57 in docs/world_models/deviations.md). ``member`` is a template: its fields
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
            if dropout_mask.shape[0] != self.num:
                raise ValueError(
                    f"dropout_mask needs a leading member axis of {self.num}, "
                    f"got {dropout_mask.shape}"
                )
            if not getattr(self.member, "dropout", 0.0) > 0:
                raise ValueError("a dropout_mask needs members built with dropout > 0")
        if self.is_initializing():
            return self._create(x, deterministic, dropout_mask)
        params = self.variables["params"]["member"]
        template = self.member.clone(parent=None)
        drop_key = None
        if dropout_mask is None and deterministic is False:
            drop_key = self.make_rng("dropout")
        outs = []
        for i in range(self.num):
            variables = {"params": jax.tree.map(lambda p, i=i: p[i], params)}
            if dropout_mask is not None:
                with nn.intercept_methods(_replay_dropout(dropout_mask[i])):
                    outs.append(template.apply(variables, x, deterministic=False))
            elif drop_key is not None:
                rngs = {"dropout": jax.random.fold_in(drop_key, i)}
                outs.append(template.apply(variables, x, deterministic=False, rngs=rngs))
            else:
                outs.append(template.apply(variables, x, deterministic=deterministic))
        return jnp.stack(outs)

    def _create(self, x, deterministic, dropout_mask) -> jax.Array:
        """Initialisation: the members' parameters, stacked, from split "params" keys."""

        def apply_member(member: nn.Module, x: jax.Array) -> jax.Array:
            # a mask replaces the draw, so init needs no "dropout" RNG for it
            determ = True if dropout_mask is not None else deterministic
            return member(x, deterministic=determ)

        members = nn.vmap(
            apply_member,
            in_axes=None,
            out_axes=0,
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            axis_size=self.num,
        )
        return members(self.member, x)


def _replay_dropout(mask: jax.Array):
    """A method interceptor: inverted dropout with ``mask`` (1 = kept) in place of a draw."""

    def replay(next_fun, args, kwargs, context):
        if isinstance(context.module, nn.Dropout) and context.method_name == "__call__":
            keep = mask.astype(args[0].dtype) / (1.0 - context.module.rate)
            return args[0] * keep
        return next_fun(*args, **kwargs)

    return replay


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
