"""Frozen configs of the networks toolbox: what a network acts in, how it is built and trained.

All three are frozen dataclasses, hence hashable: valid jit-static arguments and module fields.
They are checked by the shared validator (:class:`ajax.validation.Validated`) when built.
``EnvConfig`` is the old name of :class:`EnvSpaces`, kept until 0.3.0.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

from ajax.networks.actor_critic import CNNSpec
from ajax.networks.memory import MemoryConfig, parse_memory_config
from ajax.networks.pid_actor import PIDPolicy
from ajax.validation import (
    PYTHON_ARGUMENT,
    Validated,
    at_least,
    between,
    positive,
    require,
)


@dataclass(frozen=True)
class EnvSpaces(Validated):
    """An environment's observation and action spaces, as a network sees them.

    ``obs_shape`` is the observation's shape as the agent sees it (flattened to ``obs_dim``);
    ``action_dim`` the number of continuous action dimensions or of discrete actions;
    ``action_low``/``action_high`` the env's box (continuous only), onto which the agent's
    [-1, 1] actions are mapped; ``image_shape`` (H, W, C) the image packed first in a flat
    pixel observation, read by a CNN encoder; ``n_envs`` the batch a recurrent carry is sized to.
    """

    obs_shape: tuple[int, ...]
    action_dim: int
    continuous: bool
    n_envs: int = 1
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    image_shape: tuple[int, int, int] | None = None

    ARGUMENT = PYTHON_ARGUMENT
    RULES = {"action_dim": positive(), "n_envs": positive()}

    def __post_init__(self):
        object.__setattr__(self, "obs_shape", tuple(self.obs_shape))
        super().__post_init__()

    def relations(self) -> None:
        super().relations()
        if (self.action_low is None) != (self.action_high is None):
            given, missing = (
                ("action_low", "action_high")
                if self.action_high is None
                else ("action_high", "action_low")
            )
            require(
                self,
                False,
                missing,
                f"given with {given}: the box needs both bounds, or neither",
                f"pass EnvSpaces({missing}=...) too, or drop {given}",
            )
        shape = self.image_shape
        require(
            self,
            shape is None or (len(shape) == 3 and math.prod(shape) <= self.obs_dim),
            "image_shape",
            f"None or (H, W, C) with H*W*C <= obs_dim {self.obs_dim}",
            f"pass EnvSpaces(image_shape=...) the (H, W, C) of the image packed first in "
            f"obs_shape {self.obs_shape}, or None",
        )

    @property
    def obs_dim(self) -> int:
        """Width of the flat observation."""
        return math.prod(self.obs_shape)


def __getattr__(name: str) -> Any:
    """``EnvConfig``: the old name of :class:`EnvSpaces`, deprecated until 0.3.0."""
    if name == "EnvConfig":
        warnings.warn(
            "ajax.networks.config.EnvConfig is renamed EnvSpaces; the old name goes in 0.3.0",
            DeprecationWarning,
            stacklevel=2,
        )
        return EnvSpaces
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class OptimizerConfig(Validated):
    """An optimizer as :func:`ajax.networks.utils.get_adam_tx` builds it (fields alike)."""

    learning_rate: float = 3e-4
    max_grad_norm: float | None = None
    eps: float = 1e-5
    beta_1: float = 0.9
    beta_2: float = 0.999
    weight_decay: float = 0.0
    per_member: bool = False
    optimizer: str = "adam"

    ARGUMENT = PYTHON_ARGUMENT
    RULES = {"learning_rate": positive(), "max_grad_norm": positive(optional=True)}


@dataclass(frozen=True)
class NetworkConfig(Validated):
    """Architecture of an actor-critic pair.

    Architectures are token sequences as :func:`ajax.networks.utils.parse_architecture` reads
    them (``("256", "relu", "256", "relu")``); ``actor_architecture`` may instead be a
    :class:`ajax.networks.pid_actor.PIDPolicy`. ``kernel_init``/``bias_init`` initialise the hidden
    layers, ``actor_kernel_init``/``critic_kernel_init`` the output layers (None: orthogonal
    0.01 and 1.0). ``state_independent_log_std``, ``log_std_init`` and ``log_std_kernel_init``
    set the continuous actor's log-std head (:func:`~ajax.networks.networks.check_log_std_head`;
    the default, a Dense head with bias 0, is SAC's), ``log_std_bounds`` its clip (None: none).
    ``n_quantiles`` > 1 makes a distributional critic; ``critic_dropout`` is DroQ's dropout rate
    after each hidden Dense of the critic; ``memory`` makes both networks recurrent; ``cnn``
    encodes the env's ``image_shape`` with convolutions.
    """

    actor_architecture: Any = ("256", "relu", "256", "relu")
    critic_architecture: tuple = ("256", "relu", "256", "relu")
    kernel_init: str | None = None
    bias_init: str | None = None
    actor_kernel_init: str | None = None
    critic_kernel_init: str | None = None
    state_independent_log_std: bool = False
    log_std_init: float | None = 0.0
    log_std_kernel_init: str | None = None
    log_std_bounds: tuple[float, float] | None = (-20.0, 2.0)
    n_quantiles: int = 1
    critic_dropout: float = 0.0
    memory: MemoryConfig | None = None
    cnn: CNNSpec | None = None

    ARGUMENT = PYTHON_ARGUMENT
    RULES = {"n_quantiles": at_least(1), "critic_dropout": between(0.0, 1.0, hi_open=True)}

    def __post_init__(self):
        # Tuples keep the config hashable when the caller passed lists (or a memory dict).
        if not isinstance(self.actor_architecture, PIDPolicy):
            object.__setattr__(self, "actor_architecture", tuple(self.actor_architecture))
        object.__setattr__(self, "critic_architecture", tuple(self.critic_architecture))
        object.__setattr__(self, "memory", parse_memory_config(self.memory))
        super().__post_init__()

    def relations(self) -> None:
        super().relations()
        bounds = self.log_std_bounds
        require(
            self,
            bounds is None or bounds[0] < bounds[1],
            "log_std_bounds",
            "None or (low, high) with low < high",
            "pass NetworkConfig(log_std_bounds=(low, high)) with low < high, e.g. (-20.0, 2.0)",
        )
        require(
            self,
            self.cnn is None or isinstance(self.cnn, CNNSpec),
            "cnn",
            "None or a CNNSpec",
            "pass NetworkConfig(cnn=reference_cnn(image_shape)) or another CNNSpec",
        )
