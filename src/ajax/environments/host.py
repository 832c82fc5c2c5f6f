"""Host (non-JAX) envs: gymnasium (``gymnasium:<id>``) and dm_control (``dmc:<domain>-<task>``).

:class:`HostVecEnv` steps ``n_envs`` simulators one after the other in Python and returns
numpy :class:`~ajax.environments.types.TimeStep` batches with the same contract as the JAX
envs: auto-reset keeping ``final_obs``, ``terminated`` apart from ``truncated`` (never both),
flat float32 observations, and the episode statistics of
:class:`~ajax.environments.wrappers.EpisodeStatistics` always in ``info``. Action repeat is
done per env (each stops at its own episode end), so it is an argument here rather than a
wrapper.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
from flax import struct

from ajax.environments.types import Box, Discrete, EnvSpec, HostEnv, TimeStep


@struct.dataclass
class HostStep:
    """One host simulator step: flat float32 obs, reward, and the two end flags."""

    obs: np.ndarray
    reward: float
    terminated: bool
    truncated: bool


class HostSimulator(Protocol):
    """One simulator on the host, with its own time limit."""

    def reset(self, seed: int | None) -> np.ndarray: ...

    def step(self, action: np.ndarray) -> HostStep: ...

    def close(self) -> None: ...


class HostVecEnv(HostEnv):
    """``len(sims)`` host simulators behind the batched, auto-resetting TimeStep interface."""

    def __init__(self, sims: list[HostSimulator], spec: EnvSpec, action_repeat: int = 1):
        if not isinstance(action_repeat, int) or action_repeat < 1:
            raise ValueError(f"action repeat must be an int >= 1, got {action_repeat!r}")
        self.sims = sims
        self.action_repeat = action_repeat
        limit, dt = spec.max_episode_steps, spec.dt
        self.spec = spec.replace(
            n_envs=len(sims),
            max_episode_steps=None if limit is None else math.ceil(limit / action_repeat),
            dt=None if dt is None else dt * action_repeat,
        )
        self._return = np.zeros(len(sims), np.float32)
        self._length = np.zeros(len(sims), np.int32)
        self._last_return = np.zeros(len(sims), np.float32)
        self._last_length = np.zeros(len(sims), np.int32)

    def reset(self, seed: int | None = None) -> TimeStep:
        obs = np.stack(
            [s.reset(None if seed is None else seed + i) for i, s in enumerate(self.sims)]
        )
        n = len(self.sims)
        for stat in (self._return, self._length, self._last_return, self._last_length):
            stat[:] = 0
        false = np.zeros(n, bool)
        return self._timestep(obs, np.zeros(n, np.float32), false, false, obs, false)

    def step(self, action: np.ndarray, active: np.ndarray | None = None) -> TimeStep:
        """Step every simulator, or only those where ``active`` is set: the others stay where
        they are and report reward 0, no end and a zero observation (for
        :class:`HostExplicitReset`'s hold ticks)."""
        action = np.asarray(action)
        if action.shape[:1] != (len(self.sims),):
            raise ValueError(
                f"expected actions with leading axis {len(self.sims)}, got {action.shape}"
            )
        active = np.ones(len(self.sims), bool) if active is None else np.asarray(active, bool)
        idle = HostStep(np.zeros(self.spec.observation_shape, np.float32), 0.0, False, False)
        steps = [self._repeat(sim, a) if on else idle
                 for sim, a, on in zip(self.sims, action, active, strict=True)]  # fmt: skip
        final_obs = np.stack([s.obs for s in steps])
        reward = np.asarray([s.reward for s in steps], np.float32)
        terminated = np.asarray([s.terminated for s in steps], bool)
        truncated = np.asarray([s.truncated for s in steps], bool) & ~terminated
        done = terminated | truncated
        obs = final_obs.copy()
        for i in np.flatnonzero(done):
            obs[i] = self.sims[i].reset(None)
        self._return += reward
        self._length += active
        self._last_return = np.where(done, self._return, self._last_return)
        self._last_length = np.where(done, self._length, self._last_length)
        self._return[done], self._length[done] = 0.0, 0
        return self._timestep(obs, reward, terminated, truncated, final_obs, done)

    def _repeat(self, sim: HostSimulator, action: np.ndarray) -> HostStep:
        total = 0.0
        for _ in range(self.action_repeat):
            step = sim.step(action)
            total += float(step.reward)
            if step.terminated or step.truncated:
                break
        return step.replace(reward=total)

    def _timestep(self, obs, reward, terminated, truncated, final_obs, done) -> TimeStep:
        info = {
            "episode_return": self._last_return.copy(),
            "episode_length": self._last_length.copy(),
            "episode_done": done,
        }
        return TimeStep(None, obs, reward, terminated, truncated, final_obs, info)

    def close(self) -> None:
        for sim in self.sims:
            sim.close()


class HostExplicitReset(HostEnv):
    """:class:`~ajax.environments.wrappers.ExplicitReset` for host envs: the tick that ends an
    episode shows its true last observation with ``info["is_last"]`` (and ``is_terminal``);
    the next one is a hold tick whose action is ignored and whose simulator does not step: it
    shows the new episode's first observation with ``info["is_first"]`` and reward 0."""

    def __init__(self, env: HostEnv):
        self.env, self.spec = env, env.spec  # a HostVecEnv or host wrappers around one
        n = env.spec.n_envs
        self.pending = np.zeros(n, bool)
        self.first_obs = np.zeros((n, *env.spec.observation_shape), np.float32)

    def reset(self, seed: int | None = None) -> TimeStep:
        ts = self.env.reset(seed)
        self.pending[:] = False
        no = np.zeros_like(ts.terminated)
        return self._emit(ts, ~no, no, no)

    def step(self, action: np.ndarray) -> TimeStep:
        hold = self.pending.copy()
        inner = self.env.step(action, active=~hold)
        done = ~hold & (inner.terminated | inner.truncated)
        col = lambda flag: flag.reshape(flag.shape + (1,) * (inner.obs.ndim - 1))  # any obs rank
        obs = np.where(col(hold), self.first_obs, inner.final_obs)
        self.first_obs = np.where(col(done), inner.obs, self.first_obs)
        self.pending = done
        ts = TimeStep(None, obs, np.where(hold, 0.0, inner.reward).astype(np.float32),
                      inner.terminated & ~hold, inner.truncated & ~hold, obs, inner.info)  # fmt: skip
        return self._emit(ts, hold, done, ts.terminated)

    @staticmethod
    def _emit(ts: TimeStep, is_first, is_last, is_terminal) -> TimeStep:
        info = {**ts.info, "is_first": is_first, "is_last": is_last, "is_terminal": is_terminal}
        return ts.replace(info=info)

    def close(self) -> None:
        self.env.close()


def _flat(obs: Any) -> np.ndarray:
    if isinstance(obs, dict):  # dm_control's OrderedDict: concatenated in its own order
        return np.concatenate([np.asarray(v, np.float32).ravel() for v in obs.values()])
    return np.asarray(obs, np.float32).ravel()


class GymnasiumSimulator:
    """A ``gymnasium.make`` env; its TimeLimit wrapper supplies truncation."""

    def __init__(self, env_id: str, max_episode_steps: int | None = None, **kwargs):
        import gymnasium

        self.env = gymnasium.make(env_id, max_episode_steps=max_episode_steps, **kwargs)
        self.discrete = isinstance(self.env.action_space, gymnasium.spaces.Discrete)

    def reset(self, seed: int | None) -> np.ndarray:
        return _flat(self.env.reset(seed=seed)[0])

    def step(self, action: np.ndarray) -> HostStep:
        if self.discrete:
            action = int(action)
        else:
            action = np.asarray(action, self.env.action_space.dtype).reshape(
                self.env.action_space.shape
            )
        obs, reward, terminated, truncated, _ = self.env.step(action)
        return HostStep(_flat(obs), float(reward), bool(terminated), bool(truncated))

    def close(self) -> None:
        self.env.close()


class DMCSimulator:
    """A dm_control suite task; ``LAST`` with discount 0 is termination, else truncation.

    The time limit is counted here (the suite's own is disabled) so that it is exact in
    agent steps. With ``pixels`` the observation is the task's camera rendered at
    ``size`` x ``size`` RGB, as floats in [0, 1] (camera 2 for quadruped, else 0: the camera
    DreamerV3's and TD-MPC2's DMC-vision runs use); headless machines render through OSMesa
    or EGL (:func:`~ajax.environments.host.headless_gl`). ``proprio`` appends the state
    features after the image (a mixed observation, as the official DreamerV3's dmc env gives
    ``image`` beside the task's state keys).
    """

    def __init__(self, domain: str, task: str, max_episode_steps: int, seed: int = 0,
                 pixels: bool = False, size: int = 64, proprio: bool = False):  # fmt: skip
        from dm_control import suite

        kwargs = {"random": seed, "time_limit": float("inf")}
        self.env = suite.load(domain, task, task_kwargs=kwargs)
        self.limit = max_episode_steps
        self.t = 0
        self.pixels, self.size, self.proprio = pixels, size, proprio
        self.camera = 2 if domain == "quadruped" else 0

    def _obs(self, ts) -> np.ndarray:
        if not self.pixels:
            return _flat(ts.observation)
        frame = self.env.physics.render(self.size, self.size, camera_id=self.camera)
        image = (np.asarray(frame, np.float32) / 255.0).ravel()
        return np.concatenate([image, _flat(ts.observation)]) if self.proprio else image

    def reset(self, seed: int | None) -> np.ndarray:
        if seed is not None:
            self.env.task.random.seed(seed)
        self.t = 0
        return self._obs(self.env.reset())

    def step(self, action: np.ndarray) -> HostStep:
        ts = self.env.step(np.asarray(action, np.float64))
        self.t += 1
        terminated = ts.last() and ts.discount == 0.0
        truncated = (ts.last() and not terminated) or self.t >= self.limit
        return HostStep(self._obs(ts), float(ts.reward), terminated, truncated)

    def close(self) -> None:
        if self.pixels:  # free the GL contexts now: at interpreter exit their thread is gone
            self.env.physics.free()
        self.env.close()


def headless_gl() -> None:
    """Pick dm_control's renderer before it is first imported (it reads ``MUJOCO_GL`` once):
    without a display and without a choice made by the user, OSMesa where its library is
    installed (the README's set-up installs it), else EGL."""
    import ctypes.util
    import os

    if "MUJOCO_GL" in os.environ or os.environ.get("DISPLAY"):
        return
    os.environ["MUJOCO_GL"] = "osmesa" if ctypes.util.find_library("OSMesa") else "egl"


headless_gl()  # at import: any later dm_control import (listing, make_env) then renders


def _space(space: Any) -> Box | Discrete:
    import gymnasium

    if isinstance(space, gymnasium.spaces.Discrete):
        return Discrete(int(space.n))
    if isinstance(space, gymnasium.spaces.Box):
        return Box.from_arrays(space.low, space.high)
    raise ValueError(f"unsupported gymnasium action space {space}")


def make_gymnasium(
    env_id: str, n_envs: int = 1, action_repeat: int = 1, max_episode_steps: int | None = None
) -> HostVecEnv:
    """``n_envs`` copies of ``gymnasium.make(env_id)`` (``env_id`` without the prefix)."""
    sims = [GymnasiumSimulator(env_id, max_episode_steps) for _ in range(n_envs)]
    env = sims[0].env
    spec = EnvSpec(
        env_id=f"gymnasium:{env_id}",
        family="gymnasium",
        observation_shape=(math.prod(env.observation_space.shape),),
        action_space=_space(env.action_space),
        max_episode_steps=env.spec.max_episode_steps if env.spec else None,
        dt=getattr(env.unwrapped, "dt", None),
    )
    return HostVecEnv(sims, spec, action_repeat)


def make_dmc(
    domain: str,
    task: str,
    n_envs: int = 1,
    action_repeat: int = 1,
    max_episode_steps: int | None = None,
    pixels: bool = False,
    proprio: bool = False,
) -> HostVecEnv:
    """``n_envs`` copies of ``dm_control.suite.load(domain, task)``; env ``i`` seeded ``i``;
    ``pixels``: 64 x 64 RGB camera images instead of the state features; ``proprio`` (with
    ``pixels``): the state features after the image."""
    from dm_control import suite

    probe = suite.load(domain, task)
    # dm_control exposes the default limit only as this attribute (time_limit / control dt).
    limit = max_episode_steps or int(round(probe._step_limit))
    spec = probe.action_spec()
    size = 64
    state_dim = _flat(probe.reset().observation).shape[0]
    obs_shape = (size * size * 3 + state_dim * proprio,) if pixels else (state_dim,)
    env_spec = EnvSpec(
        env_id=f"dmc:{domain}-{task}",
        family="dmc",
        observation_shape=obs_shape,
        image_shape=(size, size, 3) if pixels else None,
        action_space=Box.from_arrays(spec.minimum, spec.maximum, spec.shape),
        max_episode_steps=limit,
        dt=float(probe.control_timestep()),
    )
    probe.close()
    sims = [DMCSimulator(domain, task, limit, i, pixels, size, proprio) for i in range(n_envs)]
    return HostVecEnv(sims, env_spec, action_repeat)
