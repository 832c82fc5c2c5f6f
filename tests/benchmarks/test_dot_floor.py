"""The dot floor's enumeration (``benchmarks/dot_floor.py``): every ``dot_general`` of a jaxpr
with its multiplicity, by the rules of ``tdmpc2_speed.matmul_flops``."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
from bench_loader import load_benchmark

floor = load_benchmark("dot_floor")


def _toy(x, w, v):
    def body(h, _):
        return jnp.tanh(h @ w), None  # [4, 5] x [5, 5], three times

    h, _ = jax.lax.scan(body, x, None, length=3)
    inner = jax.jit(lambda a, b: a @ b)  # a pjit: [4, 5] x [5, 2], once
    small = jax.lax.cond(h[0, 0] > 0, lambda: h @ v, lambda: (h @ w) @ v)  # costlier branch
    return inner(h, v).sum() + small.sum()


def test_groups_counts_and_flops_agree_with_matmul_flops():
    args = (jnp.ones((4, 5)), jnp.ones((5, 5)), jnp.ones((5, 2)))
    jaxpr = jax.make_jaxpr(_toy)(*args).jaxpr
    dots = floor.enumerate_dots(jaxpr)
    by_shape = {(d.lhs, d.rhs): c for d, c in dots.items()}
    # the scan's 3 plus the cond's costlier branch's [4,5]x[5,5]; [4,5]x[5,2] outside the
    # scan (the pjit) and in that branch
    assert by_shape == {((4, 5), (5, 5)): 4, ((4, 5), (5, 2)): 2}
    assert (
        floor.total_flops(dots)
        == floor.matmul_flops(jaxpr)
        == 4 * 2 * 4 * 5 * 5 + 2 * 2 * 4 * 5 * 2
    )
    assert all(
        d.lhs_dtype == "float32" and d.dimension_numbers == (((1,), (0,)), ((), ())) for d in dots
    )


def test_batched_dot_flops_and_the_timed_loop_runs_every_dot_of_its_chain():
    d = floor.Dot(
        (3, 4, 5), "float32", (3, 5, 2), "float32", (((2,), (1,)), ((0,), (0,))), None, None
    )
    assert d.flops == 2 * 3 * 4 * 2 * 5
    fn, ops = floor.dot_loop(d, copies=3)
    outs = fn(jnp.int32(2), ops)
    for (lhs, rhs), out in zip(ops, outs, strict=True):
        np.testing.assert_allclose(out, jnp.einsum("bik,bkj->bij", lhs, rhs), rtol=1e-5)
    # XLA keeps all three dots of the loop body (an output left unused would let it drop some)
    hlo = fn.lower(jnp.int32(2), ops).compile().as_text()
    assert len(re.findall(r" dot\(", hlo)) == 3
