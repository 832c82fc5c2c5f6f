"""Shuffled minibatch epochs over one rollout (PPO, APO, PQN).

PPO's optimisation phase (Schulman et al. 2017, Alg. 1: K epochs of minibatch steps on the
data of one rollout), which PQN's update repeats on its Q(lambda) targets (Gallici et al.
2024, Alg. 1).
"""

from __future__ import annotations

from collections.abc import Callable

import jax


def minibatch_epochs(config, carry, data, step: Callable, key):
    """``config.num_epochs`` passes over ``data``, each a fresh permutation split into
    ``config.num_minibatches`` equal minibatches, with ``step(carry, minibatch) -> (carry,
    metrics)`` on each in turn; returns the carry and each metric's mean over every step.

    Every leaf of ``data`` leads with the axis minibatches split: samples (feedforward) or envs
    (recurrent PPO: each minibatch holds whole sequences)."""
    n = jax.tree.leaves(data)[0].shape[0]
    mb_size = n // config.num_minibatches

    def epoch(carry, k):
        perm = jax.random.permutation(k, n)
        batches = jax.tree.map(
            lambda x: x[perm].reshape((config.num_minibatches, mb_size) + x.shape[1:]), data
        )
        return jax.lax.scan(step, carry, batches)

    carry, metrics = jax.lax.scan(epoch, carry, jax.random.split(key, config.num_epochs))
    return carry, jax.tree.map(lambda m: m.mean(), metrics)


def total_updates(config, total_steps: int) -> int:
    """Optimizer steps over a run of ``total_steps`` env steps: whole rollouts of ``n_envs x
    n_steps``, each ``num_epochs x num_minibatches`` steps (lr annealing, PQN's epsilon)."""
    iterations = max(1, total_steps // (config.n_envs * config.n_steps))
    return iterations * config.num_epochs * config.num_minibatches
