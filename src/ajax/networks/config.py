"""Frozen configs of the networks toolbox: what a network acts in, how it is built and trained.

All three are frozen dataclasses, hence hashable: valid jit-static arguments and module fields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ajax.networks.actor_critic import CNNSpec
from ajax.networks.memory import MemoryConfig, parse_memory_config
from ajax.networks.pid_actor import PIDPolicy


@dataclass(frozen=True)
class EnvConfig:
    """What a network needs to know about its environment.

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

    def __post_init__(self):
        object.__setattr__(self, "obs_shape", tuple(self.obs_shape))
        if self.action_dim <= 0 or self.n_envs <= 0:
            raise ValueError(
                f"action_dim and n_envs must be positive, got {self.action_dim}, {self.n_envs}"
            )
        if (self.action_low is None) != (self.action_high is None):
            raise ValueError("give both action_low and action_high, or neither")
        if self.image_shape is not None:
            if len(self.image_shape) != 3 or math.prod(self.image_shape) > self.obs_dim:
                raise ValueError(
                    f"image_shape must be (H, W, C) with H*W*C <= obs_dim {self.obs_dim}, got "
                    f"{self.image_shape}"
                )

    @property
    def obs_dim(self) -> int:
        """Width of the flat observation."""
        return math.prod(self.obs_shape)


@dataclass(frozen=True)
class OptimizerConfig:
    """An optimizer as :func:`ajax.networks.utils.get_adam_tx` builds it (fields alike)."""

    learning_rate: float = 3e-4
    max_grad_norm: float | None = None
    eps: float = 1e-5
    beta_1: float = 0.9
    beta_2: float = 0.999
    weight_decay: float = 0.0
    per_member: bool = False
    optimizer: str = "adam"

    def __post_init__(self):
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be positive or None, got {self.max_grad_norm}")


@dataclass(frozen=True)
class NetworkConfig:
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

    def __post_init__(self):
        # Tuples keep the config hashable when the caller passed lists (or a memory dict).
        if not isinstance(self.actor_architecture, PIDPolicy):
            object.__setattr__(self, "actor_architecture", tuple(self.actor_architecture))
        object.__setattr__(self, "critic_architecture", tuple(self.critic_architecture))
        object.__setattr__(self, "memory", parse_memory_config(self.memory))
        if self.n_quantiles < 1:
            raise ValueError(f"n_quantiles must be >= 1, got {self.n_quantiles}")
        if not 0.0 <= self.critic_dropout < 1.0:
            raise ValueError(f"critic_dropout must be in [0, 1), got {self.critic_dropout}")
        if self.log_std_bounds is not None and not self.log_std_bounds[0] < self.log_std_bounds[1]:
            raise ValueError(
                f"log_std_bounds must be (low, high), low < high: {self.log_std_bounds}"
            )
        if self.cnn is not None and not isinstance(self.cnn, CNNSpec):
            raise TypeError(f"cnn must be a CNNSpec (see reference_cnn), got {self.cnn!r}")
