"""Average policy optimisation (Ma et al. 2021, arXiv:2106.03442): ``ajax.APO``."""

from __future__ import annotations

from functools import partial

from ajax.agents.apo import update
from ajax.agents.apo.config import APOConfig
from ajax.agents.shared.minibatch import total_updates
from ajax.training.api import OnPolicyAgent, OnPolicyAlgorithm, feedforward


class APO(OnPolicyAlgorithm):
    """PPO on the average-reward criterion (differential GAE, learned reward rate ``rho``), on
    continuous (tanh-mean Normal) or discrete (Categorical) action spaces."""

    name = "apo"
    config_cls = APOConfig
    continuous = True
    discrete = True

    def agent(self, total_steps: int) -> OnPolicyAgent:
        c = self.config
        return feedforward(
            init=partial(update.init, c, total_updates=total_updates(c, total_steps)),
            act=update.act,
            sample=update.sample,
            update=partial(update.update, c),
        )


__all__ = ["APO", "APOConfig"]
