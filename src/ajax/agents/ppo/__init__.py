"""Proximal policy optimisation (Schulman et al., arXiv:1707.06347): ``ajax.PPO``."""

from __future__ import annotations

from functools import partial

from ajax.agents.ppo import recurrent, update
from ajax.agents.ppo.config import PPOConfig
from ajax.training.host_loop import OnPolicyAlgorithm
from ajax.training.on_policy import OnPolicyAgent, feedforward


class PPO(OnPolicyAlgorithm):
    """PPO with GAE on discrete (Categorical) or continuous (Gaussian) action spaces; with
    ``config.memory`` the actor and critic are recurrent (:mod:`ajax.agents.ppo.recurrent`)."""

    name = "ppo"
    config_cls = PPOConfig
    continuous = True
    discrete = True

    def __init__(self, env="Pendulum-v1", config=None, **env_options):
        super().__init__(env, config, **env_options)
        if self.config.memory is not None and not self.is_jax:
            raise ValueError(
                f"recurrent PPO (memory={self.config.memory!r}) trains on JAX envs only, and "
                f"{self.env_id!r} is a host env; drop --memory or pick a JAX env (ajax envs)"
            )

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
