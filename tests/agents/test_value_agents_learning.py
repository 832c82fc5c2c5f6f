"""Issue 12 learning tests: DQN and PQN on CartPole-v1 (> 450), REDQ and CrossQ on Pendulum-v1
(> -250), two vmapped seeds each, scored as in ``test_model_free_learning`` (mean over seeds of
each seed's best of its last two evaluations). Wall times are of the 2-core development machine.

All are ``slow`` (``make test-slow``): the default suite is at its 15-minute budget. PQN's takes
~15 s alone; REDQ's 20 critic steps per env step cost minutes on two cores.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.agents.test_model_free_learning import N_SEEDS, SEED, _score

from ajax.agents.crossq import CrossQ, CrossQConfig
from ajax.agents.dqn import DQN, DQNConfig
from ajax.agents.pqn import PQN, PQNConfig
from ajax.agents.redq import REDQ, REDQConfig

# Small nets and batch as the SAC/TD3 learning tests (see their docstring for the CPU cost).
PENDULUM = dict(
    hidden=64,
    batch_size=128,
    buffer_size=10_000,
    learning_starts=1_000,
    eval_freq=1_000,
    eval_episodes=10,
)


def _train(algo, steps):
    result = algo.train(seed=SEED, total_steps=steps, n_seeds=N_SEEDS)
    assert int(np.max(np.asarray(result.metrics["step"]))) <= steps + algo.config.eval_freq
    return _score(result.metrics)


@pytest.mark.slow  # ~15 s alone, ~50 s beside the rest of the suite: over the CI budget
def test_pqn_solves_cartpole():
    """PQN defaults: > 450 within 500k env steps (32 envs x 64 steps per rollout)."""
    assert _train(PQN(env="CartPole-v1", config=PQNConfig()), 500_000) > 450


@pytest.mark.slow
def test_dqn_solves_cartpole():
    """rl-zoo's CartPole DQN with lr 5e-4 and 64 updates per 256 steps: > 450 within 100k steps.

    With rl-zoo's own lr 2.3e-3 / 128 updates the greedy return swung between ~20 and 500 from one
    evaluation to the next on both seeds (measured), as DQN on CartPole is known to.
    """
    config = DQNConfig.cartpole(learning_rate=5e-4, gradient_steps=64)
    assert _train(DQN(env="CartPole-v1", config=config), 100_000) > 450


@pytest.mark.slow
def test_redq_solves_pendulum():
    """REDQ (10 Qs, subset 2, UTD 20) with 64-unit nets: > -250 within 6,000 env steps."""
    config = REDQConfig(**PENDULUM, learning_rate=1e-3)
    assert _train(REDQ(env="Pendulum-v1", config=config), 6_000) > -250


@pytest.mark.slow
def test_crossq_solves_pendulum():
    """CrossQ with 256-unit BatchRenorm critics (2048 in the paper): > -250 within 10,000 steps."""
    config = CrossQConfig(**PENDULUM, critic_hidden=256)
    assert _train(CrossQ(env="Pendulum-v1", config=config), 10_000) > -250
