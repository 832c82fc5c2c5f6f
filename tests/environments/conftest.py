"""A scripted simulator: hand-made trajectories for the wrapper and PID tests."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.environments import Box, EnvSpec, SimEnv, SimStep


class ScriptedSimulator:
    """Plays row ``t`` of fixed tables at step ``t``; the action is added to the obs.

    ``obs[t]`` is the observation after ``t`` steps (``obs[0]`` after reset), ``rewards[t]``
    and ``terminal[t]`` belong to the step that reaches it. Adding the action to the obs
    lets tests read back what the simulator was given.
    """

    def __init__(self, obs, rewards, terminal):
        self.obs = jnp.asarray(obs, jnp.float32)
        self.rewards = jnp.asarray(rewards, jnp.float32)
        self.terminal = jnp.asarray(terminal, bool)

    def init(self, key):
        del key
        return SimStep(jnp.zeros((), jnp.int32), self.obs[0], jnp.zeros(()), jnp.zeros((), bool))

    def transition(self, key, state, action):
        del key
        t = state + 1
        obs = self.obs[t] + jnp.sum(jnp.asarray(action, jnp.float32))
        return SimStep(t, obs, self.rewards[t], self.terminal[t])


def scripted_env(obs, rewards=None, terminal=None, max_steps=None, low=-1.0, high=1.0, dt=0.5):
    """A :class:`SimEnv` over a :class:`ScriptedSimulator`; rewards default to ``t``."""
    obs = np.asarray(obs, np.float32)
    n = obs.shape[0]
    rewards = np.arange(n, dtype=np.float32) if rewards is None else rewards
    terminal = np.zeros(n, bool) if terminal is None else terminal
    spec = EnvSpec(
        env_id="scripted",
        family="test",
        observation_shape=obs.shape[1:],
        action_space=Box((low,), (high,)),
        max_episode_steps=max_steps,
        dt=dt,
    )
    return SimEnv(ScriptedSimulator(obs, rewards, terminal), spec)


@pytest.fixture
def make_scripted():
    return scripted_env


def avals(tree):
    """Shape, dtype and weak type of every leaf: what decides whether ``jit`` retraces."""
    return [(x.shape, x.dtype, getattr(x, "weak_type", False)) for x in jax.tree.leaves(tree)]


@pytest.fixture
def same_avals():
    """Assert two TimeSteps (e.g. reset's and step's) would hit the same jit cache entry."""

    def check(a, b):
        assert jax.tree.structure(a) == jax.tree.structure(b)
        assert avals(a) == avals(b)

    return check
