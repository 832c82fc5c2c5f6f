"""Sequence replay shared by the world-model agents (spec 000 B18): per-env rings, two samplers.

Storage. One ring of ``capacity`` rows per environment, ``[N_env, capacity]``, filled one row per
env per vector step by :func:`add`. A row is a dict pytree with at least ``obs``, ``action``,
``reward``, ``is_first``, ``is_last`` and ``is_terminal``; extra fields (DreamerV3's latent
``deter``/``stoch``) ride along and can be overwritten later with :func:`write_back`. Positions are
kept as absolute per-env step numbers (``added``, ``committed``, ``online``); a row's slot is its
step number modulo ``capacity``, and :class:`SampleIndex` reports step numbers, so a write-back
aimed at rows the ring has since overwritten is dropped rather than corrupting newer data.
The storage (state, :func:`init`, :func:`add`, :func:`gather_windows`, :func:`write_back`) is
:mod:`ajax.buffers.ring`, re-exported here; this module adds the two papers' samplers.

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
from typing import Any

import jax
import jax.numpy as jnp

from ajax.buffers import ring
from ajax.buffers.ring import (
    FLAG_FIELDS,
    REQUIRED_FIELDS,
    SampleIndex,
    SequenceReplayState,
    add,
    gather_windows,
    init,
    stored_fields,
    write_back,
)
from ajax.buffers.windows import (
    TDMPC2Slice,
    annotate_dreamerv3,
    sample_episode_then_start,
    tdmpc2_slice_from_rows,
    tdmpc2_valid_starts,
)

__all__ = [
    "FLAG_FIELDS",
    "REQUIRED_FIELDS",
    "SampleIndex",
    "SequenceReplayState",
    "add",
    "can_sample_dreamerv3",
    "can_sample_tdmpc2",
    "gather_windows",
    "init",
    "sample_dreamerv3",
    "sample_tdmpc2",
    "stored_fields",
    "tdmpc2_index",
    "tdmpc2_valid",
    "write_back",
]


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
) -> tuple[dict[str, Any], SampleIndex, SequenceReplayState]:
    """DreamerV3 replay: (B, length) windows, fresh ones first, the rest uniform over windows.

    embodied/core/replay.py (e3f0224): every stride-1 window held is an item, drawn uniformly
    with replacement (selectors.Uniform); with ``online`` (training, replay.online: True) the
    online queue is popped first. Windows cross episode boundaries and are annotated with
    :func:`annotate_dreamerv3`. The state is returned because popping the queue advances the
    per-env online pointers; with ``online=False`` (report, eval) only a host ref advances.
    """
    ring.check_window(state, length, batch_size)
    ring.refuse_if_empty(can_sample_dreamerv3(state, length), f"{length}-row")
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
    batch, state = ring.gather(state, index, length)
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
    ring.check_window(state, horizon + 1, batch_size)
    what = f"{horizon + 1}-row TD-MPC2 (inside a completed episode)"
    ring.refuse_if_empty(can_sample_tdmpc2(state, horizon), what)
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
