"""DreamerV3's MLP modules: the heads and the vector path of the ``simple`` encoder/decoder.

danijar/dreamerv3@e3f0224 dreamerv3/rssm.py (Encoder, Decoder: vector keys) and
dreamerv3/agent.py:43-70 (the heads). Vector observations are symlogged on the way in and
predicted in symlog space (symlog MSE, summed over features).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.distributional import symlog
from ajax.networks.blocks import NormedMLP, linear

INIT = "trunc_normal_fan_in"


class MLPHead(nn.Module):
    """NormedMLP.dreamerv3(layers, units) then Linear(out) at ``outscale`` (heads.py MLPHead)."""

    layers: int
    units: int
    out: int
    outscale: float

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = NormedMLP.dreamerv3(self.layers, self.units)(x)
        return linear(self.out, INIT, outscale=self.outscale, name="out")(h)


class Encoder(nn.Module):
    """symlog(obs) -> NormedMLP.dreamerv3(layers, units): the tokens the posterior sees."""

    layers: int
    units: int

    @property
    def token_dim(self) -> int:
        return self.units

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        return NormedMLP.dreamerv3(self.layers, self.units)(symlog(jnp.asarray(obs, jnp.float32)))

    @staticmethod
    def stored(obs: jax.Array) -> jax.Array:
        """What the replay keeps of an observation: float32 features."""
        return obs.astype(jnp.float32)


class VectorDecoder(MLPHead):
    """The vector decoder: an MLP head predicting symlog(obs) (rssm.py Decoder, vector keys)."""

    @staticmethod
    def loss(recon: jax.Array, obs: jax.Array) -> jax.Array:
        """Symlog squared error summed over features (the reference's symlog MSE)."""
        return jnp.sum(jnp.square(recon - jax.lax.stop_gradient(symlog(obs))), axis=-1)
