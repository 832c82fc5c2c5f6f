"""Window predicates and per-paper layouts for the sequence replay (spec 000 B18).

Pure array functions with no buffer state: which stored rows form a valid window for each paper,
how a window is annotated (DreamerV3) or re-aligned (TD-MPC2), and the draw that picks windows.
:mod:`ajax.buffers.sequence` owns the ring buffer and calls these.

Rows are stored in DreamerV3's convention (see :mod:`ajax.buffers.sequence`): row t holds the
observation x_t, the reward r_t received on entering x_t and the action a_t chosen after x_t.
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
from flax import struct

PyTree = Any


@struct.dataclass
class TDMPC2Slice:
    """One TD-MPC2 training slice per batch entry, leading dims (B, ...), batch-major.

    The layout of tdmpc2/common/buffer.py:_prepare_batch (e9f5932) before its time-major permute:
    ``obs`` has H + 1 steps o_0..o_H; ``action[k]`` is the action taken at o_k; ``reward[k]`` and
    ``terminated[k]`` belong to the step o_k -> o_{k+1}. The reference's row-0 placeholder action
    and reward are already dropped (its ``action[1:]``, ``reward[1:]``), and reward stays (B, H)
    rather than the reference's trailing singleton (B, H, 1).
    """

    obs: PyTree  # (B, H + 1, ...)
    action: jax.Array  # (B, H, ...)
    reward: jax.Array  # (B, H)
    terminated: jax.Array  # (B, H)


def annotate_dreamerv3(is_first: jax.Array, is_last: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mark a sampled (B, T) window's first row as an episode start and close cut-off episodes.

    DreamerV3 embodied/core/replay.py:_annotate_batch (e3f0224). A window may start mid-episode, so
    row 0 gets is_first; a row followed by an is_first row ends an episode even when that episode
    was abandoned without is_last (e.g. a replaced environment), so it gets is_last. The last
    column is left alone: its successor is not in the window.
    """
    chex.assert_rank([is_first, is_last], 2)
    chex.assert_equal_shape([is_first, is_last])
    is_first = is_first.astype(bool).at[:, 0].set(True)
    next_is_first = jnp.roll(is_first, -1, axis=1).at[:, -1].set(False)
    return is_first, is_last.astype(bool) | next_is_first


def tdmpc2_valid_starts(is_first: jax.Array, sampleable: jax.Array, horizon: int) -> jax.Array:
    """Starts j of (H + 1)-row TD-MPC2 windows that stay inside one completed episode.

    TD-MPC2 samples strict-length slices within an episode (tdmpc2/common/buffer.py: SliceSampler
    with traj_key='episode', strict_length=True). ``is_first`` and ``sampleable`` are (N, C) in
    per-env chronological order, oldest row first; ``sampleable`` marks rows that are still in the
    ring and belong to a completed (committed) episode. A start j is valid iff rows j..j+H are all
    sampleable and none of rows j+1..j+H opens an episode.
    """
    chex.assert_rank([is_first, sampleable], 2)
    num_envs, capacity = is_first.shape
    if horizon + 1 > capacity:
        raise ValueError(f"a window of {horizon + 1} rows does not fit in capacity {capacity}")
    pad = jnp.zeros((num_envs, horizon), jnp.int32)
    # Counts over rows j..j+H via a cumsum padded so that windows running off the end count as
    # unsampleable.
    firsts = jnp.concatenate([jnp.zeros((num_envs, 1), jnp.int32), is_first.astype(jnp.int32)], 1)
    firsts = jnp.cumsum(jnp.concatenate([firsts, pad], 1), axis=1)
    ok = jnp.concatenate([jnp.zeros((num_envs, 1), jnp.int32), sampleable.astype(jnp.int32)], 1)
    ok = jnp.cumsum(jnp.concatenate([ok, pad], 1), axis=1)
    j = jnp.arange(capacity)
    inner_firsts = firsts[:, j + horizon + 1] - firsts[:, j + 1]  # is_first in rows j+1..j+H
    all_ok = ok[:, j + horizon + 1] - ok[:, j] == horizon + 1  # rows j..j+H sampleable
    return all_ok & (inner_firsts == 0)


def sample_episode_then_start(
    key: jax.Array, valid: jax.Array, is_first: jax.Array, batch_size: int
) -> jax.Array:
    """Draw (B,) flat indices into ``valid``: an episode uniformly, then a valid start in it.

    torchrl SliceSampler as TD-MPC2 configures it: a trajectory index uniform over the episodes
    that hold at least one full slice, then a start floor(u * n_e) over that episode's n_e valid
    starts. For episodes of equal length this is uniform over all valid windows. ``valid`` and
    ``is_first`` are (N, C) chronological per env; the oldest surviving rows of an env count as an
    episode even when the ring has overwritten its beginning (as a partially overwritten
    trajectory still does in torchrl's circular storage). Integer draws and searchsorted keep
    shapes static and the result exact; the indices are arbitrary when no start is valid.
    """
    chex.assert_rank([valid, is_first], 2)
    num_envs, capacity = valid.shape
    starts_episode = is_first.astype(bool).at[:, 0].set(True)
    prev_valid = jnp.pad(valid, ((0, 0), (1, 0)))[:, :-1]
    # Valid starts of one episode are contiguous (its first T - H rows), so each run's first row
    # marks one eligible episode.
    marker = (valid & (starts_episode | ~prev_valid)).reshape(-1)
    valid = valid.reshape(-1)
    cum_marker = jnp.cumsum(marker.astype(jnp.int32))
    cum_valid = jnp.cumsum(valid.astype(jnp.int32))
    num_episodes = cum_marker[-1]
    key_episode, key_start = jax.random.split(key)
    episode = jax.random.randint(key_episode, (batch_size,), 0, jnp.maximum(num_episodes, 1))
    first = jnp.searchsorted(cum_marker, episode + 1, side="left")
    end = jnp.searchsorted(cum_marker, episode + 2, side="left")  # next run's first row, or M
    first = jnp.minimum(first, num_envs * capacity - 1)
    run = cum_valid[end - 1] - cum_valid[first] + valid[first].astype(jnp.int32)
    u = jax.random.uniform(key_start, (batch_size,))
    offset = jnp.clip(jnp.floor(u * run).astype(jnp.int32), 0, jnp.maximum(run - 1, 0))
    return first + offset


def tdmpc2_slice_from_rows(rows: dict[str, PyTree]) -> TDMPC2Slice:
    """Re-align (B, H + 1) stored rows into a TD-MPC2 slice.

    Stored row t = (x_t, r_t entering x_t, a_t chosen after x_t); TD-MPC2's row k = (o_k, a_{k-1},
    r_{k-1}) (tdmpc2/trainer/online_trainer.py:to_td), whose training slice is obs[0..H],
    action[1..H], reward[1..H]. So actions come from stored rows 0..H-1 and rewards and
    terminations from stored rows 1..H.
    """
    return TDMPC2Slice(
        obs=rows["obs"],
        action=rows["action"][:, :-1],
        reward=rows["reward"][:, 1:],
        terminated=rows["is_terminal"][:, 1:],
    )


def tdmpc2_slice_from_transitions(
    obs: PyTree,
    action: jax.Array,
    reward: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    next_obs: PyTree,
) -> tuple[TDMPC2Slice, jax.Array]:
    """Build TD-MPC2 slices from (B, H) SARS' transitions recorded under gymnax auto-reset.

    Transition t is (o_t, a_t, r_t, terminated_t, truncated_t, o'_t) with o'_t the final
    observation when the step ended the episode (the next transition's obs is then a reset obs).
    The slice is obs = o_t..o_{t+H-1} followed by o'_{t+H-1}; actions, rewards and terminations are
    the transitions' own. Returns the slice and a (B,) flag: a window is valid iff none of its
    first H - 1 transitions ended an episode (the last may: its final obs is o'_{t+H-1}).
    """
    chex.assert_rank([reward, terminated, truncated], 2)
    chex.assert_equal_shape([reward, terminated, truncated])
    obs_seq = jax.tree.map(lambda o, n: jnp.concatenate([o, n[:, -1:]], axis=1), obs, next_obs)
    done = terminated.astype(bool) | truncated.astype(bool)
    valid = ~jnp.any(done[:, :-1], axis=1)
    sliced = TDMPC2Slice(
        obs=obs_seq, action=action, reward=reward, terminated=terminated.astype(bool)
    )
    return sliced, valid
