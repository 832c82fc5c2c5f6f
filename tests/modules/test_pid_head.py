"""Tests of ajax.modules.pid_head (spec 002, section ajax.modules.pid_head)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.modules.pid_head import PIDCarry, PIDOutputHead, init_pid_carry

# Hand inputs: T=4 steps, B=2 entries, n=2 channels.
Z = np.array(
    [
        [[1.0, -2.0], [0.5, 0.0]],
        [[2.0, 1.0], [-1.0, 3.0]],
        [[-1.0, 0.5], [0.0, 1.0]],
        [[0.5, 0.5], [2.0, -1.0]],
    ],
    np.float32,
)
NO_RESETS = np.zeros((4, 2), bool)


def set_gains(params, **gains):
    return {"params": {**params["params"], **{k: jnp.asarray(v) for k, v in gains.items()}}}


def run(head, params, z, resets, carry=None):
    carry = init_pid_carry(z.shape[1], z.shape[2]) if carry is None else carry
    return head.apply(params, carry, jnp.asarray(z), jnp.asarray(resets))


def init(head, batch=2):
    z = jnp.zeros((1, batch, head.n_outputs))
    return head.init(jax.random.key(0), init_pid_carry(batch, head.n_outputs), z, z[..., 0] > 0)


def test_pid_head_law_on_hand_inputs():
    head = PIDOutputHead(n_outputs=2)
    kp, ki, kd = np.array([1.5, -0.5]), np.array([0.25, 2.0]), np.array([-1.0, 0.3])
    params = set_gains(init(head), kp=kp, ki=ki, kd=kd)
    carry, u = run(head, params, Z, NO_RESETS)
    integral = np.cumsum(Z, axis=0)
    previous = np.concatenate([np.zeros_like(Z[:1]), Z[:-1]])
    expected = kp * Z + ki * integral + kd * (Z - previous)
    np.testing.assert_allclose(u, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(carry.integral, integral[-1], rtol=1e-6)
    np.testing.assert_allclose(carry.previous, Z[-1], rtol=1e-6)


def test_pid_head_identity_at_init_with_only_p():
    head = PIDOutputHead(n_outputs=2, use_i=False, use_d=False, kp_init=1.0)
    params = init(head)
    assert set(params["params"]) == {"kp"}  # a disabled term has no parameter
    _, u = run(head, params, Z, NO_RESETS)
    np.testing.assert_allclose(u, Z, rtol=1e-6)


def test_pid_head_default_init_is_identity_with_every_term():
    head = PIDOutputHead(n_outputs=2)
    params = init(head)
    assert set(params["params"]) == {"kp", "ki", "kd"}
    _, u = run(head, params, Z, NO_RESETS)
    np.testing.assert_allclose(u, Z, rtol=1e-6)


def test_pid_head_disabled_terms_have_no_parameter():
    params = init(PIDOutputHead(n_outputs=3, use_p=False, use_d=False))
    assert set(params["params"]) == {"ki"}
    assert params["params"]["ki"].shape == (3,)


def test_pid_head_anti_windup_stops_integral_then_unwinds():
    """Integral-only head (ki = 1) on a constant error: it winds up to the limit, holds, then a
    negative error unwinds it at once."""
    head = PIDOutputHead(n_outputs=1, use_p=False, use_d=False, ki_init=1.0, anti_windup=2.5)
    params = init(head, batch=1)
    z = np.array([1.0] * 6 + [-1.0] * 3, np.float32).reshape(9, 1, 1)
    carry, u = run(head, params, z, np.zeros((9, 1), bool))
    # 1, 2 accumulate; 3 would pass 2.5 in the saturating direction: held at 2.
    np.testing.assert_allclose(u[:, 0, 0], [1, 2, 2, 2, 2, 2, 1, 0, -1], atol=1e-6)
    np.testing.assert_allclose(carry.integral[0, 0], -1.0, atol=1e-6)
    # Without anti-windup the integral winds up to 6 and takes 6 steps to come back.
    free = PIDOutputHead(n_outputs=1, use_p=False, use_d=False, ki_init=1.0)
    _, u_free = run(free, init(free, batch=1), z, np.zeros((9, 1), bool))
    np.testing.assert_allclose(u_free[:, 0, 0], [1, 2, 3, 4, 5, 6, 5, 4, 3], atol=1e-6)


def test_pid_head_anti_windup_respects_gain_sign_and_other_terms():
    """A negative ki saturates negatively; the limit applies to the full pre-squash output."""
    head = PIDOutputHead(n_outputs=1, use_d=False, kp_init=1.0, ki_init=-1.0, anti_windup=3.0)
    params = init(head, batch=1)
    z = np.full((4, 1, 1), 1.0, np.float32)
    _, u = run(head, params, z, np.zeros((4, 1), bool))
    # u = z - I: 1-1=0, 1-2=-1, 1-3=-2, 1-4=-3 (|u| not > 3: accumulates)
    np.testing.assert_allclose(u[:, 0, 0], [0, -1, -2, -3], atol=1e-6)
    z = np.full((6, 1, 1), 1.0, np.float32)
    carry, u = run(head, params, z, np.zeros((6, 1), bool))
    np.testing.assert_allclose(u[:, 0, 0], [0, -1, -2, -3, -3, -3], atol=1e-6)
    np.testing.assert_allclose(carry.integral[0, 0], 4.0, atol=1e-6)


def test_pid_head_reset_clears_integral_and_previous():
    head = PIDOutputHead(n_outputs=2)
    kp, ki, kd = np.array([0.5, 1.0]), np.array([1.0, 0.5]), np.array([2.0, -1.0])
    params = set_gains(init(head), kp=kp, ki=ki, kd=kd)
    resets = np.array([[False, False], [False, True], [True, False], [False, False]])
    _, u = run(head, params, Z, resets)
    # Entry by entry: the episode restarting at t runs as a fresh sequence from t.
    for b in range(2):
        starts = [0] + [t for t in range(4) if resets[t, b]]
        for s, e in zip(starts, starts[1:] + [4], strict=True):
            seg = Z[s:e, b : b + 1]
            _, u_seg = run(head, params, seg, np.zeros((e - s, 1), bool))
            np.testing.assert_allclose(u[s:e, b], u_seg[:, 0], rtol=1e-6, atol=1e-6)
    # and by hand at the reset step (t=1, b=1): I=z, prev=0 -> u = (kp + ki + kd) z.
    np.testing.assert_allclose(u[1, 1], (kp + ki + kd) * Z[1, 1], rtol=1e-6)


def test_pid_head_step_equals_sequence():
    head = PIDOutputHead(n_outputs=2, anti_windup=1.5)
    params = set_gains(init(head), kp=[0.7, -0.3], ki=[0.6, 0.9], kd=[0.2, 0.4])
    resets = np.array([[False, False], [False, True], [True, False], [False, False]])
    carry_seq, u_seq = run(head, params, Z, resets)
    step = jax.jit(lambda c, z, r: head.apply(params, c, z, r))
    carry = init_pid_carry(2, 2)
    for t in range(4):
        carry, u_t = step(carry, jnp.asarray(Z[t : t + 1]), jnp.asarray(resets[t : t + 1]))
        np.testing.assert_allclose(u_t[0], u_seq[t], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(carry.integral, carry_seq.integral, rtol=1e-6)
    np.testing.assert_allclose(carry.previous, carry_seq.previous, rtol=1e-6)


def test_init_pid_carry_is_zero():
    carry = init_pid_carry(3, 2)
    assert isinstance(carry, PIDCarry)
    assert carry.integral.shape == carry.previous.shape == (3, 2)
    assert not np.any(carry.integral) and not np.any(carry.previous)
    np.testing.assert_array_equal(PIDOutputHead(n_outputs=2).initialize_carry(3).integral, 0.0)


def test_pid_head_gains_are_learnable():
    head = PIDOutputHead(n_outputs=2)
    params = init(head)
    grads = jax.grad(lambda p: run(head, p, Z, NO_RESETS)[1].sum())(params)
    for name in ("kp", "ki", "kd"):
        assert np.all(np.abs(grads["params"][name]) > 0)


@pytest.mark.parametrize(
    ("kwargs", "z_shape", "reset_shape", "match"),
    [
        ({}, (4, 2, 3), (4, 2), "time-major"),
        ({}, (2, 2), (2,), "time-major"),
        ({}, (4, 2, 2), (4,), "resets"),
        ({"anti_windup": 0.0}, (4, 2, 2), (4, 2), "anti_windup"),
    ],
)
def test_pid_head_refuses_bad_input(kwargs, z_shape, reset_shape, match):
    head = PIDOutputHead(n_outputs=2, **kwargs)
    with pytest.raises(ValueError, match=match):
        head.init(
            jax.random.key(0), init_pid_carry(2, 2), jnp.zeros(z_shape), jnp.zeros(reset_shape)
        )


def test_pid_head_refuses_carry_of_wrong_batch():
    head = PIDOutputHead(n_outputs=2)
    with pytest.raises(ValueError, match="init_pid_carry"):
        head.init(jax.random.key(0), init_pid_carry(3, 2), jnp.zeros((1, 2, 2)), jnp.zeros((1, 2)))
