"""Tests of ajax.modules.pid_actor (spec 002, section ajax.modules.pid_actor)."""

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.modules.pid_actor import (
    PIDActor,
    PIDLaw,
    PIDPolicy,
    check_pid_actor,
    pid_gains,
)
from ajax.networks.distributions import squash

try:
    from ajax.environments.utils import agent_action_to_env
except ImportError:  # written by another engineer; the affine map the spec documents

    def agent_action_to_env(action, low, high):
        return (high + low) / 2 + (high - low) / 2 * action


N_ERRORS, ACTION_DIM = 2, 3
# Observation: [e1, e2, I1, I2, D1, D2, extra, extra]; the extras must not enter the law.
OBS = np.array(
    [[0.5, -1.0, 2.0, 0.25, -0.3, 0.8, 9.0, -7.0], [1.5, 0.2, -0.4, 1.0, 0.0, -2.0, 3.0, 4.0]],
    np.float32,
)
GAINS = np.arange(3 * ACTION_DIM * N_ERRORS, dtype=np.float32).reshape(3, ACTION_DIM, N_ERRORS)
GAINS = (GAINS - 8.0) / 4.0  # mixed signs, distinct entries


def init_actor(policy, obs=OBS, key=0, **kwargs):
    actor = PIDActor(policy, ACTION_DIM, **kwargs)
    return actor, actor.init(jax.random.key(key), jnp.asarray(obs))


def with_fixed_gains(params, gains):
    p = params["params"]
    return {"params": {**p, "law": {"gains": jnp.asarray(gains)}}}


def test_pid_law_on_hand_inputs():
    law = PIDLaw(PIDPolicy(n_errors=N_ERRORS), ACTION_DIM)
    params = {"params": {"gains": jnp.asarray(GAINS)}}
    u = law.apply(params, jnp.asarray(OBS))
    expected = np.zeros((2, ACTION_DIM))
    for b in range(2):
        e, i, d = OBS[b, 0:2], OBS[b, 2:4], OBS[b, 4:6]
        for a in range(ACTION_DIM):
            for j in range(N_ERRORS):
                expected[b, a] += GAINS[0, a, j] * e[j] + GAINS[1, a, j] * i[j]
                expected[b, a] += GAINS[2, a, j] * d[j]
    np.testing.assert_allclose(u, expected, rtol=1e-6, atol=1e-6)
    gains = law.apply(params, jnp.asarray(OBS), method="gains")
    assert gains.shape == (2, 3, ACTION_DIM, N_ERRORS)
    np.testing.assert_array_equal(gains[1], GAINS)


def test_pid_law_fixed_gains_are_the_only_parameter():
    law = PIDLaw(PIDPolicy(n_errors=N_ERRORS), ACTION_DIM)
    params = law.init(jax.random.key(0), jnp.asarray(OBS))
    assert jax.tree.map(jnp.shape, params) == {"params": {"gains": (3, ACTION_DIM, N_ERRORS)}}
    np.testing.assert_array_equal(params["params"]["gains"], 0.0)


@pytest.mark.parametrize(
    "policy",
    [
        PIDPolicy(n_errors=N_ERRORS),
        PIDPolicy(n_errors=N_ERRORS, gains="observation"),
        PIDPolicy(n_errors=N_ERRORS, gains="observation", architecture=("16", "relu")),
    ],
)
def test_pid_actor_zero_gains_command_box_centre(policy):
    actor, params = init_actor(policy)
    obs = jnp.asarray(OBS) * 3.0  # any observation: the gains start at zero
    np.testing.assert_array_equal(actor.apply(params, obs, method="gains"), 0.0)
    pi = actor.apply(params, obs)
    low, high = np.array([0.0, -2.0, -1.0]), np.array([4.0, 1.0, 1.0])
    env_action = agent_action_to_env(squash(pi).mean(), low, high)
    np.testing.assert_allclose(env_action, np.broadcast_to((high + low) / 2, (2, 3)), atol=1e-7)


def test_pid_actor_distribution_and_log_std():
    actor, params = init_actor(PIDPolicy(n_errors=N_ERRORS), log_std_init=-0.5)
    params = with_fixed_gains(params, GAINS)
    pi = actor.apply(params, jnp.asarray(OBS))
    assert isinstance(pi, distrax.MultivariateNormalDiag)
    law = PIDLaw(PIDPolicy(n_errors=N_ERRORS), ACTION_DIM)
    u = law.apply({"params": {"gains": jnp.asarray(GAINS)}}, jnp.asarray(OBS))
    np.testing.assert_allclose(pi.mean(), u, rtol=1e-6)
    np.testing.assert_allclose(pi.stddev(), np.full((2, 3), np.exp(-0.5)), rtol=1e-6)
    assert params["params"]["log_std"].shape == (ACTION_DIM,)  # state-independent


def test_pid_actor_log_std_clipped_to_bounds():
    actor, params = init_actor(PIDPolicy(), log_std_init=-10.0, log_std_bounds=(-5.0, 2.0))
    pi = actor.apply(params, jnp.asarray(OBS))
    np.testing.assert_allclose(pi.stddev(), np.full((2, 3), np.exp(-5.0)), rtol=1e-6)
    with pytest.raises(ValueError, match="log_std_bounds"):
        init_actor(PIDPolicy(), log_std_bounds=(1.0, -1.0))


def test_pid_gains_reads_fixed_gains_with_seed_axis():
    policy = PIDPolicy(n_errors=N_ERRORS)
    actor = PIDActor(policy, ACTION_DIM)
    params = jax.vmap(lambda k: actor.init(k, jnp.asarray(OBS)))(
        jax.random.split(jax.random.key(0), 3)
    )
    per_seed = np.stack([GAINS, -GAINS, 2 * GAINS])  # (3 seeds, 3 terms, A, n)
    params = with_fixed_gains(params, per_seed)
    gains = pid_gains(params)
    assert set(gains) == {"kp", "ki", "kd"}
    for k, name in enumerate(("kp", "ki", "kd")):
        assert gains[name].shape == (3, ACTION_DIM, N_ERRORS)
        np.testing.assert_array_equal(gains[name], per_seed[:, k])
    # the same without the "params" level, and as the actor itself applies them
    np.testing.assert_array_equal(pid_gains(params["params"])["ki"], per_seed[:, 1])
    applied = jax.vmap(lambda p: actor.apply(p, jnp.asarray(OBS[0]), method="gains"))(params)
    np.testing.assert_array_equal(applied[:, 2], gains["kd"])


def test_pid_gains_refuses_observation_gains():
    _, params = init_actor(PIDPolicy(n_errors=N_ERRORS, gains="observation"))
    with pytest.raises(ValueError, match='method="gains"'):
        pid_gains(params)
    with pytest.raises(ValueError, match="one PIDActor"):
        pid_gains({"params": {"Dense_0": {"kernel": jnp.zeros((2, 2))}}})


def test_check_pid_actor_refusals():
    check_pid_actor(continuous=True, memory=None)
    with pytest.raises(ValueError, match="discrete"):
        check_pid_actor(continuous=False, memory=None)
    with pytest.raises(ValueError, match="memory"):
        check_pid_actor(continuous=True, memory={"kind": "gru"})


@pytest.mark.parametrize("architecture", [(), ("8", "relu")])
def test_pid_actor_observation_gains_constant_network_is_fixed(architecture):
    """A gain network whose last layer ignores its input (zero kernel) and whose bias holds the
    gains is the fixed-gain policy with those gains."""
    obs_policy = PIDPolicy(n_errors=N_ERRORS, gains="observation", architecture=architecture)
    actor, params = init_actor(obs_policy, key=1)
    head = params["params"]["law"]["gain_head"]
    head = {"kernel": jnp.zeros_like(head["kernel"]), "bias": jnp.asarray(GAINS.reshape(-1))}
    params = {"params": {**params["params"], "law": {**params["params"]["law"], "gain_head": head}}}
    fixed_actor, fixed_params = init_actor(PIDPolicy(n_errors=N_ERRORS))
    fixed_params = with_fixed_gains(fixed_params, GAINS)
    obs = jax.random.normal(jax.random.key(5), (6, OBS.shape[1]))
    np.testing.assert_allclose(
        actor.apply(params, obs).mean(), fixed_actor.apply(fixed_params, obs).mean(), rtol=1e-6
    )
    np.testing.assert_allclose(
        actor.apply(params, obs, method="gains"), np.broadcast_to(GAINS, (6, *GAINS.shape))
    )


def test_pid_actor_observation_gains_depend_on_observation():
    policy = PIDPolicy(n_errors=N_ERRORS, gains="observation", architecture=("8", "tanh"))
    actor, params = init_actor(policy)
    head = params["params"]["law"]["gain_head"]
    key = jax.random.key(2)
    head = {**head, "kernel": jax.random.normal(key, head["kernel"].shape)}
    params = {"params": {**params["params"], "law": {**params["params"]["law"], "gain_head": head}}}
    gains = actor.apply(params, jnp.asarray(OBS), method="gains")
    assert gains.shape == (2, 3, ACTION_DIM, N_ERRORS)
    assert not np.allclose(gains[0], gains[1])


def test_pid_actor_gains_get_gradients():
    actor, params = init_actor(PIDPolicy(n_errors=N_ERRORS))
    grads = jax.grad(lambda p: actor.apply(p, jnp.asarray(OBS)).mean().sum())(params)
    # d(sum u)/dK[k, a, j] = sum_b term_k_j(b): nonzero for every gain here
    terms = OBS[:, :6].reshape(2, 3, N_ERRORS).sum(0)
    np.testing.assert_allclose(
        grads["params"]["law"]["gains"], np.broadcast_to(terms[:, None, :], GAINS.shape), rtol=1e-6
    )


def test_pid_policy_validation():
    assert hash(PIDPolicy(gains="observation", architecture=["8", "relu"])) is not None
    assert PIDPolicy(gains="observation", architecture=["8"]).architecture == ("8",)
    with pytest.raises(ValueError, match="gains"):
        PIDPolicy(gains="scheduled")
    with pytest.raises(ValueError, match="n_errors"):
        PIDPolicy(n_errors=0)
    with pytest.raises(ValueError, match="n_errors = 1.5 is invalid: it must be an integer"):
        PIDPolicy(n_errors=1.5)
    with pytest.raises(ValueError, match="architecture = .* is invalid: it must be empty"):
        PIDPolicy(gains="fixed", architecture=("8",))
    with pytest.raises(ValueError, match="sequence"):
        PIDPolicy(gains="observation", architecture="8")


def test_pid_actor_refuses_short_observation():
    with pytest.raises(ValueError, match="first 6 observation entries"):
        init_actor(PIDPolicy(n_errors=N_ERRORS), obs=np.zeros((2, 5), np.float32))
