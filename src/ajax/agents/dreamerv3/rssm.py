"""DreamerV3's observe and imagine steps and their scans (spec 000 B14, B15).

Algorithms B and C of the DreamerV3 spec; danijar/dreamerv3@e3f0224 dreamerv3/rssm.py:61-118
(observe, _observe, imagine). Every function is pure: it takes the :class:`RSSM` module (its
config) and its ``params``. The scans are time-major: sequences are [T, B, ...] and outputs
[T, B, ...] (the reference scans axis 1 of [B, T, ...]; transpose replay batches first).

Random keys are split once per step, so no two steps share noise; in place of a key every
function also takes the noise itself, one row per step (:func:`~.latents.is_noise`: how the
parity tests replay the official draws). The initial state is zeros, not learned
(rssm.py:45-49).
"""

from __future__ import annotations

from collections.abc import Callable

import flax.struct
import jax
import jax.numpy as jnp

from ajax.agents.dreamerv3.latents import is_noise, onehot_st_sample
from ajax.agents.dreamerv3.networks import RSSM, RSSMConfig

sg = jax.lax.stop_gradient


class RSSMState(flax.struct.PyTreeNode):
    """The RSSM carry: deterministic state ``deter [B, D]`` and one-hot latents ``stoch [B, S, C]``."""

    deter: jax.Array
    stoch: jax.Array


class RSSMFeatures(flax.struct.PyTreeNode):
    """One step's output: the new state and the raw logits (posterior or prior) it was sampled from."""

    deter: jax.Array
    stoch: jax.Array
    logits: jax.Array


Policy = Callable[[jax.Array, RSSMState], jax.Array]


def initial_state(config: RSSMConfig, batch_size: int) -> RSSMState:
    """The all-zero state for ``batch_size`` sequences (rssm.py:45-49; not learned)."""
    return RSSMState(
        deter=jnp.zeros((batch_size, config.deter), jnp.float32),
        stoch=jnp.zeros((batch_size, config.stoch, config.classes), jnp.float32),
    )


def embed_action(action: jax.Array, config: RSSMConfig) -> jax.Array:
    """The action as the core's float input [B, A]: one-hot of an index [B] when discrete.

    nets.py:467-500 (DictConcat) for a single action key.
    """
    if config.discrete_actions:
        if jnp.issubdtype(jnp.asarray(action).dtype, jnp.floating):
            raise TypeError("discrete actions must be integer indices [B], got a float array.")
        return jax.nn.one_hot(action, config.action_dim, dtype=jnp.float32)
    action = jnp.asarray(action, jnp.float32)
    if action.shape[-1:] != (config.action_dim,):
        raise ValueError(
            f"continuous actions must be [B, {config.action_dim}], got {action.shape}."
        )
    return action


def _zero_where(x: jax.Array, is_first: jax.Array) -> jax.Array:
    """x with the rows of fresh sequences zeroed (nets.py:76-77, mask)."""
    flag = jnp.reshape(is_first, is_first.shape + (1,) * (x.ndim - is_first.ndim))
    return jnp.where(flag, jnp.zeros_like(x), x)


def per_step(draw, length: int):
    """``length`` per-step draws: a key split ``length`` ways, or noise (a float array or a tuple
    of them, one row per step) as given."""
    leaves = jax.tree.leaves(draw)
    if all(is_noise(x) for x in leaves):
        if any(x.shape[0] != length for x in leaves):
            raise ValueError(
                f"noise needs {length} rows, one per step; got {[x.shape for x in leaves]}"
            )
        return draw
    return jax.random.split(draw, length)


def split_draw(draw, n: int = 2) -> tuple:
    """A key split ``n`` ways, or a tuple of ``n`` noise arrays as given."""
    return tuple(draw) if isinstance(draw, tuple) else tuple(jax.random.split(draw, n))


def _apply(rssm: RSSM, params, method, *args) -> jax.Array:
    return rssm.apply({"params": params}, *args, method=method)


def observe_step(
    rssm: RSSM,
    params,
    carry: RSSMState,
    embed: jax.Array,
    prev_action: jax.Array,
    is_first: jax.Array,
    key: jax.Array,
) -> tuple[RSSMState, RSSMFeatures]:
    """One posterior step, Algorithm B (rssm.py:75-92).

    Where ``is_first [B]`` is set, deter, stoch and the previous action are zeroed before the core,
    and the embedded action is zeroed again: the one-hot of a zeroed index 0 is not zero. Then
    deter' = core(deter, stoch, a), logits = posterior(deter', embed) and stoch' is a
    straight-through one-hot sample of them.
    """
    is_first = jnp.asarray(is_first, bool)
    if is_first.shape != carry.deter.shape[:1] or embed.shape[:1] != is_first.shape:
        raise ValueError(
            f"is_first must be [B] and embed [B, E] with B = {carry.deter.shape[0]}, got "
            f"{is_first.shape} and {embed.shape}."
        )
    deter = _zero_where(carry.deter, is_first)
    stoch = _zero_where(carry.stoch, is_first)
    action = _zero_where(jnp.asarray(prev_action), is_first)
    action = _zero_where(embed_action(action, rssm.config), is_first)
    deter = _apply(rssm, params, RSSM.core, deter, stoch, action)
    logits = _apply(rssm, params, RSSM.posterior, deter, embed)
    stoch = onehot_st_sample(key, logits, rssm.config.unimix)
    return RSSMState(deter=deter, stoch=stoch), RSSMFeatures(
        deter=deter, stoch=stoch, logits=logits
    )


def imagine_step(
    rssm: RSSM, params, carry: RSSMState, action: jax.Array, key: jax.Array
) -> tuple[RSSMState, RSSMFeatures]:
    """One prior step, Algorithm C (rssm.py:96-106): deter' = core(carry, a), stoch' ~ prior(deter')."""
    action = embed_action(action, rssm.config)
    deter = _apply(rssm, params, RSSM.core, carry.deter, carry.stoch, action)
    logits = _apply(rssm, params, RSSM.prior, deter)
    stoch = onehot_st_sample(key, logits, rssm.config.unimix)
    return RSSMState(deter=deter, stoch=stoch), RSSMFeatures(
        deter=deter, stoch=stoch, logits=logits
    )


def observe(
    rssm: RSSM,
    params,
    carry: RSSMState,
    embed: jax.Array,
    prev_action: jax.Array,
    is_first: jax.Array,
    key: jax.Array,
) -> tuple[RSSMState, RSSMFeatures]:
    """:func:`observe_step` scanned over time: inputs [T, B, ...], features [T, B, ...].

    rssm.py:61-73. ``prev_action[t]`` is the action taken before observation t. Returns the final
    carry and the per-step posterior features.
    """
    length = embed.shape[0]
    if jnp.shape(is_first)[:1] != (length,) or jnp.shape(prev_action)[:1] != (length,):
        raise ValueError("embed, prev_action and is_first must share the leading time axis T.")

    def step(state, inputs):
        emb, act, first, k = inputs
        return observe_step(rssm, params, state, emb, act, first, k)

    return jax.lax.scan(step, carry, (embed, prev_action, is_first, per_step(key, length)))


def imagine(
    rssm: RSSM, params, carry: RSSMState, policy: Policy, length: int, key: jax.Array
) -> tuple[RSSMState, RSSMFeatures, jax.Array]:
    """``length`` prior steps driven by ``policy(key, sg(state)) -> action`` (rssm.py:94-118).

    The policy sees the stop-gradiented state, so actor gradients do not flow into the world model
    through its input; the dynamics still pass gradients along the carry. Returns the final carry,
    the features [H, B, ...] of the states reached and the actions [H, B, ...] that led there.
    ``key`` may instead be the pair (action noise [H, ...], Gumbel noise [H, B, S, C]) in the
    order each step draws them (rssm.py:97-101: the action, then the latent).
    """
    if length <= 0:
        raise ValueError(f"imagination length must be positive, got {length}.")

    def step(state, k):
        k_pi, k_z = split_draw(k)
        action = policy(k_pi, sg(state))
        state, feat = imagine_step(rssm, params, state, action, k_z)
        return state, (feat, action)

    carry, (feats, actions) = jax.lax.scan(step, carry, per_step(key, length))
    return carry, feats, actions


def imagine_actions(
    rssm: RSSM, params, carry: RSSMState, actions: jax.Array, key: jax.Array
) -> tuple[RSSMState, RSSMFeatures]:
    """Prior steps along given actions [H, B, ...] (open-loop prediction; rssm.py:112-114)."""

    def step(state, inputs):
        action, k = inputs
        return imagine_step(rssm, params, state, action, k)

    return jax.lax.scan(step, carry, (actions, per_step(key, actions.shape[0])))
