"""``ajax.networks.orthogonal``: jax's orthogonal values, without the batched-QR deadlock."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from ajax.networks.orthogonal import orthogonal


@pytest.mark.parametrize("shape, axis", [((64, 64), -1), ((3, 17), -1), ((17, 3), -1),
                                         ((4, 5, 6), -1), ((4, 5, 6), 0)])  # fmt: skip
@pytest.mark.parametrize("scale", [1.0, 0.01])
def test_values_equal_jax_orthogonal_batched_and_not(shape, axis, scale):
    key = jax.random.PRNGKey(3)
    ours, theirs = orthogonal(scale, axis), jax.nn.initializers.orthogonal(scale, axis)
    np.testing.assert_array_equal(ours(key, shape), theirs(key, shape))
    keys = jax.random.split(key, 3)
    np.testing.assert_array_equal(
        jax.jit(jax.vmap(lambda k: ours(k, shape)))(keys),
        jax.vmap(lambda k: theirs(k, shape))(keys),
    )


def test_vmapped_inits_run_to_the_end():
    """The pattern that hangs jax's initializer on a 2-core CPU (8 inits per seed, 2 seeds,
    200 jitted calls) finishes; run in a subprocess so a hang fails instead of blocking."""
    script = textwrap.dedent("""
        import jax
        from ajax.networks.orthogonal import orthogonal
        init = orthogonal()
        f = jax.jit(jax.vmap(lambda k: [init(s, (64, 64)) for s in jax.random.split(k, 8)]))
        for i in range(200):
            jax.block_until_ready(f(jax.random.split(jax.random.PRNGKey(i), 2)))
        print("done")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=False)  # fmt: skip
    assert out.returncode == 0 and "done" in out.stdout, out.stderr[-2000:]


def test_rank_one_shape_is_refused():
    with pytest.raises(ValueError, match="rank >= 2"):
        orthogonal()(jax.random.PRNGKey(0), (5,))
