"""Spec 000 B7 (SimNorm), B4/B9 parameter counts, B10 (target Qs), B14 (T2 rollout), B19 (T2 discount)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.tdmpc2.config import PlannerConfig, TDMPC2Config
from ajax.agents.tdmpc2.ensemble import keep_masks
from ajax.agents.tdmpc2.networks import (
    Q_members,
    WorldModel,
    latent_rollout,
    param_counts,
    simnorm,
)
from ajax.agents.tdmpc2.optim import adam_grouped, component_labels
from ajax.networks.train_state import LoadedTrainState, ema_update

OBS, ACT = 5, 2
SMALL = TDMPC2Config(enc_dim=32, mlp_dim=32, latent_dim=32, num_q=3)


@pytest.fixture(scope="module")
def small_model():
    model = WorldModel(SMALL, ACT)
    variables = jax.jit(model.init)(jax.random.key(0), jnp.zeros((4, OBS)), jnp.zeros((4, ACT)))
    return model, variables["params"]


def _normal(seed, shape, scale=1.0):
    """Test inputs from numpy (no per-shape compilation of a jax sampler)."""
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape) * scale, jnp.float32)


# B7 -------------------------------------------------------------------------------------------


def test_b7_simnorm_pinned():
    out = simnorm(jnp.arange(16.0) / 4, group=8)
    expected = [0.04445499, 0.05708134, 0.07329389, 0.09411121]
    expected += [0.12084118, 0.15516315, 0.19923344, 0.2558208]
    np.testing.assert_allclose(out[:8], expected, rtol=1e-6)
    np.testing.assert_allclose(out[8:], expected, rtol=1e-6)


def test_b7_simnorm_groups_sum_to_one_and_shift_invariant():
    x = _normal(1, (3, 4, 32), 3.0)
    out = simnorm(x, 8)
    np.testing.assert_allclose(out.reshape(3, 4, 4, 8).sum(-1), 1.0, rtol=1e-6)
    shift = jnp.repeat(_normal(2, (3, 4, 4), 10.0), 8, axis=-1)
    np.testing.assert_allclose(simnorm(x + shift, 8), out, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="multiple of the SimNorm group"):
        simnorm(jnp.ones(12), 8)


def test_b7_encoder_and_dynamics_end_in_simnorm(small_model):
    model, params = small_model
    obs = _normal(3, (4, OBS), 5.0)
    z = model.apply({"params": params}, obs, method="encode")
    assert z.shape == (4, SMALL.latent_dim)
    np.testing.assert_allclose(z.reshape(4, -1, 8).sum(-1), 1.0, rtol=1e-6)
    z1 = model.apply({"params": params}, z, jnp.ones((4, ACT)), method="next")
    np.testing.assert_allclose(z1.reshape(4, -1, 8).sum(-1), 1.0, rtol=1e-6)
    # Linear -> LayerNorm (learnable, eps 1e-5) -> SimNorm at the end of both.
    assert set(params["encoder"]) == {"trunk", "out", "out_norm"}
    assert set(params["reward"]) == {"trunk", "out"}


# Parameter counts (spec 000 B4 test 2, B9 test 7) ------------------------------------------


def test_b4_t2_walker_parameter_counts():
    """Walker (S = 24, A = 6) at 5M, counted from the WorldModel's own parameter shapes."""
    model = WorldModel(TDMPC2Config.preset(5), action_dim=6)
    shapes = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 24)), jnp.zeros((1, 6)))
    assert param_counts(shapes) == {
        "encoder": 139_520,
        "dynamics": 794_112,
        "reward": 582_245,
        "pi": 533_516,
        "Qs": 2_911_225,
        "total": 4_960_618,
    }


def test_t2_presets_and_validation():
    sizes = {1: (256, 384, 128, 2, 2), 19: (1024, 1024, 768, 3, 5), 317: (4096, 4096, 1376, 5, 8)}
    for size, dims in sizes.items():
        cfg = TDMPC2Config.preset(size)
        a = cfg.arch
        assert (a.enc_dim, a.mlp_dim, a.latent_dim, a.num_enc_layers, a.num_q) == dims
        assert (cfg.simnorm_dim, cfg.num_bins, cfg.vmin, cfg.vmax) == (8, 101, -10.0, 10.0)
        assert (cfg.log_std_min, cfg.log_std_max, cfg.dropout) == (-10.0, 2.0, 0.01)
    assert TDMPC2Config.preset(5) == TDMPC2Config()
    p = TDMPC2Config().planner
    assert (p.horizon, p.iterations, p.num_samples, p.num_pi_trajs, p.num_elites) == (
        3,
        6,
        512,
        24,
        64,
    )
    assert (p.min_std, p.max_std, p.temperature) == (0.05, 2.0, 0.5)
    assert p.num_iterations(19) == 6 and p.num_iterations(20) == 8
    with pytest.raises(
        ValueError, match="model_size = 7 is invalid: it must be one of 1, 5, 19, 48, 317"
    ):
        TDMPC2Config.preset(7)
    with pytest.raises(ValueError, match="multiple of simnorm_dim"):
        TDMPC2Config(latent_dim=100)
    with pytest.raises(ValueError, match="odd"):
        TDMPC2Config(num_bins=100)
    with pytest.raises(ValueError, match="symmetric"):
        TDMPC2Config(vmin=-5.0)
    with pytest.raises(ValueError, match="num_elites"):
        PlannerConfig(num_samples=32, num_pi_trajs=8, num_elites=64)
    with pytest.raises(ValueError, match="action shape"):
        model = WorldModel(SMALL, ACT)
        jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((4, OBS)), jnp.zeros((4, ACT + 1)))


def test_t2_reward_head_starts_at_zero(small_model):
    model, params = small_model
    z = jnp.abs(_normal(4, (6, SMALL.latent_dim)))
    logits = model.apply({"params": params}, z, jnp.ones((6, ACT)), method="reward")
    assert not np.any(np.asarray(params["reward"]["out"]["kernel"]))
    np.testing.assert_array_equal(SMALL.two_hot().decode(logits), 0.0)
    assert np.any(np.asarray(params["pi"]["out"]["kernel"]))  # pi's last layer is not zeroed


# B10 ------------------------------------------------------------------------------------------


def test_b10_t2_target_q_ema(small_model):
    _, params = small_model
    state = LoadedTrainState.create(
        apply_fn=None, params=params["Qs"], tx=adam_grouped(), target=True
    )
    # Init: an exact copy.
    jax.tree.map(np.testing.assert_array_equal, state.target_params, state.params)
    # Target 0, online 1 -> 0.01 after one step at TD-MPC2's rate tau, on every leaf.
    state = state.replace(
        params=jax.tree.map(jnp.ones_like, params["Qs"]),
        target_params=jax.tree.map(jnp.zeros_like, params["Qs"]),
    )
    new = state.soft_update(SMALL.tau)
    for leaf in jax.tree.leaves(new.target_params):
        np.testing.assert_allclose(leaf, 0.01, rtol=1e-6)
    # Coverage: LayerNorm scale and shift of every member are EMA'd like the kernels.
    paths = {
        jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(new.target_params)
    }
    assert any("norm_0']['scale']" in p for p in paths)
    assert any("norm_1']['bias']" in p for p in paths)


def test_b10_t2_target_receives_no_gradient(small_model):
    model, params = small_model
    z = jnp.abs(_normal(5, (4, SMALL.latent_dim)))
    a = jnp.ones((4, ACT))

    def loss(target, online):
        # A bootstrap value through the target, then one EMA step of the target.
        q = model.apply({"params": {"Qs": target}}, z, a, method="Q", deterministic=True)
        td = jax.lax.stop_gradient(q.sum())
        new_target = ema_update(target, online, SMALL.tau)
        return td + sum(jnp.sum(x) for x in jax.tree.leaves(new_target))

    g_target, g_online = jax.grad(loss, argnums=(0, 1))(params["Qs"], params["Qs"])
    for leaf in jax.tree.leaves(g_target) + jax.tree.leaves(g_online):
        assert not np.any(np.asarray(leaf))


# B14 ------------------------------------------------------------------------------------------


def test_b14_t2_consistency_rollout_equals_python_loop(small_model):
    model, params = small_model
    horizon = 3
    z0 = model.apply({"params": params}, _normal(6, (4, OBS)), method="encode")
    actions = jnp.tanh(_normal(7, (horizon, 4, ACT)))

    def next_fn(z, a):
        return model.apply({"params": params}, z, a, method="next")

    zs = latent_rollout(next_fn, z0, actions)
    assert zs.shape == (horizon + 1, 4, SMALL.latent_dim)
    z, loop = z0, [z0]
    for t in range(horizon):
        z = next_fn(z, actions[t])
        loop.append(z)
    np.testing.assert_allclose(zs, jnp.stack(loop), rtol=1e-6, atol=1e-7)


def test_b14_t2_linear_rollout_closed_form():
    m = jnp.array([[0.9, 0.2], [-0.1, 0.8]])
    n = jnp.array([[1.0, -0.5], [0.3, 0.7]])
    z0 = jnp.array([[1.0, -2.0]])
    actions = jnp.array([[[0.5, 0.1]], [[-0.3, 0.2]], [[0.0, 1.0]]])
    zs = latent_rollout(lambda z, a: z @ m + a @ n, z0, actions)
    for h in range(4):
        closed = z0 @ jnp.linalg.matrix_power(m, h)
        for t in range(h):
            closed += actions[t] @ n @ jnp.linalg.matrix_power(m, h - 1 - t)
        np.testing.assert_allclose(zs[h], closed, rtol=1e-6, atol=1e-7)
    # The gradient flows through the carry: dz_3/dz_0 = m^3.
    jac = jax.jacobian(lambda z: latent_rollout(lambda z, a: z @ m + a @ n, z, actions)[-1])(z0)
    np.testing.assert_allclose(jac[0, :, 0, :], jnp.linalg.matrix_power(m, 3).T, rtol=1e-6)


# B19 ------------------------------------------------------------------------------------------


def test_b19_t2_discount_from_episode_length():
    cfg = TDMPC2Config()
    for length, gamma in {100: 0.95, 500: 0.99, 1000: 0.995, 50: 0.95}.items():
        np.testing.assert_allclose(cfg.discount(length), gamma, rtol=1e-6)


def test_t2_optimizer_labels_match_world_model_components(small_model):
    """The world-model optimiser's groups are the WorldModel's components (encoder at 0.3 lr)."""
    _, params = small_model
    labels = component_labels(params)
    for name in ("encoder", "dynamics", "reward", "pi", "Qs"):
        assert set(jax.tree.leaves(labels[name])) == {name}
    assert jax.tree.structure(labels) == jax.tree.structure(params)
    wrapped = component_labels({"params": params})
    assert set(jax.tree.leaves(wrapped["params"]["encoder"])) == {"encoder"}


@pytest.mark.slow  # 20-36 s
def test_q_members_are_the_whole_ensembles_rows_at_two_fifths_of_the_flops():
    """Issue 13's FLOP cut: the TD-target, policy-loss and planner passes read only a random
    pair of the 5 Qs, so they evaluate the pair alone (parameters sliced). Its logits are the
    whole ensemble's rows of that pair, with dropout (each member's mask from ``fold_in(key,
    member)``, so the pair's masks are the whole draw's rows) and without, at 2/5 of the FLOPs."""
    cfg = TDMPC2Config.preset(5, enc_dim=16, mlp_dim=32, latent_dim=16, dropout=0.3)
    model = WorldModel(cfg, action_dim=3)
    params = model.init(jax.random.key(0), jnp.zeros((1, 10)), jnp.zeros((1, 3)))["params"]
    z, a = _normal(1, (4, 7, 16)), _normal(2, (4, 7, 3))
    pair, shape, key = jnp.array([3, 0]), (4, 7, 32), jax.random.key(5)
    masks = keep_masks(key, jnp.arange(5), shape, cfg.dropout)
    np.testing.assert_array_equal(keep_masks(key, pair, shape, cfg.dropout), masks[pair])
    assert 0.6 < float(masks.mean()) < 0.8  # keep probability 0.7

    def whole(mask):
        return model.apply({"params": params}, z, a, deterministic=mask is None,
                           dropout_mask=mask, method="Q")  # fmt: skip

    def alone(mask):
        return Q_members(cfg, params["Qs"], z, a, pair, None if mask is None else mask[pair])

    for mask in (masks, None):
        full, part = jax.jit(whole)(mask), jax.jit(alone)(mask)
        assert part.shape == (2, 4, 7, cfg.num_bins)
        np.testing.assert_allclose(part, full[pair], rtol=1e-6, atol=1e-7)  # bitwise here
    flops = [jax.jit(f).lower(masks).compile().cost_analysis() for f in (alone, whole)]
    flops = [float((c[0] if isinstance(c, list) else c)["flops"]) for c in flops]
    assert 0.35 < flops[0] / flops[1] < 0.45, flops
