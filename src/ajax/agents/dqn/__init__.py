"""Deep Q-networks (Mnih et al. 2015) with double and dueling options: ``ajax.DQN``."""

from __future__ import annotations

from functools import partial

from ajax.agents.dqn import update
from ajax.agents.dqn.config import DQNConfig
from ajax.training.api import OffPolicyAgent, OffPolicyAlgorithm


class DQN(OffPolicyAlgorithm):
    """DQN on discrete action spaces: replay, target network, epsilon-greedy exploration."""

    name = "dqn"
    config_cls = DQNConfig
    continuous = False
    discrete = True
    images = True  # a conv torso on image observations

    def agent(self, total_steps: int) -> OffPolicyAgent:
        c = self.config
        return OffPolicyAgent(
            init=partial(update.init, c),
            act=partial(update.act, c),
            update=partial(update.update, c),
        )


__all__ = ["DQN", "DQNConfig"]
