"""Randomized ensembled double Q-learning (Chen et al. 2021, arXiv:2101.05982): ``ajax.REDQ``."""

from __future__ import annotations

from functools import partial

from ajax.agents.redq import update
from ajax.agents.redq.config import REDQConfig
from ajax.agents.shared import guidance
from ajax.training.api import OffPolicyAgent, OffPolicyAlgorithm


class REDQ(OffPolicyAlgorithm):
    """REDQ-SAC: 10 Qs, subset-min target, UTD 20, on continuous action spaces."""

    name = "redq"
    config_cls = REDQConfig
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


__all__ = ["REDQ", "REDQConfig"]
