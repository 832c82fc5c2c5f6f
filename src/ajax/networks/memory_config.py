"""What chooses and sizes a memory block of :mod:`ajax.networks.memory`: its config, the
carry types and the kernel initialisers shared by every kind."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ajax.networks.orthogonal import orthogonal
from ajax.validation import (
    PYTHON_ARGUMENT,
    Validated,
    field_error,
    one_of,
    positive,
    require,
)

Carry = tuple[Any, ...]
KINDS = ("gru", "lstm", "transformer", "mamba")
N_GATES = {"gru": 3, "lstm": 4}


class WindowCache(NamedTuple):
    """One transformer layer's carry: its last ``window - 1`` inputs and which of them exist."""

    inputs: jax.Array  # (B, window - 1, H)
    valid: jax.Array  # (B, window - 1) bool


class SSMState(NamedTuple):
    """One mamba layer's carry: the SSM state and the conv's last ``d_conv - 1`` inputs."""

    ssm: jax.Array  # (B, expand * H, d_state)
    conv: jax.Array  # (B, d_conv - 1, expand * H)


@dataclasses.dataclass(frozen=True)
class MemoryConfig(Validated):
    """Everything that chooses and sizes a memory block (frozen: a flax field and jit-static).

    ``kind`` picks the architecture; ``hidden_size`` (H) is the output width and ``num_layers``
    the stack depth; ``gradient_checkpoint`` rematerialises each layer in the backward pass.
    Transformer only: ``window`` (steps each position sees, itself included) and ``num_heads``.
    Mamba only: ``d_state`` (N), ``d_conv`` (conv width) and ``expand`` (inner width E / H).
    ``final_norm`` ends transformer and mamba stacks with a LayerNorm. ``init`` is the kernel
    initializer of the kind's weight matrices (a callable or a string for
    :func:`ajax.networks.utils.parse_initialization`; ``"gate_block_orthogonal"`` without an
    argument takes the kind's gate count); None keeps flax's defaults. Knobs of other kinds are
    ignored.
    """

    kind: str = "gru"
    hidden_size: int = 64
    num_layers: int = 1
    gradient_checkpoint: bool = False
    window: int = 32
    num_heads: int = 4
    d_state: int = 16
    d_conv: int = 4
    expand: int = 2
    final_norm: bool = True
    init: str | Callable[..., jax.Array] | None = None

    ARGUMENT = PYTHON_ARGUMENT
    RULES = {"kind": one_of(*KINDS), "hidden_size": positive(), "num_layers": positive()}
    # Sizes of one kind only: checked for that kind, ignored by the others.
    KIND_SIZES = {"transformer": ("window", "num_heads"), "mamba": ("d_state", "d_conv", "expand")}

    def relations(self) -> None:
        super().relations()
        for name in self.KIND_SIZES.get(self.kind, ()):
            require(
                self,
                getattr(self, name) >= 1,
                name,
                f"> 0 for kind {self.kind!r}",
                f"pass MemoryConfig({name}=...) a positive int",
            )
        require(
            self,
            self.kind != "transformer" or self.hidden_size % self.num_heads == 0,
            "num_heads",
            f"a divisor of the transformer's hidden_size {self.hidden_size}",
            "pick sizes with hidden_size % num_heads == 0",
        )
        try:
            kernel_init(self)  # a bad init string fails here, not at the network's first call
        except ValueError as err:
            raise field_error(
                "MemoryConfig",
                "init",
                self.init,
                "an initializer ajax.networks.utils.parse_initialization reads",
                f"{err}",
                argument=PYTHON_ARGUMENT,
            ) from err

    @property
    def ends_normalised(self) -> bool:
        """True when the output passes through a final LayerNorm (transformer, mamba)."""
        return self.final_norm and self.kind in ("transformer", "mamba")


def parse_memory_config(memory: None | MemoryConfig | Mapping[str, Any]) -> MemoryConfig | None:
    """A :class:`MemoryConfig` from user input; None (no memory) passes through unchanged."""
    if memory is None or isinstance(memory, MemoryConfig):
        return memory
    if isinstance(memory, Mapping):
        fields = {f.name for f in dataclasses.fields(MemoryConfig)}
        unknown = sorted(set(memory) - fields)
        if unknown:
            raise ValueError(f"unknown MemoryConfig keys {unknown}; valid: {sorted(fields)}")
        return MemoryConfig(**memory)
    raise TypeError(
        f"memory must be None, a MemoryConfig or a dict, got {type(memory).__name__}: {memory!r}"
    )


def with_default_init(memory, inits: Mapping[str, Any]) -> MemoryConfig | None:
    """``memory`` with ``init = inits[kind]`` if it has none: the agent's reference default.

    An explicit ``init`` wins; a kind missing from ``inits`` keeps flax's initializers.
    """
    memory = parse_memory_config(memory)
    if memory is None or memory.init is not None or memory.kind not in inits:
        return memory
    return dataclasses.replace(memory, init=inits[memory.kind])


@dataclasses.dataclass(frozen=True)
class _GateBlockOrthogonal:
    """Initializer object (hashable by value, so configs holding it compare equal)."""

    n_gates: int

    def __call__(self, key, shape, dtype=jnp.float32):
        if len(shape) != 2:
            raise ValueError(f"gate_block_orthogonal makes (fan_in, H) kernels, not {shape}")
        fan_in, h = shape
        joint = orthogonal(1.0)(key, (fan_in, self.n_gates * h), dtype)
        return joint[:, :h]


def gate_block_orthogonal(n_gates: int) -> Callable[..., jax.Array]:
    """One gate's (fan_in, H) kernel cut from a random orthogonal (fan_in, n_gates * H) matrix.

    Spec 002 ``gate_block_orthogonal``: torch's ``orthogonal_`` on a GRU/LSTM's stacked weight, as
    Ni et al. initialise their recurrent cells (pomdp-baselines@e7c19c3
    policies/models/recurrent_actor.py:70-74). Entries have std 1/sqrt(max(n_gates * H, fan_in)),
    not flax's 1/sqrt(fan_in) or 1/sqrt(H). flax keeps a kernel per gate and calls this once per
    gate with its own key, so the gates are independent rather than jointly orthogonal.
    """
    if not isinstance(n_gates, int | np.integer) or n_gates < 1:
        raise ValueError(f"n_gates must be a positive int, got {n_gates!r}")
    return _GateBlockOrthogonal(int(n_gates))


def kernel_init(config: MemoryConfig):
    """The config's kernel initializer, or None for flax's default."""
    init = config.init
    if init is None or callable(init):
        return init
    # Imported here: ajax.networks.utils may one day register this module's initializers.
    from ajax.networks.utils import parse_function_string, parse_initialization

    name, n_gates = parse_function_string(init)
    if name != "gate_block_orthogonal":
        return parse_initialization(init)
    if n_gates is None and config.kind not in N_GATES:
        raise ValueError(f"{init!r} needs a gate count for kind {config.kind!r}, e.g. '{init}(3)'")
    return gate_block_orthogonal(N_GATES[config.kind] if n_gates is None else n_gates)


def dense(config: MemoryConfig, features: int, name: str, use_bias: bool = True) -> nn.Dense:
    init = kernel_init(config)
    kwargs = {} if init is None else {"kernel_init": init}
    return nn.Dense(features, use_bias=use_bias, name=name, **kwargs)
