"""``actor_architecture=PIDPolicy(...)`` in the continuous agents (spec 002): the actor is a
PID on the env's error terms, trains in the agent's own loop, and deploys as plain gains."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from ajax import PPO, SAC, TD3, make_env
from ajax.agents.apo import APO, APOConfig
from ajax.agents.asac import ASAC, ASACConfig
from ajax.agents.avg import AVG, AVGConfig
from ajax.agents.crossq import CrossQ, CrossQConfig
from ajax.agents.ppo.config import PPOConfig
from ajax.agents.redq import REDQ, REDQConfig
from ajax.agents.sac.config import SACConfig
from ajax.agents.td3.config import TD3Config
from ajax.modules.pid_actor import PIDPolicy, pid_gains
from ajax.validation import ConfigError

PID = PIDPolicy(n_errors=1)
TINY = dict(hidden=16, batch_size=32, learning_starts=64, buffer_size=512, eval_freq=100,
            eval_episodes=1)  # fmt: skip
AGENTS = {
    "sac": (SAC, SACConfig(actor_architecture=PID, **TINY)),
    "redq": (
        REDQ,
        REDQConfig(actor_architecture=PID, gradient_steps=2, policy_update_delay=2, **TINY),
    ),  # fmt: skip
    "td3": (TD3, TD3Config(actor_architecture=PID, **TINY)),
    "crossq": (CrossQ, CrossQConfig(actor_architecture=PID, critic_hidden=32, **TINY)),
    "asac": (ASAC, ASACConfig(actor_architecture=PID, **TINY)),
    "avg": (AVG, AVGConfig(actor_architecture=PID, hidden=16, eval_freq=100, eval_episodes=1)),
    **{
        name: (
            cls,
            cfg(
                actor_architecture=PID,
                hidden=16,
                n_envs=2,
                n_steps=50,
                num_minibatches=2,
                eval_freq=100,
                eval_episodes=1,
            ),
        )  # fmt: skip
        for name, cls, cfg in (("ppo", PPO, PPOConfig), ("apo", APO, APOConfig))
    },
}


def _env():
    """Pendulum with the error sin(theta) (obs[1]) as the PID's one error term."""
    return make_env("Pendulum-v1", pid_error_fn=lambda obs: obs[..., 1:2])


# ~30-40 s each; redq, crossq, asac and avg build their actor with SAC's actor_network, so sac
# covers it; ppo, apo, td3 (slow) check their own actor paths (Normal around the PID, around
# tanh(PID), tanh(PID))
SLOW_PID = ("ppo", "apo", "redq", "crossq", "asac", "avg", "td3")


@pytest.mark.parametrize(
    "agent", ["sac", *(pytest.param(a, marks=pytest.mark.slow) for a in SLOW_PID)]
)
def test_pid_actor_trains_and_reads_as_gains(agent):
    """Two vmapped seeds, 200 steps: the actor's parameters are fixed PID gains (kp, ki, kd,
    each (seeds, action_dim, n_errors)), they start at zero and the updates moved them."""
    cls, config = AGENTS[agent]
    result = cls(_env(), config).train(seed=0, total_steps=200, n_seeds=2)
    gains = pid_gains(result.state.agent.actor_state.params)
    assert sorted(gains) == ["kd", "ki", "kp"]
    for g in gains.values():
        assert g.shape == (2, 1, 1) and np.all(np.isfinite(g))
    assert float(jnp.abs(gains["kp"]).max()) > 0.0, gains
    assert np.all(np.isfinite(result.metrics["eval_return"]))


def test_pid_actor_refusals():
    with pytest.raises(ConfigError, match="actor_architecture"):
        PPOConfig(actor_architecture=PID, memory="gru", n_envs=4, num_minibatches=2)
    with pytest.raises(ValueError, match="discrete"):
        PPO("CartPole-v1", PPOConfig(actor_architecture=PID)).train(total_steps=100)
