"""Tests of ajax.networks.networks (spec 002): critics, CNN, actors."""

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.networks.net_helpers import (
    ARCH,
    KEY,
    jinit,
    leaves_equal,
    normal,
    numpy_variables,
)

from ajax.networks.networks import (
    Actor,
    CNNEncoder,
    CNNSpec,
    Critic,
    MultiCritic,
    Squashed,
    action_value_input,
    check_log_std_head,
    predict_value,
    reference_cnn,
)

# --------------------------------------------------------------------------- critics


def test_multicritic_members_have_distinct_parameters(sac):
    _, critic = sac
    kernel = critic.params["critic"]["torso"]["Dense_0"]["kernel"]
    assert kernel.shape == (2, 5, 8)
    assert not np.allclose(kernel[0], kernel[1])
    values = predict_value(critic, critic.params, jnp.ones((4, 5)))
    assert values.shape == (2, 4, 1)
    assert not np.allclose(values[0], values[1])


def test_multicritic_members_draw_their_own_dropout_mask(sac):
    """With identical member parameters and inputs, only the dropout masks can differ."""
    ens = MultiCritic(Critic(ARCH, dropout=0.5), num=2)  # dropout adds no parameter
    x = jnp.ones((4, 5))
    same = jax.tree.map(lambda p: jnp.broadcast_to(p[:1], p.shape), sac[1].params)

    @jax.jit
    def outputs():
        noisy = ens.apply({"params": same}, x, deterministic=False, rngs={"dropout": KEY})
        return ens.apply({"params": same}, x), noisy

    det, noisy = outputs()
    np.testing.assert_array_equal(det[0], det[1])
    assert not np.allclose(noisy[0], noisy[1])
    assert not np.allclose(noisy[0], det[0])


def test_critic_dropout_follows_every_hidden_dense():
    """DroQ's layout: Dense -> Dropout -> (norm) -> activation, for each hidden layer."""
    critic = Critic(("8", "layernorm", "relu", "8", "relu"), dropout=0.9)
    x = jnp.ones((2, 3))

    def dropout_outputs(variables):
        _, inter = critic.apply(
            variables, x, deterministic=False, rngs={"dropout": KEY}, capture_intermediates=True
        )
        leaves = jax.tree_util.tree_leaves_with_path(inter["intermediates"])
        return [v for path, v in leaves if "Dropout" in jax.tree_util.keystr(path)]

    drops = jax.jit(dropout_outputs)(numpy_variables(critic, x))
    # Rate 0.9: most features are exact zeros, after each of the two Dense layers.
    assert len(drops) == 2 and all(float((d == 0).mean()) > 0.5 for d in drops)


def test_critic_quantiles_and_encoder_shapes():
    ens = MultiCritic(Critic(ARCH, n_quantiles=5), num=2)
    x = jnp.ones((7, 5))

    def outputs(variables):
        member0 = {"params": jax.tree.map(lambda p: p[0], variables["params"]["critic"])}
        return (
            ens.apply(variables, x, method="quantiles"),
            ens.apply(variables, x),
            ens.apply(variables, x, method="apply_encoder_ensemble"),
            Critic(ARCH, n_quantiles=5).apply(member0, x, method="apply_encoder"),
        )

    q, v, feats, feats0 = jax.jit(outputs)(numpy_variables(ens, x))
    assert q.shape == (2, 7, 5) and v.shape == (2, 7, 1) and feats.shape == (2, 7, 8)
    np.testing.assert_allclose(v, q.mean(-1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(feats0, feats[0], rtol=1e-6)


def test_critic_rejects_bad_fields():
    with pytest.raises(ValueError, match="n_quantiles"):
        jax.eval_shape(Critic(ARCH, n_quantiles=0).init, KEY, jnp.ones((1, 3)))
    with pytest.raises(ValueError, match="query_dim"):
        jax.eval_shape(Critic(ARCH, query_dim=2).init, KEY, jnp.ones((1, 3)))
    with pytest.raises(ValueError, match="dropout"):
        jax.eval_shape(Critic(ARCH, dropout=1.0).init, KEY, jnp.ones((1, 3)))


# --------------------------------------------------------------------------- CNN


def test_reference_cnn_boundary_35_36():
    mnih, minatar = reference_cnn((36, 36, 4)), reference_cnn((35, 35, 4))
    assert mnih == CNNSpec() and mnih.features == (32, 64, 64) and mnih.projection == 512
    assert minatar.features == (16,) and minatar.kernel_sizes == (3,) and minatar.projection == 128
    assert reference_cnn((36, 35, 4)) == minatar and reference_cnn((10, 10, 7)) == minatar
    # Shapes only: traced, never compiled.
    out, _ = jax.eval_shape(CNNEncoder((36, 36, 1), mnih).init_with_output, KEY, jnp.ones(36**2))
    assert out.shape == (512,)
    out, _ = jax.eval_shape(CNNEncoder((35, 35, 1), minatar).init_with_output, KEY, jnp.ones(35**2))
    assert out.shape == (128,)
    with pytest.raises(ValueError, match="leaves nothing"):
        jax.eval_shape(CNNEncoder((35, 35, 1), mnih).init, KEY, jnp.ones((35 * 35,)))
    with pytest.raises(ValueError, match="H, W, C"):
        reference_cnn((10, 10))


def test_cnn_encoder_joins_extra_dims_after_convs():
    spec = CNNSpec(features=(4,), kernel_sizes=(3,), strides=(1,), projection=6)
    enc = CNNEncoder((5, 5, 2), spec)
    img = normal(3, 50)
    extra = jnp.array([[1.0, -2.0], [3.0, 4.0], [0.5, 0.0]])
    x = jnp.concatenate([img, extra], -1)

    def outputs(params):
        return enc.apply(params, x), enc.apply(params, img)

    params = numpy_variables(enc, x)
    out, img_only = jax.jit(outputs)(params)
    assert out.shape == (3, 8) and params["params"]["Conv_0"]["kernel"].shape == (3, 3, 2, 4)
    np.testing.assert_array_equal(out[:, 6:], extra)
    np.testing.assert_array_equal(out[:, :6], img_only)
    with pytest.raises(ValueError, match=">= 50"):
        enc.apply(params, img[:, :49])


def test_cnn_torch_linear_init_bounds():
    spec = CNNSpec(features=(4,), kernel_sizes=(3,), strides=(1,), projection=6,
                   kernel_init="torch_linear")  # fmt: skip
    params = jinit(CNNEncoder((5, 5, 2), spec), jnp.ones((50,)))["params"]
    conv = params["Conv_0"]
    bound = 1.0 / np.sqrt(2 * 3 * 3)
    for leaf in (conv["kernel"], conv["bias"]):
        assert float(jnp.abs(leaf).max()) <= bound and float(jnp.abs(leaf).max()) > 0.5 * bound
    proj = params["TorchLinear_0"]
    assert float(jnp.abs(proj["bias"]).max()) <= 1 / np.sqrt(4 * 3 * 3)


# --------------------------------------------------------------------------- actors


@pytest.mark.parametrize(
    ("state_independent", "init", "kernel", "message"),
    [
        (True, None, None, "needs log_std_init"),
        (True, 0.0, "lecun_normal", "unset log_std_kernel_init"),
        (False, 0.0, "torch_linear", "draws the head's bias"),
        (False, None, None, "needs log_std_init"),
        (False, None, "lecun_normal", "needs log_std_init"),
    ],
)
def test_check_log_std_head_refuses(state_independent, init, kernel, message):
    with pytest.raises(ValueError, match=message):
        check_log_std_head(state_independent, init, kernel)


@pytest.mark.parametrize(
    ("state_independent", "init", "kernel"),
    [(True, -0.5, None), (False, 0.0, None), (False, 0.0, "lecun_normal"),
     (False, None, "torch_linear")],
)  # fmt: skip
def test_check_log_std_head_accepts(state_independent, init, kernel):
    check_log_std_head(state_independent, init, kernel)


def test_action_value_input():
    obs, prev, act = jnp.ones((2, 3)), 2 * jnp.ones((2, 1)), 3 * jnp.ones((2, 1))
    np.testing.assert_array_equal(action_value_input(obs, act), [[1, 1, 1, 3]] * 2)
    np.testing.assert_array_equal(action_value_input(obs, act, prev), [[1, 1, 1, 2, 3]] * 2)


def test_actor_continuous_normal_with_clipped_log_std():
    obs = jnp.ones((4, 3))
    clipped = Actor(2, True, ARCH, log_std_init=5.0, log_std_bounds=(-3.0, 1.5))
    free = Actor(2, True, ARCH, log_std_init=0.25, log_std_bounds=None)

    @jax.jit
    def stddevs():
        pi = clipped.apply(clipped.init(KEY, obs), obs)
        return pi.mean(), pi.stddev(), free.apply(free.init(KEY, obs), obs).stddev()

    mean, clipped_std, free_std = stddevs()
    assert mean.shape == (4, 2)
    # A Dense head with an orthogonal(0.01) kernel: its bias 5 dominates, and the clip holds 1.5.
    np.testing.assert_allclose(clipped_std, np.exp(1.5), rtol=1e-6)
    assert float(jnp.abs(jnp.log(free_std) - 0.25).max()) < 0.05
    pi = jax.eval_shape(lambda: clipped.apply(clipped.init(KEY, obs), obs))
    assert isinstance(pi, distrax.MultivariateNormalDiag)
    with pytest.raises(ValueError, match="low < high"):
        jax.eval_shape(Actor(2, True, ARCH, log_std_bounds=(1.0, -1.0)).init, KEY, obs)


def test_actor_state_independent_log_std(ppo):
    actor, _ = ppo
    obs = normal(4, 3)
    params = jax.tree.map(jnp.copy, actor.params)
    params["log_std"] = jnp.array([-0.5, 0.25])
    std = jax.jit(lambda p: actor.apply_fn({"params": p}, obs).stddev())(params)
    np.testing.assert_allclose(std, np.broadcast_to(np.exp([-0.5, 0.25]), (4, 2)), rtol=1e-6)


def test_actor_discrete_categorical():
    actor = Actor(5, False, ARCH)
    obs = jnp.ones((4, 3))
    pi = jax.eval_shape(lambda: actor.apply(actor.init(KEY, obs), obs))
    assert isinstance(pi, distrax.Categorical)
    assert pi.logits.shape == (4, 5)


def test_squashed_shares_the_actor_parameters(sac):
    squashed, _ = sac
    actor = Actor(2, True, ARCH, log_std_init=1.0)
    obs = normal(64, 3)

    @jax.jit
    def outputs():
        bare = actor.init(KEY, obs)
        wrapped = Squashed(actor).init(KEY, obs)
        pi = Squashed(actor).apply(bare, obs)
        return bare, wrapped, pi.mean(), actor.apply(bare, obs).mean(), pi.sample_with_raw(KEY)

    bare, wrapped, mean, raw_mean, (action, _, raw) = outputs()
    assert jax.tree.structure(bare) == jax.tree.structure(wrapped)
    assert leaves_equal(bare, wrapped)
    assert jax.tree.structure(bare["params"]) == jax.tree.structure(squashed.params)
    np.testing.assert_allclose(mean, jnp.tanh(raw_mean), rtol=1e-6)
    np.testing.assert_allclose(action, jnp.tanh(raw), rtol=1e-6)
    assert float(jnp.abs(raw).max()) > 2.0 and float(jnp.abs(action).max()) < 1.0
