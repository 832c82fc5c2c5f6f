"""Checkpoints: a save/restore round trip is exact, including leaves orbax cannot store."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ajax.training.checkpoint import latest_step, restore_checkpoint, save_checkpoint


def test_checkpoint_round_trip_with_zero_size_leaves(tmp_path):
    """MJX states hold zero-size arrays (``data.act`` without actuator activations), which
    orbax refuses; they round-trip from the template, every other leaf bit for bit."""
    state = {
        "w": jnp.arange(6, dtype=jnp.float32).reshape(2, 3) / 7,
        "act": jnp.zeros((2, 0), jnp.float32),
        "key": jnp.array([1, 2], jnp.uint32),
        "step": jnp.int32(5),
    }
    save_checkpoint(tmp_path, 3, state)
    assert latest_step(tmp_path) == 3
    template = {k: jnp.zeros_like(v) for k, v in state.items()}
    back = restore_checkpoint(tmp_path, template)
    for name, value in state.items():
        assert back[name].shape == value.shape and back[name].dtype == value.dtype, name
        np.testing.assert_array_equal(np.asarray(back[name]), np.asarray(value), err_msg=name)
