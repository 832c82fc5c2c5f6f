"""SAC configuration (Haarnoja et al., arXiv:1812.05905; defaults of stable-baselines3's SAC)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.training.config import OffPolicyConfig


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
    """

    learning_rate: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    num_critics: int = 2
    hidden: int = 256
    init_alpha: float = 1.0
    target_entropy: float | None = None
    log_std_bounds: tuple[float, float] = (-20.0, 2.0)

    def __post_init__(self):
        super().__post_init__()
        if not 0.0 < self.tau <= 1.0:
            raise ValueError(f"tau must be in (0, 1], got {self.tau}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.num_critics < 1:
            raise ValueError(f"num_critics must be >= 1, got {self.num_critics}")
        if self.init_alpha <= 0:
            raise ValueError(f"init_alpha must be > 0, got {self.init_alpha}")
