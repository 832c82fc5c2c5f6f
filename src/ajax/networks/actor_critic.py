"""Actor and critic modules: encoders, heads and the critic ensemble.

Re-exported by :mod:`ajax.networks.networks`, whose functions build and apply them. Every network
is a :class:`Torso` (a :class:`CNNEncoder` for images, then an MLP from architecture tokens), an
optional :class:`~ajax.networks.memory.MemoryCell` and a head. Recurrent networks take time-major
``(T, B, F)`` inputs with ``(T, B)`` episode-start flags and return their carry beside their
output; feedforward ones take any leading batch dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.networks.distributions import squash
from ajax.networks.memory import MemoryCell, MemoryConfig
from ajax.networks.orthogonal import orthogonal
from ajax.networks.utils import (
    TORCH_LINEAR,
    TorchLinear,
    dense,
    parse_architecture,
    parse_initialization,
)


class CNNSpec(NamedTuple):
    """A conv stack and its projection width; ``CNNSpec()`` is Mnih et al.'s (2015) network.

    Each ``kernel_sizes``/``strides`` entry is an int (square) or an ``(h, w)`` tuple; ``padding``
    is ``nn.Conv``'s; ``layer_norm`` puts a LayerNorm after every convolution and the projection,
    before its ReLU; ``kernel_init`` names every layer's initializer as
    :func:`~ajax.networks.utils.dense` reads it (``"torch_linear"``: kernel and bias uniform in
    +-1/sqrt(fan_in), torch's default), ``None`` flax's lecun_normal with zero biases. A
    NamedTuple, hence hashable: a valid module and config field.
    """

    features: tuple[int, ...] = (32, 64, 64)
    kernel_sizes: tuple = (8, 4, 3)
    strides: tuple = (4, 2, 1)
    projection: int = 512
    padding: str = "VALID"
    layer_norm: bool = False
    kernel_init: str | None = None


MNIH_MIN_SIDE = 36  # smallest side Mnih's 8/4, 4/2, 3/1 VALID convolutions leave a pixel of


def reference_cnn(image_shape: Sequence[int]) -> CNNSpec:
    """Mnih et al.'s network for images of 36 pixels a side or more, else MinAtar's.

    Mnih's three VALID convolutions leave nothing of a side under 36 (35 -> 7 -> 2 -> 0); MinAtar
    (Young & Tian 2019) uses one 3x3 convolution of 16 channels and a 128-unit layer on its
    10 x 10 images.
    """
    if len(image_shape) != 3:
        raise ValueError(f"image_shape must be (H, W, C), got {tuple(image_shape)}")
    if min(image_shape[0], image_shape[1]) >= MNIH_MIN_SIDE:
        return CNNSpec()
    return CNNSpec(features=(16,), kernel_sizes=(3,), strides=(1,), projection=128)


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _uniform(bound: float):
    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


def _conv(features: int, kernel, stride, padding: str, kernel_init, in_channels: int) -> nn.Conv:
    """One convolution; ``"torch_linear"`` draws kernel and bias as torch's ``nn.Conv2d`` does."""
    kernel, stride = _pair(kernel), _pair(stride)
    if kernel_init == TORCH_LINEAR:
        # kaiming_uniform_(a=sqrt(5)) and the bias share the bound 1/sqrt(C_in * kh * kw).
        init = _uniform(1.0 / math.sqrt(in_channels * kernel[0] * kernel[1]))
        return nn.Conv(features, kernel, stride, padding=padding, kernel_init=init, bias_init=init)
    k_init = parse_initialization(kernel_init, nn.initializers.lecun_normal())
    return nn.Conv(features, kernel, stride, padding=padding, kernel_init=k_init)


class CNNEncoder(nn.Module):
    """Conv encoder of images packed flat as ``(..., H*W*C + extra_dim)``, NHWC order.

    The trailing ``extra_dim`` scalars (e.g. UDRL's command) skip the convolutions and join the
    embedding after them, so flat replay buffers and observation wrappers work unchanged. A stack
    of frames (T, H, W) must be transposed to (H, W, T) before flattening.
    """

    image_shape: tuple[int, int, int]
    spec: CNNSpec = CNNSpec()

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h, w, c = self.image_shape
        spec, n_pix = self.spec, h * w * c
        if x.shape[-1] < n_pix:
            raise ValueError(
                f"CNNEncoder on {self.image_shape} images expects >= {n_pix} inputs, got "
                f"{x.shape[-1]}"
            )
        lead, extra = x.shape[:-1], x[..., n_pix:]
        img = x[..., :n_pix].reshape((-1, h, w, c))
        layers = zip(spec.features, spec.kernel_sizes, spec.strides, strict=True)
        for feat, ks, st in layers:
            img = _conv(feat, ks, st, spec.padding, spec.kernel_init, img.shape[-1])(img)
            if 0 in img.shape[1:3]:
                raise ValueError(
                    f"the conv stack leaves nothing of a {h} x {w} image; use reference_cnn"
                    "(image_shape) or a smaller stack"
                )
            img = nn.relu(nn.LayerNorm()(img) if spec.layer_norm else img)
        y = img.reshape((img.shape[0], -1))
        y = dense(spec.projection, spec.kernel_init, None, nn.initializers.lecun_normal())(y)
        y = nn.relu(nn.LayerNorm()(y) if spec.layer_norm else y)
        return jnp.concatenate([y.reshape(lead + (spec.projection,)), extra], axis=-1)


class Torso(nn.Module):
    """The feedforward body of actors and critics: a :class:`CNNEncoder`, then an MLP.

    ``dropout`` > 0 follows every Dense layer of the MLP with dropout, before its norm and
    activation, as DroQ's critics do (Hiraoka et al. 2022, Dense -> Dropout -> LayerNorm -> ReLU);
    it is active only when called with ``deterministic=False`` and a ``"dropout"`` RNG.
    """

    architecture: Sequence[Any]
    kernel_init: str | None = None
    bias_init: str | None = None
    cnn: CNNSpec | None = None
    image_shape: tuple[int, int, int] | None = None
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.cnn is not None:
            if self.image_shape is None:
                raise ValueError("a CNN encoder needs image_shape (H, W, C)")
            x = CNNEncoder(self.image_shape, self.cnn)(x)
        for layer in parse_architecture(tuple(self.architecture), self.kernel_init, self.bias_init):
            x = layer(x)
            if self.dropout > 0 and isinstance(layer, nn.Dense | TorchLinear):
                x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
        return x


def _check_recurrent_call(memory, hidden_state, done) -> None:
    if memory is not None and (hidden_state is None or done is None):
        raise ValueError(
            "a recurrent network needs its carry (hidden_state) and (T, B) episode-start flags "
            "(done) beside its time-major (T, B, F) input"
        )


def check_log_std_head(
    state_independent: bool, log_std_init: float | None, log_std_kernel_init: str | None
) -> None:
    """Refuse a log-std head whose start is set twice or not at all.

    A state-independent log-std is a parameter: it needs ``log_std_init`` and has no kernel. A
    Dense head takes ``log_std_init`` as its bias, unless its kernel init is ``"torch_linear"``,
    whose layer draws the bias itself (then ``log_std_init`` must be None).
    """
    if state_independent:
        if log_std_init is None:
            raise ValueError("a state-independent log-std needs log_std_init (its start value)")
        if log_std_kernel_init is not None:
            raise ValueError(
                "a state-independent log-std is a parameter without a kernel: unset "
                f"log_std_kernel_init (got {log_std_kernel_init!r})"
            )
    elif log_std_kernel_init == TORCH_LINEAR and log_std_init is not None:
        raise ValueError(
            "log_std_kernel_init='torch_linear' draws the head's bias itself: set log_std_init "
            f"to None (got {log_std_init})"
        )
    elif log_std_kernel_init != TORCH_LINEAR and log_std_init is None:
        raise ValueError(
            "the Dense log-std head needs log_std_init (its bias), or "
            "log_std_kernel_init='torch_linear' to draw it"
        )


class Actor(nn.Module):
    """The stochastic policy: a diagonal Normal head (continuous) or a Categorical (discrete).

    Returns the distribution, and the carry with memory. The log-std is a Dense head on the
    features or, with ``state_independent_log_std``, one parameter per action dimension
    (:func:`check_log_std_head`), clipped to ``log_std_bounds`` when given. :class:`Squashed`
    bounds the policy.
    """

    action_dim: int
    continuous: bool
    architecture: Sequence[Any] = ("256", "relu", "256", "relu")
    kernel_init: str | None = None
    bias_init: str | None = None
    out_kernel_init: str | None = None
    state_independent_log_std: bool = False
    log_std_init: float | None = 0.0
    log_std_kernel_init: str | None = None
    log_std_bounds: tuple[float, float] | None = (-20.0, 2.0)
    memory: MemoryConfig | None = None
    cnn: CNNSpec | None = None
    image_shape: tuple[int, int, int] | None = None

    def _log_std(self, h: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        check_log_std_head(
            self.state_independent_log_std, self.log_std_init, self.log_std_kernel_init
        )
        if self.state_independent_log_std:
            init = nn.initializers.constant(self.log_std_init)
            return jnp.broadcast_to(self.param("log_std", init, (self.action_dim,)), shape)
        b_init = None if self.log_std_init is None else nn.initializers.constant(self.log_std_init)
        default = orthogonal(0.01)
        return dense(self.action_dim, self.log_std_kernel_init, b_init, default, "log_std")(h)

    @nn.compact
    def __call__(self, obs: jax.Array, hidden_state=None, done=None):
        _check_recurrent_call(self.memory, hidden_state, done)
        torso = Torso(self.architecture, self.kernel_init, self.bias_init, self.cnn,
                      self.image_shape, name="torso")  # fmt: skip
        h, carry = torso(obs), None
        if self.memory is not None:
            carry, h = MemoryCell(self.memory, name="cell")(hidden_state, h, done)
        default = orthogonal(0.01)
        mean = dense(self.action_dim, self.out_kernel_init, None, default, name="mean")(h)
        if not self.continuous:
            pi = distrax.Categorical(logits=mean)
        else:
            log_std = self._log_std(h, mean.shape)
            if self.log_std_bounds is not None:
                low, high = self.log_std_bounds
                if not low < high:
                    raise ValueError(f"log_std_bounds must have low < high, got {low, high}")
                log_std = jnp.clip(log_std, low, high)
            pi = distrax.MultivariateNormalDiag(mean, jnp.exp(log_std))
        return pi if self.memory is None else (pi, carry)


class Squashed(nn.Module):
    """``actor`` with its policy bounded by tanh (:func:`~ajax.networks.distributions.squash`).

    Any actor, stochastic or deterministic, feedforward or recurrent: the two share one scope, so
    the parameters are ``actor``'s alone, the same tree as the bare actor's.
    """

    actor: nn.Module
    log_det_eps: float = 0.0

    def setup(self):
        nn.share_scope(self, self.actor)

    def __call__(self, *args, **kwargs):
        out = self.actor(*args, **kwargs)
        if isinstance(out, tuple):
            pi, carry = out
            return squash(pi, self.log_det_eps), carry
        return squash(out, self.log_det_eps)


class TanhMean(nn.Module):
    """``actor``'s Normal policy with its mean passed through tanh, sampled unsquashed around it
    (APO's ``tanh_mean``, spec 002): the mean stays in [-1, 1], samples are clipped to the box by
    the loop. Shares ``actor``'s scope, as :class:`Squashed` does; a Categorical passes through.
    """

    actor: nn.Module

    def setup(self):
        nn.share_scope(self, self.actor)

    def __call__(self, *args, **kwargs):
        pi = self.actor(*args, **kwargs)
        if not isinstance(pi, distrax.MultivariateNormalDiag):
            raise ValueError(f"TanhMean wraps a feedforward Normal actor, got {type(pi).__name__}")
        return distrax.MultivariateNormalDiag(jnp.tanh(pi.loc), pi.scale_diag)


class Critic(nn.Module):
    """A value network, V(obs) or Q(obs, action), with ``n_quantiles`` outputs.

    A recurrent Q-critic's memory reads (obs, previous action); the current action, its last
    ``query_dim`` inputs, joins the memory's output at the head. ``dropout`` is the
    :class:`Torso`'s, active when a method is called with ``deterministic=False``.
    """

    architecture: Sequence[Any] = ("256", "relu", "256", "relu")
    kernel_init: str | None = None
    bias_init: str | None = None
    out_kernel_init: str | None = None
    n_quantiles: int = 1
    memory: MemoryConfig | None = None
    cnn: CNNSpec | None = None
    image_shape: tuple[int, int, int] | None = None
    query_dim: int = 0
    dropout: float = 0.0

    def setup(self):
        if self.n_quantiles < 1 or self.query_dim < 0:
            raise ValueError(
                f"need n_quantiles >= 1 and query_dim >= 0, got {self.n_quantiles}, "
                f"{self.query_dim}"
            )
        if self.query_dim and self.memory is None:
            raise ValueError("query_dim is the action a recurrent critic's head reads: set memory")
        self.torso = Torso(self.architecture, self.kernel_init, self.bias_init, self.cnn,
                           self.image_shape, self.dropout)  # fmt: skip
        self.cell = None if self.memory is None else MemoryCell(self.memory)
        self.head = dense(self.n_quantiles, self.out_kernel_init, None, orthogonal())

    def _split(self, x: jax.Array) -> tuple[jax.Array, jax.Array | None]:
        if self.query_dim == 0:
            return x, None
        return x[..., : -self.query_dim], x[..., -self.query_dim :]

    def quantiles(self, x, hidden_state=None, done=None, *, deterministic: bool = True):
        """The head's ``n_quantiles`` outputs (and the carry, with memory)."""
        _check_recurrent_call(self.memory, hidden_state, done)
        body, query = self._split(x)
        h, carry = self.torso(body, deterministic), None
        if self.cell is not None:
            carry, h = self.cell(hidden_state, h, done)
        if query is not None:
            h = jnp.concatenate([h, query], axis=-1)
        q = self.head(h)
        return q if self.memory is None else (q, carry)

    def __call__(self, x, hidden_state=None, done=None, *, deterministic: bool = True):
        """The value: the head's output, or the mean of its quantiles (last axis kept, size 1)."""
        out = self.quantiles(x, hidden_state, done, deterministic=deterministic)
        if self.memory is None:
            return out.mean(-1, keepdims=True)
        q, carry = out
        return q.mean(-1, keepdims=True), carry

    def apply_encoder(self, x):
        """The encoder's features alone, without the value head (and before any memory)."""
        return self.torso(self._split(x)[0])


class MultiCritic(nn.Module):
    """Ensemble of ``num`` copies of ``critic``, vmapped over a leading parameter axis.

    Every member has its own parameters, running statistics and dropout mask; the input is
    shared, a recurrent ensemble's carry has one entry per member (axis 0), and every output
    leads with the member axis.
    """

    critic: Critic
    num: int = 2

    def _ensemble(self, method: str, deterministic: bool, *args):
        if self.num < 1:
            raise ValueError(f"an ensemble needs num >= 1 members, got {self.num}")

        def member(critic, x, hidden_state, done):
            # deterministic is closed over: a Python bool, static under the vmap.
            return getattr(critic, method)(x, hidden_state, done, deterministic=deterministic)

        ensemble = nn.vmap(
            member,
            variable_axes={"params": 0, "batch_stats": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=(None, 0, None),
            out_axes=0,
            axis_size=self.num,
        )
        return ensemble(self.critic, *args)

    def __call__(self, x, hidden_state=None, done=None, *, deterministic: bool = True):
        """Every member's value, shape ``(num, ..., 1)`` (and the carries, with memory)."""
        return self._ensemble("__call__", deterministic, x, hidden_state, done)

    def quantiles(self, x, hidden_state=None, done=None, *, deterministic: bool = True):
        """Every member's quantiles, the ensemble axis first."""
        return self._ensemble("quantiles", deterministic, x, hidden_state, done)

    def apply_encoder_ensemble(self, x):
        """Per-member encoder features, shape ``(num, ..., d)``."""
        features = nn.vmap(
            lambda critic, x: critic.apply_encoder(x),
            variable_axes={"params": 0, "batch_stats": 0},
            split_rngs={"params": True},
            in_axes=None,
            axis_size=self.num,
        )
        return features(self.critic, x)
