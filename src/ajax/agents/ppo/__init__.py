"""Proximal policy optimisation (Schulman et al., arXiv:1707.06347): ``ajax.PPO``."""

from __future__ import annotations

from functools import partial

from ajax.agents.ppo import recurrent, update
from ajax.agents.ppo.config import PPOConfig
from ajax.training.api import OnPolicyAgent, OnPolicyAlgorithm, feedforward


class PPO(OnPolicyAlgorithm):
    """PPO with GAE on discrete (Categorical) or continuous (Gaussian) action spaces; with
    ``config.memory`` the actor and critic are recurrent (:mod:`ajax.agents.ppo.recurrent`)."""

    name = "ppo"
    config_cls = PPOConfig
    continuous = True
    discrete = True

    def agent(self, total_steps: int) -> OnPolicyAgent:
        c = self.config
        init = partial(update.init, c, total_updates=update.total_updates(c, total_steps))
        if c.memory is not None:
            return OnPolicyAgent(
                init=init,
                policy=recurrent.policy(c),
                sample=recurrent.sample,
                update=partial(recurrent.update, c),
            )
        return feedforward(
            init=init,
            act=update.act,
            sample=update.sample,
            update=partial(update.update, c),
        )


__all__ = ["PPO", "PPOConfig"]
