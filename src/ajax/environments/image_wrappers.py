"""Observation wrappers for image envs: resize, grayscale, frame stack (JAX, jit-safe).

They act on envs whose spec has ``image_shape`` (flat observations holding an (H, W, C) image
in NHWC order, e.g. gymnax MinAtar) and keep that contract: the observation stays flat and
the spec's ``image_shape`` says what it now holds. Each works on one env or a batch (leading
``n_envs`` axis) and maps ``final_obs`` as it maps ``obs``. :func:`~ajax.environments.make_env`
applies them (options ``resize``, ``grayscale``, ``frame_stack``) in that order, after action
repeat, so a frame stack holds the frames the agent saw.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ajax.environments.types import JaxEnv, TimeStep, Wrapper

# ITU-R BT.601 luma, the weights of cv2's and PIL's RGB -> L conversion.
LUMA = (0.299, 0.587, 0.114)


def _image_shape(env, wrapper: str) -> tuple[int, int, int]:
    shape = env.spec.image_shape
    if shape is None:
        raise ValueError(
            f"{wrapper} needs image observations; {env.spec.env_id!r} gives vectors of shape "
            f"{env.spec.observation_shape}: drop it, or pick an image env (e.g. Breakout-MinAtar)"
        )
    if env.spec.mixed:
        raise ValueError(
            f"{wrapper} acts on image-only observations; {env.spec.env_id!r} also gives "
            f"{env.spec.vector_dim} vector features: drop {wrapper} or proprio"
        )
    return shape


def _with_image(env: JaxEnv, shape: tuple[int, int, int]):
    h, w, c = shape
    return env.spec.replace(observation_shape=(h * w * c,), image_shape=(h, w, c))


class _MapImage(Wrapper):
    """Base: ``image(x [..., H, W, C]) -> [..., H', W', C']`` on obs and final_obs."""

    def _map(self, obs: jax.Array) -> jax.Array:
        lead = obs.shape[:-1]
        out = self.image(obs.reshape(*lead, *self.env.spec.image_shape))
        return out.reshape(*lead, -1)

    def _ts(self, ts: TimeStep) -> TimeStep:
        return ts.replace(obs=self._map(ts.obs), final_obs=self._map(ts.final_obs))

    def reset(self, key: jax.Array) -> TimeStep:
        return self._ts(self.env.reset(key))

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> TimeStep:
        return self._ts(self.env.step(key, state, action))


class ResizeImage(_MapImage):
    """Images resized to ``size`` = (H, W) with ``jax.image.resize`` (``method``: "linear",
    antialiased when shrinking, as DreamerV3's and TD-MPC2's 64 x 64 inputs need; "nearest"
    keeps binary planes such as MinAtar's 0/1)."""

    def __init__(self, env: JaxEnv, size: tuple[int, int], method: str = "linear"):
        super().__init__(env)
        h, w, c = _image_shape(env, "resize")
        if len(size) != 2 or min(size) < 1:
            raise ValueError(f"resize takes (height, width) >= 1, got {size!r}")
        self.size, self.method = (int(size[0]), int(size[1])), method
        self.spec = _with_image(env, (*self.size, c))

    def image(self, x: jax.Array) -> jax.Array:
        shape = (*x.shape[:-3], *self.size, x.shape[-1])
        return jax.image.resize(x, shape, self.method).astype(jnp.float32)


class GrayscaleImage(_MapImage):
    """RGB images as one luma channel (ITU-R BT.601 weights)."""

    def __init__(self, env: JaxEnv):
        super().__init__(env)
        h, w, c = _image_shape(env, "grayscale")
        if c != 3:
            raise ValueError(
                f"grayscale needs RGB images (3 channels); {env.spec.env_id!r} has {c} "
                "channels: drop grayscale for this env"
            )
        self.spec = _with_image(env, (h, w, 1))

    def image(self, x: jax.Array) -> jax.Array:
        return jnp.tensordot(x, jnp.asarray(LUMA, x.dtype), axes=([-1], [0]))[..., None]


@struct.dataclass
class FrameStackState:
    """The inner state and the stacked frames [..., H, W, k C] (oldest first)."""

    env_state: Any
    frames: jax.Array


class FrameStack(Wrapper):
    """The last ``k`` images stacked on the channel axis, oldest first (TD-MPC2's pixel input:
    3 frames). An episode starts with its first frame repeated ``k`` times; on a step that
    ends an episode ``final_obs`` stacks the frames of the ending episode and ``obs`` starts
    the next one."""

    def __init__(self, env: JaxEnv, k: int):
        super().__init__(env)
        h, w, c = _image_shape(env, "frame_stack")
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"frame_stack must be an int >= 1, got {k!r}")
        self.k, self.shape = k, (h, w, c)
        self.spec = _with_image(env, (h, w, c * k))

    def _frame(self, obs: jax.Array) -> jax.Array:
        return obs.reshape(*obs.shape[:-1], *self.shape)

    def _flat(self, frames: jax.Array) -> jax.Array:
        return frames.reshape(*frames.shape[:-3], -1)

    def reset(self, key: jax.Array) -> TimeStep:
        ts = self.env.reset(key)
        frames = jnp.tile(self._frame(ts.obs), self.k)
        return ts.replace(state=FrameStackState(ts.state, frames), obs=self._flat(frames),
                          final_obs=self._flat(frames))  # fmt: skip

    def step(self, key: jax.Array, state: FrameStackState, action: jax.Array) -> TimeStep:
        ts = self.env.step(key, state.env_state, action)
        frames, final = stack_frames(state.frames, self._frame(ts.obs),
                                     self._frame(ts.final_obs), ts.terminated | ts.truncated)  # fmt: skip
        return ts.replace(state=FrameStackState(ts.state, frames), obs=self._flat(frames),
                          final_obs=self._flat(final))  # fmt: skip


def stack_frames(frames, obs, final_obs, done, xp=jnp):
    """One step of a frame stack (JAX or, with ``xp=numpy``, host): ``frames``
    [..., H, W, k C] oldest first; returns the next stack (a done env restarts from its new
    first frame ``obs`` repeated) and the stack ending in the true last frame ``final_obs``."""
    c = obs.shape[-1]
    k = frames.shape[-1] // c
    final = xp.concatenate([frames[..., c:], final_obs], axis=-1)
    done = xp.reshape(done, done.shape + (1, 1, 1))
    return xp.where(done, xp.tile(obs, k), final), final
