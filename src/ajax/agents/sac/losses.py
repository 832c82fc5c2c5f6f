"""SAC losses, one pure function per rule (Haarnoja et al. 2018, arXiv:1812.05905).

They are the soft actor-critic family's, defined in
:mod:`ajax.agents.shared.soft_actor_critic_losses` (REDQ, CrossQ, ASAC and AVG reuse them).
"""

from __future__ import annotations

from ajax.agents.shared.soft_actor_critic_losses import (
    actor_loss,
    critic_loss,
    sample_action,
    soft_td_target,
    temperature_loss,
)

__all__ = ["actor_loss", "critic_loss", "sample_action", "soft_td_target", "temperature_loss"]
