"""ASAC configuration (average-reward soft actor-critic; Adamczyk et al. 2025, BobMak/asac@4b68862)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.agents.shared.soft_actor_critic_config import (
    CriticNorm,
    SoftActorCriticBase,
    TargetCritic,
)
from ajax.modules.pid_actor import pid_python_only
from ajax.validation import positive


@dataclass(frozen=True)
class ASACConfig(SoftActorCriticBase, TargetCritic, CriticNorm):
    """SAC for the average-reward criterion: no discount; the critics learn the differential
    soft Q-function and a scalar ``rho`` the soft reward rate (docs/model_free.md M9).

    Every other field is SAC's, with its SB3 defaults. Each critic's gradient is clipped to
    ``max_grad_norm`` on its own (spec 002 ``clip_by_member_norm``; BobMak/asac darer/
    Models.py:299-301 clips each member alone).

    Attributes:
        rho_lr: step size of the reward-rate estimate, rho += rho_lr * mean TD error (the
            average-reward update of differential Q-learning, Wan et al. 2021, Eq. 6).
        max_grad_norm: per-critic gradient-norm clip (None: off).
    """

    rho_lr: float = 0.01
    max_grad_norm: float | None = 10.0

    PRETRAINS: ClassVar[bool] = False  # its critic is differential, not a discounted return
    PYTHON_ONLY: ClassVar[dict[str, str]] = {
        **SoftActorCriticBase.PYTHON_ONLY,
        **pid_python_only("ASAC", "ASACConfig"),
    }

    REFUSED_FLAGS: ClassVar[dict[str, str]] = {
        "gamma": "does not apply: ASAC is undiscounted (it learns the average reward rate); "
        "drop --gamma, or use sac for a discounted return",
    }

    RULES = {"rho_lr": positive(), "max_grad_norm": positive(optional=True)}
