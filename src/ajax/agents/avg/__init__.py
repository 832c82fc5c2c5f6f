"""Action value gradient (Vasan et al. 2024, arXiv:2411.15370): ``ajax.AVG``."""

from __future__ import annotations

from functools import partial

from ajax.agents.avg import update
from ajax.agents.avg.config import AVGConfig
from ajax.training.api import OnPolicyAgent, OnPolicyAlgorithm, feedforward


class AVG(OnPolicyAlgorithm):
    """Incremental soft actor-critic without replay or target networks, on continuous action
    spaces: one update per env step (the shared on-policy loop with one-step rollouts)."""

    name = "avg"
    config_cls = AVGConfig
    continuous = True
    discrete = False

    def agent(self, total_steps: int) -> OnPolicyAgent:
        del total_steps
        c = self.config
        return feedforward(
            init=partial(update.init, c),
            act=update.make_act(c),
            sample=update.make_sample(c),
            update=partial(update.update, c),
        )


__all__ = ["AVG", "AVGConfig"]
