"""Upside-down reinforcement learning (Srivastava et al. 2019, arXiv:1912.02877): ``ajax.UDRL``."""

from __future__ import annotations

from functools import partial

from ajax.agents.udrl import update
from ajax.agents.udrl.config import UDRLConfig
from ajax.training.api import OnPolicyAgent, OnPolicyAlgorithm


class UDRL(OnPolicyAlgorithm):
    """A command-conditioned behaviour function trained by supervised learning on its best
    episodes; discrete (Categorical) or continuous (tanh-squashed Normal) actions."""

    name = "udrl"
    config_cls = UDRLConfig
    continuous = True
    discrete = True

    def agent(self, total_steps: int) -> OnPolicyAgent:
        c = self.config
        return OnPolicyAgent(
            init=partial(update.init, c),
            policy=update.policy(c),
            sample=partial(update.sample, c),
            update=partial(update.update, c),
        )


__all__ = ["UDRL", "UDRLConfig"]
