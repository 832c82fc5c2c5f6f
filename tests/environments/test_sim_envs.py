"""The MJX families: playground's control suite and brax, through the common interface.

Compiling MJX/brax physics on CPU takes tens of CPU seconds, so the non-slow tests check
shapes and dtypes by tracing (``jax.eval_shape``: the whole adapter and wrapper stack, no
compilation); the slow ones compile and run.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.environments import Box, make_env

KEY = jax.random.key(0)


def check_traced_shapes(env, obs_dim, n_envs, same_avals):
    ts = jax.eval_shape(env.reset, KEY)
    action = jax.ShapeDtypeStruct((n_envs, *env.spec.action_space.shape), jnp.float32)
    nxt = jax.eval_shape(env.step, KEY, ts.state, action)
    for t in (ts, nxt):
        assert t.obs.shape == (n_envs, obs_dim) and t.obs.dtype == jnp.float32
        assert t.final_obs.shape == (n_envs, obs_dim) and t.final_obs.dtype == jnp.float32
        assert t.reward.shape == (n_envs,) and t.reward.dtype == jnp.float32
        assert t.terminated.dtype == jnp.bool_ and t.truncated.dtype == jnp.bool_
    same_avals(ts, nxt)  # brax's and gymnax's weak types differ between reset and step


def test_playground_cartpole_swingup_traced_smoke(same_avals):
    env = make_env("CartpoleSwingup", n_envs=2)
    spec = env.spec
    assert spec.family == "playground" and spec.observation_shape == (5,)
    assert spec.action_space == Box((-1.0,), (1.0,))
    assert spec.max_episode_steps == 1000 and spec.dt == pytest.approx(0.01)
    check_traced_shapes(env, 5, 2, same_avals)


def test_brax_inverted_pendulum_traced_smoke(same_avals):
    env = make_env("brax:inverted_pendulum", n_envs=2)
    spec = env.spec
    assert spec.family == "brax" and spec.observation_shape == (4,)
    assert spec.action_space == Box((-1.0,), (1.0,)) and spec.max_episode_steps == 1000
    check_traced_shapes(env, 4, 2, same_avals)
    with pytest.raises(ValueError, match="backend"):
        make_env("brax:inverted_pendulum", backend="warp")


@pytest.mark.slow
def test_playground_cartpole_swingup_runs_and_truncates():
    env = make_env("CartpoleSwingup", n_envs=2, max_episode_steps=3, rescale_actions=True)
    ts = jax.jit(env.reset)(KEY)
    step = jax.jit(env.step)
    truncated = []
    for i in range(4):
        ts = step(jax.random.key(i), ts.state, jnp.full((2, 1), 0.5))
        truncated.append(np.asarray(ts.truncated))
        assert np.isfinite(ts.obs).all() and np.isfinite(ts.reward).all()
    np.testing.assert_array_equal(np.stack(truncated)[:, 0], [False, False, True, False])
    assert not np.asarray(ts.terminated).any()
    assert (ts.info["episode_length"] == 3).all()


@pytest.mark.slow
def test_brax_inverted_pendulum_terminates_and_resets():
    env = make_env("brax:inverted_pendulum", n_envs=2)

    @jax.jit
    def run(key):
        def body(ts, k):
            ts = env.step(k, ts.state, jnp.ones((2, 1)))
            return ts, ts

        return jax.lax.scan(body, env.reset(key), jax.random.split(key, 60))[1]

    traj = run(KEY)
    assert traj.terminated[:, 0].any() and not traj.truncated.any()
    t = int(np.flatnonzero(traj.terminated[:, 0])[0])
    assert abs(traj.final_obs[t, 0, 1]) > 0.2  # the pole angle left [-0.2, 0.2]
    assert abs(traj.obs[t, 0, 1]) < 0.02  # a fresh episode
