"""DreamerV3 on mixed observations: an image and vector features, each through its own path.

danijar/dreamerv3@e3f0224 dreamerv3/rssm.py (Encoder, Decoder) and agent.py:38-40: the
encoder and decoder take every observation key but the reward and the three flags; rank-3
keys go through the CNN and the other keys, concatenated, through the symlog MLP, and the token
is the MLP's output followed by the CNN's (rssm.py:210-248); the decoder predicts every key and
the world model adds each key's loss at the ``rec`` scale (agent.py:82, :179-182). Ajax's
observations are flat ([image H W C, vector V], ``EnvSpec.image_shape`` / ``vector_dim``), so
the keys are the two parts, ``"image"`` and ``"vector"``. ``enc_spaces`` / ``dec_spaces`` (regular
expressions over the part names, ``re.fullmatch``) are Ajax's own option: the official code has
no such keys at e3f0224, and its DMC-vision protocol drops the state in the env instead
(configs.yaml:186). With ``".*"`` (the default) both parts are used, as officially; the mixed
parity fixture checks that path against the official train and acting steps.
"""

from __future__ import annotations

import re

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.agents.dreamerv3.conv import ConvDecoder, ConvEncoder, image_loss
from ajax.agents.dreamerv3.mlp import Encoder, VectorDecoder
from ajax.networks.pixels import split_image, to_bytes

PARTS = ("vector", "image")  # the token's order: MLP output, then CNN output


def observation_parts(image_shape: tuple[int, int, int] | None, vector_dim: int) -> tuple[str, ...]:
    """The parts an observation has, in :data:`PARTS` order."""
    has = {"vector": vector_dim > 0, "image": image_shape is not None}
    return tuple(p for p in PARTS if has[p])


def select_parts(pattern: str, available: tuple[str, ...], field: str) -> tuple[str, ...]:
    """The parts of ``available`` that ``pattern`` (``enc_spaces`` / ``dec_spaces``) matches
    whole; ValueError naming the field when it matches none or does not compile."""
    try:
        chosen = tuple(p for p in available if re.fullmatch(pattern, p))
    except re.error as err:
        raise ValueError(f"{field}={pattern!r} is not a regular expression ({err})") from err
    if not chosen:
        raise ValueError(
            f"{field}={pattern!r} selects none of this env's observation parts "
            f"{list(available)}: use '.*' (all) or one of them"
        )
    return chosen


def split(obs, image_shape: tuple[int, int, int]) -> dict:
    """Flat observations [..., H W C + V] (or the stored dict) as ``{"image", "vector"}``."""
    if isinstance(obs, dict):
        return obs
    image, vector = split_image(obs, image_shape)
    return {"image": image, "vector": vector}


class MixedEncoder(nn.Module):
    """Mixed observations -> tokens [..., token_dim]: the selected parts' outputs side by side."""

    image_shape: tuple[int, int, int]
    depth: int
    layers: int
    units: int
    parts: tuple[str, ...]

    @property
    def token_dim(self) -> int:
        cnn = ConvEncoder(self.image_shape, self.depth).token_dim if "image" in self.parts else 0
        return cnn + (self.units if "vector" in self.parts else 0)

    @nn.compact
    def __call__(self, obs) -> jax.Array:
        x = split(obs, self.image_shape)
        outs = []
        if "vector" in self.parts:
            outs.append(Encoder(self.layers, self.units, name="mlp")(x["vector"]))
        if "image" in self.parts:
            outs.append(ConvEncoder(self.image_shape, self.depth, name="cnn")(x["image"]))
        return jnp.concatenate(outs, axis=-1)

    def stored(self, obs: jax.Array) -> dict:
        """What the replay keeps: the image as bytes, the vector as float32 (every part, so
        that the decoder can read parts the encoder does not)."""
        x = split(obs, self.image_shape)
        return {"image": to_bytes(x["image"]), "vector": x["vector"].astype(jnp.float32)}


class MixedDecoder(nn.Module):
    """Features [..., deter + stoch] -> ``{part: reconstruction}`` for the selected parts."""

    image_shape: tuple[int, int, int]
    vector_dim: int
    depth: int
    layers: int
    units: int
    deter: int
    parts: tuple[str, ...]

    @nn.compact
    def __call__(self, feat: jax.Array) -> dict:
        out = {}
        if "vector" in self.parts:
            out["vector"] = VectorDecoder(
                self.layers, self.units, self.vector_dim, 1.0, name="mlp"
            )(feat)
        if "image" in self.parts:
            cnn = ConvDecoder(self.image_shape, self.depth, self.units, self.deter, name="cnn")
            out["image"] = cnn(feat)
        return out

    def loss(self, recon: dict, obs) -> jax.Array:
        """Each decoded part's loss (symlog MSE, pixel squared error), summed."""
        x = split(obs, self.image_shape)
        total = 0.0
        if "vector" in recon:
            total = total + VectorDecoder.loss(recon["vector"], x["vector"])
        if "image" in recon:
            total = total + image_loss(recon["image"], x["image"], self.image_shape)
        return total
