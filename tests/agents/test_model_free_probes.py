"""Probe environments (one step, constant observation, known values) for SAC, TD3 and PPO.

Each probe episode is a single step from the observation ``[1.0]`` that terminates, so the true
action value is the reward itself (nothing to bootstrap) and the greedy action is known:

- continuous probe: ``r(a) = -(a - 0.5)^2`` on ``a in [-1, 1]``: ``Q(s, a) = r(a)``, the
  greedy action is 0.5 and ``Q(s, 0.5) = 0``;
- discrete probe: two actions, ``r = 1`` for action 1 and 0 for action 0: the greedy action is 1
  and, once the policy picks it, ``V(s) = 1``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ajax.agents.ppo import PPO, PPOConfig
from ajax.agents.sac import SAC, SACConfig
from ajax.agents.td3 import TD3, TD3Config
from ajax.environments import Box, Discrete, EnvSpec, SimEnv, SimStep
from ajax.networks.networks import action_value, state_value

OBS = jnp.ones((1, 1), jnp.float32)


class OneStepSim:
    """Constant observation [1.0]; the first action ends the episode with ``reward_fn(a)``."""

    def __init__(self, reward_fn):
        self.reward_fn = reward_fn

    def init(self, key):
        del key
        return SimStep(jnp.zeros((), jnp.int32), OBS[0], jnp.zeros(()), jnp.zeros((), bool))

    def transition(self, key, state, action):
        del key
        return SimStep(state, OBS[0], self.reward_fn(action), jnp.ones((), bool))


def continuous_probe() -> SimEnv:
    spec = EnvSpec("probe-continuous", "probe", (1,), Box((-1.0,), (1.0,)), 1)
    return SimEnv(OneStepSim(lambda a: -((a[0] - 0.5) ** 2)), spec)


def discrete_probe() -> SimEnv:
    spec = EnvSpec("probe-discrete", "probe", (1,), Discrete(2), 1)
    return SimEnv(OneStepSim(lambda a: (a == 1).astype(jnp.float32)), spec)


OFF_POLICY = dict(
    hidden=32,
    batch_size=64,
    learning_rate=3e-3,
    buffer_size=2_000,
    learning_starts=200,
    eval_freq=500,
    eval_episodes=1,
)


def _check_continuous_values(state, act):
    """Learned Q(s, .) matches r(.) at a few actions; the greedy action is near 0.5."""
    actions = jnp.array([[-0.5], [0.0], [0.5], [1.0]])
    q = action_value(state, jnp.repeat(OBS, 4, axis=0), actions)
    expected = -((actions[:, 0] - 0.5) ** 2)
    np.testing.assert_allclose(np.asarray(q), np.asarray(expected), atol=0.05)
    greedy = act(state, OBS, jax.random.PRNGKey(0), True)
    np.testing.assert_allclose(np.asarray(greedy), [[0.5]], atol=0.1)


def test_sac_probe_learns_q_and_greedy_action():
    """SAC on the continuous probe: Q(s, a) = -(a - 0.5)^2 and tanh(mean) ~ 0.5."""
    algo = SAC(env=continuous_probe(), config=SACConfig(**OFF_POLICY))
    result = algo.train(seed=0, total_steps=2_000)
    _check_continuous_values(result.state.agent, algo.agent_act())
    assert float(result.metrics["eval_return"][-1]) > -0.01


def test_td3_probe_learns_q_and_greedy_action():
    """TD3 on the continuous probe: Q(s, a) = -(a - 0.5)^2 and mu(s) ~ 0.5."""
    algo = TD3(env=continuous_probe(), config=TD3Config(**OFF_POLICY))
    result = algo.train(seed=0, total_steps=2_000)
    _check_continuous_values(result.state.agent, algo.agent_act())
    assert float(result.metrics["eval_return"][-1]) > -0.01


def test_ppo_probe_learns_value_and_greedy_action():
    """PPO on the discrete probe: the greedy action is 1 and V(s) ~ 1."""
    config = PPOConfig(n_envs=4, n_steps=16, hidden=16, learning_rate=3e-3, eval_freq=640)
    algo = PPO(env=discrete_probe(), config=config)
    result = algo.train(seed=0, total_steps=6_400)
    state = result.state.agent
    np.testing.assert_allclose(float(state_value(state, OBS, None)[0]), 1.0, atol=0.05)
    greedy = algo.agent_act()(state, OBS, jax.random.PRNGKey(0), True)
    assert int(greedy[0]) == 1
    assert float(result.metrics["eval_return"][-1]) == 1.0


def test_ppo_continuous_probe_learns_the_best_action():
    """PPO's Gaussian path on the continuous probe (reward -(a - 0.5)^2): the mean moves to
    0.5, the state-independent std shrinks from 1, and V(s) follows the expected reward."""
    config = PPOConfig(n_envs=8, n_steps=16, hidden=16, learning_rate=3e-3, ent_coef=0.0,
                       eval_freq=1280)  # fmt: skip
    algo = PPO(env=continuous_probe(), config=config)
    result = algo.train(seed=0, total_steps=12_800)
    state = result.state.agent
    greedy = algo.agent_act()(state, OBS, jax.random.PRNGKey(0), True)
    np.testing.assert_allclose(float(greedy[0, 0]), 0.5, atol=0.05)
    pi = state.actor_state.apply_fn({"params": state.actor_state.params}, OBS)
    std = float(pi.stddev()[0, 0])
    assert std < 0.5, std
    # E[-(a - 0.5)^2] = -std^2 at the optimal mean
    np.testing.assert_allclose(float(state_value(state, OBS, None)[0]), -(std**2), atol=0.05)


def test_avg_probe_learns_scaled_q_and_greedy_action():
    """AVG on the continuous probe, one update per step: sigma Q(s, a) = r(a) (its critic
    learns in units of the TD scale sigma) near the policy, and tanh(mean) ~ 0.5.

    Without replay the critic only ever sees the actions the policy takes, so Q is checked
    within 0.2 of 0.5 (measured at 3000 steps: at -1.0, which the early policy left at
    once, sigma Q is -0.15 where r is -2.25)."""
    from ajax.agents.avg import AVG, AVGConfig
    from ajax.agents.avg.losses import td_scale
    from ajax.agents.avg.update import _obs, _q

    config = AVGConfig(hidden=32, eval_freq=1_000, eval_episodes=1)
    algo = AVG(env=continuous_probe(), config=config)
    result = algo.train(seed=0, total_steps=3_000)
    state = result.state.agent
    m = state.td_moments
    sigma = td_scale(m.var[0], m.var[1], m.mean[2])
    actions = jnp.array([[0.3], [0.4], [0.5], [0.6], [0.7]])
    s = _obs(config, state, state.obs_moments, jnp.repeat(OBS, 5, axis=0))
    q = sigma * _q(state, state.critic_state.params, s, actions)
    np.testing.assert_allclose(np.asarray(q), np.asarray(-((actions[:, 0] - 0.5) ** 2)), atol=0.02)
    greedy = algo.agent_act()(state, OBS, jax.random.PRNGKey(0), True)
    np.testing.assert_allclose(np.asarray(greedy), [[0.5]], atol=0.1)
    assert float(result.metrics["eval_return"][-1]) > -0.01


def test_sac_critic_norm_puts_layernorm_after_each_critic_hidden_layer():
    """critic_norm="layernorm": each critic's two hidden layers are Dense, LayerNorm, ReLU (as
    RLPD's critic); the actor stays a plain MLP."""
    from ajax.agents.sac.update import critic_mlp, init

    config = SACConfig(hidden=8, critic_norm="layernorm")
    assert critic_mlp(config) == ("8", "layernorm", "relu", "8", "layernorm", "relu")
    state = init(config, jax.random.PRNGKey(0), continuous_probe())
    critic = str(jax.tree_util.tree_flatten_with_path(state.critic_state.params)[0])
    actor = str(jax.tree_util.tree_flatten_with_path(state.actor_state.params)[0])
    assert critic.count("LayerNorm") >= 4 and "LayerNorm" not in actor
