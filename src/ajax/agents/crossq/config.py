"""CrossQ configuration (Bhatt et al. 2024, arXiv:1902.05605; adityab/CrossQ@a318a26 defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.agents.shared.soft_actor_critic_config import SoftActorCriticBase
from ajax.training.api import Discounted
from ajax.validation import at_least, between, positive


@dataclass(frozen=True)
class CrossQConfig(SoftActorCriticBase, Discounted):
    """SAC without a target network: BatchRenorm critics evaluate (s, a) and (s', a') in one
    joint batch, so the bootstrap sees the same normalisation statistics as the regression.

    Defaults as CrossQ's: lr 1e-3 with Adam beta_1 0.5, actor 2 x 256, critics 2 x 2048 with
    BatchRenorm (momentum 0.99, 100k warm-up steps of plain batch norm, r_max 3, d_max 5), one
    actor step per 3 critic steps, 5,000 random steps. No ``tau``: there is no target network
    (the family's :class:`~ajax.agents.shared.soft_actor_critic_config.TargetCritic` is left out).

    Attributes:
        critic_hidden: width of the critics' two hidden layers (``hidden`` is the actor's).
        beta_1: Adam's first-moment decay for actor, critics and temperature.
        policy_delay: critic steps per actor/temperature step.
    """

    learning_rate: float = 1e-3
    critic_hidden: int = 2048
    beta_1: float = 0.5
    policy_delay: int = 3
    learning_starts: int = 5_000

    # not a field: CrossQ's critics are always BatchRenorm, whose statistics its update trains
    critic_norm: ClassVar[str] = "batchrenorm"
    PRETRAINS: ClassVar[bool] = False
    REFUSED_FLAGS: ClassVar[dict[str, str]] = {
        "tau": "does not apply: CrossQ has no target network (the joint BatchRenorm pass "
        "replaces it); drop --tau, or use sac for a target-network critic",
        "critic_norm": "does not apply: CrossQ's joint batch needs BatchRenorm critics (always "
        "on); drop --critic-norm, or use sac for other critics",
    }
    RULES = {"critic_hidden": positive(), "beta_1": between(0.0, 1.0, hi_open=True),
             "policy_delay": at_least(1)}  # fmt: skip

    def relations(self) -> None:
        super().relations()
