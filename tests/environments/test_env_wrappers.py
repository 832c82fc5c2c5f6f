"""Auto-reset, time limits and the JAX wrappers, on scripted trajectories and gymnax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.environments import (
    ActionRepeat,
    Box,
    Discrete,
    EpisodeStatistics,
    NormalizeObservation,
    RescaleAction,
    VmapEnv,
    agent_action_to_env,
    env_action_to_agent,
    make_env,
    obs_moments,
)

KEY = jax.random.key(0)


def rollout(env, actions, key=KEY):
    """Reset, then one jitted scan over ``actions``; returns the stacked TimeSteps."""

    @jax.jit
    def run(key):
        ts = env.reset(key)
        keys = jax.random.split(key, len(actions))

        def body(ts, xs):
            k, a = xs
            ts = env.step(k, ts.state, a)
            return ts, ts

        return jax.lax.scan(body, ts, (keys, actions))[1]

    return run(key)


def test_autoreset_keeps_final_obs(make_scripted):
    obs = np.arange(6, dtype=np.float32)[:, None] * 10  # obs_t = 10 t
    env = make_scripted(obs, terminal=[0, 0, 0, 1, 0, 0])
    traj = rollout(env, jnp.zeros((4, 1)))
    np.testing.assert_array_equal(traj.terminated, [False, False, True, False])
    np.testing.assert_array_equal(traj.truncated, [False] * 4)
    # Step 3 ends the episode: final_obs is the true last obs, obs the reset one.
    np.testing.assert_array_equal(traj.final_obs[:, 0], [10, 20, 30, 10])
    np.testing.assert_array_equal(traj.obs[:, 0], [10, 20, 0, 10])
    np.testing.assert_array_equal(traj.state.t, [1, 2, 0, 1])
    np.testing.assert_array_equal(traj.reward, [1, 2, 3, 1])


def test_time_limit_is_truncation_and_terminal_wins(make_scripted):
    obs = np.arange(6, dtype=np.float32)[:, None]
    env = make_scripted(obs, terminal=[0, 0, 0, 0, 0, 0], max_steps=2)
    traj = rollout(env, jnp.zeros((4, 1)))
    np.testing.assert_array_equal(traj.truncated, [False, True, False, True])
    assert not traj.terminated.any()
    # A terminal state on the last allowed step is terminated, not truncated.
    env = make_scripted(obs, terminal=[0, 0, 1, 0, 0, 0], max_steps=2)
    traj = rollout(env, jnp.zeros((2, 1)))
    np.testing.assert_array_equal(traj.terminated, [False, True])
    np.testing.assert_array_equal(traj.truncated, [False, False])


def test_cartpole_terminates_pendulum_truncates_at_200():
    cartpole = make_env("CartPole-v1")
    traj = rollout(cartpole, jnp.zeros(60, jnp.int32))  # always push left: falls fast
    assert traj.terminated.any() and not traj.truncated.any()
    ended = np.flatnonzero(traj.terminated)
    final = np.asarray(traj.final_obs[ended])
    assert np.all((np.abs(final[:, 0]) > 2.4) | (np.abs(final[:, 2]) > 12 * 2 * np.pi / 360))
    assert not np.allclose(traj.final_obs[ended], traj.obs[ended])
    ongoing = np.flatnonzero(~traj.terminated)
    np.testing.assert_array_equal(traj.final_obs[ongoing], traj.obs[ongoing])

    pendulum = make_env("Pendulum-v1")
    assert pendulum.spec.max_episode_steps == 200
    traj = rollout(pendulum, jnp.zeros((201, 1)))
    np.testing.assert_array_equal(np.flatnonzero(traj.truncated), [199])
    assert not traj.terminated.any()
    assert traj.info["episode_length"][199] == 200 and traj.info["episode_done"][199]


def test_batched_sim_env_equals_vmap_env():
    """make_env batches the base env itself (resets only when some env is done): same draws
    and same trajectory as VmapEnv over the unbatched env, resets included."""
    single = make_env("Pendulum-v1", max_episode_steps=4, episode_stats=False)
    vmapped = VmapEnv(single, 3)
    native = make_env("Pendulum-v1", n_envs=3, max_episode_steps=4, episode_stats=False)
    assert native.spec == vmapped.spec and native.spec.n_envs == 3
    actions = jax.random.uniform(KEY, (9, 3, 1), minval=-2, maxval=2)
    a, b = rollout(native, actions), rollout(vmapped, actions)
    assert a.obs.shape == (9, 3, 3) and a.reward.shape == (9, 3)
    assert a.truncated[3].all() and a.truncated[7].all()
    np.testing.assert_allclose(a.obs, b.obs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.final_obs, b.final_obs, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a.truncated, b.truncated)
    np.testing.assert_array_equal(a.state.t, b.state.t)
    # VmapEnv gives env i the i-th of split(key, 3).
    resets = [single.reset(k).obs for k in jax.random.split(KEY, 3)]
    np.testing.assert_allclose(jax.jit(vmapped.reset)(KEY).obs, np.stack(resets), rtol=1e-6)
    with pytest.raises(ValueError, match="already vectorised"):
        VmapEnv(vmapped, 2)


def test_rescale_action_bounds(make_scripted):
    env = make_scripted(np.zeros((5, 1)), low=0.0, high=4.0)
    wrapped = RescaleAction(env)
    assert wrapped.spec.action_space == Box((-1.0,), (1.0,))
    traj = rollout(wrapped, jnp.array([[-1.0], [0.0], [1.0], [3.0]]))
    # The scripted obs is the env-side action: c + h * clip(a) with c = 2, h = 2.
    np.testing.assert_allclose(traj.final_obs[:, 0], [0.0, 2.0, 4.0, 4.0])
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 10.0])
    a = np.array([0.5, -0.5])
    np.testing.assert_allclose(agent_action_to_env(a, low, high), [1.0, 2.5])
    np.testing.assert_allclose(env_action_to_agent(agent_action_to_env(a, low, high), low, high), a)
    with pytest.raises(ValueError, match="Box"):
        RescaleAction(make_env("CartPole-v1"))
    unbounded = make_scripted(np.zeros((2, 1)), low=-np.inf, high=np.inf)
    with pytest.raises(ValueError, match="finite"):
        RescaleAction(unbounded)


def test_action_repeat_sums_rewards_and_stops_at_done(make_scripted):
    obs = np.arange(8, dtype=np.float32)[:, None]
    env = make_scripted(obs, terminal=[0, 0, 0, 0, 0, 1, 0, 0], max_steps=7)
    repeated = ActionRepeat(env, 3)
    assert repeated.spec.max_episode_steps == 3 and repeated.spec.dt == 1.5
    traj = rollout(repeated, jnp.zeros((3, 1)))
    # Steps 1-3 (rewards 1+2+3), then 4-5 ends at the terminal step 5: 4+5, no reward
    # from the reset episode; then a fresh episode's steps 1-3.
    np.testing.assert_array_equal(traj.reward, [6.0, 9.0, 6.0])
    np.testing.assert_array_equal(traj.terminated, [False, True, False])
    np.testing.assert_array_equal(traj.final_obs[:, 0], [3, 5, 3])
    np.testing.assert_array_equal(traj.obs[:, 0], [3, 0, 3])
    with pytest.raises(ValueError, match="repeat"):
        ActionRepeat(env, 0)


def test_episode_statistics(make_scripted):
    obs = np.zeros((6, 1), np.float32)
    env = EpisodeStatistics(
        make_scripted(obs, rewards=[0, 1, 2, 3, 4, 5], terminal=[0, 0, 0, 1, 0, 0])
    )
    ts = env.reset(KEY)
    assert ts.info["episode_return"] == 0 and not ts.info["episode_done"]
    traj = rollout(env, jnp.zeros((5, 1)))
    np.testing.assert_array_equal(traj.info["episode_done"], [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(traj.info["episode_return"], [0, 0, 6, 6, 6])
    np.testing.assert_array_equal(traj.info["episode_length"], [0, 0, 3, 3, 3])
    np.testing.assert_array_equal(traj.state.episode_return, [1, 3, 0, 1, 3])


def test_normalize_observation_statistics_raw_prefix_and_freeze(make_scripted):
    rng = np.random.default_rng(0)
    obs = rng.normal(3.0, 2.0, (6, 2)).astype(np.float32)
    inner = VmapEnv(make_scripted(obs), 2)
    env = NormalizeObservation(inner)
    traj = rollout(env, jnp.zeros((4, 2, 1)))
    seen = np.concatenate([obs[:1], obs[:1], np.repeat(obs[1:5], 2, axis=0)])  # (10, 2)
    count = 1e-4 + len(seen)
    mean = seen.sum(0) / count
    var = (1e-4 * (1 + mean**2) + ((seen - mean) ** 2).sum(0)) / count
    moments = obs_moments(traj.state)
    np.testing.assert_allclose(moments.mean[-1], mean, rtol=1e-5)
    np.testing.assert_allclose(moments.var[-1], var, rtol=1e-5)
    np.testing.assert_allclose(moments.count[-1], count, rtol=1e-6)
    expected = (obs[4] - mean) / np.sqrt(var + 1e-8)
    np.testing.assert_allclose(traj.obs[-1], np.stack([expected, expected]), rtol=1e-4)
    # Leading raw entries stay in env units.
    raw = NormalizeObservation(VmapEnv(make_scripted(obs), 2))
    raw.spec = raw.spec.replace(raw_obs_prefix=1)
    traj_raw = rollout(raw, jnp.zeros((4, 2, 1)))
    np.testing.assert_allclose(traj_raw.obs[-1, :, 0], obs[4, 0])
    np.testing.assert_allclose(traj_raw.obs[-1, :, 1], traj.obs[-1, :, 1], rtol=1e-6)
    # Frozen for evaluation: given moments, never updated.
    frozen = jax.jit(env.reset_frozen)(KEY, jax.tree.map(lambda x: x[-1], moments))
    nxt = jax.jit(env.step)(KEY, frozen.state, jnp.zeros((2, 1)))
    np.testing.assert_array_equal(obs_moments(nxt.state).mean, moments.mean[-1])
    np.testing.assert_allclose(nxt.obs[0], (obs[1] - mean) / np.sqrt(var + 1e-8), rtol=1e-4)


def test_make_env_wrapper_stack_jits_and_vmaps():
    env = make_env(
        "MountainCarContinuous-v0",
        n_envs=4,
        action_repeat=2,
        rescale_actions=True,
        normalize_obs=True,
    )
    assert env.spec.n_envs == 4 and env.spec.max_episode_steps == 500
    traj = rollout(env, jnp.ones((3, 4, 1)))
    assert traj.obs.shape == (3, 4, 2) and traj.obs.dtype == jnp.float32
    assert traj.reward.shape == (3, 4) and traj.terminated.dtype == jnp.bool_
    assert set(traj.info) == {"episode_return", "episode_length", "episode_done"}
    assert make_env("Acrobot-v1").spec.action_space == Discrete(3)
