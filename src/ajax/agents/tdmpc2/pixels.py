"""TD-MPC2's pixel encoder and its random-shift augmentation.

nicklashansen/tdmpc2 common/layers.py:36-71 (``ShiftAug``, ``PixelPreprocess``), :136-150
(``conv``) and :153-162 (the ``rgb`` encoder, SimNorm last), checked against the official code
by ``tests/agents/tdmpc2/fixtures/tdmpc2_pixel_*.npz`` (deviations.md D54): 64 x 64 frames (3
stacked RGB frames, oldest first, 9 channels, as dmcontrol.py:66-81) scaled to [-0.5, 0.5],
four VALID convolutions of ``num_channels`` (32) filters, 7x7/2, 5x5/2, 3x3/2, 3x3/1, ReLU
between them (64 -> 29 -> 13 -> 6 -> 4), flattened channel-major as torch's ``nn.Flatten`` of
NCHW (so SimNorm's groups of 8 are runs of one channel's feature map) into 4 x 4 x num_channels
features, the latent. Convolutions keep torch's default init (init.py ``weight_init`` leaves
Conv2d alone).

The shift augmentation (layers.py:36-59, DrQ-v2's, pad 3) is an integer translation of each
image with edge-replicated padding: ``grid_sample`` at pixel centres, which Ajax takes exactly
(:func:`shift_images`; the official's bilinear sampling is off by at most 0.002 of 255). The
official applies it inside the encoder, so every encode shifts with its own draw: each frame
of an update's batch once (update.py) and the observation of every planning decision, evaluation
included (act.py).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.networks.pixels import pixels
from ajax.networks.utils import TORCH_LINEAR, parse_initialization

LAYERS = ((7, 2), (5, 2), (3, 2), (3, 1))  # (kernel, stride) of the reference's conv stack
SHIFT_PAD = 3


def conv_side(side: int) -> int:
    """The side of the last feature map for ``side`` x ``side`` inputs."""
    for kernel, stride in LAYERS:
        side = (side - kernel) // stride + 1
    return side


def _torch_bias(fan_in: int):
    bound = fan_in**-0.5
    return lambda key, shape, dtype=jnp.float32: jax.random.uniform(
        key, shape, dtype, -bound, bound
    )


class PixelEncoder(nn.Module):
    """Frames [..., H W C] (flat or shaped; uint8 or [0, 1] floats) -> features [..., latent]
    (SimNorm follows in :meth:`~ajax.agents.tdmpc2.networks.WorldModel.encode`)."""

    image_shape: tuple[int, int, int]
    num_channels: int = 32

    @property
    def latent_dim(self) -> int:
        return conv_side(self.image_shape[0]) * conv_side(self.image_shape[1]) * self.num_channels

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = pixels(obs, self.image_shape) - 0.5
        lead = x.shape[:-3]
        x = x.reshape(-1, *self.image_shape)
        channels = self.image_shape[-1]
        for i, (kernel, stride) in enumerate(LAYERS):
            fan_in = kernel * kernel * channels
            x = nn.Conv(self.num_channels, (kernel, kernel), strides=(stride, stride),
                        padding="VALID", kernel_init=parse_initialization(TORCH_LINEAR),
                        bias_init=_torch_bias(fan_in), name=f"conv_{i}")(x)  # fmt: skip
            channels = self.num_channels
            if i < len(LAYERS) - 1:
                x = jax.nn.relu(x)
        # channel-major like nn.Flatten of NCHW (layers.py:147); the world model SimNorms it
        return jnp.moveaxis(x, -1, -3).reshape(*lead, -1)


def draw_shifts(key: jax.Array, shape: tuple[int, ...], pad: int = SHIFT_PAD) -> jax.Array:
    """Integer crop offsets [..., 2] in [0, 2 pad], one (dy, dx) per image."""
    return jax.random.randint(key, (*shape, 2), 0, 2 * pad + 1)


def shift_images(obs: jax.Array, shifts: jax.Array, image_shape, pad: int = SHIFT_PAD):
    """Random shift (ShiftAug): each flat image [..., H W C] padded by ``pad`` with its edge
    pixels and cropped back to H x W at offset ``shifts[...]`` = (dy, dx); (pad, pad) is the
    identity. Same dtype and shape as ``obs``."""
    h, w, c = image_shape
    lead = obs.shape[:-1]
    images = obs.reshape(-1, h, w, c)
    padded = jnp.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    crop = lambda img, s: jax.lax.dynamic_slice(img, (s[0], s[1], 0), (h, w, c))
    out = jax.vmap(crop)(padded, shifts.reshape(-1, 2))
    return out.reshape(*lead, h * w * c)
