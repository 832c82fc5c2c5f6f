"""DreamerV3's image encoder and decoder: the CNN path of the ``simple`` encoder and decoder.

danijar/dreamerv3@e3f0224 dreamerv3/rssm.py (Encoder, Decoder, image keys) and configs.yaml
(``enc.simple`` / ``dec.simple``: depth = units / 16 from the size preset, mults (2, 3, 4, 4),
kernel 5, RMSNorm, SiLU, non-strided, decoder ``bspace`` 8). Images enter as pixels in [0, 1]
(``uint8 / 255`` when stored as bytes) shifted by -0.5; each encoder stage is a 'same' conv,
a 2 x 2 max-pool, RMSNorm and SiLU; the flattened last stage is the token (no MLP after it). The
decoder builds the smallest feature map from the deterministic state through a BlockLinear
(``bspace`` blocks) plus the stochastic state through a two-layer MLP, normalises their sum
(SiLU(RMSNorm(x0 + x1)), rssm.py:316-327), then doubles it stage by stage (nearest repeat,
conv, norm, act) up to a sigmoid image; its loss is the squared error summed over pixels and
channels against ``pixels / 255``.

Checked against the official code by the parity fixtures (tests/agents/dreamerv3/fixtures) at
64 x 64. One deliberate generalisation: the reference always runs its four stages (64 x 64 inputs, 4 x 4 at
the end). Here a smaller image runs the *last* ``image_stages`` of them, halving while the side
stays even and at least 4: all four for 64 x 64, the last two (4, 4 x depth channels) for
16 x 16, the last one for MinAtar's 10 x 10 (to 5 x 5), since a small image is what the
reference's later stages see; the final width, and so the decoder's ``bspace`` blocks, stay
the reference's.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.agents.dreamerv3.networks import BlockLinear
from ajax.networks.pixels import pixels, to_bytes
from ajax.networks.utils import trunc_normal_fan_in

MULTS = (2, 3, 4, 4)
MIN_RES = 4


def image_stages(height: int, width: int, max_stages: int = len(MULTS)) -> int:
    """Stride-2 stages of an image: halve while both sides stay even and >= ``MIN_RES``."""
    k = 0
    while k < max_stages and all(s % (2 ** (k + 1)) == 0 and s >> (k + 1) >= MIN_RES
                                 for s in (height, width)):  # fmt: skip
        k += 1
    if k == 0:
        raise ValueError(
            f"images of {height} x {width} are too small for DreamerV3's CNN: each side must be "
            f"even and at least {2 * MIN_RES}; resize them (e.g. make_env(..., resize=(64, 64)))"
        )
    return k


def stage_depths(image_shape: tuple[int, int, int], depth: int) -> tuple[int, ...]:
    """Channels of each stage for images of ``image_shape``: the last stages of the reference's."""
    k = image_stages(*image_shape[:2])
    return tuple(depth * m for m in MULTS[len(MULTS) - k :])


def _conv(features: int, kernel: int, name: str) -> nn.Conv:
    init = trunc_normal_fan_in(1.0)  # fan-in over kernel x kernel x in-channels (B5)
    return nn.Conv(features, (kernel, kernel), padding="SAME", kernel_init=init, name=name)


def _norm_act(x: jax.Array, name: str) -> jax.Array:
    return jax.nn.silu(nn.RMSNorm(epsilon=1e-4, dtype=jnp.float32, name=name)(x))


class ConvEncoder(nn.Module):
    """Pixels [..., H W C] (flat or shaped; uint8 or [0, 1] floats) -> tokens [..., h w d]."""

    image_shape: tuple[int, int, int]
    depth: int
    kernel: int = 5

    @property
    def depths(self) -> tuple[int, ...]:
        return stage_depths(self.image_shape, self.depth)

    @property
    def token_dim(self) -> int:
        h, w, _ = self.image_shape
        k = len(self.depths)
        return (h >> k) * (w >> k) * self.depths[-1]

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = pixels(obs, self.image_shape) - 0.5
        lead = x.shape[:-3]
        x = x.reshape(-1, *self.image_shape)
        for i, depth in enumerate(self.depths):
            x = _conv(depth, self.kernel, f"conv_{i}")(x)
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = _norm_act(x, f"norm_{i}")
        return x.reshape(*lead, -1)

    @staticmethod
    def stored(obs: jax.Array) -> jax.Array:
        """What the replay keeps of an observation: bytes."""
        return to_bytes(obs)


class ConvDecoder(nn.Module):
    """Features [..., deter + stoch] -> image [..., H, W, C] in (0, 1) (sigmoid)."""

    image_shape: tuple[int, int, int]
    depth: int
    units: int
    deter: int
    kernel: int = 5
    bspace: int = 8

    @nn.compact
    def __call__(self, feat: jax.Array) -> jax.Array:
        h, w, channels = self.image_shape
        depths = stage_depths(self.image_shape, self.depth)
        k = len(depths)
        shape = (h >> k, w >> k, depths[-1])
        lead = feat.shape[:-1]
        feat = feat.reshape(-1, feat.shape[-1])
        deter, stoch = feat[:, : self.deter], feat[:, self.deter :]
        g, size = self.bspace, shape[0] * shape[1] * shape[2]
        # deter -> (g blocks of h w c/g) -> h w (g c/g): each block owns a slice of channels
        x0 = BlockLinear(size, g, name="space0")(deter)
        x0 = x0.reshape(-1, g, shape[0], shape[1], shape[2] // g)
        x0 = jnp.moveaxis(x0, 1, 3).reshape(-1, *shape)
        init = trunc_normal_fan_in(1.0)
        x1 = _norm_act(
            nn.Dense(2 * self.units, kernel_init=init, name="space1")(stoch), "space1_norm"
        )
        x1 = nn.Dense(size, kernel_init=init, name="space2")(x1).reshape(-1, *shape)
        x = _norm_act(x0 + x1, "space_norm")  # one norm over the sum (rssm.py:327)
        for i in reversed(range(k - 1)):
            x = jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)
            x = _norm_act(_conv(depths[i], self.kernel, f"conv_{i}")(x), f"norm_{i}")
        x = jnp.repeat(jnp.repeat(x, 2, axis=1), 2, axis=2)
        x = jax.nn.sigmoid(_conv(channels, self.kernel, "image")(x))
        return x.reshape(*lead, h, w, channels)

    def loss(self, recon: jax.Array, obs: jax.Array) -> jax.Array:
        return image_loss(recon, obs, self.image_shape)


def image_loss(recon: jax.Array, obs: jax.Array, image_shape: tuple[int, int, int]) -> jax.Array:
    """Squared error summed over pixels and channels against the observed pixels [...]."""
    return jnp.sum(jnp.square(recon - pixels(obs, image_shape)), axis=(-3, -2, -1))
