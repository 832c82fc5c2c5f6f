"""Tests of ajax.networks.networks (spec 002): building train states, recurrent networks,
reading values."""

from typing import NamedTuple

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.networks.net_helpers import (
    ARCH,
    ENV,
    KEY,
    OPT,
    leaves_equal,
    normal,
)

from ajax.modules.pid_actor import PIDActor, PIDPolicy
from ajax.networks.config import EnvSpaces, NetworkConfig
from ajax.networks.distributions import Squash
from ajax.networks.memory import MemoryConfig
from ajax.networks.networks import (
    Actor,
    Critic,
    MultiCritic,
    action_value,
    action_value_input,
    get_initialized_actor_critic,
    get_initialized_critic,
    in_critic_units,
    init_network_carry,
    init_network_state,
    phi_star_critic_state,
    predict_value,
    predict_value_sequence,
    predict_value_train,
    state_value,
)
from ajax.networks.train_state import ActionUnits, LoadedTrainState, ObsStats
from ajax.networks.utils import get_adam_tx

# --------------------------------------------------------------------------- building states


def test_get_initialized_actor_critic_sac_like(sac):
    actor, critic = sac
    obs = normal(6, 3)
    assert isinstance(jax.eval_shape(lambda: actor.apply_fn({"params": actor.params}, obs)), Squash)
    assert set(actor.params) == {"torso", "mean", "log_std"}  # Squashed adds no scope

    @jax.jit
    def q_values():
        pi = actor.apply_fn({"params": actor.params}, obs)
        return predict_value(critic, critic.params, action_value_input(obs, pi.sample(seed=KEY)))

    assert q_values().shape == (2, 6, 1)
    assert leaves_equal(critic.params, critic.target_params)
    assert actor.target_params is None and critic.hidden_state is None


def test_get_initialized_actor_critic_ppo_like(ppo):
    actor, critic = ppo
    np.testing.assert_array_equal(actor.params["log_std"], [0.0, 0.0])
    assert critic.target_params is None
    obs = jnp.ones((4, 3))
    pi = jax.eval_shape(lambda: actor.apply_fn({"params": actor.params}, obs))
    assert isinstance(pi, distrax.MultivariateNormalDiag)
    assert jax.eval_shape(lambda: predict_value(critic, critic.params, obs)).shape == (2, 4, 1)
    # max_timesteps: the learning rate decays linearly to 0 over 10 updates.
    step = jax.jit(lambda s: s.apply_gradients(jax.tree.map(jnp.ones_like, s.params)))
    state = critic
    for _ in range(10):
        state = step(state)
    assert not leaves_equal(state.params, critic.params)
    assert leaves_equal(step(state).params, state.params)
    net = NetworkConfig(actor_architecture=ARCH, critic_architecture=ARCH)
    with pytest.raises(ValueError, match="continuous"):
        get_initialized_actor_critic(KEY, ENV, OPT, OPT, net, continuous=False)


def test_get_initialized_actor_critic_discrete_and_extra_dims():
    env = EnvSpaces(obs_shape=(3,), action_dim=4, continuous=False)
    net = NetworkConfig(actor_architecture=ARCH, critic_architecture=ARCH)

    def pi_and_v():
        actor, critic = get_initialized_actor_critic(
            KEY, env, OPT, OPT, net, squash=True, num_critics=2, extra_obs_dim=2
        )
        obs = jnp.ones((1, 5))
        pi = actor.apply_fn({"params": actor.params}, obs)
        return pi, predict_value(critic, critic.params, obs)

    pi, v = jax.eval_shape(pi_and_v)
    assert isinstance(pi, distrax.Categorical)  # squash leaves a discrete policy alone
    assert pi.logits.shape == (1, 4) and v.shape == (2, 1, 1)


def test_get_initialized_actor_critic_pid_actor():
    policy = PIDPolicy(n_errors=1)
    net = NetworkConfig(actor_architecture=policy, critic_architecture=ARCH, log_std_init=-1.0)
    # The critic is dead code here: XLA drops its initialisation before compiling it.
    actor = jax.jit(
        lambda k: get_initialized_actor_critic(k, ENV, OPT, OPT, net, True, True, True, 2)[0]
    )(KEY)
    bare = jax.eval_shape(PIDActor(policy, 2).init, KEY, jnp.ones((1, 3)))
    assert jax.tree.structure(actor.params) == jax.tree.structure(bare["params"])
    np.testing.assert_array_equal(actor.params["law"]["gains"], 0.0)
    np.testing.assert_array_equal(actor.params["log_std"], [-1.0, -1.0])
    pi = jax.eval_shape(lambda: actor.apply_fn({"params": actor.params}, jnp.ones((2, 3))))
    assert isinstance(pi, Squash)
    with pytest.raises(ValueError, match="discrete"):
        get_initialized_actor_critic(
            KEY, EnvSpaces((3,), 2, False), OPT, OPT, net, continuous=False
        )
    unset = NetworkConfig(actor_architecture=policy, log_std_init=None)
    with pytest.raises(ValueError, match="log_std_init"):
        get_initialized_actor_critic(KEY, ENV, OPT, OPT, unset, continuous=True)


def test_get_initialized_critic_is_a_feedforward_q_ensemble():
    net = NetworkConfig(critic_architecture=ARCH, memory=MemoryConfig("gru", hidden_size=4))

    def critic_and_values():
        critic = get_initialized_critic(KEY, ENV, OPT, net, num_critics=2)
        return critic, predict_value(critic, critic.params, jnp.ones((2, 5)))

    critic, values = jax.eval_shape(critic_and_values)
    assert critic.hidden_state is None and "cell" not in critic.params["critic"]
    assert jax.tree.structure(critic.target_params) == jax.tree.structure(critic.params)
    assert values.shape == (2, 2, 1)


def test_init_network_carry_stacks_members():
    memory = MemoryConfig("gru", hidden_size=4)
    assert init_network_carry(Critic(ARCH), None, KEY, 3) is None
    (single,) = init_network_carry(Critic(ARCH, memory=memory), memory, KEY, 3)
    (stacked,) = init_network_carry(MultiCritic(Critic(ARCH, memory=memory), 5), memory, KEY, 3)
    assert single.shape == (3, 4) and stacked.shape == (5, 3, 4)


# --------------------------------------------------------------------------- recurrent


def test_recurrent_actor_critic_gru_sequence():
    memory = MemoryConfig("gru", hidden_size=4)
    net = NetworkConfig(actor_architecture=ARCH, critic_architecture=ARCH, memory=memory)
    env = EnvSpaces(obs_shape=(3,), action_dim=2, continuous=True, n_envs=2)
    T, B = 5, 2
    obs = normal(T, B, 3)
    resets = jnp.zeros((T, B), bool).at[3, 0].set(True)

    # Traced, not compiled (a recurrent ensemble's init is the slowest program here to
    # compile); the values below read parameters drawn by numpy.
    actor, critic = jax.eval_shape(
        lambda: get_initialized_actor_critic(
            KEY, env, OPT, OPT, net, continuous=True, action_value=True, squash=True, num_critics=2
        )
    )
    assert jax.tree.leaves(actor.hidden_state)[0].shape == (B, 4)
    assert jax.tree.leaves(critic.hidden_state)[0].shape == (2, B, 4)
    # The current action enters at the head, after the memory (query_dim).
    assert critic.params["critic"]["head"]["kernel"].shape == (2, 4 + 2, 1)
    rng = np.random.default_rng(0)

    def draw(s):
        return jnp.asarray(rng.normal(0, 0.5, s.shape), s.dtype)

    def zeros(s):
        return jnp.zeros(s.shape, s.dtype)

    actor = actor.replace(params=jax.tree.map(draw, actor.params))
    critic = critic.replace(
        params=jax.tree.map(draw, critic.params),
        hidden_state=jax.tree.map(zeros, critic.hidden_state),
    )

    @jax.jit
    def act(obs, resets):
        """Critic inputs (obs, previous action, action) from the recurrent actor."""
        carry = jax.tree.map(zeros, actor.hidden_state)
        pi, carry = actor.apply_fn({"params": actor.params}, obs, carry, resets)
        action = pi.sample(seed=KEY)
        prev = jnp.concatenate([jnp.zeros((1, B, 2)), action[:-1]])
        return action_value_input(obs, action, prev), carry

    x, actor_carry = act(obs, resets)
    assert x.shape == (T, B, 3 + 2 + 2) and jax.tree.leaves(actor_carry)[0].shape == (B, 4)

    @jax.jit
    def values_of(x, resets, h):
        return predict_value_sequence(critic, critic.params, x, resets, h)

    # Distinct per-member carries, so that a member reading another's would show.
    h0 = jax.tree.map(lambda c: c + jnp.array([0.5, -0.5])[:, None, None], critic.hidden_state)
    values, final = values_of(x, resets, h0)
    assert values.shape == (2, T, B, 1) and jax.tree.leaves(final)[0].shape == (2, B, 4)
    quantiles, _ = jax.eval_shape(
        lambda: predict_value_sequence(critic, critic.params, x, resets, h0, quantiles=True)
    )
    assert quantiles.shape == (2, T, B, 1)  # n_quantiles = 1
    # Stepping one step at a time gives the same values (the acting path is the T = 1 case).
    carry, steps = h0, []
    for t in range(T):
        v, carry = values_of(x[t : t + 1], resets[t : t + 1], carry)
        steps.append(v)
    np.testing.assert_allclose(jnp.concatenate(steps, axis=1), values, rtol=1e-5, atol=1e-6)
    for leaf_seq, leaf_step in zip(jax.tree.leaves(final), jax.tree.leaves(carry), strict=True):
        np.testing.assert_allclose(leaf_step, leaf_seq, rtol=1e-5, atol=1e-6)
    # Each member reads its own carry (mapped on axis 0, not broadcast).
    swapped, _ = values_of(x, resets, jax.tree.map(lambda c: c[::-1], h0))
    assert not np.allclose(swapped[:, 0], values[:, 0])
    # The reset at t = 3 cuts env 0 off its past: a changed first step no longer matters there.
    changed, _ = values_of(x.at[0].add(1.0), resets, h0)
    np.testing.assert_allclose(changed[:, 3:, 0], values[:, 3:, 0], rtol=1e-6)
    assert not np.allclose(changed[:, 3:, 1], values[:, 3:, 1])
    with pytest.raises(ValueError, match="predict_value_sequence"):
        predict_value(critic, critic.params, x[0])
    with pytest.raises(ValueError, match="carry"):
        jax.eval_shape(lambda: critic.apply_fn({"params": critic.params}, x))


def test_init_network_state_recurrent_actor_carry():
    memory = MemoryConfig("gru", hidden_size=4)
    actor = Actor(2, False, ARCH, memory=memory)
    tx = get_adam_tx(1e-3)

    def acting_step():
        state = init_network_state(jnp.zeros((1, 3)), actor, KEY, tx, 3, memory)
        resets = jnp.zeros((1, 3), bool)
        pi, carry = state.apply_fn({"params": state.params}, jnp.ones((1, 3, 3)),
                                   state.hidden_state, resets)  # fmt: skip
        return state.hidden_state, pi, carry

    (h0,), pi, (h1,) = jax.eval_shape(acting_step)
    assert h0.shape == (3, 4) and h1.shape == (3, 4) and pi.logits.shape == (1, 3, 2)


# --------------------------------------------------------------------------- reading values


def test_in_critic_units_and_predict_value_with_action_units(sac):
    _, critic = sac
    a = jnp.array([[-1.0, 1.0], [0.0, 0.5]])
    assert in_critic_units(critic, a) is a
    units = ActionUnits(low=jnp.array([0.0, -4.0]), high=jnp.array([2.0, 0.0]))
    mapped = critic.replace(action_units=units)
    np.testing.assert_allclose(in_critic_units(mapped, a), [[0.0, 0.0], [1.0, -1.0]])
    obs = jnp.ones((2, 3))

    @jax.jit
    def values():
        expected = predict_value(critic, critic.params, jnp.concatenate([obs, units(a)], -1))
        return expected, predict_value(mapped, mapped.params, action_value_input(obs, a))

    expected, got = values()
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_phi_star_critic_state_drops_obs_stats(sac):
    _, critic = sac
    stats = ObsStats(mean=jnp.array([1.0, 2.0, 3.0]), var=jnp.array([4.0, 1.0, 0.25]))
    normed = critic.replace(obs_stats=stats)
    phi = phi_star_critic_state(normed)
    assert phi.obs_stats is None and normed.obs_stats is stats
    x = jnp.array([[3.0, 2.0, 3.5, 0.5, -0.5]])
    z = jnp.array([[1.0, 0.0, 1.0, 0.5, -0.5]])  # (x - mean) / std on the obs part only

    @jax.jit
    def values():
        plain = critic.params
        return (predict_value(normed, plain, x), predict_value(critic, plain, z),
                predict_value(phi, plain, x), predict_value(critic, plain, x))  # fmt: skip

    normed_x, raw_z, phi_x, raw_x = values()
    np.testing.assert_allclose(normed_x, raw_z, rtol=1e-5)
    np.testing.assert_array_equal(phi_x, raw_x)
    assert not np.allclose(phi_x, normed_x)


class _AgentState(NamedTuple):
    critic_state: LoadedTrainState


def test_state_value_and_action_value_are_ensemble_means(sac, ppo):
    obs, act = normal(4, 3), jnp.full((4, 2), 0.3)
    q_state, v_state = sac[1], ppo[1]

    @jax.jit
    def values():
        all_q = predict_value(q_state, q_state.params, action_value_input(obs, act))
        all_v = predict_value(v_state, v_state.params, obs)
        q = action_value(_AgentState(q_state), obs, act)
        return q, all_q, state_value(_AgentState(v_state), obs, act), all_v

    q, all_q, v, all_v = values()
    assert q.shape == (4,) and v.shape == (4,)
    assert not np.allclose(all_q[0], all_q[1]) and not np.allclose(all_v[0], all_v[1])
    np.testing.assert_allclose(q, (all_q[0, :, 0] + all_q[1, :, 0]) / 2, rtol=1e-6)
    np.testing.assert_allclose(v, (all_v[0, :, 0] + all_v[1, :, 0]) / 2, rtol=1e-6)


def test_predict_value_train_updates_batchrenorm_stats():
    net = NetworkConfig(critic_architecture=("64", "batchrenorm", "relu"))
    critic = jax.jit(lambda k: get_initialized_critic(k, ENV, OPT, net, num_critics=2))(KEY)
    assert critic.batch_stats is not None
    x = 3.0 + normal(32, 5)

    @jax.jit
    def train_and_eval():
        values, stats = predict_value_train(critic, critic.params, x)
        return values, stats, predict_value(critic, critic.params, x)

    values, stats, eval_values = train_and_eval()
    assert values.shape == (2, 32, 1)
    old = critic.batch_stats["critic"]["torso"]["BatchRenorm_0"]
    new = stats["critic"]["torso"]["BatchRenorm_0"]
    assert old["mean"].shape == (2, 64)
    np.testing.assert_array_equal(new["steps"], [1, 1])
    np.testing.assert_array_equal(old["steps"], [0, 0])
    assert not np.allclose(new["mean"], old["mean"])
    # Outside training the running statistics normalise, so the values differ from the batch's.
    assert not np.allclose(eval_values, values)
