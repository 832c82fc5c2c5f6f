"""Evaluation normalises observations with the training env's moments, frozen.

Before this, the eval env of a ``normalize_obs=True`` run started its own moments from
scratch, so a policy trained on normalised observations was scored on differently scaled
ones (measured: PPO on Pendulum-v1 evaluated near -1200 while its training episodes were at
-700 and its deterministic policy, evaluated with the training moments, at -135 to -280).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ajax.environments import make_env
from ajax.environments.core import SimEnv, SimStep
from ajax.environments.normalize import NormalizeObservation, ObsMoments, pooled_moments
from ajax.environments.types import Box, EnvSpec
from ajax.training.loop import evaluate, random_return, stateless


def test_pooled_moments_hand_worked():
    """counts 1 and 3, means 0 and 4, variances 1 and 1: mean 0.25 * 0 + 0.75 * 4 = 3,
    var 0.25 (1 + 9) + 0.75 (1 + 1) = 4, count 4."""
    m = ObsMoments(
        mean=jnp.array([[0.0], [4.0]]), var=jnp.ones((2, 1)), count=jnp.array([1.0, 3.0])
    )
    p = pooled_moments(m)
    np.testing.assert_allclose(p.mean, [3.0])
    np.testing.assert_allclose(p.var, [4.0])
    np.testing.assert_allclose(p.count, 4.0)
    shared = ObsMoments(mean=jnp.zeros(1), var=jnp.ones(1), count=jnp.asarray(5.0))
    assert pooled_moments(shared) is shared


class _Echo:
    """Constant observation [1.0]; the one action ends the episode with reward = action."""

    def init(self, key):
        del key
        return SimStep(jnp.zeros((), jnp.int32), jnp.ones(1), jnp.zeros(()), jnp.zeros((), bool))

    def transition(self, key, state, action):
        del key, state
        return SimStep(jnp.zeros((), jnp.int32), jnp.ones(1), action[0], jnp.ones((), bool))


def test_evaluation_reads_the_training_moments():
    """A policy acting its (normalised) observation scores (1 - 0.5) / 0.5 = 1 under the
    training moments (mean 0.5, var 0.25, one per env of a vmapped wrapper), and ~0 when the
    eval env normalises with moments of its own (its first obs is then ~its mean: 0.007)."""
    env = NormalizeObservation(
        SimEnv(_Echo(), EnvSpec("echo", "probe", (1,), Box((-1.0,), (1.0,)), 1))
    )
    policy = stateless(lambda agent_state, obs, key, deterministic: obs)
    train_state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 3)).state
    moments = ObsMoments(mean=jnp.full((3, 1), 0.5), var=jnp.full((3, 1), 0.25),
                         count=jnp.full((3,), 10.0))  # fmt: skip
    train_state = train_state.replace(moments=moments)
    key = jax.random.PRNGKey(1)
    np.testing.assert_allclose(evaluate(env, policy, None, key, 4, train_state), 1.0, rtol=1e-5)
    np.testing.assert_allclose(evaluate(env, policy, None, key, 4), 0.0, atol=0.02)


def test_host_evaluation_takes_the_training_moments():
    """The host loop hands its training env's moments to the eval env and freezes them."""
    from ajax.agents.sac import SAC, SACConfig

    config = SACConfig(hidden=8, batch_size=8, learning_starts=8, buffer_size=64, eval_freq=20,
                       eval_episodes=1)  # fmt: skip
    algo = SAC("gymnasium:Pendulum-v1", config, normalize_obs=True)
    run = algo.host_run(20, [0])
    run.evaluate(run.state.agent, jax.random.PRNGKey(0))  # the reset already moved the moments
    assert run.eval_env.frozen
    np.testing.assert_array_equal(run.eval_env.moments.mean, run.env.moments.mean)
    assert float(run.env.moments.count) >= 1


def test_random_return_scores_uniform_random_actions():
    """On the one-step echo env the return is the action itself, so the mean of 4,096 uniform
    [-1, 1] actions: 0 within 4 standard errors (0.577 / 64 = 0.009); the actions do differ
    between episodes. On CartPole-v1 uniform random play lasts about 22 steps (the well-known
    random baseline; 512 episodes, so within +-3)."""
    echo = SimEnv(_Echo(), EnvSpec("echo", "probe", (1,), Box((-1.0,), (1.0,)), 1))
    mean = float(jax.jit(lambda k: random_return(echo, k, 4096))(jax.random.PRNGKey(0)))
    assert abs(mean) < 0.04
    one = [float(random_return(echo, jax.random.PRNGKey(i), 1)) for i in range(2)]
    assert one[0] != one[1] and all(-1.0 <= x <= 1.0 for x in one)
    cartpole = make_env("CartPole-v1")
    mean = float(jax.jit(lambda k: random_return(cartpole, k, 512))(jax.random.PRNGKey(0)))
    assert 19.0 < mean < 25.0, mean
