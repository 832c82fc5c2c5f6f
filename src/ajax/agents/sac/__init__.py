"""Soft actor-critic (Haarnoja et al., arXiv:1812.05905): ``ajax.SAC``."""

from __future__ import annotations

from functools import partial

from ajax.agents.sac import update
from ajax.agents.sac.config import SACConfig
from ajax.training.algorithm import Algorithm, Chunks, n_chunks_for
from ajax.training.host_loop import HostOffPolicyRun
from ajax.training.off_policy import OffPolicyAgent, make_off_policy


class SAC(Algorithm):
    """SAC with twin critics and automatic temperature, on continuous action spaces."""

    name = "sac"
    config_cls = SACConfig
    continuous = True
    discrete = False

    def agent(self) -> OffPolicyAgent:
        c = self.config
        return OffPolicyAgent(
            init=partial(update.init, c), act=update.act, update=partial(update.update, c)
        )

    def agent_act(self):
        return self.agent().act

    def host_run(self, total_steps: int, seeds: list[int]):
        loop = make_off_policy(self.config, self.env, self.eval_env, self.agent())
        return HostOffPolicyRun(self, loop, seeds)

    def make_chunks(self, total_steps: int) -> Chunks:
        loop = make_off_policy(self.config, self.env, self.eval_env, self.agent())
        n_chunks = n_chunks_for(total_steps, loop.steps_per_chunk)
        return Chunks(loop.init, loop.run_chunk, loop.steps_per_chunk, n_chunks)


__all__ = ["SAC", "SACConfig"]
