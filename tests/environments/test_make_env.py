"""make_env: id resolution, errors, options, listing, and the gymnax family's interface."""

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.environments import (
    FAMILIES,
    Box,
    Discrete,
    EnvSpec,
    TimeStep,
    format_env_listing,
    is_jax_env,
    list_envs,
    make_env,
    resolve_env_id,
)

KEY = jax.random.key(0)


@pytest.mark.parametrize(
    "env_id, obs_dim, space",
    [("Pendulum-v1", 3, Box((-2.0,), (2.0,))), ("CartPole-v1", 4, Discrete(2))],
)
def test_gymnax_reset_step_shapes_and_dtypes(env_id, obs_dim, space, same_avals):
    env = make_env(env_id)
    assert is_jax_env(env) and env.is_jax
    spec = env.spec
    assert isinstance(spec, EnvSpec) and spec.family == "gymnax"
    assert spec.observation_shape == (obs_dim,) and spec.action_space == space
    assert spec.n_envs is None
    ts = jax.jit(env.reset)(KEY)
    assert isinstance(ts, TimeStep)
    action = jnp.zeros(space.shape, jnp.int32 if spec.discrete else jnp.float32)
    nxt = jax.jit(env.step)(KEY, ts.state, action)
    for t in (ts, nxt):
        assert t.obs.shape == (obs_dim,) and t.obs.dtype == jnp.float32
        assert t.final_obs.shape == (obs_dim,) and t.final_obs.dtype == jnp.float32
        assert t.reward.shape == () and t.reward.dtype == jnp.float32
        assert t.terminated.dtype == jnp.bool_ and t.truncated.dtype == jnp.bool_
    # Same keys and types after reset and step: a scan carry, and no second jit trace.
    same_avals(ts, nxt)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_gymnax_trajectory_equals_gymnax_step(env_id):
    """Ajax's time limit and auto-reset reproduce gymnax 1.0.1's own ``step`` exactly (same key
    split), except that a terminal state on the last step is only ``terminated`` here."""
    import gymnax

    genv, params = gymnax.make(env_id)
    env = make_env(env_id, episode_stats=False)
    steps = 230 if env_id == "Pendulum-v1" else 120
    if env_id == "Pendulum-v1":
        actions = jax.random.uniform(KEY, (steps, 1), minval=-2, maxval=2)
    else:
        actions = jax.random.bernoulli(KEY, 0.5, (steps,)).astype(jnp.int32)
    keys = jax.random.split(jax.random.key(1), steps)

    @jax.jit
    def both():
        ts = env.reset(KEY)
        _, gstate = genv.reset(KEY, params)

        def body(carry, xs):
            ts, gstate = carry
            k, a = xs
            ts = env.step(k, ts.state, a)
            gobs, gstate, r, term, trunc, info = genv.step(k, gstate, a, params)
            ref = (gobs, r, term, trunc & ~term, info["final_observation"])
            return (ts, gstate), (
                (ts.obs, ts.reward, ts.terminated, ts.truncated, ts.final_obs),
                ref,
            )

        return jax.lax.scan(body, (ts, gstate), (keys, actions))[1]

    ours, ref = both()
    for name, a, b in zip(
        ("obs", "reward", "terminated", "truncated", "final_obs"), ours, ref, strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=name)
    assert np.asarray(ours[2] | ours[3]).any()  # the comparison crossed an auto-reset


def test_unknown_id_suggests_closest_and_lists_families():
    with pytest.raises(ValueError) as error:
        make_env("Pendulm-v1")
    message = str(error.value)
    assert message.startswith("unknown env id 'Pendulm-v1'; did you mean 'Pendulum-v1'")
    for family in ("gymnax", "playground", "brax:", "gymnasium:", "dmc:"):
        assert family in message
    with pytest.raises(ValueError, match="did you mean 'brax:inverted_pendulum'"):
        make_env("brax:invertedpendulum")
    with pytest.raises(ValueError, match="did you mean 'dmc:cartpole-swingup'"):
        make_env("dmc:cartpole-swingupp")
    with pytest.raises(ValueError, match="unknown env id 'mujoco:Ant'"):
        make_env("mujoco:Ant")


def test_playground_reacher_and_locomotion_fail_fast_without_clone(monkeypatch):
    from mujoco_playground._src import mjx_env

    def no_clone(*args, **kwargs):
        raise AssertionError("tried to fetch mujoco_menagerie")

    monkeypatch.setattr(mjx_env, "ensure_menagerie_exists", no_clone)
    monkeypatch.setattr(mjx_env, "_clone_with_progress", no_clone)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="ReacherEasy.*dmc:reacher-easy"):
        make_env("ReacherEasy")
    with pytest.raises(ValueError, match="ReacherHard"):
        make_env("playground:ReacherHard")
    with pytest.raises(ValueError, match="mujoco_menagerie.*no network"):
        make_env("Go1JoystickFlatTerrain")
    with pytest.raises(ValueError, match="mujoco_menagerie"):
        make_env("PandaPickCube")
    assert time.perf_counter() - start < 10.0
    assert not mjx_env.MENAGERIE_PATH.exists()


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown make_env options \\['n_env'\\]"):
        make_env("Pendulum-v1", n_env=4)
    with pytest.raises(ValueError, match="brax option"):
        make_env("Pendulum-v1", backend="spring")
    with pytest.raises(ValueError, match="playground option"):
        make_env("Pendulum-v1", config_overrides={"impl": "jax"})
    with pytest.raises(ValueError, match="n_envs"):
        make_env("Pendulum-v1", n_envs=0)
    with pytest.raises(ValueError, match="max_episode_steps"):
        make_env("Pendulum-v1", max_episode_steps=0)
    assert make_env("Pendulum-v1", max_episode_steps=50).spec.max_episode_steps == 50
    assert resolve_env_id("gymnax:CartPole-v1") == ("gymnax", "CartPole-v1")
    assert resolve_env_id("WalkerWalk") == ("playground", "WalkerWalk")
    assert resolve_env_id("dmc:ball_in_cup-catch") == ("dmc", "ball_in_cup-catch")


def test_list_envs_reports_families_ids_and_blocked():
    infos = list_envs()
    assert tuple(infos) == FAMILIES
    assert all(info["available"] and not info["reason"] for info in infos.values())
    assert {"Pendulum-v1", "CartPole-v1", "MountainCarContinuous-v0"} <= set(infos["gymnax"]["ids"])
    assert {"CartpoleSwingup", "WalkerWalk", "CheetahRun"} <= set(infos["playground"]["ids"])
    assert "brax:inverted_pendulum" in infos["brax"]["ids"]
    assert "gymnasium:Pendulum-v1" in infos["gymnasium"]["ids"]
    assert "dmc:cartpole-swingup" in infos["dmc"]["ids"]
    assert [info["jax"] for info in infos.values()] == [True, True, True, True, False, False, False]
    assert "atari:Pong" in infos["atari"]["ids"]
    assert "craftax:Craftax-Classic-Pixels-v1" in infos["craftax"]["images"]
    blocked = infos["playground"]["blocked"]
    assert {"ReacherEasy", "ReacherHard", "Go1JoystickFlatTerrain"} <= set(blocked)
    assert "CartpoleSwingup" not in blocked
    images = infos["gymnax"]["images"]
    assert {"Breakout-MinAtar", "SpaceInvaders-MinAtar"} <= set(images)
    assert "Pendulum-v1" not in images and "dreamerv3" in images["Breakout-MinAtar"]
    assert "Breakout-MinAtar  (image obs: 10 x 10" in format_env_listing(infos)
    assert "--pixels" in infos["dmc"]["note"] and not infos["gymnax"]["note"]
    text = format_env_listing(infos, max_ids=2)
    assert "gymnax [jax] available" in text and "dmc [host] available" in text
    assert "more" in text
    assert len(infos["dmc"]["ids"]) > 20
