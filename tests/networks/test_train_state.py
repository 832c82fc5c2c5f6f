"""Tests of ajax.networks.train_state: LoadedTrainState, ema_update (spec 000 B10), units, stats."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ajax.networks.train_state import ActionUnits, LoadedTrainState, ObsStats, ema_update


def params_with_layernorm():
    """An MLP's parameter tree, LayerNorm scale and bias included (values fixed, not drawn)."""
    return {
        "Dense_0": {"kernel": jnp.full((2, 3), 0.5), "bias": jnp.zeros(3)},
        "LayerNorm_0": {"scale": jnp.ones(3), "bias": jnp.zeros(3)},
    }


class Counter(nn.Module):
    """y = w * x + count, where count counts the training passes (a stand-in for BatchRenorm)."""

    @nn.compact
    def __call__(self, x):
        count = self.variable("batch_stats", "count", lambda: jnp.zeros((), jnp.float32))
        w = self.param("w", nn.initializers.ones, ())
        y = w * x + count.value
        if self.is_mutable_collection("batch_stats") and not self.is_initializing():
            count.value = count.value + 1.0
        return y


def state_of(params, tx=None, **kwargs):
    return LoadedTrainState.create(
        apply_fn=lambda v, x: x, params=params, tx=tx or optax.sgd(0.1), **kwargs
    )


@pytest.mark.parametrize(("rate", "expected"), [(0.02, 0.02), (0.01, 0.01)])
def test_b10_one_ema_step_pinned(rate, expected):
    """Target 0, online 1: one step gives the rate, DreamerV3's slow critic 0.02, TD-MPC2's 0.01."""
    online = jax.tree.map(jnp.ones_like, params_with_layernorm())
    target = jax.tree.map(jnp.zeros_like, online)
    for leaf in jax.tree.leaves(ema_update(target, online, rate)):
        np.testing.assert_allclose(leaf, expected, rtol=1e-6)
    state = state_of(online).replace(target_params=target).soft_update(rate)
    for leaf in jax.tree.leaves(state.target_params):
        np.testing.assert_allclose(leaf, expected, rtol=1e-6)
    assert all(np.all(leaf == 1.0) for leaf in jax.tree.leaves(state.params))


def test_b10_target_starts_as_an_exact_copy():
    params = params_with_layernorm()
    state = state_of(params, target=True)
    leaves, target = jax.tree.leaves(state.params), jax.tree.leaves(state.target_params)
    assert jax.tree.structure(state.params) == jax.tree.structure(state.target_params)
    for online, copy in zip(leaves, target, strict=True):
        np.testing.assert_array_equal(online, copy)
        # A copy, not an alias of the online buffers: the state can be donated to a jit.
        assert online.unsafe_buffer_pointer() != copy.unsafe_buffer_pointer()
    assert state_of(params).target_params is None
    with_target = state_of(params).with_target()
    assert all(
        np.array_equal(a, b)
        for a, b in zip(leaves, jax.tree.leaves(with_target.target_params), strict=True)
    )


def test_b10_every_leaf_moves_layernorm_included():
    online = params_with_layernorm()
    target = jax.tree.map(lambda x: x + 1.0, online)
    new = ema_update(target, online, 0.5)
    expected = jax.tree.map(lambda t, o: 0.5 * t + 0.5 * o, target, online)
    for got, want in zip(jax.tree.leaves(new), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(new["LayerNorm_0"]["scale"], 1.5)
    np.testing.assert_allclose(new["LayerNorm_0"]["bias"], 0.5)


def test_b10_target_receives_no_gradient():
    online, target = params_with_layernorm(), jax.tree.map(jnp.ones_like, params_with_layernorm())

    def loss(target, online):
        new = ema_update(target, online, 0.01)
        return sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(new))

    g_target, g_online = jax.grad(loss, argnums=(0, 1))(target, online)
    for leaf in jax.tree.leaves((g_target, g_online)):
        np.testing.assert_array_equal(leaf, 0.0)


def test_ema_update_checks_its_rate_and_accepts_a_traced_one():
    params = params_with_layernorm()
    for rate in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            ema_update(params, params, rate)
    with pytest.raises(ValueError, match="with_target"):
        state_of(params).soft_update(0.01)
    moved = jax.jit(ema_update)(params, jax.tree.map(jnp.zeros_like, params), 0.25)
    np.testing.assert_allclose(moved["LayerNorm_0"]["scale"], 0.75, rtol=1e-6)
    np.testing.assert_allclose(moved["Dense_0"]["kernel"], 0.375, rtol=1e-6)


def test_apply_gradients_steps_the_optimizer():
    params = {"w": jnp.array([1.0, -2.0])}
    state = state_of(params, tx=optax.sgd(0.1))
    assert int(state.step) == 0
    state = state.apply_gradients({"w": jnp.array([10.0, 1.0])})
    assert int(state.step) == 1
    np.testing.assert_allclose(state.params["w"], [0.0, -2.1], rtol=1e-6)
    state = state_of(params, tx=optax.adam(0.1))
    for _ in range(2):
        state = state.apply_gradients({"w": jnp.array([10.0, -1.0])})
    # Adam's first steps move each coordinate by the learning rate, against the gradient's sign.
    np.testing.assert_allclose(state.params["w"], [0.8, -1.8], rtol=1e-5)


def test_apply_train_returns_the_running_statistics():
    module = Counter()
    variables = module.init(jax.random.key(0), jnp.ones(2))
    state = LoadedTrainState.create(
        apply_fn=module.apply,
        params=variables["params"],
        tx=optax.sgd(0.1),
        batch_stats=variables["batch_stats"],
    )
    assert set(state.variables()) == {"params", "batch_stats"}
    out, stats = state.apply_train(state.params, jnp.ones(2))
    np.testing.assert_array_equal(out, [1.0, 1.0])
    np.testing.assert_array_equal(stats["count"], 1.0)
    trained = state.replace(batch_stats=stats)
    np.testing.assert_array_equal(trained.apply_fn(trained.variables(), jnp.ones(2)), [2.0, 2.0])
    plain = LoadedTrainState.create(
        apply_fn=lambda v, x: v["params"]["w"] * x, params={"w": jnp.array(3.0)}, tx=optax.sgd(0.1)
    )
    assert set(plain.variables()) == {"params"}
    out, stats = plain.apply_train({"w": jnp.array(2.0)}, jnp.ones(2))
    np.testing.assert_array_equal(out, [2.0, 2.0])
    assert stats is None


def test_action_units_and_obs_stats():
    units = ActionUnits(low=jnp.array([0.0, -4.0]), high=jnp.array([2.0, 0.0]))
    a = jnp.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.5]])
    np.testing.assert_allclose(units(a), [[0.0, -4.0], [2.0, 0.0], [1.0, -1.0]], rtol=1e-6)
    stats = ObsStats(mean=jnp.array([1.0, -1.0]), var=jnp.array([4.0, 0.25]), eps=0.0)
    np.testing.assert_allclose(stats.normalize(jnp.array([3.0, 0.0])), [1.0, 2.0], rtol=1e-6)
    # Both are pytrees: they cross jit as part of a state.
    np.testing.assert_allclose(jax.jit(lambda u, x: u(x))(units, a), units(a), rtol=1e-6)
