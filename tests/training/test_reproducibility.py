"""What is promised about reproducibility (README, "What Ajax guarantees"; issue 15 item 6).

* The same seeds give the same result, bitwise, on the CPU (two separately compiled runs).
* Seed k of an ``--n-seeds N`` run draws exactly the random numbers seed k draws alone: before
  the first gradient update every key and integer leaf is bitwise equal (and here the
  observations too), floats agree to one rounding step.
* They agree to float32 rounding, not bitwise: XLA's CPU backend compiles a seed-vmapped
  (batched) computation into different kernels than a single one; a batched dot product sums
  in another order (a one-layer MLP's gradient already differs in the last bit) and fused
  elementwise code rounds differently (Pendulum's reward differs by one ulp while the
  observations match). The test below states the tolerance measured on a short run.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ajax.agents.sac import SAC, SACConfig

# Chunks of 32 steps, updates from step 48: the first chunk collects only, the second learns.
CONFIG = SACConfig(
    hidden=16, batch_size=32, learning_starts=48, buffer_size=256, eval_freq=32, eval_episodes=1
)


def _chunks():
    chunks = SAC("Pendulum-v1", CONFIG).make_chunks(64)

    def two(key):
        state, _ = chunks.run_chunk(chunks.init(key))
        collected = state
        state, record = chunks.run_chunk(state)
        return collected, state, record

    return two


def _float_leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def test_same_seeds_same_result_bitwise_and_seed_k_of_n_matches_the_seed_alone():
    """Same seeds, same result: the run is traced and compiled twice (a run and a resumed run
    also compile apart and end bitwise equal, test_run_resume.py); seed k of 3 vs seed k alone."""
    keys = jax.vmap(jax.random.PRNGKey)(jnp.arange(3))
    collected_n, learned_n, record_n = jax.jit(jax.vmap(_chunks()))(keys)
    again = jax.jit(jax.vmap(_chunks()))(keys)  # a second trace and compile
    for x, y in zip(_float_leaves((collected_n, learned_n, record_n)), _float_leaves(again),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(x, y)

    collected_1, learned_1, record_1 = jax.jit(_chunks())(keys[2])
    pick = lambda tree: jax.tree.map(lambda x: x[2], tree)  # noqa: E731
    for x, y in zip(_float_leaves(pick(collected_n)), _float_leaves(collected_1), strict=True):
        if x.dtype.kind == "f":
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(pick(collected_n).replay.experience.obs,
                                  collected_1.replay.experience.obs)  # fmt: skip
    params_n, params_1 = pick(learned_n.agent), learned_1.agent
    diffs = [
        np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)), initial=0.0)
        for x, y in zip(_float_leaves(params_n), _float_leaves(params_1), strict=True)
        if x.dtype.kind == "f"
    ]
    assert max(diffs) < 1e-5, max(diffs)
    np.testing.assert_allclose(
        np.asarray(record_n["eval_return"])[2], np.asarray(record_1["eval_return"]), rtol=1e-5
    )
