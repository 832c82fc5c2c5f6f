"""DQN and PQN on gymnax MinAtar's channel images (issue 12): the env spec carries the image,
the Q-networks convolve it, and both learn Breakout-MinAtar well past a random policy.

The conv stack is MinAtar's (Young & Tian 2019, Sec. 4: one 3x3 convolution of 16 channels, a
128-unit layer); its parameter count for Breakout's (10, 10, 4) images and 3 actions is pinned
by hand: 3*3*4*16 + 16 = 592, (8*8*16)*128 + 128 = 131,200 (the VALID 3x3 convolution leaves
8 x 8), 128*3 + 3 = 387.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.agents.test_model_free_learning import N_SEEDS, SEED, _score

from ajax.agents.dqn import DQN, DQNConfig
from ajax.agents.dqn import update as dqn_update
from ajax.agents.pqn import PQN, PQNConfig
from ajax.agents.pqn import update as pqn_update
from ajax.environments import make_env

ENV = "Breakout-MinAtar"


def _n_params(tree) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


def random_return(env_id: str, n_envs: int = 64, steps: int = 1_000) -> float:
    """Mean return of the uniform random policy over every episode finished in ``steps``."""
    env = make_env(env_id, n_envs=n_envs)
    n_actions = env.spec.action_space.n

    def step(carry, key):
        ts, ret, total, n = carry
        k_act, k_env = jax.random.split(key)
        ts = env.step(k_env, ts.state, jax.random.randint(k_act, (n_envs,), 0, n_actions))
        ret = ret + ts.reward
        total = total + jnp.sum(jnp.where(ts.done, ret, 0.0))
        return (ts, jnp.where(ts.done, 0.0, ret), total, n + ts.done.sum()), None

    init = (env.reset(jax.random.key(0)), jnp.zeros(n_envs), 0.0, 0)
    keys = jax.random.split(jax.random.key(1), steps)
    (_, _, total, n), _ = jax.jit(lambda c: jax.lax.scan(step, c, keys))(init)
    return float(total / n)


def test_minatar_spec_carries_its_channel_image():
    spec = make_env(ENV).spec
    assert spec.image_shape == (10, 10, 4)
    assert spec.observation_shape == (400,)
    assert make_env("CartPole-v1").spec.image_shape is None


def test_q_networks_convolve_minatar_images_with_the_papers_stack():
    env = make_env(ENV)
    q = dqn_update.init(DQNConfig(), jax.random.key(0), env).q_state
    conv = q.params["Torso_0"]["CNNEncoder_0"]["Conv_0"]["kernel"]
    assert conv.shape == (3, 3, 4, 16)
    assert _n_params(q.params) == 592 + 131_200 + 387
    # PQN: the same stack with LayerNorm after the convolution and the projection.
    p = pqn_update.init(PQNConfig(), jax.random.key(0), env).q_state
    assert _n_params(p.params) == 592 + 131_200 + 387 + 2 * 16 + 2 * 128
    # The image is read in NHWC order: moving one pixel's channel changes the values.
    obs = jnp.zeros((1, 400)).at[0, 3].set(1.0)
    moved = jnp.zeros((1, 400)).at[0, 4 * 55 + 3].set(1.0)
    out = [np.asarray(q.apply_fn({"params": q.params}, o)) for o in (obs, moved)]
    assert not np.allclose(out[0], out[1])


def test_random_policy_baseline_of_breakout():
    """The baseline the learning tests compare against: ~0.4 per episode (measured 0.41)."""
    assert 0.2 < random_return(ENV) < 0.7


@pytest.mark.slow  # ~75 s on 2 cores
def test_pqn_learns_breakout_minatar():
    """PQN, 64 envs x 32 steps, lambda 0.65 (purejaxql's MinAtar lambda), lr 1e-3, 200k env
    steps: measured 8.8 and 7.5 at the last eval with the default RAdam (10.9 and 9.2 with Adam;
    random: 0.41), asserted > 10x random."""
    config = PQNConfig(n_envs=64, n_steps=32, num_minibatches=16, num_epochs=2,
                       learning_rate=1e-3, q_lambda=0.65, eval_freq=40_000)  # fmt: skip
    result = PQN(env=ENV, config=config).train(seed=SEED, total_steps=200_000, n_seeds=N_SEEDS)
    assert _score(result.metrics) > 10 * random_return(ENV)


@pytest.mark.slow  # ~110 s on 2 cores
def test_dqn_learns_breakout_minatar():
    """DQN with MinAtar's replay settings (Young & Tian 2019: batch 32, target sync 1000, 5000
    warm-up steps) at train_freq 4, 100k env steps: measured 8.2 and 6.8 (random: 0.41),
    asserted > 10x random."""
    config = DQNConfig(learning_rate=2.5e-4, buffer_size=100_000, learning_starts=5_000,
                       train_freq=4, target_update_interval=1_000, exploration_steps=25_000,
                       eval_freq=20_000)  # fmt: skip
    result = DQN(env=ENV, config=config).train(seed=SEED, total_steps=100_000, n_seeds=N_SEEDS)
    assert _score(result.metrics) > 10 * random_return(ENV)
