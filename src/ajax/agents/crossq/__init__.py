"""CrossQ (Bhatt et al. 2024, ICLR; adityab/CrossQ@a318a26): ``ajax.CrossQ``."""

from __future__ import annotations

from functools import partial

from ajax.agents.crossq import update
from ajax.agents.crossq.config import CrossQConfig
from ajax.training.api import OffPolicyAgent, OffPolicyAlgorithm


class CrossQ(OffPolicyAlgorithm):
    """CrossQ: BatchRenorm critics, no target network, on continuous action spaces."""

    name = "crossq"
    config_cls = CrossQConfig
    continuous = True
    discrete = False

    def agent(self, total_steps: int) -> OffPolicyAgent:
        c = self.config
        return OffPolicyAgent(
            init=partial(update.init, c), act=update.act, update=partial(update.update, c)
        )


__all__ = ["CrossQ", "CrossQConfig"]
