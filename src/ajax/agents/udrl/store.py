"""UDRL's episode store: the highest-return episodes seen, and the recorder that fills it.

Srivastava et al. 2019 (arXiv:1912.02877), Sec. 3 and Alg. 1: the behaviour function learns
only from the best episodes so far, relabelled in hindsight; the store keeps ``K`` of them
sorted by return, the recorder holds each env's episode in progress. Everything is fixed-shape
arrays, so recording runs inside the jitted update and vmaps over seeds.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

# The return of an empty slot: below any real return, yet finite, because the run's divergence
# check (training.run.check_finite) stops a run whose state holds a non-finite float.
EMPTY = float(jnp.finfo(jnp.float32).min)


def is_stored(ret: jax.Array) -> jax.Array:
    """True where a slot (or candidate) holds an episode: its return is above :data:`EMPTY`."""
    return ret > EMPTY


class Episodes(flax.struct.PyTreeNode):
    """``M`` episodes of at most ``L`` steps: ``obs [M, L, O]``, ``action [M, L, ...]``,
    ``rtg [M, L]`` the return from each step to the episode's end, ``length [M]``, ``ret [M]``
    (:data:`EMPTY` for an empty slot)."""

    obs: jax.Array
    action: jax.Array
    rtg: jax.Array
    length: jax.Array
    ret: jax.Array

    @classmethod
    def empty(cls, m: int, max_len: int, obs_dim: int, action_shape, action_dtype) -> Episodes:
        return cls(
            obs=jnp.zeros((m, max_len, obs_dim)),
            action=jnp.zeros((m, max_len, *action_shape), action_dtype),
            rtg=jnp.zeros((m, max_len)),
            length=jnp.zeros((m,), jnp.int32),
            ret=jnp.full((m,), EMPTY),
        )


class Recorder(flax.struct.PyTreeNode):
    """Each env's episode in progress: ``obs``/``action``/``reward`` ``[N, L, ...]`` and its
    ``length [N]`` so far."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    length: jax.Array

    @classmethod
    def empty(cls, n: int, max_len: int, obs_dim: int, action_shape, action_dtype) -> Recorder:
        return cls(
            obs=jnp.zeros((n, max_len, obs_dim)),
            action=jnp.zeros((n, max_len, *action_shape), action_dtype),
            reward=jnp.zeros((n, max_len)),
            length=jnp.zeros((n,), jnp.int32),
        )


def returns_to_go(reward: jax.Array, length: jax.Array) -> jax.Array:
    """sum_{k >= t} r_k within each row's first ``length`` steps: ``[N, L]``."""
    steps = jnp.arange(reward.shape[1])
    r = jnp.where(steps[None] < length[:, None], reward, 0.0)
    return jnp.cumsum(r[:, ::-1], axis=1)[:, ::-1]


def merge_best(store: Episodes, new: Episodes) -> Episodes:
    """The ``K`` highest-return episodes of ``store`` and ``new`` (``N <= K`` candidates, :data:`EMPTY`
    returns for the ones that did not end).

    The N weakest stored slots, weakest first, face the candidates, strongest first; a
    candidate replaces its slot when its return is higher. Both orders are monotone, so the
    replaced slots are exactly the ones the top-K of the union drops.
    """
    n = new.ret.shape[0]
    neg_weakest, slots = jax.lax.top_k(-store.ret, n)
    order = jnp.argsort(-new.ret)
    cand = jax.tree.map(lambda x: x[order], new)
    better = cand.ret > -neg_weakest

    def put(old, c):
        mask = better.reshape((n,) + (1,) * (c.ndim - 1))
        return old.at[slots].set(jnp.where(mask, c, old[slots]))

    return jax.tree.map(put, store, cand)


def record_step(store: Episodes, rec: Recorder, obs, action, reward, done):
    """Append one vector step to the recorder; episodes that end (or fill ``L``) go to the store.

    ``done[i]``: the step of env i ended its episode (terminated or truncated). An episode
    longer than the recorder is cut at ``L`` steps and stored as if it had ended there.
    """
    n, max_len = rec.length.shape[0], rec.reward.shape[1]
    envs, t = jnp.arange(n), jnp.minimum(rec.length, max_len - 1)
    rec = rec.replace(
        obs=rec.obs.at[envs, t].set(obs),
        action=rec.action.at[envs, t].set(action),
        reward=rec.reward.at[envs, t].set(reward),
        length=t + 1,
    )
    ends = done | (rec.length >= max_len)
    rtg = returns_to_go(rec.reward, rec.length)
    new = Episodes(rec.obs, rec.action, rtg, rec.length, jnp.where(ends, rtg[:, 0], EMPTY))
    store = merge_best(store, new)
    return store, rec.replace(length=jnp.where(ends, 0, rec.length))


def best_command_stats(store: Episodes, last_few: int):
    """(mean return, std of returns, mean length) of the ``last_few`` best stored episodes
    (Srivastava et al. 2019, Alg. 2); (0, 0, 1) while the store is empty."""
    ret, idx = jax.lax.top_k(store.ret, last_few)
    valid = is_stored(ret)
    count = jnp.maximum(valid.sum(), 1)
    r = jnp.where(valid, ret, 0.0)
    mean = r.sum() / count
    std = jnp.sqrt(jnp.where(valid, (r - mean) ** 2, 0.0).sum() / count)
    length = jnp.where(valid, store.length[idx], 0).sum() / count
    return mean, std, jnp.where(valid.any(), length, 1.0)


def sample_segments(store: Episodes, key, batch_size: int):
    """``batch_size`` (obs, action, d_r, d_h) of stored episodes: an episode uniform among the
    stored ones, a step t uniform in it, the command the return and horizon that followed t
    (the paper's trailing segments, t2 = the episode's end)."""
    k_ep, k_t = jax.random.split(key)
    valid = is_stored(store.ret)
    logits = jnp.where(valid, 0.0, -jnp.inf)
    logits = jnp.where(valid.any(), logits, 0.0)  # an empty store: any slot (the loss is off)
    ep = jax.random.categorical(k_ep, logits, shape=(batch_size,))
    length = jnp.maximum(store.length[ep], 1)
    t = jnp.minimum((jax.random.uniform(k_t, (batch_size,)) * length).astype(jnp.int32), length - 1)
    d_r = store.rtg[ep, t]
    d_h = (length - t).astype(jnp.float32)
    return store.obs[ep, t], store.action[ep, t], d_r, d_h
