"""The orthogonal initializer, safe to vmap on a small CPU: ``jax.nn.initializers.orthogonal``'s
values, one LAPACK QR per matrix.

Why not jax's own: under ``vmap`` (seeds) its QR is one batched LAPACK call that splits the
batch over the CPU thread pool and waits for the parts; when two such calls run at once (an
actor's and a critic's layers) they can hold every thread of a 2-thread pool while waiting for
each other. Measured with jax 0.10.2 on the 2-core CI machine: a jitted ``vmap`` over 2 seeds of
8 orthogonal 64x64 inits hangs within 200 calls, and vmapped recurrent PPO (GRU: orthogonal
recurrent kernels) hung in ``lapack_sgeqrf_ffi`` -> ``ParallelBatchMap``. Here a batched QR is
a ``lax.map`` of unbatched calls, which run inline on their thread.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap


@custom_vmap
def qr(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Reduced QR of one matrix (``jnp.linalg.qr``)."""
    return tuple(jnp.linalg.qr(a))


@qr.def_vmap
def _qr_vmap(axis_size, in_batched, a):
    del axis_size, in_batched  # the only input, so it is the batched one
    return jax.lax.map(qr, a), (True, True)


def orthogonal(scale: float = 1.0, column_axis: int = -1):
    """``jax.nn.initializers.orthogonal(scale, column_axis)``, drawing the same Gaussian and
    fixing the signs as ``jax.random.orthogonal`` does (same values), with :func:`qr`."""

    def init(key, shape, dtype=jnp.float32):
        if len(shape) < 2:
            raise ValueError(f"orthogonal init needs a shape of rank >= 2, got {shape}")
        if any(d == 0 for d in shape):
            return jnp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        z = jax.random.normal(key, (max(n_rows, n_cols), min(n_rows, n_cols)), dtype)
        q, r = qr(z)
        q = q * jnp.sign(jnp.diagonal(r))[None, :]
        if n_rows < n_cols:
            q = q.T
        q = q.reshape(tuple(np.delete(shape, column_axis)) + (n_cols,))
        return jnp.asarray(scale, dtype) * jnp.moveaxis(q, -1, column_axis)

    return init
