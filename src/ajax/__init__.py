"""Ajax: Agents in JAX.

World-model agents (TD-MPC2, DreamerV3), the building blocks they share, and the networks
toolbox the model-free agents (SAC, TD3, PPO) are built from. The agent classes load lazily,
so ``import ajax`` stays cheap::

    import ajax
    state, metrics = ajax.SAC(env="Pendulum-v1").train(seed=0, total_steps=20_000)
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

# Names that are not an agent or its config; the agents and their configs (``SAC``,
# ``SACConfig``, ...) come from the one registry, :mod:`ajax.agents`.
_EXTRA = {
    "MCPretrain": ("ajax.agents.sac", "MCPretrain"),
    "ExpertImitation": ("ajax.agents.sac", "ExpertImitation"),
    "MultitaskTDMPC2": ("ajax.agents.tdmpc2.multitask", "MultitaskTDMPC2"),
    "make_env": ("ajax.environments", "make_env"),
}


def _agent_names() -> dict[str, str]:
    """Public name -> registry name, for every registered agent and its config."""
    agents = importlib.import_module("ajax.agents")  # not `from ajax import`: __getattr__
    out = {}
    for name in agents.names():
        cls = agents.class_name(name)
        out[cls] = out[cls + "Config"] = name
    return out


def __getattr__(name: str):
    # Module-level lazy import (PEP 562), not attribute delegation on an object.
    if name in _EXTRA:
        module, attr = _EXTRA[name]
        return getattr(importlib.import_module(module), attr)
    registered = _agent_names().get(name)
    if registered is not None:
        cls = importlib.import_module("ajax.agents").get(registered)
        if name == cls.__name__:
            return cls
        if cls.config_cls.__name__ == name:
            return cls.config_cls
    raise AttributeError(f"module 'ajax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXTRA, *_agent_names()})


__all__ = sorted({*_EXTRA, *_agent_names()})
