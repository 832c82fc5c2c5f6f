"""Spec 000 B18: sequence replay (ajax.buffers.sequence, ajax.buffers.windows), Tests 1-5 and more.

Most tests share one buffer shape (N = 2 envs, capacity 32, DreamerV3 windows of L = 4 rows,
TD-MPC2 horizon H = 3) so that the jitted samplers compile once for the whole file.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import chisquare

from ajax.buffers import sequence as sq
from ajax.buffers.windows import annotate_dreamerv3, tdmpc2_slice_from_transitions

N, C, L, H = 2, 32, 4, 3


def example_row():
    return {
        "obs": jnp.zeros((2,), jnp.float32),
        "action": jnp.zeros((2,), jnp.float32),
        "reward": jnp.zeros((), jnp.float32),
        "is_first": jnp.zeros((), bool),
        "is_last": jnp.zeros((), bool),
        "is_terminal": jnp.zeros((), bool),
        "deter": jnp.zeros((3,), jnp.float32),
    }


def fill(rows, state=None):
    """Add (steps, N, ...) rows one vector step at a time through the public add."""
    state = sq.init(example_row(), N, C) if state is None else state
    for t in range(len(rows["obs"])):
        state = sq.add(state, {k: v[t] for k, v in rows.items()})
    return state


def counter_rows(steps, start=0):
    """Rows whose obs and reward are 1000 * env + step; an episode every 10 steps."""
    t = np.arange(start, steps)[:, None] + 1000 * np.arange(N)[None]
    return {
        "obs": np.stack([t, t], -1).astype(np.float32),
        "action": np.zeros((steps - start, N, 2), np.float32),
        "reward": t.astype(np.float32),
        "is_first": t % 1000 % 10 == 0,
        "is_last": t % 1000 % 10 == 9,
        "is_terminal": np.zeros((steps - start, N), bool),
        "deter": np.zeros((steps - start, N, 3), np.float32),
    }


def explicit_reset_stream(episode_lengths, steps):
    """Rows of one env under explicit resets: an episode of T transitions is T + 1 rows.

    Row k of episode e: obs = 100 e + k, reward of the step k-1 -> k = 100 e + k - 1 + 0.25 (0 at
    k = 0), action chosen after the obs = 100 e + k + 0.5 (0 on the last row, which is ignored).
    """
    obs, act, rew, first, last = [], [], [], [], []
    for e, length in enumerate(episode_lengths):
        for k in range(length + 1):
            obs.append(100 * e + k)
            rew.append(0.0 if k == 0 else 100 * e + k - 1 + 0.25)
            act.append(100 * e + k + 0.5 if k < length else 0.0)
            first.append(k == 0)
            last.append(k == length)
    assert len(obs) >= steps, "not enough episodes for the requested steps"
    obs, act = np.asarray(obs[:steps], np.float32), np.asarray(act[:steps], np.float32)
    return {
        "obs": np.stack([obs, obs], -1),
        "action": np.stack([act, act], -1),
        "reward": np.asarray(rew[:steps], np.float32),
        "is_first": np.asarray(first[:steps]),
        "is_last": np.asarray(last[:steps]),
        "is_terminal": np.asarray(last[:steps]),
        "deter": np.zeros((steps, 3), np.float32),
    }


def stack_envs(*streams):
    return {k: np.stack([s[k] for s in streams], 1) for k in streams[0]}


def test_b18_1_d3_annotation():
    is_first, is_last = annotate_dreamerv3(
        jnp.array([[0, 0, 1, 0]], bool), jnp.array([[0, 0, 0, 0]], bool)
    )
    np.testing.assert_array_equal(is_first, [[1, 0, 1, 0]])
    np.testing.assert_array_equal(is_last, [[0, 1, 0, 0]])
    # An is_first in the last column closes nothing: its predecessor's successor is in the window,
    # but the last row's successor is not.
    _, is_last = annotate_dreamerv3(jnp.array([[1, 0, 0, 1]], bool), jnp.zeros((1, 4), bool))
    np.testing.assert_array_equal(is_last, [[0, 0, 1, 0]])


def test_b18_1_d3_annotation_through_sampler():
    rows = counter_rows(C)
    rows["is_first"] = np.broadcast_to((np.arange(C) % 4 == 2)[:, None], (C, N))
    rows["is_last"] = np.zeros((C, N), bool)
    batch, index, _ = sq.sample_dreamerv3(fill(rows), jax.random.key(0), 512, L, online=False)
    aligned = np.asarray(index.start_idx) % 4 == 0  # windows whose stored is_first = [0, 0, 1, 0]
    assert aligned.sum() > 50
    np.testing.assert_array_equal(batch["is_first"][aligned], [[1, 0, 1, 0]] * aligned.sum())
    np.testing.assert_array_equal(batch["is_last"][aligned], [[0, 1, 0, 0]] * aligned.sum())


def valid_windows_oracle(rows, added, horizon=H):
    """Numpy enumeration of TD-MPC2 windows: {(env, start step): episode} and episode sizes."""
    windows = {}
    for env in range(N):
        first, last = rows["is_first"][:added, env], rows["is_last"][:added, env]
        committed = max([s + 1 for s in range(added) if last[s]], default=0)
        episode = np.cumsum(first)
        for s in range(max(added - C, 0), added - horizon):
            inner = first[s + 1 : s + horizon + 1]
            if s + horizon < committed and not inner.any():
                windows[(env, s)] = (env, episode[s])
    sizes = {}
    for episode in windows.values():
        sizes[episode] = sizes.get(episode, 0) + 1
    return windows, sizes


def draw_counts(state, windows, seed):
    _, index = sq.sample_tdmpc2(state, jax.random.key(seed), 100_000, H)
    env, start = np.asarray(index.env_idx), np.asarray(index.start_idx)
    order = sorted(windows)
    cell = {w: i for i, w in enumerate(order)}
    assert set(zip(env.tolist(), start.tolist(), strict=True)) <= set(windows)
    counts = np.bincount([cell[w] for w in zip(env, start, strict=True)], minlength=len(order))
    return counts, order


def test_b18_2_t2_no_episode_start_inside_window():
    rows = stack_envs(
        explicit_reset_stream([5, 2, 7, 3, 9, 4, 6], 40), explicit_reset_stream([3, 6] * 5, 40)
    )
    state = fill(rows)
    _, index = sq.sample_tdmpc2(state, jax.random.key(1), 4096, H)
    window = sq.gather_windows(state, index, H + 1)
    assert not np.any(window["is_first"][:, 1:])
    # obs = 100 * episode + k: rows of one episode step by exactly 1.
    np.testing.assert_array_equal(np.diff(window["obs"][:, :, 0], axis=1), np.ones((4096, H)))


def test_b18_2_t2_uniform_over_valid_starts_chi_square():
    """Equal-length episodes: uniform over valid windows, chi-square p > 1e-3 over 1e5 draws."""
    rows = stack_envs(*[explicit_reset_stream([9] * 4, C)] * 2)
    windows, sizes = valid_windows_oracle(rows, C)
    assert len(windows) == N * 3 * 7 and set(sizes.values()) == {7}
    counts, _ = draw_counts(fill(rows), windows, seed=2)
    assert chisquare(counts).pvalue > 1e-3


def test_b18_2_t2_episode_then_start_chi_square():
    """Unequal episodes, the oldest partly overwritten: P = 1 / E * 1 / n_e, as torchrl draws."""
    lengths = ([4, 11, 6, 3, 8, 5, 9], [7, 2, 12, 5, 4, 6, 3, 5])
    rows = stack_envs(*[explicit_reset_stream(ls, 46) for ls in lengths])
    windows, sizes = valid_windows_oracle(rows, 46)
    counts, order = draw_counts(fill(rows), windows, seed=3)
    expected = np.array([1.0 / len(sizes) / sizes[windows[w]] for w in order])
    assert chisquare(counts, expected * counts.sum()).pvalue > 1e-3
    # The test can fail: the same draws reject "uniform over windows".
    assert chisquare(counts).pvalue < 1e-10


def test_b18_2_t2_running_episode_never_sampled():
    """Env 0: one completed episode (10 rows) and 7 rows of a running one; env 1: all running."""
    rows = stack_envs(explicit_reset_stream([9, 20], 17), explicit_reset_stream([30], 17))
    assert not bool(sq.can_sample_tdmpc2(fill({k: v[:9] for k, v in rows.items()}), H))
    state = fill(rows)
    assert bool(sq.can_sample_tdmpc2(state, H))
    _, index = sq.sample_tdmpc2(state, jax.random.key(4), 100_000, H)
    assert not np.any(index.env_idx)
    assert set(np.asarray(index.start_idx).tolist()) == set(range(7))  # rows 0..9 only


def auto_reset_transitions(episode_lengths):
    """gymnax-style SARS' transitions of the same episodes as explicit_reset_stream."""
    out = {k: [] for k in ("obs", "action", "reward", "terminated", "truncated", "next_obs")}
    for e, length in enumerate(episode_lengths):
        for k in range(length):
            out["obs"].append([100 * e + k] * 2)
            out["action"].append([100 * e + k + 0.5] * 2)
            out["reward"].append(100 * e + k + 0.25)
            out["terminated"].append(k == length - 1)
            out["truncated"].append(False)
            out["next_obs"].append([100 * e + k + 1] * 2)  # the final obs on done, not the reset
    flags = ("terminated", "truncated")
    return {k: np.asarray(v, bool if k in flags else np.float32) for k, v in out.items()}


def transition_windows(transitions, starts):
    return {k: np.stack([v[t : t + H] for t in starts]) for k, v in transitions.items()}


def test_b18_3_alignment_round_trip():
    lengths = [6, 4, 8, 5, 3]
    tr = auto_reset_transitions(lengths)
    # Converter alone: obs[H] is the next_obs of the last transition, even across a reset.
    t = lengths[0] - H  # the window whose last transition ends episode 0
    sliced, valid = tdmpc2_slice_from_transitions(**transition_windows(tr, [t, t + 1]))
    np.testing.assert_array_equal(sliced.obs[0, H], tr["next_obs"][t + H - 1])
    assert sliced.obs[0, H, 0] != tr["obs"][t + H, 0]  # not the reset obs that follows
    np.testing.assert_array_equal(valid, [True, False])  # a done inside the window is invalid

    # Round trip: explicit-reset rows -> ring -> sample_tdmpc2 equals the transitions' slice.
    rows = explicit_reset_stream(lengths, sum(lengths) + len(lengths))
    got, _ = sq.sample_tdmpc2(fill(stack_envs(rows, rows)), jax.random.key(5), 4096, H)
    obs0 = np.asarray(got.obs[:, 0, 0]).astype(int)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    want, valid = tdmpc2_slice_from_transitions(
        **transition_windows(tr, offsets[obs0 // 100] + obs0 % 100)
    )
    assert np.all(valid)
    for field in ("obs", "action", "reward", "terminated"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))


def test_b18_4_write_back_read_back():
    state = fill(counter_rows(C))
    _, index, _ = sq.sample_dreamerv3(state, jax.random.key(6), 512, L, online=False)
    index = jax.tree.map(lambda x: x[:1], index)
    latents = jnp.arange(9, dtype=jnp.float32).reshape(1, L - 1, 3) + 1.0
    state = sq.write_back(state, index, {"deter": latents})  # rows 1..L-1 of the window
    batch, again, _ = sq.sample_dreamerv3(state, jax.random.key(7), 512, L, online=False)
    same = (again.env_idx == index.env_idx[0]) & (again.start_idx == index.start_idx[0])
    assert np.sum(same) > 0
    np.testing.assert_array_equal(
        batch["deter"][same][:, 1:], np.broadcast_to(latents, (int(np.sum(same)), L - 1, 3))
    )
    np.testing.assert_array_equal(batch["deter"][same][:, 0], 0.0)
    assert int(jnp.sum(state.rows["deter"] != 0)) == latents.size  # nothing else touched


def test_b18_4_write_back_skips_overwritten_rows():
    state = fill(counter_rows(C))
    _, index, _ = sq.sample_dreamerv3(state, jax.random.key(8), 512, L, online=False)
    index = jax.tree.map(lambda x: x[:1], index)
    state = fill(counter_rows(2 * C, start=C), state)  # the ring now holds steps 32..63 only
    after = sq.write_back(state, index, {"deter": jnp.ones((1, L - 1, 3))})
    np.testing.assert_array_equal(after.rows["deter"], state.rows["deter"])


def test_b18_5_ring_wrap_keeps_per_env_order():
    state = fill(counter_rows(75))  # wraps twice; holds steps 43..74
    np.testing.assert_array_equal(state.write_ptr, [75 % C] * N)
    np.testing.assert_array_equal(state.count, [C] * N)
    held = sq.gather_windows(state, sq.SampleIndex(jnp.arange(N), state.oldest), C)
    np.testing.assert_array_equal(held["reward"], np.arange(43, 75) + 1000 * np.arange(N)[:, None])
    batch, index, _ = sq.sample_dreamerv3(state, jax.random.key(9), 512, L, online=False)
    starts = np.asarray(index.start_idx)
    assert set(starts.tolist()) == set(range(43, 75 - L + 1))
    want = starts[:, None] + np.arange(L) + 1000 * np.asarray(index.env_idx)[:, None]
    np.testing.assert_array_equal(batch["reward"], want)


def test_b18_d3_uniform_over_items_chi_square():
    state = fill(counter_rows(40))
    _, index, _ = sq.sample_dreamerv3(state, jax.random.key(10), 100_000, L, online=False)
    cell = np.asarray(index.env_idx) * C + np.asarray(index.start_idx) - (40 - C)
    counts = np.bincount(cell, minlength=N * C)
    np.testing.assert_array_equal(counts.reshape(N, C)[:, C - L + 1 :], 0)  # not full windows
    assert chisquare(counts.reshape(N, C)[:, : C - L + 1].ravel()).pvalue > 1e-3


def test_b18_d3_online_queue_fresh_first_non_overlapping():
    state = fill(counter_rows(13))
    batch, first, state = sq.sample_dreamerv3(state, jax.random.key(11), 4, L)
    # The reference queues the windows starting at 1, L + 1, ... per env, FIFO across envs.
    np.testing.assert_array_equal(first.start_idx, [1, 1, 5, 5])
    np.testing.assert_array_equal(first.env_idx, [0, 1, 0, 1])
    np.testing.assert_array_equal(batch["reward"][:, 0], [1, 1001, 5, 1005])
    _, _, same = sq.sample_dreamerv3(state, jax.random.key(12), 4, L, online=False)
    np.testing.assert_array_equal(same.online, state.online)  # report/eval pop nothing
    _, second, state = sq.sample_dreamerv3(state, jax.random.key(12), 4, L)
    np.testing.assert_array_equal(second.start_idx[:2], [9, 9])
    np.testing.assert_array_equal(second.env_idx[:2], [0, 1])
    _, third, state = sq.sample_dreamerv3(state, jax.random.key(13), 4, L)  # queue empty
    _, uniform, _ = sq.sample_dreamerv3(state, jax.random.key(13), 4, L, online=False)
    np.testing.assert_array_equal(third.start_idx, uniform.start_idx)
    state = fill(counter_rows(17, start=13), state)
    _, fourth, state = sq.sample_dreamerv3(state, jax.random.key(14), 4, L)
    np.testing.assert_array_equal(fourth.start_idx[:2], [13, 13])
    for env in range(N):
        fresh = [
            np.asarray(i.start_idx[:k])[np.asarray(i.env_idx[:k]) == env]
            for i, k in ((first, 4), (second, 2), (fourth, 2))
        ]
        np.testing.assert_array_equal(np.concatenate(fresh), [1, 5, 9, 13])  # non-overlapping


def test_b18_jit_and_vmap_sanity():
    state = fill(counter_rows(20))
    key = jax.random.key(15)
    eager = sq.sample_dreamerv3(state, key, 4, L)
    jitted = jax.jit(sq.sample_dreamerv3, static_argnums=(2, 3))(state, key, 4, L)
    jax.tree.map(np.testing.assert_array_equal, eager, jitted)
    assert not bool(jax.jit(sq.can_sample_dreamerv3, static_argnums=1)(state, C + 1))

    other = fill(counter_rows(C + 5))
    states = jax.tree.map(lambda a, b: jnp.stack([a, b]), state, other)
    keys = jax.random.split(key, 2)
    batch, index, _ = jax.vmap(lambda s, k: sq.sample_dreamerv3(s, k, 4, L))(states, keys)
    t2, t2_index = jax.vmap(lambda s, k: sq.sample_tdmpc2(s, k, 4096, H))(states, keys)
    assert t2.obs.shape == (2, 4096, H + 1, 2) and t2.action.shape == (2, 4096, H, 2)
    for i, one in enumerate((state, other)):
        b, idx, _ = sq.sample_dreamerv3(one, keys[i], 4, L)
        np.testing.assert_array_equal(batch["obs"][i], b["obs"])
        np.testing.assert_array_equal(index.start_idx[i], idx.start_idx)
        _, t2_one = sq.sample_tdmpc2(one, keys[i], 4096, H)
        np.testing.assert_array_equal(t2_index.start_idx[i], t2_one.start_idx)


def test_b18_errors():
    with pytest.raises(ValueError, match="required fields"):
        sq.init({"obs": jnp.zeros(2)}, N, C)
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        sq.init(example_row(), N, 0)
    state = sq.init(example_row(), N, C)
    with pytest.raises(ValueError, match="capacity 32 is smaller than a window of 65 rows"):
        sq.sample_dreamerv3(state, jax.random.key(0), 4)
    with pytest.raises(ValueError, match="capacity 32 is smaller than a window of 33 rows"):
        sq.sample_tdmpc2(state, jax.random.key(0), 4, horizon=32)
    step = {k: v[0] for k, v in counter_rows(1).items()}
    with pytest.raises(ValueError, match=r"field \['obs'\] has shape \(3, 2\), expected \(2, 2\)"):
        sq.add(state, dict(step, obs=np.zeros((3, 2), np.float32)))
    with pytest.raises(TypeError, match=r"\['action'\] has dtype int32"):
        sq.add(state, dict(step, action=np.zeros((N, 2), np.int32)))
    with pytest.raises(ValueError, match="structure"):
        sq.add(state, {k: v for k, v in step.items() if k != "deter"})
    with pytest.raises(ValueError, match="no valid 4-row window"):
        sq.sample_dreamerv3(state, jax.random.key(0), 4, L)
    with pytest.raises(ValueError, match="no valid 4-row TD-MPC2"):
        sq.sample_tdmpc2(state, jax.random.key(0), 4096, H)
    index = sq.SampleIndex(jnp.zeros(1, jnp.int32), jnp.zeros(1, jnp.int32))
    with pytest.raises(ValueError, match="not stored"):
        sq.write_back(state, index, {"stoch": jnp.zeros((1, L - 1, 3))})
