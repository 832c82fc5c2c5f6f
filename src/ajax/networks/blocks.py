"""Dense layers and the normalised MLP shared by DreamerV3 and TD-MPC2 (spec 000 B4, B5).

Both world models build every network from one hidden layer, Dense -> [Dropout] -> Norm -> Act,
with the bias kept; they differ only in its configuration:

- DreamerV3 (arXiv:2301.04104v2 Table 4; danijar/dreamerv3@2411f7d nets.py:367-403, :724-758):
  RMSNorm (eps 1e-4, learnable scale, no shift), SiLU, fan-in truncated-normal kernels.
- TD-MPC2 (arXiv:2310.16828v2 Sec. 3.1; nicklashansen/tdmpc2@5f6fade common/layers.py:85-122,
  common/init.py:4-17): LayerNorm (eps 1e-5, scale and shift, two-pass variance), Mish,
  dropout between the first Dense and its norm (Q-functions only), N(0, 0.02^2) kernels.

flax's norm defaults fit neither paper (eps 1e-6; LayerNorm's fast variance E[x^2] - E[x]^2 loses
precision on inputs with a large mean), so the norms are configured explicitly. Statistics are
float32; Ajax runs these agents in float32 throughout (deviation D4). Output layers and heads are
composed by the agents with :func:`linear`.
"""

from __future__ import annotations

from typing import Literal

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.networks.utils import (
    ActivationFunction,
    Initializer,
    _scaled,
    parse_activation,
    parse_initialization,
)


def narrow_out(kernel_shape: tuple[int, ...]) -> bool:
    """Whether a ``[in, out]`` kernel's weight gradient runs faster laid out ``[out, in]`` on CPU.

    Measured on XLA:CPU (jax 0.10.2, one Zen3 core, N rows): the weight gradient x^T g computed
    as ``[in, out]`` against ``[out, in]`` then transposed, N 16384: in 640 -> out 64 33.2 vs
    17.8 ms, 128 -> 64 7.9 vs 4.4, 512 -> 128 54.2 vs 40.1, 64 -> 16 1.6 vs 0.6; no gain or a
    loss once out >= 256 or in <= out (512 -> 256 91.0 vs 84.8, 2560 -> 256 93.3 vs 95.7,
    64 -> 255 8.0 vs 9.6, 1024 -> 512 at N 1024 25.9 vs 31.1).
    """
    return (
        len(kernel_shape) == 2 and kernel_shape[1] <= 128 and kernel_shape[0] >= 2 * kernel_shape[1]
    )


@jax.custom_vjp
def rows_matmul(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """``x [N, in] @ kernel [in, out]`` whose weight gradient is computed laid out ``[out, in]``.

    Same values and gradients as ``x @ kernel`` (the weight gradient's sum may round
    differently). XLA:CPU runs x^T g for a narrow ``out`` about twice as fast into an
    ``[out, in]`` result (:func:`narrow_out` has the measurements); an optimization barrier
    keeps XLA from folding the transpose back into the dot. A ``jax.custom_vjp``: reverse mode
    (``grad``, ``vjp``, under ``vmap``) only; ``jax.jvp`` through it raises.
    """
    return x @ kernel


def _rows_matmul_fwd(x, kernel):
    return x @ kernel, (x, kernel)


def _rows_matmul_bwd(res, g):
    x, kernel = res
    weight = jax.lax.optimization_barrier(jnp.einsum("bi,bo->oi", x, g)).T
    return g @ kernel.T, weight


rows_matmul.defvjp(_rows_matmul_fwd, _rows_matmul_bwd)


def _rows_dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """RowDense's dot: :func:`rows_matmul` on CPU for kernels where that is faster, else lax's."""
    (contract_lhs, contract_rhs), (batch_lhs, _) = dimension_numbers
    if (
        lhs.ndim == 2
        and (tuple(contract_lhs), tuple(contract_rhs), tuple(batch_lhs)) == ((1,), (0,), ())
        and precision is None
        and preferred_element_type is None
        and narrow_out(rhs.shape)
        and jax.default_backend() == "cpu"
    ):
        return rows_matmul(lhs, rhs)
    return jax.lax.dot_general(
        lhs, rhs, dimension_numbers, precision=precision,
        preferred_element_type=preferred_element_type,
    )  # fmt: skip


class RowDense(nn.Dense):
    """``nn.Dense`` applied to its input's rows: leading dimensions are merged into one first.

    Same parameters and same maths. Why: autodiff of a matmul whose input has two or more
    leading dimensions ([T, B, in], as TD-MPC2's and DreamerV3's sequence batches are) gives a
    weight gradient that contracts over several dimensions, and XLA's CPU backend writes the
    cotangent out transposed for it, with the element-wise backward fused into that copy. On
    a 2-D input the weight gradient is one plain matmul. Measured (benchmarks/tdmpc2_profile.py)
    in the README's TD-MPC2 speed section. On CPU, kernels with a narrow output take their
    weight gradient from :func:`rows_matmul` (:func:`narrow_out`).
    """

    dot_general: object = _rows_dot_general

    @nn.compact
    def __call__(self, inputs: jax.Array) -> jax.Array:
        lead = inputs.shape[:-1]
        rows = super().__call__(inputs.reshape(-1, inputs.shape[-1]))
        return rows.reshape(*lead, self.features)


def linear(
    features: int,
    kernel_init: str | Initializer,
    bias_init: str | Initializer = "zeros",
    outscale: float = 1.0,
    name: str | None = None,
) -> RowDense:
    """The papers' Linear layer: :class:`RowDense` with named initializers and an output scale.

    The bias is always present, zero-initialised and never scaled (DreamerV3 nets.py:594-635;
    TD-MPC2 init.py weight_init). ``outscale`` multiplies the kernel initializer; 0 gives an exactly
    zero kernel, as in DreamerV3's reward/value heads and TD-MPC2's reward/Q heads. Call it where a
    module may be constructed (``setup`` or an ``nn.compact`` method).
    """
    if outscale < 0:
        raise ValueError(f"outscale must be >= 0, got {outscale}")
    if features <= 0:
        raise ValueError(f"features must be positive, got {features}")
    if kernel_init is None:
        raise ValueError("linear needs a kernel_init, e.g. 'trunc_normal_fan_in' or 'normal(0.02)'")
    k_init = _scaled(parse_initialization(kernel_init), outscale)
    b_init = parse_initialization(bias_init)
    return RowDense(features, kernel_init=k_init, bias_init=b_init, name=name)


class NormedMLP(nn.Module):
    """``layers`` hidden layers Dense -> [Dropout] -> Norm -> Act, each ``units`` wide.

    Dropout (inverted, rate ``dropout``) follows only the first Dense and is active only when
    ``deterministic`` is False, drawing from the ``"dropout"`` RNG stream (TD-MPC2 layers.py:120,
    ``dropout * (i == 0)``). No output layer: compose one with :func:`linear`. Leading input
    dimensions are batch dimensions.
    """

    layers: int
    units: int
    act: str | ActivationFunction = "silu"
    norm: Literal["layer", "rms"] = "rms"
    norm_eps: float = 1e-4
    kernel_init: str | Initializer = "trunc_normal_fan_in"
    dropout: float = 0.0

    @classmethod
    def dreamerv3(cls, layers: int, units: int, **module_kwargs) -> NormedMLP:
        """DreamerV3's trunk: RMSNorm(eps 1e-4), SiLU, fan-in init (nets.py:390-391, :728)."""
        kwargs = dict(act="silu", norm="rms", norm_eps=1e-4, kernel_init="trunc_normal_fan_in")
        return cls(layers=layers, units=units, **{**kwargs, **module_kwargs})

    @classmethod
    def tdmpc2(cls, layers: int, units: int, dropout: float = 0.0, **module_kwargs) -> NormedMLP:
        """TD-MPC2's NormedLinear stack: LayerNorm(eps 1e-5), Mish, N(0, 0.02^2) kernels.

        layers.py:85-100 and init.py:7-9. torch's ``trunc_normal_(std=0.02)`` truncates at the
        absolute bounds +-2 (100 sigma), i.e. it is ``normal(0.02)``; jax's
        ``truncated_normal(0.02)`` would cut at +-0.04 and shrink the std to 0.0176.
        """
        kwargs = dict(act="mish", norm="layer", norm_eps=1e-5, kernel_init="normal(0.02)")
        return cls(layers=layers, units=units, dropout=dropout, **{**kwargs, **module_kwargs})

    def _norm(self, i: int) -> nn.Module:
        if self.norm == "rms":
            return nn.RMSNorm(epsilon=self.norm_eps, dtype=jnp.float32, name=f"norm_{i}")
        return nn.LayerNorm(
            epsilon=self.norm_eps, use_fast_variance=False, dtype=jnp.float32, name=f"norm_{i}"
        )

    def _check(self) -> None:
        if self.norm not in ("layer", "rms"):
            raise ValueError(f"norm must be 'layer' or 'rms', got {self.norm!r}")
        if self.layers < 0 or self.units <= 0:
            raise ValueError(f"need layers >= 0 and units > 0, got {self.layers}, {self.units}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.norm_eps <= 0:
            raise ValueError(f"norm_eps must be > 0, got {self.norm_eps}")

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool | None = None) -> jax.Array:
        """Apply the trunk to ``x [..., in]``; returns ``[..., units]``.

        ``deterministic`` must be given when ``dropout > 0``: True disables dropout, False
        enables it and needs a ``"dropout"`` RNG.
        """
        self._check()
        if self.dropout > 0 and deterministic is None:
            raise ValueError(
                "NormedMLP with dropout > 0 needs deterministic=True (no dropout) or False "
                "(dropout on, with a 'dropout' rng)"
            )
        act = parse_activation(self.act)
        h = x.astype(jnp.float32)
        for i in range(self.layers):
            h = linear(self.units, self.kernel_init, name=f"dense_{i}")(h)
            if i == 0 and self.dropout > 0:
                h = nn.Dropout(self.dropout, deterministic=deterministic)(h)
            h = act(self._norm(i)(h))
        return h
