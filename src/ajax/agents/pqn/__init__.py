"""Parallelised Q-learning (Gallici et al. 2024, arXiv:2407.04811): ``ajax.PQN``."""

from __future__ import annotations

from functools import partial

from ajax.agents.pqn import update
from ajax.agents.pqn.config import PQNConfig
from ajax.training.api import OnPolicyAgent, OnPolicyAlgorithm, feedforward


class PQN(OnPolicyAlgorithm):
    """PQN on discrete action spaces: vmapped envs' rollouts, Q(lambda), no replay or target."""

    name = "pqn"
    config_cls = PQNConfig
    continuous = False
    discrete = True
    images = True  # a conv torso on image observations

    def agent(self, total_steps: int) -> OnPolicyAgent:
        c = self.config
        return feedforward(
            init=partial(update.init, c, total_updates=update.total_updates(c, total_steps)),
            act=partial(update.act, c),
            sample=partial(update.sample, c),
            update=partial(update.update, c),
        )


__all__ = ["PQN", "PQNConfig"]
