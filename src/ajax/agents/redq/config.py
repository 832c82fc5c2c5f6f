"""REDQ configuration (Chen et al. 2021, arXiv:2101.05982; the authors' watchernyu/REDQ defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.agents.shared.soft_actor_critic_config import SoftActorCriticConfig
from ajax.validation import at_least, require


@dataclass(frozen=True)
class REDQConfig(SoftActorCriticConfig):
    """Randomized ensembled double Q-learning: SAC with a large Q ensemble, an in-target min over
    a random subset, and a high update-to-data ratio.

    Defaults as the authors' redq_sac.py: 10 Qs, subset 2, UTD 20 (``gradient_steps``), one
    actor and temperature step per 20 critic steps (``policy_update_delay``), 5,000 random
    steps, batch 256, polyak 0.995 (tau 0.005), lr 3e-4. The actor maximises the ensemble's mean.

    Attributes:
        num_min: size of the random subset the target's min runs over (M in the paper).
        policy_update_delay: critic steps per actor/temperature step.
    """

    num_critics: int = 10
    num_min: int = 2
    gradient_steps: int = 20
    policy_update_delay: int = 20
    learning_starts: int = 5_000

    RULES = {"num_min": at_least(1), "policy_update_delay": at_least(1)}

    def relations(self) -> None:
        super().relations()
        require(
            self,
            self.num_min <= self.num_critics,
            "num_min",
            f"<= num_critics ({self.num_critics}): the target's min runs over a subset",
            "lower --num-min or raise --num-critics",
        )
