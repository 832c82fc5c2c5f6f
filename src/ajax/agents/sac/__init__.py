"""Soft actor-critic (Haarnoja et al., arXiv:1812.05905): ``ajax.SAC``."""

from __future__ import annotations

from functools import partial

from ajax.agents.sac import guidance, update
from ajax.agents.sac.config import SACConfig
from ajax.agents.sac.guidance import ExpertImitation, MCPretrain
from ajax.training.api import OffPolicyAgent, OffPolicyAlgorithm


class SAC(OffPolicyAlgorithm):
    """SAC with twin critics and automatic temperature, on continuous action spaces."""

    name = "sac"
    config_cls = SACConfig
    continuous = True
    discrete = False

    def agent(self, total_steps: int) -> OffPolicyAgent:
        c = self.config
        return OffPolicyAgent(
            init=partial(update.init, c),
            act=update.act,
            update=partial(update.update, c),
            demonstrations=partial(guidance.demonstrations, c.pretrain),
        )


__all__ = ["SAC", "SACConfig", "ExpertImitation", "MCPretrain"]
