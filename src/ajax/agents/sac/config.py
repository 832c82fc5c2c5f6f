"""SAC configuration (Haarnoja et al., arXiv:1812.05905; defaults of stable-baselines3's SAC)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.agents.shared.soft_actor_critic_config import SoftActorCriticConfig


@dataclass(frozen=True)
class SACConfig(SoftActorCriticConfig):
    """Soft actor-critic with automatic entropy tuning: the family's fields, SB3 defaults and
    rules as they are (:class:`~ajax.agents.shared.soft_actor_critic_config.SoftActorCriticConfig`,
    where each field is documented)."""
