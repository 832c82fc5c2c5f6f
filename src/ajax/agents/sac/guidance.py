"""Expert guidance for SAC (spec 002): Monte-Carlo pretraining and a fading imitation term.

Defined in :mod:`ajax.agents.shared.guidance`, which REDQ shares.
"""

from __future__ import annotations

from ajax.agents.shared.guidance import (
    ExpertData,
    ExpertImitation,
    MCPretrain,
    behaviour_cloning_loss,
    collect_expert,
    critic_regression_loss,
    demonstrations,
    expert_bounded_target,
    expert_critic_td_loss,
    imitation_loss,
    mc_returns,
    pretrain,
    refresh_expert_critic,
)

__all__ = [
    "ExpertData",
    "ExpertImitation",
    "MCPretrain",
    "behaviour_cloning_loss",
    "collect_expert",
    "critic_regression_loss",
    "demonstrations",
    "expert_bounded_target",
    "expert_critic_td_loss",
    "imitation_loss",
    "mc_returns",
    "pretrain",
    "refresh_expert_critic",
]
