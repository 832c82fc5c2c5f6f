"""Craftax (Crafter in JAX) behind make_env: pixels with the time limit as truncation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import make_env


@pytest.mark.slow  # ~35 CPU s of compiling craftax's step (plus the first texture render)
def test_craftax_classic_pixels_with_its_time_limit_as_truncation():
    """Craftax-Classic pixels under jit: 63 x 63 RGB in [0, 1], 17 actions, the 10,000-step
    limit by default; a limit of 3 truncates on the third step (craftax's own ``done`` would
    call it terminal), and nobody dies from three noops."""
    assert make_env("craftax:Craftax-Classic-Pixels-v1").spec.max_episode_steps == 10_000
    env = make_env("craftax:Craftax-Classic-Pixels-v1", n_envs=2, max_episode_steps=3)
    spec = env.spec
    assert spec.family == "craftax" and spec.image_shape == (63, 63, 3)
    assert spec.action_space.n == 17
    ts = jax.jit(env.reset)(jax.random.PRNGKey(0))
    assert ts.obs.shape == (2, 63 * 63 * 3) and 0 <= float(ts.obs.min()) <= float(ts.obs.max()) <= 1
    step, flags = jax.jit(env.step), []
    for i in range(3):
        ts = step(jax.random.PRNGKey(i), ts.state, jnp.zeros((2,), jnp.int32))
        flags.append((bool(ts.terminated.any()), bool(ts.truncated.all())))
    assert flags == [(False, False), (False, False), (False, True)]


@pytest.mark.slow  # a fresh install renders Craftax's textures on the first build (~45-60 s)
def test_dreamerv3_needs_craftax_pixels_resized_to_an_even_side():
    from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config

    with pytest.raises(ValueError, match="too small for DreamerV3's CNN.*resize"):
        DreamerV3("craftax:Craftax-Classic-Pixels-v1", DreamerV3Config.preset("1m"))
    algo = DreamerV3("craftax:Craftax-Classic-Pixels-v1", DreamerV3Config.preset("1m"),
                     resize=(64, 64))  # fmt: skip
    assert algo.env.spec.image_shape == (64, 64, 3)
    assert np.isfinite(algo.replay_nbytes(1000))


@pytest.mark.slow  # ~2-3 CPU min: Craftax's step and the four-stage 64 x 64 CNN compile
def test_dreamerv3_on_craftax_pixels_is_one_jitted_run_over_two_seeds():
    """Crafter in JAX from pixels: Craftax-Classic resized to 64 x 64 (the reference's four CNN
    stages), 2 vmapped seeds, env, hold ticks, uint8 replay and updates under one jit."""
    from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config

    cfg = DreamerV3Config.preset(
        "1m", batch_size=2, batch_length=4, train_ratio=8.0, eval_freq=40, eval_episodes=1
    )
    algo = DreamerV3("craftax:Craftax-Classic-Pixels-v1", cfg, resize=(64, 64),
                     max_episode_steps=30)  # fmt: skip
    result = algo.train(seed=0, total_steps=80, n_seeds=2)
    rows = result.state.replay.rows
    assert rows["obs"].dtype == jnp.uint8 and rows["obs"].shape[-1] == 64 * 64 * 3
    assert int(result.state.agent.updates.min()) >= 2
    assert np.all(np.isfinite(result.metrics["loss/rec"]))
