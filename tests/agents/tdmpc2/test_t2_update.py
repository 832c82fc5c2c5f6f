"""TD-MPC2 losses, TD target (B11 one-step, B16 termination) and one full update (B10, B17)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.tdmpc2 import (
    TDMPC2Config,
    WorldModel,
    draw_update_noise,
    losses,
    update_with_noise,
)
from ajax.agents.tdmpc2.update import init_state
from ajax.buffers.windows import TDMPC2Slice

CFG = TDMPC2Config(
    enc_dim=16, mlp_dim=16, latent_dim=16, num_q=3, batch_size=4, episodic=True, dropout=0.0
)
H, B, O, A = CFG.planner.horizon, CFG.batch_size, 3, 2
MODEL = WorldModel(CFG, A)
_STEP = jax.jit(lambda s, b, n: update_with_noise(CFG, MODEL, 0.9, s, b, n))  # compiled once


def _batch(seed=0, terminated=None):
    rng = np.random.default_rng(seed)
    term = np.zeros((H, B), bool) if terminated is None else terminated
    return TDMPC2Slice(
        obs=jnp.asarray(rng.normal(size=(H + 1, B, O)), jnp.float32),
        action=jnp.asarray(rng.uniform(-1, 1, size=(H, B, A)), jnp.float32),
        reward=jnp.asarray(rng.normal(size=(H, B)), jnp.float32),
        terminated=jnp.asarray(term),
    )


def test_b11_t2_td_target_one_step_and_absorbing_termination():
    r = jnp.array([1.0, 2.0, -1.0])
    q = jnp.array([10.0, 20.0, 30.0])
    term = jnp.array([False, True, False])
    y = losses.td_target(r, term, 0.9, q)
    # lambda = 0, T = 1: r + gamma (1 - term) q; a terminal step keeps only its reward.
    np.testing.assert_allclose(y, [10.0, 2.0, 26.0], rtol=1e-6)


def test_t2_rho_weighting_of_h_step_losses():
    np.testing.assert_allclose(losses.rho_weights(0.5, 4), [1.0, 0.5, 0.25, 0.125])
    z_pred = jnp.stack([jnp.full((2, 3), v) for v in (1.0, 2.0, 3.0)])
    # per-step MSEs 1, 4, 9 -> (1 + 0.5 * 4 + 0.25 * 9) / 3
    np.testing.assert_allclose(
        losses.consistency_loss(z_pred, jnp.zeros_like(z_pred), 0.5), 5.25 / 3, rtol=1e-6
    )
    with pytest.raises(ValueError, match="rho"):
        losses.rho_weights(0.0, 3)


def test_b16_t2_termination_loss_at_zero_logit_is_log2():
    loss = losses.termination_loss(jnp.zeros((H, B)), jnp.asarray(_batch().terminated))
    np.testing.assert_allclose(loss, 0.6931472, rtol=1e-6)


def test_t2_policy_loss_scale_and_entropy():
    q = jnp.array([[2.0, 4.0], [6.0, 8.0]])
    ent = jnp.ones_like(q)
    # step 0: -(0.1 + 3 / 2) = -1.6; step 1: 0.5 * -(0.1 + 7 / 2) = -1.8; mean -1.7
    np.testing.assert_allclose(losses.policy_loss(q, ent, 2.0, 0.1, 0.5), -1.7, rtol=1e-6)


@pytest.mark.slow  # 15-41 s on 2 cores
def test_t2_update_terminating_batch():
    """A hand-made episodic batch: the termination head trains toward the labels, the TD target
    of a terminal step is its reward, and the target Qs move by the EMA after both steps."""
    model, step = MODEL, _STEP
    state = init_state(CFG, model, jax.random.PRNGKey(0), O)
    assert "termination" in state.params
    term = np.zeros((H, B), bool)
    term[-1, :2] = True
    batch = _batch(1, term)
    noise = draw_update_noise(jax.random.PRNGKey(1), CFG, A)
    new, metrics = step(state, batch, noise)
    first_loss = float(metrics["termination_loss"])
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert float(metrics["termination_loss"]) > 0
    # target Qs: tau * new online + (1 - tau) * old target (B10, after both steps)
    expect = jax.tree.map(
        lambda t, o: (1 - CFG.tau) * t + CFG.tau * o, state.target_Qs, new.params["Qs"]
    )
    for a, b in zip(jax.tree.leaves(new.target_Qs), jax.tree.leaves(expect), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)
    # repeated updates on the same batch drive the termination logits toward the labels
    for i in range(30):
        new, metrics = step(new, batch, draw_update_noise(jax.random.PRNGKey(2 + i), CFG, A))
    assert float(metrics["termination_loss"]) < first_loss - 0.05
    # the value target of a terminal step ignores the bootstrap
    next_z = model.apply({"params": new.params}, batch.obs[1:], method="encode")
    logits = model.apply({"params": new.params}, next_z, method="termination")
    assert float(jnp.mean(logits[-1, :2])) > float(jnp.mean(logits[-1, 2:]))


@pytest.mark.slow  # 35-65 s; the parity fixtures pin a whole update against the official one
def test_t2_update_is_deterministic_given_noise_and_every_component_moves():
    state = init_state(CFG, MODEL, jax.random.PRNGKey(0), O)
    noise = draw_update_noise(jax.random.PRNGKey(3), CFG, A)
    a, _ = _STEP(state, _batch(2), noise)
    b, _ = _STEP(state, _batch(2), noise)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
    # every component changed (world model by its optimiser, pi by its own)
    for name in ("encoder", "dynamics", "reward", "pi", "Qs", "termination"):
        moved = jax.tree.map(
            lambda u, v: float(jnp.max(jnp.abs(u - v))), a.params[name], state.params[name]
        )
        assert max(jax.tree.leaves(moved)) > 0, name
