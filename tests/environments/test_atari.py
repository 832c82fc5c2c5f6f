"""Atari (ale-py) behind make_env with DreamerV3's settings: 4 frames a step, 64 x 64 frames."""

from __future__ import annotations

import numpy as np
import pytest

from ajax import make_env


def test_atari_pong_frames_repeat_and_spec():
    env = make_env("atari:Pong", n_envs=2)
    spec = env.spec
    assert spec.family == "atari" and not env.is_jax
    assert spec.image_shape == (64, 64, 3) and spec.observation_shape == (64 * 64 * 3,)
    assert spec.action_space.n == 18 and spec.max_episode_steps == 27_000
    ts = env.reset(seed=0)
    assert ts.obs.shape == (2, 12288) and 0 <= ts.obs.min() and ts.obs.max() <= 1
    ale = env.sims[0].env.unwrapped.ale
    for _ in range(3):
        ts = env.step(np.zeros(2, np.int64))
    assert ale.getEpisodeFrameNumber() == 12  # 4 emulator frames per agent step
    assert ts.obs.std() > 0.01
    gray = make_env("atari:Pong", grayscale=True)
    assert gray.spec.image_shape == (64, 64, 1)
    gray.close()
    env.close()


def test_atari_refuses_an_extra_action_repeat():
    with pytest.raises(ValueError, match="4 frames per step.*drop action_repeat"):
        make_env("atari:Pong", action_repeat=2)
