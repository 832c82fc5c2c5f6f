"""PPO configuration (Schulman et al., arXiv:1707.06347; CleanRL/rejax defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.agents.shared.proximal_policy_config import ProximalPolicyConfig


@dataclass(frozen=True)
class PPOConfig(ProximalPolicyConfig):
    """Clipped-surrogate PPO with GAE: the family's fields, defaults and rules as they are
    (:class:`~ajax.agents.shared.proximal_policy_config.ProximalPolicyConfig`, where each field
    is documented)."""
