"""Proximal policy optimisation (Schulman et al., arXiv:1707.06347): ``ajax.PPO``."""

from __future__ import annotations

from functools import partial

from ajax.agents.ppo import update
from ajax.agents.ppo.config import PPOConfig
from ajax.training.host_loop import OnPolicyAlgorithm
from ajax.training.on_policy import OnPolicyAgent


class PPO(OnPolicyAlgorithm):
    """PPO with GAE on discrete (Categorical) or continuous (Gaussian) action spaces."""

    name = "ppo"
    config_cls = PPOConfig
    continuous = True
    discrete = True

    def agent(self, total_steps: int) -> OnPolicyAgent:
        c = self.config
        return OnPolicyAgent(
            init=partial(update.init, c, total_updates=update.total_updates(c, total_steps)),
            act=update.act,
            sample=update.sample,
            update=partial(update.update, c),
        )


__all__ = ["PPO", "PPOConfig"]
