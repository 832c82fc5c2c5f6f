"""Slow learning test of issue 5: TD-MPC2 size 1 learns Pendulum-v1 within 6,000 env steps."""

import time

import numpy as np
import pytest

from ajax.agents.tdmpc2 import TDMPC2, TDMPC2Config


@pytest.mark.slow
def test_t2_learns_pendulum_size1_two_seeds():
    """Mean eval return over 2 vmapped seeds above -400 at 6,000 steps (official-like config:
    seed steps max(1000, 5 T) = 1000, then one update per step; eval every 2,000 steps)."""
    cfg = TDMPC2Config.preset(1, eval_freq=2_000, eval_episodes=10)
    start = time.time()
    result = TDMPC2("Pendulum-v1", cfg).train(seed=0, total_steps=6_000, n_seeds=2)
    final = np.asarray(result.metrics["eval_return"])[:, -1]
    print(f"eval returns at 6000 steps: {final}, wall {time.time() - start:.0f} s")
    assert final.mean() > -400.0
