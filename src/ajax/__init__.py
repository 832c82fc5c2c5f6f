"""Ajax: Agents in JAX.

World-model agents (TD-MPC2, DreamerV3), the building blocks they share, and the networks
toolbox the model-free agents (SAC, TD3, PPO) are built from. The agent classes load lazily,
so ``import ajax`` stays cheap::

    import ajax
    state, metrics = ajax.SAC(env="Pendulum-v1").train(seed=0, total_steps=20_000)
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_AGENTS = {
    "SAC": ("ajax.agents.sac", "SAC"),
    "SACConfig": ("ajax.agents.sac", "SACConfig"),
    "MCPretrain": ("ajax.agents.sac", "MCPretrain"),
    "ExpertImitation": ("ajax.agents.sac", "ExpertImitation"),
    "TD3": ("ajax.agents.td3", "TD3"),
    "TD3Config": ("ajax.agents.td3", "TD3Config"),
    "PPO": ("ajax.agents.ppo", "PPO"),
    "DQN": ("ajax.agents.dqn", "DQN"),
    "DQNConfig": ("ajax.agents.dqn", "DQNConfig"),
    "PQN": ("ajax.agents.pqn", "PQN"),
    "UDRL": ("ajax.agents.udrl", "UDRL"),
    "UDRLConfig": ("ajax.agents.udrl", "UDRLConfig"),
    "PQNConfig": ("ajax.agents.pqn", "PQNConfig"),
    "REDQ": ("ajax.agents.redq", "REDQ"),
    "REDQConfig": ("ajax.agents.redq", "REDQConfig"),
    "APO": ("ajax.agents.apo", "APO"),
    "APOConfig": ("ajax.agents.apo", "APOConfig"),
    "ASAC": ("ajax.agents.asac", "ASAC"),
    "ASACConfig": ("ajax.agents.asac", "ASACConfig"),
    "AVG": ("ajax.agents.avg", "AVG"),
    "AVGConfig": ("ajax.agents.avg", "AVGConfig"),
    "CrossQ": ("ajax.agents.crossq", "CrossQ"),
    "CrossQConfig": ("ajax.agents.crossq", "CrossQConfig"),
    "PPOConfig": ("ajax.agents.ppo", "PPOConfig"),
    "TDMPC2": ("ajax.agents.tdmpc2", "TDMPC2"),
    "TDMPC2Config": ("ajax.agents.tdmpc2", "TDMPC2Config"),
    "MultitaskTDMPC2": ("ajax.agents.tdmpc2.multitask", "MultitaskTDMPC2"),
    "DreamerV3": ("ajax.agents.dreamerv3", "DreamerV3"),
    "DreamerV3Config": ("ajax.agents.dreamerv3", "DreamerV3Config"),
    "make_env": ("ajax.environments", "make_env"),
}

__all__ = sorted(_AGENTS)


def __getattr__(name: str):
    # Module-level lazy import (PEP 562), not attribute delegation on an object.
    if name not in _AGENTS:
        raise AttributeError(f"module 'ajax' has no attribute {name!r}")
    module, attr = _AGENTS[name]
    return getattr(importlib.import_module(module), attr)
