"""PPO's optimiser and update: GAE over the rollout, then the family's minibatch epochs.

State, networks, acting, the loss and the fit are the PPO family's
(:mod:`ajax.agents.shared.proximal_policy`), shared with APO.
"""

from __future__ import annotations

from ajax.agents.ppo.config import PPOConfig
from ajax.agents.shared.minibatch import total_updates
from ajax.agents.shared.proximal_policy import (
    Batch,
    PPOState,
    act,
    actor_critic_epochs,
    advantages,
    fit,
    init_state,
    network_config,
    ppo_loss,
    sample,
    value_of,
)
from ajax.networks.config import OptimizerConfig
from ajax.training.api import Rollout, values_at_cuts

__all__ = [
    "Batch",
    "PPOState",
    "act",
    "actor_critic_epochs",
    "advantages",
    "fit",
    "init",
    "init_state",
    "minibatch_epochs",
    "network_config",
    "ppo_loss",
    "sample",
    "total_updates",
    "update",
    "value_of",
]

# The name this module gave the actor-critic epochs before they moved to the shared package.
minibatch_epochs = actor_critic_epochs


def init(config: PPOConfig, key, env, total_updates: int | None = None) -> PPOState:
    """Actor (Gaussian with a state-independent log-std, or Categorical) and a V critic, each
    with its own memory cell when ``config.memory`` is set."""
    opt = OptimizerConfig(
        learning_rate=config.learning_rate, max_grad_norm=config.max_grad_norm, eps=1e-5
    )
    return init_state(config, key, env, total_updates, opt)


def update(config: PPOConfig, state: PPOState, rollout: Rollout, last_obs, key):
    """GAE over the rollout, then ``num_epochs`` passes of ``num_minibatches`` Adam steps."""
    v = lambda obs: value_of(state, state.critic_state.params, obs)
    adv = advantages(config, rollout, values_at_cuts(v, rollout), v(last_obs), config.gamma)
    return fit(config, state, rollout, adv, key)
