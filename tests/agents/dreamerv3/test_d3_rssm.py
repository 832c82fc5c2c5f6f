"""Spec 000 B15 (RSSM block-GRU core, observe/imagine steps) and B14 (DreamerV3's scans)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.dreamerv3.networks import RSSM, RSSMConfig, block_gru_gates
from ajax.agents.dreamerv3.rssm import (
    RSSMState,
    embed_action,
    initial_state,
    observe_step,
)

# Keys use the "rbg" generator: on CPU, threefry recompiles for every new shape at ~6 s of CPU each,
# which would dominate these tests. The functions under test take any key.
KEY = functools.partial(jax.random.key, impl="rbg")

# A small RSSM: D = 16 in 4 blocks, d = 8, S = 3 latents of C = 4 classes, A = 2, embed E = 5.
B, E = 2, 5


def _tiny(discrete=False):
    return RSSMConfig(deter=16, hidden=8, classes=4, action_dim=2, discrete_actions=discrete,
                      stoch=3, blocks=4)  # fmt: skip


def _fill(shapes, seed):
    """Random parameters of the given shapes, drawn with numpy: no init program to compile.

    Kernels ~ N(0, 1 / fan_in), biases ~ N(0, 0.1^2), norm scales ~ 1 + N(0, 0.1^2).
    """
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = jax.tree_util.keystr(path)
        if "kernel" in name:
            fan_in = int(np.prod(leaf.shape[:-1]))
            return jnp.asarray(rng.normal(size=leaf.shape) / np.sqrt(fan_in), jnp.float32)
        base = 1.0 if "scale" in name else 0.0
        return jnp.asarray(base + 0.1 * rng.normal(size=leaf.shape), jnp.float32)

    return jax.tree_util.tree_map_with_path(draw, shapes)


def _setup(discrete=False, seed=0):
    config = _tiny(discrete)
    rssm = RSSM(config)
    s = initial_state(config, B)
    shapes = jax.eval_shape(rssm.init, KEY(0), s.deter, s.stoch, jnp.zeros((B, 2)),
                            jnp.zeros((B, E)))  # fmt: skip
    return rssm, _fill(shapes["params"], seed)


def _random_state(seed, config):
    rng = np.random.default_rng(seed)
    stoch = jax.nn.one_hot(rng.integers(0, config.classes, size=(B, config.stoch)), config.classes)
    return RSSMState(
        deter=jnp.asarray(rng.normal(size=(B, config.deter)), jnp.float32), stoch=stoch
    )


def _normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


@functools.partial(jax.jit, static_argnums=0)
def _core(rssm, params, deter, stoch, action):
    return rssm.apply({"params": params}, deter, stoch, action, method=RSSM.core)


# ---------------------------------------------------------------------------------------- B15


def test_b15_zero_gru_keeps_sigmoid_one_of_state():
    """dyngru zeroed: r = 0.5, c = 0, u = sigmoid(-1) = 0.2689414, h' = 0.7310586 h."""
    reset, cand, update = block_gru_gates(jnp.zeros((B, 48)), 4)
    np.testing.assert_allclose(update, 0.2689414, rtol=1e-6)
    np.testing.assert_array_equal(reset, 0.5)
    np.testing.assert_array_equal(cand, 0.0)
    rssm, params = _setup()
    params = dict(params, dyngru=jax.tree.map(jnp.zeros_like, params["dyngru"]))
    state = _random_state(1, rssm.config)
    action = _normal(2, (B, 2))
    out = _core(rssm, params, state.deter, state.stoch, action)
    np.testing.assert_allclose(out, 0.7310586 * state.deter, rtol=1e-6)


def test_b15_gate_layout_is_per_block_r_c_u():
    """Block k of the dyngru output is [r_k | c_k | u_k]; the update of block 1 comes from its u."""
    x = jnp.zeros((1, 48)).at[0, 12 + 8].set(5.0)  # block 1 (width 12), u part, first unit
    _, _, update = block_gru_gates(x, 4)
    expected = np.full((1, 16), 0.2689414, np.float32)
    expected[0, 4] = 1 / (1 + np.exp(-4.0))  # deter unit 4 = block 1, unit 0
    np.testing.assert_allclose(update, expected, rtol=1e-6)


@functools.partial(jax.jit, static_argnums=0)
def _observe_step(rssm, *args):
    return observe_step(rssm, *args)


@pytest.mark.parametrize("discrete", [False, True])
def test_b15_is_first_gives_core_of_zeros(discrete):
    """is_first: h = core(0, 0, 0) whatever the carry and previous action (index 0 included)."""
    rssm, params = _setup(discrete)
    zeros = initial_state(rssm.config, B)
    expected = _core(rssm, params, zeros.deter, zeros.stoch, jnp.zeros((B, 2)))
    embed = _normal(4, (B, E))
    first, key = jnp.ones((B,), bool), KEY(5)
    prevs = [jnp.array([0, 0]), jnp.array([3, 1])] if discrete else [
        jnp.array([[3.0, -1.0], [0.5, 0.2]]), jnp.array([[-0.1, 0.0], [2.0, 9.0]])]  # fmt: skip
    outs = [
        _observe_step(rssm, params, _random_state(seed, rssm.config), embed, prev, first, key)[
            0
        ].deter  # fmt: skip
        for seed, prev in zip((3, 13), prevs, strict=True)
    ]
    np.testing.assert_array_equal(outs[0], outs[1])  # the same program: bitwise independent
    np.testing.assert_allclose(outs[0], expected, rtol=1e-6, atol=1e-7)
    if discrete:  # the second mask matters: one_hot(0) != 0 would change the result
        onehot0 = embed_action(jnp.zeros((B,), jnp.int32), rssm.config)
        unmasked = _core(rssm, params, zeros.deter, zeros.stoch, onehot0)
        assert np.abs(unmasked - expected).max() > 1e-4
    # Not first: the carry matters.
    state = _random_state(3, rssm.config)
    carry2, _ = _observe_step(rssm, params, state, embed, prevs[0], ~first, key)
    assert np.abs(carry2.deter - expected).max() > 1e-4


def test_b15_is_first_masks_per_row():
    rssm, params = _setup(True)
    state = _random_state(6, rssm.config)
    embed = _normal(7, (B, E))
    prev, first = jnp.array([1, 1]), jnp.array([True, False])
    carry, _ = _observe_step(rssm, params, state, embed, prev, first, KEY(8))
    zeros = initial_state(rssm.config, B)
    fresh = _core(rssm, params, zeros.deter, zeros.stoch, jnp.zeros((B, 2)))
    cont = _core(rssm, params, state.deter, state.stoch, embed_action(prev, rssm.config))
    np.testing.assert_allclose(carry.deter[0], fresh[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(carry.deter[1], cont[1], rtol=1e-6, atol=1e-7)
    assert np.abs(fresh[0] - cont[0]).max() > 1e-4


def _blocks_offdiag(jac, g=4):
    """Off-diagonal blocks of a [D, D] Jacobian split into g x g blocks."""
    d = jac.shape[0] // g
    blocks = np.asarray(jac).reshape(g, d, g, d)
    return np.stack([blocks[k, :, j] for k in range(g) for j in range(g) if j != k])


def _coupling_rank_ratio(jac, g=4):
    """s_1 / s_0 of every row block k's coupling to the other blocks (rank one -> ~0)."""
    d = jac.shape[0] // g
    ratios = []
    for k in range(g):
        others = [j for j in range(k * d)] + [j for j in range((k + 1) * d, g * d)]
        sv = np.linalg.svd(
            np.asarray(jac, np.float64)[k * d : (k + 1) * d][:, others], compute_uv=0
        )
        ratios.append(sv[1] / sv[0])
    return max(ratios)


def test_b15_blocks_interact_only_through_x0_and_the_hidden_rms():
    """Spec B15 test 3 corrected: besides x0, blocks share the hidden RMSNorm's mean square.

    The spec says output block k depends on other blocks only through x0. In the reference
    (rssm.py:151-153, 2411f7d nets.py:662-672 with block_norm False) the norm after dynhid0 spans
    all D units, so every block also sees the other blocks through that one scalar: with x fixed,
    the off-diagonal Jacobian blocks are nonzero but of rank one (outer product of d out/d ms and
    d ms/d deter), not zero.
    """
    rssm, params = _setup()
    state = _random_state(9, rssm.config)
    deter, stoch = state.deter[0], state.stoch[0]
    action = jnp.array([0.3, -0.7])

    def core(p, h):
        return _core(rssm, p, h[None], stoch[None], action[None])[0]

    x = rssm.apply({"params": params}, deter[None], stoch[None], action[None],
                   method=RSSM.core_inputs)  # fmt: skip
    recur = lambda h: rssm.apply({"params": params}, h[None], x, method=RSSM.core_recurrence)[0]
    # With the shared inputs x fixed, the only coupling is the rank-one one through the RMS.
    jac_recur = jax.jacobian(recur)(deter)
    assert np.abs(_blocks_offdiag(jac_recur)).max() > 0
    assert _coupling_rank_ratio(jac_recur) < 1e-4
    # Through x0 = SiLU(RMS(Linear(deter))) the coupling is of full rank.
    jac_core = jax.jacobian(functools.partial(core, params))(deter)
    assert _coupling_rank_ratio(jac_core) > 1e-2
    # Cut that path (dynin0's kernel zeroed): only the rank-one RMS coupling remains.
    cut = jax.tree.map(lambda v: v, params)
    cut["dynin0"]["dense_0"]["kernel"] = jnp.zeros_like(cut["dynin0"]["dense_0"]["kernel"])
    assert _coupling_rank_ratio(jax.jacobian(functools.partial(core, cut))(deter)) < 1e-4


def test_b15_action_divided_by_max_one_abs():
    """a / sg(max(1, |a|)): [3, -0.5] enters the core as [1, -0.5]."""
    rssm, params = _setup()
    state = _random_state(10, rssm.config)
    big = _core(rssm, params, state.deter, state.stoch, jnp.array([[3.0, -0.5]] * B))
    unit = _core(rssm, params, state.deter, state.stoch, jnp.array([[1.0, -0.5]] * B))
    np.testing.assert_allclose(big, unit, rtol=1e-6)


def _param_count(tree):
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


def test_b15_parameter_counts_12m():
    """12M (d = 256, S = 32, C = 16, A = 6, D = 2048, g = 8); the posterior with a 256-wide embed.

    Each count is Linear + bias + RMSNorm scale of the named layer(s): dynhid0 includes its norm,
    dyngru has none; the prior is its [d] x 2 MLP plus the logit layer, the posterior its [d] x 1
    MLP on concat(deter, embed) plus the logit layer.
    """
    config = RSSMConfig.size12m(action_dim=6)
    assert (config.deter, config.hidden, config.stoch, config.classes, config.blocks) == (
        2048, 256, 32, 16, 8)  # fmt: skip
    s = initial_state(config, 1)
    shapes = jax.eval_shape(RSSM(config).init, KEY(0), s.deter, s.stoch,
                            jnp.zeros((1, 6)), jnp.zeros((1, 256)))["params"]  # fmt: skip
    counts = {k: _param_count(v) for k, v in shapes.items()}
    assert counts["dynin0"] == 524_800
    assert counts["dynin1"] == 131_584
    assert counts["dynin2"] == 2_048
    assert counts["dynhid_0"] + counts["dynhid_norm_0"] == 2_101_248
    assert counts["dyngru"] == 1_579_008
    core = ("dynin0", "dynin1", "dynin2", "dynhid_0", "dynhid_norm_0", "dyngru")
    assert sum(counts[k] for k in core) == 4_338_688
    assert counts["prior_mlp"] + counts["prior_logit"] == 722_432
    assert counts["post_mlp"] + counts["post_logit"] == 721_920
    assert shapes["dynhid_0"]["kernel"].shape == (8, 1024, 256)
    assert shapes["dyngru"]["kernel"].shape == (8, 256, 768)


def test_b15_initial_state_is_zeros():
    s = initial_state(_tiny(), 3)
    assert s.deter.shape == (3, 16) and s.stoch.shape == (3, 3, 4)
    assert not np.any(s.deter) and not np.any(s.stoch)


def test_b15_bad_config_and_inputs_raise():
    with pytest.raises(ValueError, match="a divisor of deter"):
        RSSMConfig(deter=10, hidden=8, classes=4, action_dim=2, blocks=4)
    with pytest.raises(ValueError, match="hidden = 0 is invalid: it must be > 0"):
        RSSMConfig(deter=16, hidden=0, classes=4, action_dim=2, blocks=4)
    with pytest.raises(TypeError, match="integer"):
        embed_action(jnp.zeros((2,)), _tiny(True))
    with pytest.raises(ValueError, match="continuous actions"):
        embed_action(jnp.zeros((2, 3)), _tiny())


@pytest.mark.parametrize("dyn_layers", [0, 1, 2])
def test_b15_core_recurrence_matches_the_reference_layout(dyn_layers):
    """The block-major core (shared x kept out of the broadcast) equals rssm.py:147-158 written
    out in numpy in the reference's [B, g, .] layout: [deter_k | x] per block, dyn_layers x
    SiLU(RMSNorm over all D (eps 1e-4)(BlockLinear)), dyngru, gates. dyn_layers 0 feeds x to dyngru."""
    config = dataclasses.replace(_tiny(), dyn_layers=dyn_layers)
    rssm = RSSM(config)
    s = initial_state(config, B)
    shapes = jax.eval_shape(rssm.init, KEY(0), s.deter, s.stoch, jnp.zeros((B, 2)),
                            jnp.zeros((B, E)))  # fmt: skip
    params = _fill(shapes["params"], 3)
    deter, x = _normal(4, (B, 16)), _normal(5, (B, 24))
    got = rssm.apply({"params": params}, deter, x, method=RSSM.core_recurrence)
    g, p = 4, jax.tree.map(np.asarray, params)

    def block_linear(h, layer):
        return np.einsum("bki,kio->bko", h, layer["kernel"]) + layer["bias"].reshape(g, -1)

    groups = np.asarray(deter).reshape(B, g, 4)
    h = np.concatenate([groups, np.broadcast_to(np.asarray(x)[:, None], (B, g, 24))], -1)
    for i in range(dyn_layers):
        h = block_linear(h, p[f"dynhid_{i}"]).reshape(B, 16)
        h = h / np.sqrt(np.mean(h**2, -1, keepdims=True) + 1e-4) * p[f"dynhid_norm_{i}"]["scale"]
        h = (h / (1 + np.exp(-h))).reshape(B, g, 4)
    r, c, u = np.split(block_linear(h, p["dyngru"]), 3, axis=-1)
    r, u = 1 / (1 + np.exp(-r)), 1 / (1 + np.exp(1.0 - u))
    c = np.tanh(r * c)
    want = (u * c + (1 - u) * groups).reshape(B, 16)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
