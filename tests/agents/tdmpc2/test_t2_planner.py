"""Spec 000 B13: TD-MPC2's MPPI planner (update step, warm start, iterations, final action)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.tdmpc2.config import PlannerConfig
from ajax.agents.tdmpc2.planner import (
    draw_plan_noise,
    mppi_update,
    plan,
    sample_elite,
    warm_start,
)

CFG = PlannerConfig()  # the paper's planner: H 3, 6 iterations, N 512, P 24, E 64
SMALL = PlannerConfig(num_samples=32, num_pi_trajs=4, num_elites=8)
A = 2
TARGET = jnp.array([[0.3, -0.5], [0.6, 0.1], [-0.2, 0.4]])  # a* [H, A]
_draw = jax.jit(draw_plan_noise, static_argnums=(1, 2))  # one compilation per shape


def _quadratic(target):
    """V = -||a - a*||^2 summed over the horizon: maximised at a*."""
    return lambda actions, key: -jnp.sum(jnp.square(actions - target[:, None]), axis=(0, 2))


def _inputs(seed, cfg=CFG, action_dim=A):
    rng = np.random.default_rng(seed)
    pi = jnp.asarray(np.tanh(rng.normal(size=(cfg.horizon, cfg.num_pi_trajs, action_dim))))
    prev = jnp.asarray(rng.uniform(-1, 1, size=(cfg.horizon, action_dim)), jnp.float32)
    return pi.astype(jnp.float32), prev


def _recorded_plan(cfg, prev_mean, t0, noise, pi):
    """Run plan under jit and record every value_fn call (actions, key data) in order."""
    calls = []

    def record(actions, key_data):
        calls.append((np.asarray(actions), np.asarray(key_data)))

    def value_fn(actions, key):
        jax.debug.callback(record, actions, jax.random.key_data(key), ordered=True)
        return _quadratic(TARGET)(actions, key)

    run = jax.jit(lambda prev, first: plan(value_fn, pi, prev, first, noise, cfg))
    out = jax.block_until_ready(run(prev_mean, t0))
    jax.effects_barrier()
    return out, calls


def test_b13_update_step_pinned():
    elite_values = jnp.array([1.0, 2.0, 4.0])
    elite_actions = jnp.array([[0.0, 0.5, 1.0], [-1.0, 0.0, 0.2]])[:, :, None]  # [H=2, E=3, A=1]
    score, mean, std = mppi_update(elite_values, elite_actions, 0.5, 0.05, 2.0)
    np.testing.assert_allclose(score, [0.14024438, 0.2312239, 0.6285317], rtol=1e-6)
    np.testing.assert_allclose(mean[:, 0], [0.74414366, -0.01453803], rtol=1e-6)
    np.testing.assert_allclose(std[:, 0], [0.3641262, 0.4064164], rtol=1e-6)
    # The temperature multiplies: a hotter (larger) temperature sharpens the scores.
    sharper, _, _ = mppi_update(elite_values, elite_actions, 2.0, 0.05, 2.0)
    assert float(sharper[-1]) > float(score[-1])
    # The std is clipped to [min_std, max_std].
    _, _, clipped = mppi_update(elite_values, elite_actions, 0.5, 0.38, 0.4)
    np.testing.assert_allclose(clipped[:, 0], [0.38, 0.4], rtol=1e-6)


def test_b13_warm_start_shifts_only_the_mean():
    prev = jnp.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    mean, std = warm_start(prev, False, CFG)
    np.testing.assert_array_equal(mean[:-1], prev[1:])
    np.testing.assert_array_equal(mean[-1], 0.0)
    np.testing.assert_array_equal(std, 2.0)
    mean, std = warm_start(prev, True, CFG)
    np.testing.assert_array_equal(mean, 0.0)
    np.testing.assert_array_equal(std, 2.0)


def test_b13_iterations_candidates_and_pi_columns():
    """First candidates are clip(shifted mean + 2 noise); pi columns are re-scored unchanged."""
    pi, prev = _inputs(0, SMALL)
    prev = prev * 3.0  # shifted means beyond [-1, 1]: the clip must act
    noise = _draw(jax.random.key(1), SMALL, A)
    _, calls = _recorded_plan(SMALL, prev, False, noise, pi)
    assert len(calls) == SMALL.iterations
    mean0, std0 = warm_start(prev, False, SMALL)
    first = np.clip(mean0[:, None] + std0[:, None] * noise.candidates[0], -1.0, 1.0)
    np.testing.assert_allclose(calls[0][0][:, SMALL.num_pi_trajs :], first, rtol=1e-6)
    for i, (actions, key) in enumerate(calls):
        assert actions.shape == (SMALL.horizon, SMALL.num_samples, A)
        np.testing.assert_array_equal(actions[:, : SMALL.num_pi_trajs], pi)
        assert actions.min() >= -1.0 and actions.max() <= 1.0
        np.testing.assert_array_equal(key, jax.random.key_data(noise.value_keys[i]))
    # t0 ignores prev_mean.
    _, calls = _recorded_plan(SMALL, prev, True, noise, pi)
    first = np.clip(2.0 * noise.candidates[0], -1.0, 1.0)
    np.testing.assert_allclose(calls[0][0][:, SMALL.num_pi_trajs :], first, rtol=1e-6)


def test_b13_eval_mode_removes_only_the_final_noise():
    pi, prev = _inputs(2)
    noise = _draw(jax.random.key(3), CFG, A)
    run = jax.jit(lambda ev: plan(_quadratic(TARGET), pi, prev, False, noise, CFG, ev))
    train, evaluate = run(False), run(True)
    for field in ("mean", "std", "score", "elite_actions", "elite_index"):
        np.testing.assert_array_equal(getattr(train, field), getattr(evaluate, field))
    chosen = train.elite_actions[0, train.elite_index]
    np.testing.assert_allclose(evaluate.action, jnp.clip(chosen, -1, 1), rtol=1e-6)
    noisy = jnp.clip(chosen + train.std[0] * noise.action, -1, 1)
    np.testing.assert_allclose(train.action, noisy, rtol=1e-6)
    assert not np.allclose(train.action, evaluate.action)


def test_b13_mean_converges_to_the_optimum():
    pi, _ = _inputs(4)
    noise = _draw(jax.random.key(5), CFG, A)
    out = jax.jit(lambda: plan(_quadratic(TARGET), pi, jnp.zeros((3, A)), True, noise, CFG))()
    start = float(jnp.abs(TARGET).max())
    assert float(jnp.abs(out.mean - TARGET).max()) < 0.1 * start
    assert float(jnp.abs(out.action - TARGET[0]).max()) < 0.5
    # The returned mean is the next warm start, not the executed action.
    assert not np.allclose(out.mean[0], out.action)


def test_b13_jit_vmap_over_envs_equals_loop():
    envs = 3
    rng = np.random.default_rng(6)
    targets = jnp.asarray(rng.uniform(-0.8, 0.8, size=(envs, 3, A)), jnp.float32)
    pis = jnp.stack([_inputs(10 + e)[0] for e in range(envs)])
    prevs = jnp.stack([_inputs(10 + e)[1] for e in range(envs)])
    t0 = jnp.array([True, False, False])
    noises = jax.jit(jax.vmap(lambda k: draw_plan_noise(k, CFG, A)))(
        jax.random.split(jax.random.key(7), envs)
    )

    def plan_env(target, pi, prev, first, noise):
        return plan(_quadratic(target), pi, prev, first, noise, CFG)

    batched = jax.jit(jax.vmap(plan_env))(targets, pis, prevs, t0, noises)
    single = jax.jit(plan_env)
    for e in range(envs):
        one = single(targets[e], pis[e], prevs[e], t0[e], jax.tree.map(lambda x: x[e], noises))
        for field in ("action", "mean", "std", "score"):
            np.testing.assert_allclose(
                getattr(batched, field)[e], getattr(one, field), rtol=1e-6, atol=1e-6
            )
        assert int(batched.elite_index[e]) == int(one.elite_index)


def test_b13_sample_elite_matches_numpy_choice():
    """sample_elite(u, p) with u = RandomState(s).random_sample() is RandomState(s).choice(E, p=p)."""
    rng = np.random.default_rng(8)
    draw = jax.jit(jax.vmap(sample_elite))
    for size in (3, 64):
        logits = rng.normal(size=(200, size)) * 2
        scores = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        us = np.array([np.random.RandomState(s).random_sample() for s in range(200)])
        ours = np.asarray(draw(jnp.asarray(us, jnp.float32), jnp.asarray(scores, jnp.float32)))
        theirs = [np.random.RandomState(s).choice(size, p=scores[s]) for s in range(200)]
        np.testing.assert_array_equal(ours, theirs)
    # Zero-probability entries are never drawn; u near 1 gives the last positive entry.
    p = jnp.array([0.0, 0.5, 0.0, 0.5, 0.0])
    assert int(sample_elite(jnp.float32(0.0), p)) == 1
    assert int(sample_elite(jnp.float32(0.999), p)) == 3


def test_b13_large_action_heuristic_and_bad_inputs():
    noise = _draw(jax.random.key(9), SMALL, 20)
    assert noise.candidates.shape == (8, 3, SMALL.num_candidates, 20)
    assert noise.value_keys.shape == (8,) and noise.action.shape == (20,)
    pi, prev = _inputs(11, SMALL)
    with pytest.raises(ValueError, match="draw_plan_noise"):
        plan(_quadratic(TARGET), pi, prev, False, noise, SMALL)
    with pytest.raises(ValueError, match="pi_actions"):
        plan(_quadratic(TARGET), pi[:, :2], prev, False, noise, SMALL)


def test_b13_nan_values_count_as_zero():
    """V = nan_to_num(V): a NaN candidate scores 0, it does not poison the refit."""
    pi, prev = _inputs(12, SMALL)
    noise = _draw(jax.random.key(13), SMALL, A)

    def value_fn(actions, key):
        v = _quadratic(TARGET)(actions, key) - 10.0
        return v.at[0].set(jnp.nan)  # a pi trajectory: finite sequences all score below 0

    out = jax.jit(lambda: plan(value_fn, pi, prev, False, noise, SMALL))()
    assert np.all(np.isfinite(out.mean)) and np.all(np.isfinite(out.std))
    np.testing.assert_array_equal(out.elite_actions[:, 0], pi[:, 0])  # the best (0) elite
