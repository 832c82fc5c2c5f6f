"""Host-side counterparts of the JAX wrappers: action rescaling, observation normalisation
and frame stacking.

They apply the same rules as :class:`~ajax.environments.wrappers.RescaleAction` and
:class:`~ajax.environments.normalize.NormalizeObservation` (the same functions, on numpy
arrays); the moments live in the wrapper, since a host env has no state to carry them.
"""

from __future__ import annotations

import numpy as np

from ajax.environments.image_wrappers import _image_shape, stack_frames
from ajax.environments.normalize import (
    ObsMoments,
    initial_moments,
    normalize_obs,
    update_moments,
)
from ajax.environments.types import Box, HostEnv, TimeStep
from ajax.environments.utils import agent_action_to_env


class HostWrapper(HostEnv):
    """Base of the host wrappers: keeps the inner env in ``env`` and forwards the spec."""

    def __init__(self, env: HostEnv):
        if not isinstance(env, HostEnv):
            raise TypeError(f"{type(self).__name__} wraps a HostEnv, got {type(env).__name__}")
        self.env = env
        self.spec = env.spec

    def reset(self, seed: int | None = None) -> TimeStep:
        return self.env.reset(seed)

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> TimeStep:
        return self.env.step(action, active)

    def close(self) -> None:
        self.env.close()

    @property
    def unwrapped(self) -> HostEnv:
        return self.env.unwrapped


class HostRescaleAction(HostWrapper):
    """Actions in agent units [-1, 1], clipped, then mapped onto the env box (``c + h a``)."""

    def __init__(self, env: HostEnv):
        super().__init__(env)
        space = env.spec.action_space
        if not isinstance(space, Box) or not space.is_bounded:
            raise ValueError(
                f"rescaling needs a bounded Box action space, {env.spec.env_id} has {space}"
            )
        self.low = np.asarray(space.low, np.float32)
        self.high = np.asarray(space.high, np.float32)
        n = len(space.low)
        self.spec = env.spec.replace(action_space=Box((-1.0,) * n, (1.0,) * n))

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> TimeStep:
        action = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        return self.env.step(agent_action_to_env(action, self.low, self.high), active)


class HostNormalizeObservation(HostWrapper):
    """Running-moment observation normalisation over all ``n_envs`` (SB3 ``VecNormalize``).

    ``frozen = True`` stops the updates (evaluation); ``moments`` can be read and assigned.
    """

    def __init__(self, env: HostEnv, clip: float = 10.0, eps: float = 1e-8):
        super().__init__(env)
        if clip <= 0 or eps <= 0:
            raise ValueError(f"clip and eps must be > 0, got clip={clip}, eps={eps}")
        self.clip, self.eps = float(clip), float(eps)
        self.moments: ObsMoments = initial_moments(env.spec.obs_dim, np)
        self.frozen = False

    def reset(self, seed: int | None = None) -> TimeStep:
        return self._normalize(self.env.reset(seed))

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> TimeStep:
        return self._normalize(self.env.step(action, active), active)

    def _normalize(self, ts: TimeStep, active: np.ndarray | None = None) -> TimeStep:
        if not self.frozen:  # idle simulators (hold ticks) report nothing to count
            seen = ts.obs if active is None else ts.obs[np.asarray(active, bool)]
            if len(seen):
                self.moments = update_moments(self.moments, seen)
        prefix = self.spec.raw_obs_prefix
        norm = lambda x: normalize_obs(self.moments, x, prefix, self.clip, self.eps)
        return ts.replace(obs=norm(ts.obs), final_obs=norm(ts.final_obs))


class HostFrameStack(HostWrapper):
    """:class:`~ajax.environments.image_wrappers.FrameStack` for host image envs (rendered
    dm_control pixels): the same :func:`~ajax.environments.image_wrappers.stack_frames` rule on
    numpy arrays; an idle simulator (a hold tick's ``active`` False) keeps its stack."""

    def __init__(self, env: HostEnv, k: int):
        super().__init__(env)
        h, w, c = _image_shape(env, "frame_stack")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"frame_stack must be an int >= 1, got {k!r}")
        self.k, self.shape = k, (h, w, c)
        self.spec = env.spec.replace(observation_shape=(h * w * c * k,), image_shape=(h, w, c * k))
        self.frames = np.zeros((env.spec.n_envs, h, w, c * k), np.float32)

    def _frame(self, obs: np.ndarray) -> np.ndarray:
        return obs.reshape(len(obs), *self.shape)

    def _flat(self, frames: np.ndarray) -> np.ndarray:
        return frames.reshape(len(frames), -1)

    def reset(self, seed: int | None = None) -> TimeStep:
        ts = self.env.reset(seed)
        self.frames = np.tile(self._frame(ts.obs), self.k)
        return ts.replace(obs=self._flat(self.frames), final_obs=self._flat(self.frames))

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> TimeStep:
        ts = self.env.step(action, active)
        done = np.asarray(ts.terminated | ts.truncated)
        frames, final = stack_frames(self.frames, self._frame(ts.obs),
                                     self._frame(ts.final_obs), done, np)  # fmt: skip
        if active is not None:
            idle = ~np.asarray(active, bool)[:, None, None, None]
            frames, final = np.where(idle, self.frames, frames), np.where(idle, self.frames, final)
        self.frames = frames
        return ts.replace(obs=self._flat(frames), final_obs=self._flat(final))
