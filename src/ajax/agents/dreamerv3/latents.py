"""DreamerV3's categorical latents: unimix, straight-through samples, KL and free bits.

Spec 000 B7 (DreamerV3 side) and B8; arXiv:2301.04104v2 Eqs. 3-5 and Sec. "Robust predictions";
danijar/dreamerv3@e3f0224 embodied/jax/outs.py:208-271 (Categorical, OneHot) and
dreamerv3/rssm.py:120-133 (RSSM.loss).

The RSSM's stochastic state is S independent categoricals with C classes each, stored as raw
logits [..., S, C]. Every function here takes raw logits and applies the 1% uniform mixture
itself, so the mixture is re-applied after any stop-gradient (the references wrap sg(logits) in a
fresh distribution). These latents share the reshape and softmax with TD-MPC2's SimNorm and
nothing else: SimNorm is deterministic, without unimix or sampling.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

sg = jax.lax.stop_gradient


def _check_unimix(unimix: float) -> None:
    if not 0.0 <= unimix < 1.0:
        raise ValueError(f"unimix must be in [0, 1), got {unimix}; DreamerV3 uses 0.01.")


def _check_logits(logits: jax.Array, name: str = "logits") -> jax.Array:
    logits = jnp.asarray(logits, jnp.float32)
    if logits.ndim == 0 or logits.shape[-1] < 2:
        raise ValueError(f"{name} must have a class axis of size >= 2 last, got {logits.shape}.")
    return logits


def unimix_logits(logits: jax.Array, unimix: float = 0.01) -> jax.Array:
    """Logits of (1 - u) softmax(l) + u / C over the last axis.

    outs.py:210-217 (Categorical.__init__). With ``unimix = 0`` the logits pass through unchanged,
    as in the reference; every consumer normalises them with a (log-)softmax.
    """
    _check_unimix(unimix)
    logits = _check_logits(logits)
    if unimix == 0.0:
        return logits
    probs = jax.nn.softmax(logits, axis=-1)
    probs = (1.0 - unimix) * probs + unimix / logits.shape[-1]
    return jnp.log(probs)


def is_noise(draw) -> bool:
    """True when ``draw`` is noise already drawn (a float array), False for a PRNG key.

    Every sampler of the agent takes either: a key draws from the same distribution as the
    official code (its ``jax.random.categorical``, ``outs.Normal`` mean + std N(0, 1)), recorded
    noise replays the official draws exactly (the parity fixtures).
    """
    return jnp.issubdtype(getattr(draw, "dtype", jnp.float32), jnp.floating)


def categorical_index(draw: jax.Array, logits: jax.Array) -> jax.Array:
    """A sample of Cat(softmax(logits)) over the last axis: from a key, or replayed from Gumbel noise.

    outs.py:222-224 (Categorical.sample) draws ``jax.random.categorical(key, logits)``, the
    argmax of logits + Gumbel noise, one Gumbel per class. Given that noise as ``draw`` (the
    parity fixtures), this is that argmax. Given a key, it inverts the CDF with one uniform per
    categorical, the same distribution from C times fewer random numbers: the Gumbel draws had
    been about 4% of DreamerV3's size1m train step on CPU (jax's threefry runs as a loop there).
    """
    if is_noise(draw):
        return jnp.argmax(logits + draw, axis=-1)
    classes = logits.shape[-1]  # the CDF as a matmul: XLA:CPU's cumsum is a slower reduce-window
    cdf = jax.nn.softmax(logits, axis=-1) @ jnp.triu(jnp.ones((classes, classes), logits.dtype))
    u = jax.random.uniform(draw, logits.shape[:-1] + (1,), cdf.dtype) * cdf[..., -1:]
    return jnp.minimum(jnp.sum(cdf <= u, axis=-1), classes - 1)


def onehot_st_sample(key: jax.Array, logits: jax.Array, unimix: float = 0.01) -> jax.Array:
    """A one-hot sample [..., C] of Cat(unimix(l)) with straight-through gradients.

    outs.py:252-254, 265-271 (OneHot.sample, _onehot_with_grad): the value is sg(onehot) + (p - sg(p)) with p
    the mixed probabilities, so it is exactly one-hot while d value / d l = d p / d l. ``key`` is a
    PRNG key or the Gumbel noise [..., C] itself (:func:`is_noise`).
    """
    mixed = unimix_logits(logits, unimix)
    index = categorical_index(key, mixed)
    onehot = jax.nn.one_hot(index, mixed.shape[-1], dtype=jnp.float32)
    probs = jax.nn.softmax(mixed, axis=-1)
    return sg(onehot) + (probs - sg(probs))


def categorical_kl(logits_p: jax.Array, logits_q: jax.Array, unimix: float = 0.01) -> jax.Array:
    """KL(P || Q) per categorical, summed over the class axis only: shape [...].

    outs.py:236-240 (Categorical.kl) on unimix-mixed logits. The caller sums over the S latents.
    """
    logits_p, logits_q = _check_logits(logits_p, "logits_p"), _check_logits(logits_q, "logits_q")
    if logits_p.shape != logits_q.shape:
        raise ValueError(f"KL needs equal shapes, got {logits_p.shape} and {logits_q.shape}.")
    log_p = jax.nn.log_softmax(unimix_logits(logits_p, unimix), axis=-1)
    log_q = jax.nn.log_softmax(unimix_logits(logits_q, unimix), axis=-1)
    return jnp.sum(jnp.exp(log_p) * (log_p - log_q), axis=-1)


def categorical_entropy(logits: jax.Array, unimix: float = 0.01) -> jax.Array:
    """Entropy -sum p log p of the mixed categorical, over the class axis: shape [...].

    outs.py:230-234 (Categorical.entropy).
    """
    log_p = jax.nn.log_softmax(unimix_logits(logits, unimix), axis=-1)
    return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)


def free_bits(x: jax.Array, nats: float = 1.0) -> jax.Array:
    """max(x, nats): below the threshold the loss is constant and passes no gradient.

    arXiv:2301.04104v2 Eq. 5; rssm.py:127-129.
    """
    if nats < 0:
        raise ValueError(f"free nats must be >= 0, got {nats}.")
    return jnp.maximum(x, nats)


def _latent_kl(post: jax.Array, prior: jax.Array, unimix: float) -> jax.Array:
    post, prior = _check_logits(post, "post_logits"), _check_logits(prior, "prior_logits")
    if post.ndim < 2:
        raise ValueError(f"latent logits must be [..., S, C], got shape {post.shape}.")
    return jnp.sum(categorical_kl(post, prior, unimix), axis=-1)


def dyn_loss(
    post_logits: jax.Array, prior_logits: jax.Array, unimix: float = 0.01, nats: float = 1.0
) -> jax.Array:
    """Dynamics loss max(nats, sum_S KL(sg(post) || prior)) per leading index, e.g. [B, T].

    arXiv:2301.04104v2 Eq. 5 (L_dyn); rssm.py:125. Trains the prior towards the posterior only.
    """
    return free_bits(_latent_kl(sg(post_logits), prior_logits, unimix), nats)


def rep_loss(
    post_logits: jax.Array, prior_logits: jax.Array, unimix: float = 0.01, nats: float = 1.0
) -> jax.Array:
    """Representation loss max(nats, sum_S KL(post || sg(prior))) per leading index, e.g. [B, T].

    arXiv:2301.04104v2 Eq. 5 (L_rep); rssm.py:126. Trains the posterior (encoder) only.
    """
    return free_bits(_latent_kl(post_logits, sg(prior_logits), unimix), nats)
