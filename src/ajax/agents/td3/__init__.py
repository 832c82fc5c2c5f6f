"""Twin delayed DDPG (Fujimoto et al., arXiv:1802.09477): ``ajax.TD3``."""

from __future__ import annotations

from functools import partial

from ajax.agents.td3 import update
from ajax.agents.td3.config import TD3Config
from ajax.training.api import OffPolicyAgent, OffPolicyAlgorithm


class TD3(OffPolicyAlgorithm):
    """TD3 with target-policy smoothing and delayed actor updates, on continuous actions."""

    name = "td3"
    config_cls = TD3Config
    continuous = True
    discrete = False

    def agent(self, total_steps: int) -> OffPolicyAgent:
        c = self.config
        return OffPolicyAgent(
            init=partial(update.init, c),
            act=partial(update.act, c),
            update=partial(update.update, c),
        )


__all__ = ["TD3", "TD3Config"]
