"""APO configuration (average policy optimisation; Ma et al. 2021, arXiv:2106.03442)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.agents.shared.proximal_policy_config import ProximalPolicyConfig
from ajax.modules.pid_actor import pid_python_only
from ajax.validation import between, nonnegative, require


@dataclass(frozen=True)
class APOConfig(ProximalPolicyConfig):
    """PPO for the average-reward criterion: GAE on the differential rewards r - rho without a
    discount, an estimate rho of the reward rate from the rollouts, and the average value
    constraint on the critic (docs/model_free.md M10).

    The rest is PPO's (:class:`~ajax.agents.shared.proximal_policy_config.ProximalPolicyConfig`),
    with no entropy bonus (``ent_coef`` 0, as PPO's MuJoCo setting); a continuous actor's mean is
    tanh of its output, sampled unsquashed around it (spec 002 ``tanh_mean``); ``max_grad_norm``
    clips the joint norm of actor and critic gradients (spec 002: APO clips both its networks at
    once).

    Attributes:
        rho_step: rho += rho_step * (mean reward of the rollout - rho) before each update.
        value_constraint: weight nu of nu * mean(V)^2, which holds the differential values'
            average at 0 (they are defined up to a constant; without it they drift).
    """

    gamma: float = 1.0
    ent_coef: float = 0.0
    rho_step: float = 0.1
    value_constraint: float = 0.1

    PYTHON_ONLY: ClassVar[dict[str, str]] = pid_python_only("APO", "APOConfig")

    RULES = {"rho_step": between(0.0, 1.0, lo_open=True), "value_constraint": nonnegative()}

    def relations(self) -> None:
        super().relations()
        require(self, self.gamma == 1.0, "gamma", "1.0: APO is undiscounted",
                "drop gamma, or use PPO for a discounted return")  # fmt: skip
        require(self, self.memory is None, "memory", "None: APO's actor and critic are "
                "feedforward", "drop --memory, or use ppo --memory")  # fmt: skip
