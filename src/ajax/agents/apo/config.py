"""APO configuration (average policy optimisation; Ma et al. 2021, arXiv:2106.03442)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.agents.shared.proximal_policy_config import ProximalPolicyBase
from ajax.modules.pid_actor import pid_python_only
from ajax.validation import between, nonnegative


@dataclass(frozen=True)
class APOConfig(ProximalPolicyBase):
    """PPO for the average-reward criterion: GAE on the differential rewards r - rho without a
    discount, an estimate rho of the reward rate from the rollouts, and the average value
    constraint on the critic (docs/model_free.md M10).

    The rest is PPO's (:class:`~ajax.agents.shared.proximal_policy_config.ProximalPolicyBase`, no
    ``gamma``),
    with no entropy bonus (``ent_coef`` 0, as PPO's MuJoCo setting); a continuous actor's mean is
    tanh of its output, sampled unsquashed around it (spec 002 ``tanh_mean``); ``max_grad_norm``
    clips the joint norm of actor and critic gradients (spec 002: APO clips both its networks at
    once).

    Attributes:
        rho_step: rho += rho_step * (mean reward of the rollout - rho) before each update.
        value_constraint: weight nu of nu * mean(V)^2, which holds the differential values'
            average at 0 (they are defined up to a constant; without it they drift).
    """

    ent_coef: float = 0.0
    rho_step: float = 0.1
    value_constraint: float = 0.1

    PYTHON_ONLY: ClassVar[dict[str, str]] = pid_python_only("APO", "APOConfig")
    REFUSED_FLAGS: ClassVar[dict[str, str]] = {
        "gamma": "does not apply: APO is undiscounted (it learns the average reward rate); "
        "drop --gamma, or use ppo for a discounted return",
        "memory": "does not apply: APO's actor and critic are feedforward; drop --memory, or "
        "use ppo --memory",
        "memory_hidden": "does not apply: APO's actor and critic are feedforward; drop "
        "--memory-hidden, or use ppo --memory",
    }

    RULES = {"rho_step": between(0.0, 1.0, lo_open=True), "value_constraint": nonnegative()}
