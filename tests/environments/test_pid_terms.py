"""PIDTermsWrapper (spec 002, ajax.modules.pid_actor, environment side) on hand-made data."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.environments import NormalizeObservation, PIDTermsWrapper, VmapEnv, make_env

KEY = jax.random.key(0)
# obs_t = [x_t, v_t]; the episode terminates on reaching row 3.
OBS = np.array([[0.0, 2.0], [0.5, 1.0], [0.8, -1.0], [1.2, 4.0], [9.0, 9.0]], np.float32)
TERMINAL = [0, 0, 0, 1, 0]


def run(env, n_steps, action=None):
    action = jnp.zeros((1,)) if action is None else action
    step = jax.jit(env.step)
    ts = jax.jit(env.reset)(KEY)
    out = [ts]
    for _ in range(n_steps):
        ts = step(KEY, ts.state, action)
        out.append(ts)
    return out


def test_pid_terms_hand_made_trajectory(make_scripted):
    env = PIDTermsWrapper(make_scripted(OBS, terminal=TERMINAL, dt=0.5), lambda o: 1.0 - o[0])
    assert env.n_errors == 1 and env.dt == 0.5
    assert env.spec.observation_shape == (5,) and env.spec.raw_obs_prefix == 3
    steps = run(env, 4)
    # e = 1 - x; I_t = I_{t-1} + e_t dt with I_0 = e_0 dt; D_t = (e_t - e_{t-1}) / dt, D_0 = 0.
    expected_terms = [
        [1.0, 0.5, 0.0],  # reset, x = 0
        [0.5, 0.75, -1.0],  # x = 0.5
        [0.2, 0.85, -0.6],  # x = 0.8
        [-0.2, 0.75, -0.8],  # x = 1.2: the terminal step, kept in final_obs
        [0.5, 0.75, -1.0],  # first step of the next episode: terms restarted
    ]
    finals = np.stack([ts.final_obs for ts in steps])
    np.testing.assert_allclose(finals[:, :3], expected_terms, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(finals[:, 3:], OBS[[0, 1, 2, 3, 1]], rtol=1e-6)
    # On the terminal step obs opens the next episode with fresh terms.
    np.testing.assert_allclose(steps[3].obs, [1.0, 0.5, 0.0, 0.0, 2.0], atol=1e-6)
    np.testing.assert_allclose(steps[3].state.integral, [0.5], atol=1e-6)
    for ts in steps[:3] + steps[4:]:
        np.testing.assert_array_equal(ts.obs, ts.final_obs)


def test_pid_terms_layout_with_two_errors(make_scripted):
    error_fn = lambda o: jnp.stack([1.0 - o[0], -o[1]])
    env = PIDTermsWrapper(make_scripted(OBS, terminal=TERMINAL), error_fn, dt=2.0)
    assert env.n_errors == 2 and env.spec.raw_obs_prefix == 6
    steps = run(env, 1)
    # [e (2), I (2), D (2), obs (2)]: x 0 -> 0.5, v 2 -> 1.
    np.testing.assert_allclose(steps[0].obs[:6], [1.0, -2.0, 2.0, -4.0, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(steps[1].obs[:6], [0.5, -1.0, 3.0, -6.0, -0.25, 0.5], atol=1e-6)


def test_pid_terms_stay_raw_under_normalisation(make_scripted):
    pid = PIDTermsWrapper(make_scripted(OBS, terminal=TERMINAL), lambda o: 1.0 - o[0])
    env = NormalizeObservation(VmapEnv(pid, 2))
    ts = run(env, 1, jnp.zeros((2, 1)))[-1]
    np.testing.assert_allclose(ts.obs[:, :3], [[0.5, 0.75, -1.0]] * 2, atol=1e-6)
    assert not np.allclose(ts.obs[:, 3:], OBS[1])  # the rest is normalised


def test_pid_terms_checks_and_make_env(make_scripted):
    with pytest.raises(ValueError, match="dt"):
        PIDTermsWrapper(make_scripted(OBS, dt=None), lambda o: o[0])
    # Batched inner env: the same terms per env as the unbatched wrapper computes.
    batched = PIDTermsWrapper(VmapEnv(make_scripted(OBS, terminal=TERMINAL), 2), lambda o: 1 - o[0])
    ts = run(batched, 3, jnp.zeros((2, 1)))[-1]
    np.testing.assert_allclose(ts.final_obs[:, :3], [[-0.2, 0.75, -0.8]] * 2, atol=1e-6)
    np.testing.assert_allclose(ts.obs[:, :3], [[1.0, 0.5, 0.0]] * 2, atol=1e-6)
    # Pendulum: track theta = 0 through sin(theta); the agent step is 2 x 0.05 s.
    env = make_env("Pendulum-v1", pid_error_fn=lambda o: -o[1], action_repeat=2, n_envs=3)
    assert env.spec.observation_shape == (6,) and env.spec.raw_obs_prefix == 3
    ts = jax.jit(env.reset)(KEY)
    np.testing.assert_allclose(ts.obs[:, 0], -ts.obs[:, 4], rtol=1e-6)
    np.testing.assert_allclose(ts.obs[:, 1], -ts.obs[:, 4] * 0.1, rtol=1e-6)
    with pytest.raises(ValueError, match="pid_error_fn"):
        make_env("Pendulum-v1", pid_dt=0.1)
