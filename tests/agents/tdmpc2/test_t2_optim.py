"""Spec 000 B17, TD-MPC2 rows: grouped Adam after one global clip, and the policy's Adam."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ajax.agents.tdmpc2.optim import adam_grouped, component_labels, pi_adam

# Each group's gradient has norm 30 (encoder) and 40 (rest): global norm 50 > 20.
GRADS = {
    "encoder": jnp.full((4,), 15.0),
    "dynamics": jnp.full((2,), 40.0 / np.sqrt(2.0)),
}
PARAMS = jax.tree.map(jnp.zeros_like, GRADS)


def _first_update(tx, grads=GRADS, params=PARAMS):
    updates, _ = jax.jit(tx.update)(grads, tx.init(params), params)
    return updates


def test_b17_t2_global_clip_before_groups():
    """g_enc = 30 and g_rest = 40 are clipped together to 12 and 16 (one global norm of 50).

    Adam's update is scale-invariant, so the clip is read from its first moment:
    mu = (1 - b1) * clipped grad. Clipping each group alone would leave the encoder at 20.
    """
    clipped, _ = optax.clip_by_global_norm(20.0).update(GRADS, None)
    np.testing.assert_allclose(optax.tree.norm(clipped["encoder"]), 12.0, rtol=1e-6)
    np.testing.assert_allclose(optax.tree.norm(clipped["dynamics"]), 16.0, rtol=1e-6)
    tx = adam_grouped()
    _, state = jax.jit(tx.update)(GRADS, tx.init(PARAMS), PARAMS)
    groups = state[1].inner_states
    mu_enc = groups["encoder"].inner_state[0].mu["encoder"]
    mu_rest = groups["rest"].inner_state[0].mu["dynamics"]
    np.testing.assert_allclose(jnp.linalg.norm(mu_enc), 0.1 * 12.0, rtol=1e-5)
    np.testing.assert_allclose(jnp.linalg.norm(mu_rest), 0.1 * 16.0, rtol=1e-5)


def test_b17_t2_first_step_updates():
    """-lr_g * m_hat / (sqrt(v_hat) + eps) at t = 1: -0.3 * 3e-4 (encoder), -3e-4 (rest).

    The pinned values carry optax's float32 bias corrections (1 - b**t with b rounded to
    float32), 6.7e-6 relative below torch's float64 ones: a documented deviation.
    """
    updates = _first_update(adam_grouped())
    np.testing.assert_allclose(updates["encoder"], -8.99994e-5, rtol=1e-6)
    np.testing.assert_allclose(updates["dynamics"], -2.99998e-4, rtol=1e-6)
    np.testing.assert_allclose(updates["encoder"], -9e-5, rtol=1e-5)  # the exact-arithmetic value


def test_b17_t2_pi_adam():
    """chain(clip_by_global_norm(20), adam(3e-4, eps=1e-5)): eps matters for small gradients."""
    small = {"w": jnp.array([1e-5])}
    updates = _first_update(pi_adam(), small, {"w": jnp.zeros(1)})
    # m_hat / (sqrt(v_hat) + eps) = 1e-5 / (1e-5 + 1e-5) = 0.5
    np.testing.assert_allclose(updates["w"], -1.5e-4, rtol=1e-4)
    big = {"w": jnp.array([3.0, 4.0, 0.0]) * 10}  # norm 50 -> clipped to 20
    clipped, _ = optax.clip_by_global_norm(20.0).update(big, None)
    np.testing.assert_allclose(clipped["w"], [12.0, 16.0, 0.0], rtol=1e-6)
    updates = _first_update(pi_adam(), big, {"w": jnp.zeros(3)})
    np.testing.assert_allclose(updates["w"][:2], -3e-4, rtol=1e-5)


def test_b17_t2_bad_arguments():
    with pytest.raises(ValueError, match="scales must be >= 0"):
        adam_grouped(lr_scales={"encoder": -1.0})
    with pytest.raises(ValueError, match="need lr > 0"):
        adam_grouped(lr=0.0)
    with pytest.raises(ValueError, match="reserved"):
        adam_grouped(lr_scales={"rest": 0.5})
    with pytest.raises(ValueError, match="need lr > 0"):
        pi_adam(clip_norm=-1.0)
    with pytest.raises(ValueError, match="dict of components"):
        component_labels(jnp.zeros(3))
