"""Image observations as networks read them: Ajax's flat-image convention, shared by the
world models' CNN encoders (DreamerV3's conv.py, TD-MPC2's pixels.py).

Envs give images flat ([..., H W C], NHWC order, ``spec.image_shape``) as floats in [0, 1],
followed by any vector features of a mixed observation (:func:`split_image`);
replays keep them as uint8 bytes (:func:`to_bytes`, 4x smaller), and :func:`pixels` reads
either back as float pixels [..., H, W, C].
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def pixels(obs: jax.Array, image_shape: tuple[int, int, int]) -> jax.Array:
    """Flat or shaped image observations [..., H W C] as float pixels in [0, 1], [..., H, W, C].

    ``uint8`` (the replay's storage) is divided by 255; floats are taken as already in [0, 1].
    """
    x = obs.astype(jnp.float32) / 255.0 if obs.dtype == jnp.uint8 else obs.astype(jnp.float32)
    lead = obs.shape[:-3] if obs.shape[-3:] == tuple(image_shape) else obs.shape[:-1]
    return x.reshape(*lead, *image_shape)


def to_bytes(obs: jax.Array) -> jax.Array:
    """Float pixels in [0, 1] as replays store them: ``uint8`` (4x smaller than float32)."""
    return jnp.round(jnp.clip(obs, 0.0, 1.0) * 255.0).astype(jnp.uint8)


def split_image(obs, image_shape: tuple[int, int, int]) -> tuple:
    """A flat observation [..., H W C + V] as (flat image [..., H W C], vector [..., V])."""
    p = math.prod(image_shape)
    return obs[..., :p], obs[..., p:]
