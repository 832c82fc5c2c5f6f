"""``lockstep``: a step-derived predicate stays a real branch under the seed vmap."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ajax.training.rollout import lockstep


def _run(state):
    def body(carry, _):
        due = lockstep(carry["step"] >= 2)
        value = jax.lax.cond(due, lambda: carry["value"] * 2.0, lambda: carry["value"])
        return {"step": carry["step"] + 1, "value": value}, due

    return jax.lax.scan(body, state, None, length=4)


def test_lockstep_keeps_cond_a_branch_under_vmap():
    state = {"step": jnp.zeros((2,), jnp.int32), "value": jnp.array([1.0, 3.0])}
    jaxpr = str(jax.make_jaxpr(jax.vmap(_run))(state))
    assert "cond[" in jaxpr and "select_n" not in jaxpr  # a batched predicate gives select_n
    (final, due) = jax.vmap(_run)(state)
    np.testing.assert_array_equal(final["value"], [4.0, 12.0])  # doubled at steps 2 and 3
    np.testing.assert_array_equal(due, [[False, False, True, True]] * 2)
    one, _ = _run({"step": jnp.int32(0), "value": jnp.float32(3.0)})  # unvmapped: identity
    assert float(one["value"]) == 12.0
