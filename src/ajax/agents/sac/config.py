"""SAC configuration (Haarnoja et al., arXiv:1812.05905; defaults of stable-baselines3's SAC)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.modules.pid_actor import PIDPolicy
from ajax.training.config import OffPolicyConfig
from ajax.validation import at_least, between, positive, require


@dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    """Soft actor-critic with automatic entropy tuning.

    Attributes:
        learning_rate: Adam step size of actor, critics and temperature (SB3: 3e-4).
        gamma: discount.
        tau: target-critic EMA rate (SB3: 0.005).
        num_critics: size of the Q ensemble; the target takes the min over all members.
        hidden: width of the two hidden layers of actor and critics.
        init_alpha: initial temperature (SB3 ``ent_coef="auto"`` starts at 1.0).
        target_entropy: ``None`` is the heuristic ``-action_dim``.
        log_std_bounds: the actor's log-std clip (SB3: [-20, 2]).
        actor_architecture: None (the MLP above), or a :class:`~ajax.modules.pid_actor.PIDPolicy`:
            the actor is then a PID controller with learned gains on the error terms a
            ``make_env(..., pid_error_fn=...)`` env puts first (spec 002; Python API only).
    """

    learning_rate: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    num_critics: int = 2
    hidden: int = 256
    init_alpha: float = 1.0
    target_entropy: float | None = None
    log_std_bounds: tuple[float, float] = (-20.0, 2.0)
    actor_architecture: PIDPolicy | None = None

    PYTHON_ONLY: ClassVar[dict[str, str]] = {
        "actor_architecture": "takes a PIDPolicy, which needs an env built with "
        "make_env(..., pid_error_fn=f): set it from Python, e.g. "
        "ajax.SAC(make_env(id, pid_error_fn=f), SACConfig(actor_architecture=PIDPolicy()))",
    }

    RULES = {
        "learning_rate": positive(),
        "gamma": between(0.0, 1.0),
        "tau": between(0.0, 1.0, lo_open=True),
        "num_critics": at_least(1),
        "hidden": positive(),
        "init_alpha": positive(),
    }

    def relations(self) -> None:
        super().relations()
        lo, hi = self.log_std_bounds
        require(
            self,
            len(self.log_std_bounds) == 2 and lo < hi,
            "log_std_bounds",
            "a pair (min, max) with min < max",
            "e.g. --log-std-bounds -20 2",
        )
