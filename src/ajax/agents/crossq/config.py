"""CrossQ configuration (Bhatt et al. 2024, arXiv:1902.05605; adityab/CrossQ@a318a26 defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.agents.shared.soft_actor_critic_config import SoftActorCriticConfig
from ajax.validation import at_least, between, positive, require


@dataclass(frozen=True)
class CrossQConfig(SoftActorCriticConfig):
    """SAC without a target network: BatchRenorm critics evaluate (s, a) and (s', a') in one
    joint batch, so the bootstrap sees the same normalisation statistics as the regression.

    Defaults as CrossQ's: lr 1e-3 with Adam beta_1 0.5, actor 2 x 256, critics 2 x 2048 with
    BatchRenorm (momentum 0.99, 100k warm-up steps of plain batch norm, r_max 3, d_max 5), one
    actor step per 3 critic steps, 5,000 random steps. ``tau`` stays 1.0: there is no target.

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
    tau: float = 1.0
    critic_norm: str | None = "batchrenorm"

    TRAINS_BATCH_STATS: ClassVar[bool] = True
    PRETRAINS: ClassVar[bool] = False
    RULES = {"critic_hidden": positive(), "beta_1": between(0.0, 1.0, hi_open=True),
             "policy_delay": at_least(1)}  # fmt: skip

    def relations(self) -> None:
        super().relations()
        require(
            self,
            self.tau == 1.0,
            "tau",
            "1.0: CrossQ has no target network (the joint BatchRenorm pass replaces it)",
            "drop --tau, or use sac for a target-network critic",
        )
        require(self, self.critic_norm == "batchrenorm", "critic_norm",
                "'batchrenorm': CrossQ's joint batch needs BatchRenorm critics",
                "drop --critic-norm, or use sac for other critics")  # fmt: skip
