"""The typed interface every Ajax environment exposes: spaces, spec, time step, env classes.

Two kinds of environment share one :class:`TimeStep` and one :class:`EnvSpec`:

- :class:`JaxEnv`: pure functions ``reset(key) -> TimeStep`` and
  ``step(key, state, action) -> TimeStep``; jit them, vmap them, scan them.
- :class:`HostEnv`: numpy ``reset(seed) -> TimeStep`` and ``step(action) -> TimeStep`` over
  ``n_envs`` simulators stepped on the host (gymnasium, dm_control); the loop calls jitted
  act/update functions around them.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
from flax import struct

from ajax.validation import PYTHON_ARGUMENT, Validated, at_least, require

Array = Any  # jax.Array or np.ndarray: the host path carries numpy arrays in the same fields.


@dataclasses.dataclass(frozen=True)
class Box(Validated):
    """A continuous action space: each entry of the action lies in ``[low[i], high[i]]``.

    Bounds are stored as tuples so the spec stays hashable and comparable; read them as
    arrays with ``np.asarray(space.low, np.float32)``.
    """

    low: tuple[float, ...]
    high: tuple[float, ...]

    ARGUMENT = PYTHON_ARGUMENT

    def relations(self) -> None:
        super().relations()
        require(
            self,
            len(self.low) == len(self.high) > 0,
            "high",
            f"as long as low (length {len(self.low)}), and not empty",
            "pass Box(low=..., high=...) one bound per action entry, e.g. Box.from_arrays",
        )
        require(
            self,
            all(lo <= hi for lo, hi in zip(self.low, self.high, strict=True)),
            "high",
            f">= low entry by entry (low={self.low})",
            "swap the bounds where low > high",
        )

    @classmethod
    def from_arrays(cls, low, high, shape: tuple[int, ...] | None = None) -> Box:
        """Build from scalars or arrays, broadcast to ``shape`` and flattened."""
        low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        shape = shape if shape is not None else np.broadcast_shapes(low.shape, high.shape)
        low, high = np.broadcast_to(low, shape).ravel(), np.broadcast_to(high, shape).ravel()
        return cls(tuple(float(x) for x in low), tuple(float(x) for x in high))

    @property
    def shape(self) -> tuple[int]:
        return (len(self.low),)

    @property
    def is_bounded(self) -> bool:
        """Whether every bound is finite (needed to rescale agent actions onto the box)."""
        return all(math.isfinite(x) for x in self.low + self.high)


@dataclasses.dataclass(frozen=True)
class Discrete(Validated):
    """A discrete action space: an int32 scalar action in ``{0, ..., n - 1}``."""

    n: int

    ARGUMENT = PYTHON_ARGUMENT
    RULES = {"n": at_least(1)}

    @property
    def shape(self) -> tuple[()]:
        return ()


ActionSpace = Box | Discrete


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """What an agent and a training loop need to know about an environment.

    Attributes:
      env_id: the id given to :func:`ajax.environments.make_env`.
      family: ``gymnax``, ``playground``, ``brax``, ``gymnasium`` or ``dmc``.
      observation_shape: shape of one env's observation; always flat, ``(obs_dim,)``, float32.
      action_space: :class:`Box` (float32 actions of ``action_space.shape``) or
        :class:`Discrete` (int32 scalar actions).
      max_episode_steps: agent steps after which an episode is truncated (``None``: never).
      dt: seconds of simulated time per agent step, where the simulator states it.
      n_envs: the number of vectorised copies (leading axis of every TimeStep field), or
        ``None`` for a single unbatched env.
      raw_obs_prefix: leading observation entries that observation normalisers must leave raw
        (the PID error terms of :class:`~ajax.environments.pid_terms.PIDTermsWrapper`).
      image_shape: ``(H, W, C)`` when the flat observation holds an image (gymnax MinAtar's
        channel images), packed first in NHWC order; networks then encode it with convolutions.
        Entries after the image are vector features (mixed observations, e.g. rendered
        dm_control with its proprioceptive state): :attr:`vector_dim` of them.
    """

    env_id: str
    family: str
    observation_shape: tuple[int, ...]
    action_space: ActionSpace
    max_episode_steps: int | None
    dt: float | None = None
    n_envs: int | None = None
    raw_obs_prefix: int = 0
    image_shape: tuple[int, int, int] | None = None

    @property
    def obs_dim(self) -> int:
        return int(np.prod(self.observation_shape))

    @property
    def vector_dim(self) -> int:
        """Vector features of an observation: all of them without an image, else those after it."""
        if self.image_shape is None:
            return self.obs_dim
        return self.obs_dim - int(np.prod(self.image_shape))

    @property
    def mixed(self) -> bool:
        """An image and vector features in one observation."""
        return self.image_shape is not None and self.vector_dim > 0

    @property
    def discrete(self) -> bool:
        return isinstance(self.action_space, Discrete)

    @property
    def action_dim(self) -> int:
        """Box: the action's width; Discrete: the number of actions."""
        if isinstance(self.action_space, Discrete):
            return self.action_space.n
        return self.action_space.shape[0]

    def replace(self, **changes) -> EnvSpec:
        return dataclasses.replace(self, **changes)


@struct.dataclass
class TimeStep:
    """One step of experience, batched over a leading env axis when ``spec.n_envs`` is set.

    Auto-reset: when an episode ends at this step (``terminated | truncated``), ``obs`` is
    already the first observation of the next episode and ``final_obs`` the true last
    observation of the one that ended; otherwise the two are equal. A replay transition is
    therefore ``(prev.obs, action, ts.reward, ts.terminated, ts.final_obs)``.

    Attributes:
      state: the env state to pass to the next ``step`` (``None`` on the host path).
      obs: float32 ``(..., obs_dim)``: what the agent acts on next.
      reward: float32 ``(...)``: reward of the step that led here (0 after ``reset``).
      terminated: bool ``(...)``: the episode reached a terminal state (do not bootstrap).
      truncated: bool ``(...)``: the episode was cut by a time limit (bootstrap from
        ``final_obs``). Never both true: a terminal state on the last allowed step counts as
        terminated.
      final_obs: float32 ``(..., obs_dim)``: the observation this step actually reached.
      info: dict of arrays with the same keys after ``reset`` and ``step`` (so TimeSteps can
        be a ``lax.scan`` carry); wrappers add keys, e.g. :class:`EpisodeStatistics`.
    """

    state: Any
    obs: Array
    reward: Array
    terminated: Array
    truncated: Array
    final_obs: Array
    info: dict[str, Array]

    @property
    def done(self) -> Array:
        """The episode ended at this step (terminal or time limit)."""
        return self.terminated | self.truncated


class JaxEnv(abc.ABC):
    """A pure-functional environment: every method can be jitted, vmapped and scanned.

    Subclasses set ``spec``. Keys are explicit: ``step`` uses its key for the simulator's
    noise and for the auto-reset draw.
    """

    is_jax: ClassVar[bool] = True
    spec: EnvSpec

    @abc.abstractmethod
    def reset(self, key: Array) -> TimeStep:
        """Start an episode (all envs, when vectorised)."""

    @abc.abstractmethod
    def step(self, key: Array, state: Any, action: Array) -> TimeStep:
        """Advance one agent step; episodes that end are reset (see :class:`TimeStep`)."""

    @property
    def unwrapped(self) -> JaxEnv:
        """The innermost env under all wrappers."""
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.env_id!r})"


class Wrapper(JaxEnv):
    """Base of the JAX wrappers: keeps the inner env in ``env`` and forwards the spec."""

    def __init__(self, env: JaxEnv):
        if not isinstance(env, JaxEnv):
            raise TypeError(f"{type(self).__name__} wraps a JaxEnv, got {type(env).__name__}")
        self.env = env
        self.spec = env.spec

    @property
    def unwrapped(self) -> JaxEnv:
        return self.env.unwrapped

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env!r})"


class HostEnv(abc.ABC):
    """``spec.n_envs`` simulators stepped on the host, with numpy batched TimeSteps.

    Same auto-reset contract as :class:`JaxEnv`; ``TimeStep.state`` is ``None``.
    """

    is_jax: ClassVar[bool] = False
    spec: EnvSpec

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> TimeStep:
        """Reset every env; env ``i`` is seeded with ``seed + i`` when a seed is given."""

    @abc.abstractmethod
    def step(self, action: np.ndarray) -> TimeStep:
        """Step every env with its row of ``action`` (leading axis ``n_envs``)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release simulator resources."""

    @property
    def unwrapped(self) -> HostEnv:
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.env_id!r}, n_envs={self.spec.n_envs})"


def is_jax_env(env: JaxEnv | HostEnv) -> bool:
    """True for a pure-JAX env (jit/vmap/scan it), False for a host env (drive it in Python)."""
    if isinstance(env, JaxEnv):
        return True
    if isinstance(env, HostEnv):
        return False
    raise TypeError(f"expected a JaxEnv or HostEnv, got {type(env).__name__}")
