"""Atari (ale-py) behind make_env with DreamerV3's settings at e3f0224 (configs.yaml env.atari
and env.atari100k, embodied/envs/atari.py): 4 frames a step, no-op starts, the two frame blocks."""

from __future__ import annotations

import numpy as np
import pytest

from ajax import make_env
from ajax.environments.atari import MAX_FRAMES, AtariSimulator


def test_atari_pong_frames_repeat_and_spec():
    """env.atari: 96 x 96 gray, 18 actions, sticky; 4 emulator frames per agent step after
    0..30 no-op frames drawn at reset (seeded by the reset's seed)."""
    env = make_env("atari:Pong", n_envs=2)
    spec = env.spec
    assert spec.family == "atari" and not env.is_jax
    assert spec.image_shape == (96, 96, 1) and spec.observation_shape == (96 * 96,)
    assert spec.action_space.n == 18 and spec.max_episode_steps == 27_000
    ts = env.reset(seed=0)
    assert ts.obs.shape == (2, 9216) and 0 <= ts.obs.min() and ts.obs.max() <= 1
    ale = env.sims[0].env.unwrapped.ale
    noops = ale.getEpisodeFrameNumber()
    assert 0 <= noops <= 30
    assert ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    for _ in range(3):
        ts = env.step(np.zeros(2, np.int64))
    assert ale.getEpisodeFrameNumber() == noops + 12  # 4 emulator frames per agent step
    assert ts.obs.std() > 0.01
    again = make_env("atari:Pong")
    again.reset(seed=0)
    assert again.sims[0].env.unwrapped.ale.getEpisodeFrameNumber() == noops
    again.close()
    env.close()


def test_atari100k_settings_and_gray_weights():
    """env.atari100k: 64 x 64 RGB, the minimal action set, no sticky actions; grayscale= gives
    the official luma (0.299, 0.587, 0.114, truncated to a byte) of the resized frame."""
    env = make_env("atari:Pong", atari_settings="atari100k")
    assert env.spec.image_shape == (64, 64, 3) and env.spec.action_space.n == 6
    ale = env.sims[0].env.unwrapped.ale
    assert ale.getFloat("repeat_action_probability") == 0.0
    rgb = env.reset(seed=1).obs[0].reshape(64, 64, 3)
    gray = make_env("atari:Pong", atari_settings="atari100k", grayscale=True)
    luma = gray.reset(seed=1).obs[0].reshape(64, 64)
    want = (np.round(rgb * 255) @ np.array([0.299, 0.587, 0.114])).astype(np.uint8) / 255
    np.testing.assert_allclose(luma, want, atol=1.5 / 255)  # the weights' last digit rounds
    gray.close()
    env.close()
    with pytest.raises(ValueError, match="atari_settings='atari100k' picks.*atari:<Game> ids"):
        make_env("CartPole-v1", atari_settings="atari100k")


def test_atari_frame_limit_ends_the_episode_as_terminal():
    """atari.py:113 and :176: the 108,000-frame limit ends the episode with is_terminal set."""
    sim = AtariSimulator("Pong", size=64, gray=False, sticky=False, full_actions=False)
    sim.reset(seed=0)
    sim.duration = MAX_FRAMES - 2
    step = sim.step(np.asarray(0))
    assert step.terminated and not step.truncated and sim.duration == MAX_FRAMES
    sim.close()


def test_atari_refuses_an_extra_action_repeat():
    with pytest.raises(ValueError, match="4 frames per step.*drop action_repeat"):
        make_env("atari:Pong", action_repeat=2)
