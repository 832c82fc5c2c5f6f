"""Sequence replay shared by the world-model agents (spec 000 B18): per-env rings, two samplers.

Storage. One ring of ``capacity`` rows per environment, ``[N_env, capacity]``, filled one row per
env per vector step by :func:`add`. A row is a dict pytree with at least ``obs``, ``action``,
``reward``, ``is_first``, ``is_last`` and ``is_terminal``; extra fields (DreamerV3's latent
``deter``/``stoch``) ride along and can be overwritten later with :func:`write_back`. Positions are
kept as absolute per-env step numbers (``added``, ``committed``, ``online``); a row's slot is its
step number modulo ``capacity``, and :class:`SampleIndex` reports step numbers, so a write-back
aimed at rows the ring has since overwritten is dropped rather than corrupting newer data.

One storage convention, DreamerV3's (embodied driver with explicit resets, option (a) of spec 000
B18 Q1): row t = (x_t, r_t received on entering x_t, a_t chosen after x_t, flags). DreamerV3's
``prevact`` for row t is the action stored at row t - 1, which its agent prepends itself.
TD-MPC2's row k = (o_k, a_{k-1}, r_{k-1}) shifts actions by one; :func:`sample_tdmpc2` derives it
(:func:`ajax.buffers.windows.tdmpc2_slice_from_rows`). Episodes end with their own is_last row
(the terminal observation), followed by the next episode's is_first row (reward 0).

Samplers, both drawing with explicit keys and static shapes (integer draws plus searchsorted,
exact, no rejection loop, so cost does not depend on how many windows are valid):

- :func:`sample_dreamerv3`: stride-1 windows of ``length`` rows (65) that cross episode
  boundaries, uniform over windows with replacement, annotated by
  :func:`~ajax.buffers.windows.annotate_dreamerv3`; in training, fresh non-overlapping windows
  (the reference's online queue) are handed out first. It returns the new state too.
- :func:`sample_tdmpc2`: (H + 1)-row windows inside one completed episode, uniform over episodes
  and then over starts (torchrl SliceSampler), equal to uniform over windows when episodes have
  equal length.

Sampling before any valid window exists: called eagerly, the samplers raise ``ValueError``; under
``jit``/``vmap`` they cannot, and return arbitrary in-range windows, so gate jitted calls on
:func:`can_sample_dreamerv3` / :func:`can_sample_tdmpc2`.

Host rows. ``init(..., host=True)`` keeps every field but the flags in host memory
(:class:`~ajax.buffers.host_store.HostStore`, reached by callbacks from the same jitted code), so
a device holds only flags and positions; batches and write-backs are the device replay's, bitwise.

Every public function checks its arguments in Python, then runs a jitted core, so eager calls reuse
compiled code; all of them may also be called inside ``jit``/``vmap``/``scan``. Step numbers are
int32: at most 2**31 - 1 rows per env.

Why not flashbax: its trajectory buffer (Ajax ``get_buffer(sequence_length=...)``) gives the same
stride-1 episode-crossing windows, but it returns no indices (so DreamerV3's latent write-back is
impossible), has no online queue and no episode-validity filter for TD-MPC2.
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
from ajax.buffers.windows import (
    TDMPC2Slice,
    annotate_dreamerv3,
    sample_episode_then_start,
    tdmpc2_slice_from_rows,
    tdmpc2_valid_starts,
)
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
    return _gather(state, index, length)[0]


def _gather(state, index, length):
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


def _check_window(state: SequenceReplayState, length: int, batch_size: int) -> None:
    if not isinstance(length, int | np.integer) or length < 1:
        raise ValueError(f"window length must be a positive int, got {length!r}")
    if not isinstance(batch_size, int | np.integer) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if length > state.capacity:
        raise ValueError(
            f"capacity {state.capacity} is smaller than a window of {length} rows; "
            "raise capacity or shorten the window"
        )


def _refuse_if_empty(available: jax.Array, what: str) -> None:
    """Raise outside jit when nothing can be sampled; traced values cannot be checked."""
    if not isinstance(available, jax.core.Tracer) and not bool(available):
        raise ValueError(f"no valid {what} window in the buffer yet; add more rows before sampling")


def _dreamerv3_items(state: SequenceReplayState, length: int) -> jax.Array:
    """(N,) number of complete stride-1 windows each env holds."""
    return jnp.maximum(state.count - length + 1, 0)


@functools.partial(jax.jit, static_argnames="length")
def can_sample_dreamerv3(state: SequenceReplayState, length: int = 65) -> jax.Array:
    """Whether any env holds a full ``length``-row window (bool scalar, jit-safe)."""
    return jnp.sum(_dreamerv3_items(state, length)) > 0


def _pop_online(state: SequenceReplayState, length: int, batch_size: int):
    """Up to B fresh windows in the reference's queue order, and the advanced online pointers.

    embodied/core/replay.py:add queues the window that ends at a stream's step n whenever
    n % length == 0, i.e. windows starting at 1, L + 1, 2L + 1, ... per env (non-overlapping);
    the queue is FIFO across envs, i.e. ordered by start then env in lockstep collection. Fresh
    windows the ring has already overwritten are skipped.
    """
    num_envs = state.added.shape[0]
    lo = jnp.maximum(state.online, state.oldest)
    first = lo + jnp.mod(1 - lo, length)  # smallest start >= lo that is 1 mod L
    starts = first[:, None] + length * jnp.arange(batch_size)  # (N, B)
    ready = (starts + length <= state.added[:, None]).reshape(-1)
    env = jnp.repeat(jnp.arange(num_envs), batch_size)
    starts = starts.reshape(-1)
    order = jnp.lexsort((env, jnp.where(ready, starts, jnp.iinfo(jnp.int32).max)))[:batch_size]
    taken = jnp.arange(batch_size) < jnp.sum(ready)
    consumed = jnp.zeros((num_envs,), jnp.int32).at[env[order]].add(taken.astype(jnp.int32))
    return env[order], starts[order], taken, first + consumed * length


def sample_dreamerv3(
    state: SequenceReplayState,
    key: jax.Array,
    batch_size: int,
    length: int = 65,
    online: bool = True,
) -> tuple[dict[str, PyTree], SampleIndex, SequenceReplayState]:
    """DreamerV3 replay: (B, length) windows, fresh ones first, the rest uniform over windows.

    embodied/core/replay.py (e3f0224): every stride-1 window held is an item, drawn uniformly
    with replacement (selectors.Uniform); with ``online`` (training, replay.online: True) the
    online queue is popped first. Windows cross episode boundaries and are annotated with
    :func:`annotate_dreamerv3`. The state is returned because popping the queue advances the
    per-env online pointers; with ``online=False`` (report, eval) only a host ref advances.
    """
    _check_window(state, length, batch_size)
    _refuse_if_empty(can_sample_dreamerv3(state, length), f"{length}-row")
    return _sample_dreamerv3(state, key, batch_size, length, online)


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _sample_dreamerv3(state, key, batch_size, length, online):
    items = _dreamerv3_items(state, length)
    total = jnp.sum(items)
    cum = jnp.cumsum(items)
    u = jax.random.randint(key, (batch_size,), 0, jnp.maximum(total, 1))
    env = jnp.minimum(jnp.searchsorted(cum, u, side="right"), items.shape[0] - 1)
    start = state.oldest[env] + u - (cum[env] - items[env])
    if online:
        fresh_env, fresh_start, taken, pointers = _pop_online(state, length, batch_size)
        env = jnp.where(taken, fresh_env, env)
        start = jnp.where(taken, fresh_start, start)
        state = state.replace(online=pointers)
    index = SampleIndex(env_idx=env.astype(jnp.int32), start_idx=start.astype(jnp.int32))
    batch, state = _gather(state, index, length)
    is_first, is_last = annotate_dreamerv3(batch["is_first"], batch["is_last"])
    return dict(batch, is_first=is_first, is_last=is_last), index, state


def tdmpc2_valid(state: SequenceReplayState, horizon: int) -> tuple[jax.Array, jax.Array]:
    """(N, C) chronological is_first flags and the mask of valid starts of (horizon + 1)-row
    windows inside completed episodes (oldest slot first)."""
    capacity = state.capacity
    j = jnp.arange(capacity)
    step = state.added[:, None] - capacity + j  # step number of chronological position j
    is_first = jnp.take_along_axis(state.rows["is_first"], step % capacity, axis=1)
    sampleable = (step >= 0) & (step < state.committed[:, None])
    return is_first, tdmpc2_valid_starts(is_first, sampleable, horizon)


@functools.partial(jax.jit, static_argnames="horizon")
def can_sample_tdmpc2(state: SequenceReplayState, horizon: int = 3) -> jax.Array:
    """Whether a completed episode holds an (H + 1)-row window (bool scalar, jit-safe)."""
    return jnp.any(tdmpc2_valid(state, horizon)[1])


def sample_tdmpc2(
    state: SequenceReplayState, key: jax.Array, batch_size: int, horizon: int = 3
) -> tuple[TDMPC2Slice, SampleIndex]:
    """TD-MPC2 replay: B slices of H + 1 rows inside completed episodes.

    tdmpc2/common/buffer.py (e9f5932): only finished episodes are added, and torchrl's
    SliceSampler draws an episode uniformly, then a start uniformly among those whose H + 1 rows
    fit (:func:`ajax.buffers.windows.sample_episode_then_start`). Rows of the episode each env is
    still running are never sampled. The stored rows are re-aligned by
    :func:`ajax.buffers.windows.tdmpc2_slice_from_rows`. Costs O(N_env * capacity) per call.
    """
    _check_window(state, horizon + 1, batch_size)
    what = f"{horizon + 1}-row TD-MPC2 (inside a completed episode)"
    _refuse_if_empty(can_sample_tdmpc2(state, horizon), what)
    return _sample_tdmpc2(state, key, batch_size, horizon)


def tdmpc2_index(
    state: SequenceReplayState, key: jax.Array, batch_size: int, horizon: int
) -> SampleIndex:
    """Starts of B (horizon + 1)-row windows: an episode uniformly, then a start uniformly
    (torchrl's SliceSampler); no validation, for callers inside ``jit`` that checked
    :func:`tdmpc2_valid` themselves."""
    is_first, valid = tdmpc2_valid(state, horizon)
    flat = sample_episode_then_start(key, valid, is_first, batch_size)
    env = (flat // state.capacity).astype(jnp.int32)
    start = (state.added[env] - state.capacity + flat % state.capacity).astype(jnp.int32)
    return SampleIndex(env_idx=env, start_idx=start)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _sample_tdmpc2(state, key, batch_size, horizon):
    index = tdmpc2_index(state, key, batch_size, horizon)
    return tdmpc2_slice_from_rows(gather_windows(state, index, horizon + 1)), index
