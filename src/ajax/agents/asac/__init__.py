"""Average-reward soft actor-critic (Adamczyk et al. 2025, arXiv:2501.09080): ``ajax.ASAC``."""

from __future__ import annotations

from functools import partial

from ajax.agents.asac import update
from ajax.agents.asac.config import ASACConfig
from ajax.training.api import OffPolicyAgent, OffPolicyAlgorithm


class ASAC(OffPolicyAlgorithm):
    """SAC on the average-reward criterion (differential soft Q, learned reward rate ``rho``),
    on continuous action spaces."""

    name = "asac"
    config_cls = ASACConfig
    continuous = True
    discrete = False

    def agent(self, total_steps: int) -> OffPolicyAgent:
        c = self.config
        return OffPolicyAgent(
            init=partial(update.init, c), act=update.act, update=partial(update.update, c)
        )


__all__ = ["ASAC", "ASACConfig"]
