"""``LoopConfig.action_repeat``: every agent on the shared loop repeats actions in the env built
from its id (TD-MPC2's official DMC runs act every 2 env steps; DreamerV3's every step at
e3f0224, configs.yaml:36, where dreamerv3 1.5.0 had 2)."""

from __future__ import annotations

import pytest

from ajax.agents.ppo import PPO
from ajax.agents.ppo.config import PPOConfig
from ajax.agents.sac import SAC
from ajax.agents.sac.config import SACConfig
from ajax.agents.td3 import TD3
from ajax.agents.td3.config import TD3Config
from ajax.environments import make_env


@pytest.mark.parametrize(
    "algo_cls, config, env_id, limit",
    [
        (SAC, SACConfig(action_repeat=2), "Pendulum-v1", 100),
        (TD3, TD3Config(action_repeat=4), "Pendulum-v1", 50),
        (PPO, PPOConfig(action_repeat=3), "CartPole-v1", 167),  # ceil(500 / 3)
    ],
)
def test_action_repeat_is_an_env_option_of_the_id(algo_cls, config, env_id, limit):
    """Training and evaluation envs both repeat, so the time limit counts agent steps, and
    the option is recorded with the others; an env object is refused (wrap it yourself)."""
    algo = algo_cls(env_id, config)
    assert algo.env.spec.max_episode_steps == algo.eval_env.spec.max_episode_steps == limit
    assert algo.env_options == {"action_repeat": config.action_repeat}
    with pytest.raises(ValueError, match="action_repeat applies to an env id"):
        algo_cls(make_env(env_id), config)


def test_action_repeat_must_be_positive():
    with pytest.raises(ValueError, match="action_repeat"):
        SACConfig(action_repeat=0)
