"""DreamerV3's encoder, decoder, heads and actor around the RSSM, and their parameters.

danijar/dreamerv3@e3f0224: dreamerv3/rssm.py (Encoder, Decoder: the vector path of the
``simple`` encoder/decoder; the image path is in conv.py), dreamerv3/agent.py:43-70 (rew, con, pol, val heads and
``feat2tensor``) and configs.yaml (layers, units, outscales). For vector observations the
encoder symlogs them, the decoder predicts them in symlog space (symlog-MSE, summed over
features); images go through the CNNs of :mod:`~ajax.agents.dreamerv3.conv`. Every head is NormedMLP.dreamerv3 followed by one Linear:

- reward and value: 255 two-hot logits at outscale 0 (an exactly zero first prediction);
- continue: one Bernoulli logit at outscale 1;
- policy: bounded normal (outscale 0.01) for boxes, a plain categorical (outscale 0.01) for
  discrete actions (heads.py:101-110: the policy's unimix reaches only the ``onehot`` output).
"""

from __future__ import annotations

import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.agents.dreamerv3.config import DreamerV3Config
from ajax.agents.dreamerv3.conv import ConvDecoder, ConvEncoder
from ajax.agents.dreamerv3.mixed import (
    MixedDecoder,
    MixedEncoder,
    observation_parts,
    select_parts,
)
from ajax.agents.dreamerv3.mlp import INIT, Encoder, MLPHead, VectorDecoder
from ajax.agents.dreamerv3.networks import RSSM
from ajax.agents.dreamerv3.policy import BoundedNormalHead, Categorical
from ajax.agents.dreamerv3.rssm import RSSMState, initial_state
from ajax.networks.blocks import NormedMLP, linear

MODULES = ("enc", "dyn", "dec", "rew", "con", "pol", "val")


class Actor(nn.Module):
    """The policy head: the action distribution for features [..., F] (agent.py:57-63)."""

    layers: int
    units: int
    action_dim: int
    discrete: bool
    minstd: float = 0.1
    maxstd: float = 1.0

    @nn.compact
    def __call__(self, x: jax.Array):
        h = NormedMLP.dreamerv3(self.layers, self.units)(x)
        if self.discrete:
            logits = linear(self.action_dim, INIT, outscale=0.01, name="out")(h)
            return Categorical.create(logits)
        return BoundedNormalHead(self.action_dim, self.minstd, self.maxstd, name="out")(h)


@dataclasses.dataclass(frozen=True)
class Nets:
    """The agent's modules (static): build with :meth:`create`, apply with :meth:`apply`."""

    rssm: RSSM
    enc: Encoder | ConvEncoder | MixedEncoder
    dec: VectorDecoder | ConvDecoder | MixedDecoder
    rew: MLPHead
    con: MLPHead
    pol: Actor
    val: MLPHead

    @classmethod
    def create(
        cls, cfg: DreamerV3Config, obs_dim: int, action_dim: int, discrete: bool,
        image_shape: tuple[int, int, int] | None = None,
    ) -> Nets:  # fmt: skip
        """The modules for ``obs_dim`` features, or for images of ``image_shape`` (H, W, C):
        the CNN encoder and decoder (:mod:`~ajax.agents.dreamerv3.conv`) at the preset's depth.
        An image followed by vector features (``obs_dim`` past the image) takes the mixed
        modules (:mod:`~ajax.agents.dreamerv3.mixed`) over the parts ``cfg.enc_spaces`` and
        ``cfg.dec_spaces`` select; ValueError when they select none."""
        u, depth, deter = cfg.arch.units, cfg.arch.depth, cfg.arch.deter
        vector_dim = obs_dim - (math.prod(image_shape) if image_shape is not None else 0)
        available = observation_parts(image_shape, vector_dim)
        enc_parts = select_parts(cfg.enc_spaces, available, "enc_spaces")
        dec_parts = select_parts(cfg.dec_spaces, available, "dec_spaces")
        if image_shape is None:
            enc, dec = Encoder(cfg.enc_layers, u), VectorDecoder(cfg.dec_layers, u, obs_dim, 1.0)
        elif len(available) == 1:
            enc = ConvEncoder(tuple(image_shape), depth)
            dec = ConvDecoder(tuple(image_shape), depth, u, deter)
        else:
            shape = tuple(image_shape)
            enc = MixedEncoder(shape, depth, cfg.enc_layers, u, enc_parts)
            dec = MixedDecoder(shape, vector_dim, depth, cfg.dec_layers, u, deter, dec_parts)
        return cls(
            rssm=RSSM(cfg.rssm(action_dim, discrete)),
            enc=enc,
            dec=dec,
            rew=MLPHead(cfg.head_layers, u, cfg.bins, 0.0),
            con=MLPHead(cfg.head_layers, u, 1, 1.0),
            pol=Actor(cfg.ac_layers, u, action_dim, discrete, cfg.minstd, cfg.maxstd),
            val=MLPHead(cfg.ac_layers, u, cfg.bins, 0.0),
        )

    def apply(self, name: str, params: dict, *args):
        """Apply module ``name`` ('enc', 'dec', 'rew', 'con', 'pol', 'val') with ``params[name]``."""
        return getattr(self, name).apply({"params": params[name]}, *args)

    def init(self, key: jax.Array, obs_dim: int) -> dict:
        """Parameters of every module, ``{enc, dyn, dec, rew, con, pol, val}``."""
        c = self.rssm.config
        keys = dict(zip(MODULES, jax.random.split(key, len(MODULES)), strict=True))
        state = initial_state(c, 1)
        action = jnp.zeros((1, c.action_dim), jnp.float32)
        tokens = jnp.zeros((1, self.enc.token_dim), jnp.float32)
        feat = jnp.zeros((1, c.deter + c.stoch * c.classes), jnp.float32)
        init = lambda name, *args: getattr(self, name).init(keys[name], *args)["params"]
        return {
            "enc": init("enc", jnp.zeros((1, obs_dim), jnp.float32)),
            "dyn": self.rssm.init(keys["dyn"], state.deter, state.stoch, action, tokens)["params"],
            **{name: init(name, feat) for name in ("dec", "rew", "con", "pol", "val")},
        }


def feat(state: RSSMState) -> jax.Array:
    """concat(deter, flat stoch) [..., D + S C]: what every head reads (agent.py feat2tensor)."""
    stoch = state.stoch.reshape(*state.stoch.shape[:-2], -1)
    return jnp.concatenate([state.deter, stoch], axis=-1)


def param_count(params) -> int:
    """Number of parameters (the official optimiser's printed count covers the same modules)."""
    return int(sum(x.size for x in jax.tree.leaves(params)))
