"""The agents, by command-line name: the one registry.

``ajax train NAME``, ``ajax agents``, ``import ajax`` (``ajax.SAC``, ``ajax.SACConfig``) and
the error messages that list agents all read :data:`REGISTRY`. Adding an agent is its own
package (a config dataclass and a class on a base of :mod:`ajax.training.api`) plus one line
here, or, from outside the package, one call::

    import ajax.agents
    ajax.agents.register("mine", "my_package.agent:Mine")   # or the class itself

Entries are ``"module:Class"`` strings, imported on first use, so ``import ajax`` stays cheap.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

REGISTRY: dict[str, str | type] = {
    "sac": "ajax.agents.sac:SAC",
    "td3": "ajax.agents.td3:TD3",
    "ppo": "ajax.agents.ppo:PPO",
    "dqn": "ajax.agents.dqn:DQN",
    "pqn": "ajax.agents.pqn:PQN",
    "redq": "ajax.agents.redq:REDQ",
    "crossq": "ajax.agents.crossq:CrossQ",
    "asac": "ajax.agents.asac:ASAC",
    "apo": "ajax.agents.apo:APO",
    "avg": "ajax.agents.avg:AVG",
    "udrl": "ajax.agents.udrl:UDRL",
    "tdmpc2": "ajax.agents.tdmpc2:TDMPC2",
    "dreamerv3": "ajax.agents.dreamerv3:DreamerV3",
}

_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register(name: str, agent: str | type) -> None:
    """Register ``agent`` (a class on a base of :mod:`ajax.training.api`, or its
    ``"module:Class"``) under the command-line name ``name``; ValueError names the problem."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"agent name {name!r} must be lowercase letters, digits and _")
    if isinstance(agent, str) and agent.count(":") != 1:
        raise ValueError(f"register {name!r} as 'module:Class' or the class, got {agent!r}")
    if name in REGISTRY and REGISTRY[name] != agent:
        raise ValueError(f"agent {name!r} is already registered ({REGISTRY[name]!r})")
    REGISTRY[name] = agent


def unregister(name: str) -> None:
    """Remove ``name`` (tests register toy agents and take them out again)."""
    REGISTRY.pop(name, None)


def names() -> list[str]:
    """The registered names, sorted."""
    return sorted(REGISTRY)


def class_name(name: str) -> str:
    """The class name of agent ``name`` without importing it (``"SAC"`` for ``"sac"``)."""
    entry = REGISTRY[name]
    return entry.rsplit(":", 1)[1] if isinstance(entry, str) else entry.__name__


def get(name: str) -> type:
    """The class of agent ``name`` (imported now); ValueError names the known agents."""
    if name not in REGISTRY:
        raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(names())}")
    entry = REGISTRY[name]
    if isinstance(entry, str):
        module, attr = entry.split(":")
        entry = getattr(importlib.import_module(module), attr)
    return entry


def available() -> dict[str, type]:
    """Every agent whose module imports here, by name (one whose optional dependencies are
    missing is left out)."""
    out = {}
    for name in names():
        try:
            out[name] = get(name)
        except ImportError:
            continue
    return out


def where(pred: Callable[[type], bool]) -> str:
    """The names of the agents whose class satisfies ``pred``, as ``"a, b, c"`` (for error
    messages: "pick an agent that acts discretely (...)")."""
    return ", ".join(name for name, cls in available().items() if pred(cls))
