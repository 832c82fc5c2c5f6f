"""Atomic checkpoints of a whole training state (agent, env, replay, keys) with orbax.

orbax writes each step into a temporary directory and renames it when complete, so a crash or a
kill during a save leaves the previous checkpoint intact. Keys are stored as raw uint32 data.
orbax refuses zero-size arrays (MJX states hold some, e.g. ``data.act`` of a model without
actuator activations), so those are stored as one placeholder element and restored from the
template, which already holds their (empty) value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp


def _manager(directory: str | Path, max_to_keep: int | None = 2) -> ocp.CheckpointManager:
    options = ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
    )
    return ocp.CheckpointManager(Path(directory).absolute(), options=options)


def _storable(x) -> np.ndarray:
    x = np.asarray(x)
    return np.zeros((1,), x.dtype) if x.size == 0 else x


def save_checkpoint(directory: str | Path, step: int, state: Any, max_to_keep: int = 2) -> None:
    """Save ``state`` (a pytree of arrays) as checkpoint ``step``; returns when it is on disk."""
    with _manager(directory, max_to_keep) as mngr:
        host = jax.tree.map(_storable, jax.device_get(state))
        mngr.save(step, args=ocp.args.StandardSave(host), force=True)
        mngr.wait_until_finished()


def latest_step(directory: str | Path) -> int | None:
    """The newest complete checkpoint's step, or None."""
    if not Path(directory).exists():
        return None
    with _manager(directory) as mngr:
        return mngr.latest_step()


def restore_checkpoint(directory: str | Path, template: Any, step: int | None = None) -> Any:
    """Restore checkpoint ``step`` (default: the newest) into the structure of ``template``."""
    with _manager(directory) as mngr:
        step = mngr.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {directory}")
        host = jax.tree.map(_storable, jax.device_get(template))
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, host)
        restored = mngr.restore(step, args=ocp.args.StandardRestore(abstract))
    return jax.tree.map(
        lambda t, r: jax.numpy.asarray(t if t.size == 0 else r, dtype=t.dtype), template, restored
    )
