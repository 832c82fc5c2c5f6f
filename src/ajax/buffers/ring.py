"""The sequence replay's storage (spec 000 B18): per-env rings of step rows, add, gather, write-back.

The state and its writes; the two papers' samplers and the storage convention are in
:mod:`ajax.buffers.sequence`, which re-exports everything public here (use it, not this module).
Positions are absolute per-env step numbers; a row's slot is its step number modulo ``capacity``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax.buffers.host_store import HostStore
from ajax.partition import constrain_data

PyTree = Any
REQUIRED_FIELDS = ("obs", "action", "reward", "is_first", "is_last", "is_terminal")
FLAG_FIELDS = ("is_first", "is_last", "is_terminal")


@struct.dataclass
class SequenceReplayState:
    """Per-env ring buffers of step rows; every position is an absolute per-env step number."""

    rows: dict[str, PyTree]  # leaves (N_env, capacity, ...)
    added: jax.Array  # (N_env,) int32, rows ever added; the write slot is added % capacity
    committed: jax.Array  # (N_env,) int32, end (exclusive) of the last completed episode
    online: jax.Array  # (N_env,) int32, no fresh (online-queue) window starts before this step
    capacity: int = struct.field(pytree_node=False)
    # with host rows: where the non-flag fields live, and this seed's (slot, version) there
    host: HostStore | None = struct.field(pytree_node=False, default=None)
    host_ref: jax.Array | None = None

    @property
    def write_ptr(self) -> jax.Array:
        """Slot the next row of each env goes to."""
        return self.added % self.capacity

    @property
    def count(self) -> jax.Array:
        """Rows currently held per env."""
        return jnp.minimum(self.added, self.capacity)

    @property
    def oldest(self) -> jax.Array:
        """Step number of the oldest row still held per env."""
        return jnp.maximum(self.added - self.capacity, 0)


@struct.dataclass
class SampleIndex:
    """Where each window of a batch came from: (B,) env and step number of its first row."""

    env_idx: jax.Array
    start_idx: jax.Array


def init(
    example_row: Mapping[str, PyTree],
    num_envs: int,
    capacity: int,
    host: bool = False,
    seed_key: jax.Array | None = None,
) -> SequenceReplayState:
    """Empty rings shaped like ``example_row`` (one unbatched row), flags stored as bool.

    ``host`` keeps every other field in host memory (module docstring). Under vmap over seeds
    each seed registers its own rings only if the registration's input is batched, so pass a
    per-seed ``seed_key`` (the seed's key) with ``host``; else the row must vary per seed."""
    if not isinstance(example_row, Mapping):
        raise TypeError(f"example_row must be a dict of fields, got {type(example_row).__name__}")
    missing = [k for k in REQUIRED_FIELDS if k not in example_row]
    if missing:
        raise ValueError(
            f"example_row lacks required fields {missing}; rows need {REQUIRED_FIELDS}"
        )
    flag_shapes = {k: jnp.shape(example_row[k]) for k in FLAG_FIELDS}
    if any(flag_shapes.values()):
        raise ValueError(f"flags must be scalars per row, got shapes {flag_shapes}")
    for name, value in (("num_envs", num_envs), ("capacity", capacity)):
        if not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")

    def empty(path, leaf):
        dtype = bool if path[0].key in FLAG_FIELDS else jnp.asarray(leaf).dtype
        return jnp.zeros((num_envs, capacity, *jnp.shape(leaf)), dtype)

    row = dict(example_row)
    store, ref = None, None
    if host:
        on_host = {k: v for k, v in row.items() if k not in FLAG_FIELDS}
        spec = lambda v: jax.ShapeDtypeStruct(jnp.shape(v), jnp.asarray(v).dtype)
        store = HostStore(jax.tree.map(spec, on_host), num_envs, capacity)
        ref = store.register(jax.tree.map(jnp.asarray, (on_host, seed_key)))
        row = {k: row[k] for k in FLAG_FIELDS}
    rows = jax.tree_util.tree_map_with_path(empty, row)
    zeros = jnp.zeros((num_envs,), jnp.int32)
    return SequenceReplayState(rows=rows, added=zeros, committed=zeros, online=zeros,
                               capacity=int(capacity), host=store, host_ref=ref)  # fmt: skip


def stored_fields(state: SequenceReplayState) -> dict[str, PyTree]:
    """Every stored field, ``[N_env, capacity, ...]``: arrays on the device, shapes of host rows."""
    return dict(state.rows) if state.host is None else {**state.rows, **state.host.ring_shapes()}


def _split_host(state: SequenceReplayState, fields: dict) -> tuple[dict, dict]:
    """``fields`` as (the device's, the host's)."""
    return (fields, {}) if state.host is None else state.host.split(fields)


def _check_rows(state: SequenceReplayState, rows: Mapping[str, PyTree], lead: tuple) -> list:
    """Leaves of ``rows`` cast to the stored dtypes, after checking structure, shape and kind."""
    stored, treedef = jax.tree_util.tree_flatten_with_path(stored_fields(state))
    given, given_def = jax.tree.flatten(dict(rows))
    if given_def != treedef:
        raise ValueError(f"rows have structure {given_def}, the buffer stores {treedef}")
    out = []
    for (path, s), g in zip(stored, given, strict=True):
        name = jax.tree_util.keystr(path[:1])
        g = jnp.asarray(g)
        want = (*lead, *s.shape[2:])
        if g.shape != want:
            raise ValueError(f"field {name} has shape {g.shape}, expected {want} (leading dims)")
        if jnp.dtype(g.dtype).kind != jnp.dtype(s.dtype).kind and s.dtype != bool:
            raise TypeError(f"field {name} has dtype {g.dtype}, the buffer stores {s.dtype}")
        out.append(g.astype(s.dtype))
    return out


def add(state: SequenceReplayState, rows: Mapping[str, PyTree]) -> SequenceReplayState:
    """Append one row per env (leading dim N_env) and commit episodes that just ended.

    An env's rows up to its latest is_last row (inclusive), or up to its latest is_first row
    (exclusive, for an episode abandoned without is_last), belong to completed episodes.
    """
    leaves = _check_rows(state, rows, (state.added.shape[0],))
    return _add(state, jax.tree.unflatten(jax.tree.structure(stored_fields(state)), leaves))


@jax.jit
def _add(state: SequenceReplayState, rows: dict[str, PyTree]) -> SequenceReplayState:
    env, slot = jnp.arange(state.added.shape[0]), state.write_ptr
    rows, host_rows = _split_host(state, rows)
    new_rows = jax.tree.map(lambda buf, row: buf.at[env, slot].set(row), state.rows, rows)
    ref = state.host_ref
    if host_rows:
        ref = state.host.write(ref, slot, host_rows)
    step = state.added
    committed = jnp.maximum(state.committed, jnp.where(rows["is_first"], step, 0))
    committed = jnp.maximum(committed, jnp.where(rows["is_last"], step + 1, 0))
    return state.replace(rows=new_rows, added=step + 1, committed=committed, host_ref=ref)


@functools.partial(jax.jit, static_argnames="length")
def gather_windows(
    state: SequenceReplayState, index: SampleIndex, length: int
) -> dict[str, PyTree]:
    """Rows start..start+length-1 of each indexed window, (B, length, ...), ring-wrapped."""
    return gather(state, index, length)[0]


def gather(state, index, length):
    """:func:`gather_windows`, and the state with its host ref advanced past the gather."""
    slot = (index.start_idx[:, None] + jnp.arange(length)) % state.capacity
    env = index.env_idx[:, None]
    rows = jax.tree.map(lambda buf: buf[env, slot], state.rows)
    if state.host is not None:
        host_rows, ref = state.host.gather(state.host_ref, jnp.broadcast_to(env, slot.shape), slot)
        rows, state = {**rows, **host_rows}, state.replace(host_ref=ref)
    # the update batch splits over a data mesh's devices (a no-op otherwise)
    return constrain_data(rows), state


def write_back(
    state: SequenceReplayState,
    index: SampleIndex,
    fields: Mapping[str, PyTree],
    offset: int = 1,
) -> SequenceReplayState:
    """Overwrite ``fields`` (leaves (B, T', ...)) at rows start+offset..start+offset+T'-1.

    DreamerV3 writes its posterior latents back at rows 1..64 of each 65-row window (offset 1,
    T' = 64; dreamerv3/agent.py:train with replay_context=1, embodied/core/replay.py:update), so
    the next window starting there begins from a fresh latent. Rows the ring has overwritten since
    the window was sampled are skipped, as the reference skips chunks it has freed. Where windows
    of one batch overlap, which write lands is unspecified (the reference's last one wins).
    """
    if not fields:
        raise ValueError("write_back needs at least one field to write")
    stored = stored_fields(state)
    unknown = [k for k in fields if k not in stored]
    if unknown:
        raise ValueError(f"write_back fields {unknown} are not stored; stored: {list(stored)}")
    batch = index.env_idx.shape[0]
    steps = jax.tree.leaves(fields)[0].shape[1]
    if offset < 0 or offset + steps > state.capacity:
        raise ValueError(f"rows offset {offset}..{offset + steps - 1} exceed capacity")
    sub = {k: stored[k] for k in fields}
    leaves = _check_rows(state.replace(rows=sub, host=None), fields, (batch, steps))
    return _write_back(state, index, jax.tree.unflatten(jax.tree.structure(sub), leaves), offset)


@functools.partial(jax.jit, static_argnames="offset")
def _write_back(state, index, fields, offset):
    steps = jax.tree.leaves(fields)[0].shape[1]
    step = index.start_idx[:, None] + offset + jnp.arange(steps)
    env = index.env_idx[:, None]
    held = (step >= state.oldest[env]) & (step < state.added[env])
    slot = jnp.where(held, step % state.capacity, state.capacity)  # out of range: dropped
    fields, host_fields = _split_host(state, dict(fields))
    new = jax.tree.map(
        lambda buf, v: buf.at[env, slot].set(v, mode="drop"),
        dict((k, state.rows[k]) for k in fields),
        fields,
    )
    ref = state.host_ref
    if host_fields:
        ref = state.host.scatter(ref, jnp.broadcast_to(env, slot.shape), slot, host_fields)
    return state.replace(rows=dict(state.rows, **new), host_ref=ref)


def check_window(state: SequenceReplayState, length: int, batch_size: int) -> None:
    if not isinstance(length, int | np.integer) or length < 1:
        raise ValueError(f"window length must be a positive int, got {length!r}")
    if not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if length > state.capacity:
        raise ValueError(
            f"capacity {state.capacity} is smaller than a window of {length} rows; "
            "raise capacity or shorten the window"
        )


def refuse_if_empty(available: jax.Array, what: str) -> None:
    """Raise outside jit when nothing can be sampled; traced values cannot be checked."""
    if not isinstance(available, jax.core.Tracer) and not bool(available):
        raise ValueError(f"no valid {what} window in the buffer yet; add more rows before sampling")
