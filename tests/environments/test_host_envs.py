"""Host envs: gymnasium and dm_control behind the batched numpy TimeStep interface."""

import numpy as np
import pytest

from ajax.environments import (
    Box,
    Discrete,
    HostNormalizeObservation,
    is_jax_env,
    make_env,
)


def test_gymnasium_pendulum_shapes_and_truncation_at_200():
    env = make_env("gymnasium:Pendulum-v1", n_envs=2)
    assert not is_jax_env(env) and not env.is_jax
    assert env.spec.action_space == Box((-2.0,), (2.0,))
    assert env.spec.max_episode_steps == 200 and env.spec.n_envs == 2
    ts = env.reset(seed=0)
    assert ts.obs.shape == (2, 3) and ts.obs.dtype == np.float32 and ts.state is None
    np.testing.assert_array_equal(env.reset(seed=0).obs, ts.obs)  # seeded
    truncated = []
    for _ in range(200):
        ts = env.step(np.zeros((2, 1)))
        truncated.append(ts.truncated.copy())
        assert ts.reward.shape == (2,) and ts.reward.dtype == np.float32
    truncated = np.stack(truncated)
    assert truncated[-1].all() and not truncated[:-1].any() and not ts.terminated.any()
    assert (ts.info["episode_length"] == 200).all() and ts.info["episode_done"].all()
    assert not np.allclose(ts.obs, ts.final_obs)  # auto-reset kept the last obs
    np.testing.assert_allclose(ts.info["episode_return"].shape, (2,))
    env.close()


def test_gymnasium_cartpole_terminates_discrete():
    env = make_env("gymnasium:CartPole-v1", n_envs=1)
    assert env.spec.action_space == Discrete(2)
    env.reset(seed=1)
    for _ in range(100):
        ts = env.step(np.zeros((1,), np.int64))
        if ts.done.any():
            break
    assert ts.terminated[0] and not ts.truncated[0]
    assert abs(ts.final_obs[0, 2]) > 0.2 or abs(ts.final_obs[0, 0]) > 2.4
    assert abs(ts.obs[0, 2]) < 0.06  # a fresh episode


def test_dmc_cartpole_swingup_host_env():
    env = make_env("dmc:cartpole-swingup", n_envs=2, action_repeat=4, rescale_actions=True)
    assert env.spec.observation_shape == (5,) and env.spec.family == "dmc"
    assert env.spec.max_episode_steps == 250 and env.spec.dt == pytest.approx(0.04)
    ts = env.reset(seed=3)
    assert ts.obs.shape == (2, 5) and ts.obs.dtype == np.float32
    for _ in range(250):
        ts = env.step(np.full((2, 1), 0.3))
    assert ts.truncated.all() and not ts.terminated.any()
    assert (ts.info["episode_length"] == 250).all()
    assert 0 < ts.info["episode_return"].max() <= 1000
    with pytest.raises(ValueError, match="leading axis"):
        env.step(np.zeros((3, 1)))
    env.close()


def test_host_normalize_observation_and_options():
    env = make_env("gymnasium:Pendulum-v1", n_envs=4, normalize_obs=True)
    assert isinstance(env, HostNormalizeObservation)
    raw = make_env("gymnasium:Pendulum-v1", n_envs=4)
    env.reset(seed=0)
    raw_ts = raw.reset(seed=0)
    seen = [raw_ts.obs]
    for _ in range(5):
        env.step(np.ones((4, 1)))
        raw_ts = raw.step(np.ones((4, 1)))
        seen.append(raw_ts.obs)
    seen = np.concatenate(seen)
    count = 1e-4 + len(seen)
    mean = seen.sum(0) / count
    np.testing.assert_allclose(env.moments.mean, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(env.moments.count, count, rtol=1e-6)
    env.frozen = True
    frozen_mean = env.moments.mean.copy()
    env.step(np.ones((4, 1)))
    np.testing.assert_array_equal(env.moments.mean, frozen_mean)
    with pytest.raises(ValueError, match="pid_error_fn"):
        make_env("gymnasium:Pendulum-v1", pid_error_fn=lambda o: o[0])
    with pytest.raises(ValueError, match="bounded Box"):
        make_env("gymnasium:CartPole-v1", rescale_actions=True)


def test_dmc_pixels_render_the_camera_as_flat_unit_floats():
    """``pixels=True``: 64 x 64 RGB frames of camera 0 (headless: OSMesa or EGL), flat floats
    in [0, 1] that move with the cart; the time limit still truncates and auto-resets."""
    env = make_env("dmc:cartpole-swingup", n_envs=2, pixels=True, max_episode_steps=3)
    assert env.spec.image_shape == (64, 64, 3) and env.spec.observation_shape == (12288,)
    ts = env.reset(seed=0)
    first = ts.obs
    assert first.shape == (2, 12288) and first.dtype == np.float32
    assert 0.0 <= first.min() and first.max() <= 1.0 and first.std() > 0.05
    np.testing.assert_allclose(first * 255, np.round(first * 255), atol=1e-3)  # bytes / 255
    for _ in range(3):
        ts = env.step(np.ones((2, 1)))
    assert ts.truncated.all()
    assert np.abs(ts.final_obs - first).max() > 0.1  # the pushed cart moved in the image
    env.close()


def test_dmc_pixels_with_proprio_append_the_state_after_the_image():
    """``proprio=True``: the image, then the task's state features (a mixed observation); the
    tail is what the state-only env gives for the same seed."""
    env = make_env("dmc:cartpole-swingup", n_envs=2, pixels=True, proprio=True)
    state = make_env("dmc:cartpole-swingup", n_envs=2)
    assert env.spec.mixed and env.spec.vector_dim == state.spec.obs_dim == 5
    assert env.spec.observation_shape == (12288 + 5,)
    obs, want = env.reset(seed=3).obs, state.reset(seed=3).obs
    np.testing.assert_allclose(obs[:, 12288:], want, rtol=1e-6)
    assert 0.0 <= obs[:, :12288].min() and obs[:, :12288].max() <= 1.0
    action = np.full((2, 1), 0.5)
    np.testing.assert_allclose(env.step(action).obs[:, 12288:], state.step(action).obs, rtol=1e-6)
    env.close()
    state.close()


def test_pixels_only_for_dm_control():
    with pytest.raises(ValueError, match="pixels= renders dm_control cameras"):
        make_env("Pendulum-v1", pixels=True)
