"""PPO losses and GAE, one pure function per rule (Schulman et al. 2017; 2015 GAE).

They are the PPO family's, defined in :mod:`ajax.agents.shared.proximal_policy_losses` (APO
reuses them).
"""

from __future__ import annotations

from ajax.agents.shared.proximal_policy_losses import (
    clipped_surrogate_loss,
    gae_advantages,
    value_loss,
)

__all__ = ["clipped_surrogate_loss", "gae_advantages", "value_loss"]
