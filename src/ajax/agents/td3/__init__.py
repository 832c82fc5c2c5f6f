"""Twin delayed DDPG (Fujimoto et al., arXiv:1802.09477): ``ajax.TD3``."""

from __future__ import annotations

from functools import partial

from ajax.agents.td3 import update
from ajax.agents.td3.config import TD3Config
from ajax.training.algorithm import Algorithm, Chunks, n_chunks_for
from ajax.training.host_loop import HostOffPolicyRun
from ajax.training.off_policy import OffPolicyAgent, make_off_policy


class TD3(Algorithm):
    """TD3 with target-policy smoothing and delayed actor updates, on continuous actions."""

    name = "td3"
    config_cls = TD3Config
    continuous = True
    discrete = False

    def agent(self) -> OffPolicyAgent:
        c = self.config
        return OffPolicyAgent(
            init=partial(update.init, c),
            act=partial(update.act, c),
            update=partial(update.update, c),
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


__all__ = ["TD3", "TD3Config"]
