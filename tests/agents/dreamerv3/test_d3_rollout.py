"""Spec 000 B14, DreamerV3 side: the observe and imagine scans (no shared rollout helper).

B14 test 2 (closed form of a linear step function) belongs to a generic rollout helper, which
Ajax does not have (status note of spec 000); DreamerV3's scans are checked against Python loops.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ajax.agents.dreamerv3.networks import RSSM, RSSMConfig
from ajax.agents.dreamerv3.rssm import (
    RSSMState,
    imagine,
    imagine_actions,
    imagine_step,
    initial_state,
    observe,
    observe_step,
)

T, B, E, A = 4, 2, 5, 2
CONFIG = RSSMConfig(deter=16, hidden=8, classes=4, action_dim=A, stoch=3, blocks=4)
RSSM_ = RSSM(CONFIG)
TOL = dict(rtol=1e-5, atol=1e-6)
# Keys use the "rbg" generator: on CPU, threefry recompiles for every new shape at ~6 s of CPU each,
# which would dominate these tests. The functions under test take any key.
KEY = functools.partial(jax.random.key, impl="rbg")


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


def _params(seed=0):
    s = initial_state(CONFIG, B)
    shapes = jax.eval_shape(RSSM_.init, KEY(0), s.deter, s.stoch, jnp.zeros((B, A)),
                            jnp.zeros((B, E)))  # fmt: skip
    return _fill(shapes["params"], seed)


def _inputs(seed=1):
    rng = np.random.default_rng(seed)
    embed = jnp.asarray(rng.normal(size=(T, B, E)), jnp.float32)
    prev_action = jnp.asarray(rng.normal(size=(T, B, A)), jnp.float32)
    is_first = jnp.zeros((T, B), bool).at[0].set(True).at[2, 1].set(True)
    return embed, prev_action, is_first


def _start(seed=2):
    rng = np.random.default_rng(seed)
    stoch = jax.nn.one_hot(rng.integers(0, 4, size=(B, 3)), 4)
    return RSSMState(deter=jnp.asarray(rng.normal(size=(B, 16)), jnp.float32), stoch=stoch)


def _policy(key, state):
    return jnp.tanh(state.deter[:, :A]) + 0.1 * jax.random.normal(key, (B, A))


def test_b14_observe_scan_equals_python_loop():
    params, (embed, prev_action, is_first), key = _params(), _inputs(), KEY(3)
    carry, feats = jax.jit(lambda p, c: observe(RSSM_, p, c, embed, prev_action, is_first, key))(
        params, _start()
    )
    state, keys = _start(), jax.random.split(key, T)
    step = jax.jit(lambda *args: observe_step(RSSM_, *args))
    for t in range(T):
        state, feat = step(params, state, embed[t], prev_action[t], is_first[t], keys[t])
        np.testing.assert_allclose(feats.deter[t], feat.deter, **TOL)
        np.testing.assert_allclose(feats.logits[t], feat.logits, **TOL)
        np.testing.assert_array_equal(feats.stoch[t], feat.stoch)
    np.testing.assert_allclose(carry.deter, state.deter, **TOL)
    assert feats.deter.shape == (T, B, 16) and feats.logits.shape == (T, B, 3, 4)


def test_b14_imagine_scan_equals_python_loop():
    params, key = _params(), KEY(4)
    carry, feats, actions = jax.jit(lambda p, c: imagine(RSSM_, p, c, _policy, T, key))(
        params, _start()
    )
    state, step = _start(), jax.jit(lambda *args: imagine_step(RSSM_, *args))
    for t, k in enumerate(jax.random.split(key, T)):
        k_pi, k_z = jax.random.split(k)
        action = _policy(k_pi, state)
        state, feat = step(params, state, action, k_z)
        np.testing.assert_allclose(actions[t], action, **TOL)
        np.testing.assert_allclose(feats.deter[t], feat.deter, **TOL)
        np.testing.assert_array_equal(feats.stoch[t], feat.stoch)
    np.testing.assert_allclose(carry.deter, state.deter, **TOL)
    # Open-loop imagination along the same actions reproduces the states.
    _, feats2 = imagine_actions(RSSM_, params, _start(), actions, key=KEY(9))
    np.testing.assert_allclose(feats2.deter[0], feats.deter[0], **TOL)


def test_b14_keys_split_per_step():
    """Uniform posterior logits: every step's latents are fresh draws, never a repeat."""
    params = _params()
    params["post_logit"] = jax.tree.map(jnp.zeros_like, params["post_logit"])
    params["prior_logit"] = jax.tree.map(jnp.zeros_like, params["prior_logit"])
    embed, prev_action, is_first = _inputs()
    _, feats = observe(RSSM_, params, _start(), embed, prev_action, is_first, KEY(5))
    _, img, actions = imagine(RSSM_, params, _start(), _policy, T, KEY(5))
    for stoch in (feats.stoch, img.stoch):
        for t in range(1, T):
            assert not np.array_equal(stoch[t], stoch[0])
    noise = np.asarray(
        actions - jnp.tanh(jnp.concatenate([_start().deter[None], img.deter[:-1]])[..., :A])
    )
    assert len({tuple(np.round(n.ravel(), 6)) for n in noise}) == T


def test_b14_gradient_flows_through_carry_unless_stopped():
    params, (embed, prev_action, _), key = _params(), _inputs(), KEY(6)
    no_reset = jnp.zeros((T, B), bool)

    def observed(deter, is_first):
        start = RSSMState(deter=deter, stoch=_start().stoch)
        return observe(RSSM_, params, start, embed, prev_action, is_first, key)[0].deter.sum()

    grad_observed = jax.jit(jax.grad(observed))
    assert np.abs(grad_observed(_start().deter, no_reset)).max() > 1e-4
    # A reset at t = 0 cuts the path from the initial carry.
    np.testing.assert_array_equal(grad_observed(_start().deter, no_reset.at[0].set(True)), 0.0)

    def imagined(deter):
        start = RSSMState(deter=deter, stoch=_start().stoch)
        _, feats, actions = imagine(RSSM_, params, start, _policy, T, key)
        return feats.deter.sum(), actions.sum()

    g_state, g_action = jax.jit(jax.jacrev(lambda d: jnp.stack(imagined(d))))(_start().deter)
    assert np.abs(g_state).max() > 1e-4  # the dynamics pass gradients along the carry
    np.testing.assert_array_equal(g_action, 0.0)  # the policy sees sg(carry)
