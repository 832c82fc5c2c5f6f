"""TD3 configuration (Fujimoto et al., arXiv:1802.09477; defaults of the authors' TD3.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.modules.pid_actor import PIDPolicy, pid_python_only
from ajax.training.api import OffPolicyConfig
from ajax.validation import at_least, between, nonnegative, positive


@dataclass(frozen=True)
class TD3Config(OffPolicyConfig):
    """Twin delayed DDPG.

    Attributes:
        learning_rate: Adam step size of actor and critics (authors: 3e-4).
        gamma: discount.
        tau: target EMA rate of actor and critics (authors: 0.005).
        policy_delay: critic updates per actor and target update (authors: 2).
        exploration_noise: std of the Gaussian added to acting actions, in [-1, 1] units (0.1).
        target_noise: std of the target-policy smoothing noise (0.2).
        target_noise_clip: clip of that noise (0.5).
        hidden: width of the two hidden layers.
        actor_architecture: None (the MLP), or a :class:`~ajax.modules.pid_actor.PIDPolicy`:
            mu(s) = tanh of a PID on the env's error terms (spec 002; Python API only).
    """

    learning_rate: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    policy_delay: int = 2
    exploration_noise: float = 0.1
    target_noise: float = 0.2
    target_noise_clip: float = 0.5
    hidden: int = 256
    actor_architecture: PIDPolicy | None = None

    PYTHON_ONLY: ClassVar[dict[str, str]] = pid_python_only("TD3", "TD3Config")

    RULES = {
        "learning_rate": positive(),
        "gamma": between(0.0, 1.0),
        "tau": between(0.0, 1.0, lo_open=True),
        "policy_delay": at_least(1),
        "exploration_noise": nonnegative(),
        "target_noise": nonnegative(),
        "target_noise_clip": nonnegative(),
        "hidden": positive(),
    }
