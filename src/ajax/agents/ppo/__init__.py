"""Proximal policy optimisation (Schulman et al., arXiv:1707.06347): ``ajax.PPO``."""

from __future__ import annotations

from functools import partial

from ajax.agents.ppo import update
from ajax.agents.ppo.config import PPOConfig
from ajax.training.algorithm import Algorithm, Chunks, n_chunks_for
from ajax.training.host_loop import HostOnPolicyRun
from ajax.training.on_policy import OnPolicyAgent, make_on_policy


class PPO(Algorithm):
    """PPO with GAE on discrete (Categorical) or continuous (Gaussian) action spaces."""

    name = "ppo"
    config_cls = PPOConfig
    continuous = True
    discrete = True

    def agent_act(self):
        return update.act

    def agent(self, total_steps: int) -> OnPolicyAgent:
        c = self.config
        return OnPolicyAgent(
            init=partial(update.init, c, total_updates=update.total_updates(c, total_steps)),
            act=update.act,
            sample=update.sample,
            update=partial(update.update, c),
        )

    def make_chunks(self, total_steps: int) -> Chunks:
        c = self.config
        init, run_chunk, per = make_on_policy(
            c, c.n_steps, self.env, self.eval_env, self.agent(total_steps)
        )
        return Chunks(init, run_chunk, per, n_chunks_for(total_steps, per))

    def host_run(self, total_steps: int, seeds: list[int]):
        c = self.config
        per = max(1, c.eval_freq // (c.n_envs * c.n_steps)) * c.n_envs * c.n_steps
        return HostOnPolicyRun(self, self.agent(total_steps), c.n_steps, per, seeds)


__all__ = ["PPO", "PPOConfig"]
