"""Blocks that two or more agents share, so that no agent imports another.

- :mod:`~ajax.agents.shared.soft_actor_critic` (state, networks, acting, policy step),
  :mod:`~ajax.agents.shared.soft_actor_critic_config` and
  :mod:`~ajax.agents.shared.soft_actor_critic_losses`: the soft actor-critic family (SAC, REDQ,
  CrossQ, ASAC; AVG's actor), with its expert :mod:`~ajax.agents.shared.guidance`.
- :mod:`~ajax.agents.shared.proximal_policy`, :mod:`~ajax.agents.shared.proximal_policy_config`
  and :mod:`~ajax.agents.shared.proximal_policy_losses`: the PPO family (PPO, APO).
- :mod:`~ajax.agents.shared.minibatch`: the shuffled minibatch epochs over one rollout (PPO, APO,
  PQN).

This package imports no agent package.
"""
