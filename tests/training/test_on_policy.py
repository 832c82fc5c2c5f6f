"""The on-policy bootstrap helpers: values at time-limit cuts, and each step's next value."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ajax.training.on_policy import Rollout, next_values, values_at_cuts

T, N = 4, 3


def _rollout(truncated, terminated=None):
    truncated = jnp.array(truncated, bool)
    zeros = jnp.zeros((T, N))
    # final_obs[t, n] = (10 t + n, 1): value_fn below reads 10 t + n + 1
    final_obs = jnp.stack([10.0 * jnp.arange(T)[:, None] + jnp.arange(N), jnp.ones((T, N))], -1)
    return Rollout(
        obs=jnp.zeros((T, N, 2)), action=zeros, log_prob=zeros,
        value=100.0 + jnp.arange(T * N, dtype=jnp.float32).reshape(T, N), reward=zeros,
        terminated=jnp.zeros((T, N), bool) if terminated is None else jnp.array(terminated, bool),
        truncated=truncated, final_obs=final_obs, is_first=jnp.zeros((T, N), bool),
    )  # fmt: skip


def value_fn(obs):
    return obs.sum(-1)


def test_values_at_cuts_one_row_per_env_and_every_step():
    # at most one cut per env (env 0 at t=2, env 2 at t=0): the one-row-per-env branch
    once = [[0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0]]
    expected = [[0, 0, 3], [0, 0, 0], [21, 0, 0], [0, 0, 0]]
    np.testing.assert_array_equal(values_at_cuts(value_fn, _rollout(once)), expected)
    # env 1 cut twice (a time limit shorter than the rollout): every step's value is computed
    twice = [[0, 1, 0], [0, 0, 0], [1, 0, 0], [0, 1, 0]]
    expected = [[0, 2, 0], [0, 0, 0], [21, 0, 0], [0, 32, 0]]
    np.testing.assert_array_equal(values_at_cuts(value_fn, _rollout(twice)), expected)
    none = jnp.zeros((T, N), bool)
    np.testing.assert_array_equal(values_at_cuts(value_fn, _rollout(none)), np.zeros((T, N)))
    # vmapped over seeds both branches run and each seed keeps its own answer
    stacked = jax.tree.map(lambda a, b: jnp.stack([a, b]), _rollout(once), _rollout(twice))
    both = jax.vmap(lambda r: values_at_cuts(value_fn, r))(stacked)
    np.testing.assert_array_equal(both[1], [[0, 2, 0], [0, 0, 0], [21, 0, 0], [0, 32, 0]])


def test_next_values_read_the_next_step_the_cut_or_the_last_obs():
    # env 0 cut at t=1, env 1 terminated at t=2, env 2 runs on
    rollout = _rollout([[0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]],
                       [[0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0]])  # fmt: skip
    v_cut = values_at_cuts(value_fn, rollout)
    got = next_values(rollout, v_cut, jnp.array([-1.0, -2.0, -3.0]))
    # value[t, n] = 100 + 3 t + n; the cut reads 10 * 1 + 0 + 1 = 11, the terminal 0
    expected = [[103, 104, 105], [11, 107, 108], [109, 0, 111], [-1, -2, -3]]
    np.testing.assert_array_equal(got, expected)
