"""Image observation wrappers: resize, grayscale, frame stack (hand-worked frames)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import make_env
from ajax.environments.core import SimEnv, SimStep
from ajax.environments.host import HostStep, HostVecEnv
from ajax.environments.host_wrappers import HostFrameStack
from ajax.environments.image_wrappers import FrameStack, GrayscaleImage, ResizeImage
from ajax.environments.types import Discrete, EnvSpec


class FrameSim:
    """2 x 2 x 3 images whose every pixel is (t, 2t, 3t); episodes of 3 transitions."""

    def _obs(self, t):
        return jnp.tile(jnp.stack([t, 2 * t, 3 * t]).astype(jnp.float32), 4)

    def init(self, key):
        del key
        t = jnp.zeros((), jnp.int32)
        return SimStep(t, self._obs(t), jnp.zeros(()), jnp.zeros((), bool))

    def transition(self, key, state, action):
        t = state + 1
        return SimStep(t, self._obs(t), jnp.ones(()), t >= 3)


def _env(n_envs=None) -> SimEnv:
    spec = EnvSpec("frames", "probe", (12,), Discrete(2), 10, image_shape=(2, 2, 3))
    return SimEnv(FrameSim(), spec.replace(n_envs=n_envs))


def test_frame_stack_repeats_the_first_frame_and_restarts_at_episode_ends():
    env = FrameStack(_env(), 3)
    assert env.spec.image_shape == (2, 2, 9) and env.spec.observation_shape == (36,)
    ts = env.reset(jax.random.PRNGKey(0))
    red = lambda obs: np.asarray(obs).reshape(2, 2, 9)[0, 0, ::3].tolist()  # t of each frame
    seen, finals = [red(ts.obs)], []
    for i in range(4):
        ts = env.step(jax.random.PRNGKey(i), ts.state, jnp.zeros((), jnp.int32))
        seen.append(red(ts.obs))
        finals.append(red(ts.final_obs))
    assert seen == [[0, 0, 0], [0, 0, 1], [0, 1, 2], [0, 0, 0], [0, 0, 1]]
    assert finals[2] == [1, 2, 3]  # the ending episode's last three frames
    assert finals[0] == [0, 0, 1] and finals[3] == [0, 0, 1]


def test_frame_stack_batched_matches_unbatched():
    one, many = FrameStack(_env(), 2), FrameStack(_env(4), 2)
    ts1, tsn = one.reset(jax.random.PRNGKey(0)), many.reset(jax.random.PRNGKey(0))
    for i in range(5):
        np.testing.assert_array_equal(tsn.obs, jnp.broadcast_to(ts1.obs, tsn.obs.shape))
        ts1 = one.step(jax.random.PRNGKey(i), ts1.state, jnp.zeros((), jnp.int32))
        tsn = many.step(jax.random.PRNGKey(i), tsn.state, jnp.zeros((4,), jnp.int32))


def test_grayscale_is_bt601_luma():
    env = GrayscaleImage(_env())
    assert env.spec.image_shape == (2, 2, 1)
    ts = env.step(jax.random.PRNGKey(0), env.reset(jax.random.PRNGKey(0)).state, 0)
    np.testing.assert_allclose(ts.obs, [0.299 + 2 * 0.587 + 3 * 0.114] * 4, rtol=1e-6)


def test_resize_nearest_keeps_minatar_planes_binary():
    raw = make_env("Breakout-MinAtar")
    env = make_env("Breakout-MinAtar", resize=(20, 20))
    assert env.spec.image_shape == (20, 20, 4) and env.spec.obs_dim == 1600
    nearest = ResizeImage(raw, (20, 20), method="nearest")
    small = np.asarray(raw.reset(jax.random.PRNGKey(0)).obs).reshape(10, 10, 4)
    big = np.asarray(nearest.reset(jax.random.PRNGKey(0)).obs).reshape(20, 20, 4)
    np.testing.assert_array_equal(big, small.repeat(2, 0).repeat(2, 1))
    linear = np.asarray(env.reset(jax.random.PRNGKey(0)).obs)
    assert linear.min() >= 0 and linear.max() <= 1 and linear.sum() > 0


def test_image_options_refused_where_they_cannot_apply():
    with pytest.raises(ValueError, match="frame_stack needs image observations.*drop it"):
        make_env("Pendulum-v1", frame_stack=3)
    with pytest.raises(ValueError, match="grayscale needs RGB images .*4 channels"):
        make_env("Breakout-MinAtar", grayscale=True)
    with pytest.raises(ValueError, match="host envs render 64 x 64 RGB"):
        make_env("gymnasium:CartPole-v1", resize=(64, 64))
    with pytest.raises(ValueError, match="frame_stack needs image observations"):
        make_env("gymnasium:CartPole-v1", frame_stack=3)
    with pytest.raises(ValueError, match="frame_stack must be an int >= 1"):
        make_env("Breakout-MinAtar", frame_stack=0)


class HostFrameSim:
    """:class:`FrameSim` stepped on the host."""

    def __init__(self):
        self.sim, self.t = FrameSim(), None

    def reset(self, seed):
        first = self.sim.init(None)
        self.t = first.state
        return np.asarray(first.obs)

    def step(self, action):
        nxt = self.sim.transition(None, self.t, action)
        self.t = nxt.state
        return HostStep(np.asarray(nxt.obs), 1.0, bool(nxt.terminated), False)

    def close(self):
        pass


def test_host_frame_stack_equals_the_jax_frame_stack_and_holds_idle_envs():
    spec = EnvSpec("frames", "probe", (12,), Discrete(2), 10, image_shape=(2, 2, 3))
    host = HostFrameStack(HostVecEnv([HostFrameSim(), HostFrameSim()], spec), 3)
    jax_env = FrameStack(_env(2), 3)
    assert host.spec.image_shape == jax_env.spec.image_shape == (2, 2, 9)
    ts_h, ts_j = host.reset(0), jax_env.reset(jax.random.PRNGKey(0))
    for i in range(5):
        np.testing.assert_array_equal(ts_h.obs, ts_j.obs)
        np.testing.assert_array_equal(ts_h.final_obs, ts_j.final_obs)
        ts_h = host.step(np.zeros(2, np.int32))
        ts_j = jax_env.step(jax.random.PRNGKey(i), ts_j.state, jnp.zeros((2,), jnp.int32))
    before = host.frames.copy()
    host.step(np.zeros(2, np.int32), active=np.array([False, True]))
    np.testing.assert_array_equal(host.frames[0], before[0])  # idle: its stack stays
    assert not np.array_equal(host.frames[1], before[1])
