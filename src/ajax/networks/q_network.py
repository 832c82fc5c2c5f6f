"""Discrete action-value networks Q(s, .) for DQN and PQN, with the dueling head as an option.

One forward pass gives every action's value (Mnih et al. 2015, Nature 518, Fig. 1); the dueling
head (Wang et al. 2016, arXiv:1511.06581, Eq. 9) splits it into V(s) + A(s, a) - mean_a A(s, a).
The body is the toolbox's :class:`~ajax.networks.actor_critic.Torso`, so the architecture tokens
("256", "relu", "layernorm", ...) are those of every other network here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.networks.actor_critic import Torso
from ajax.networks.train_state import LoadedTrainState
from ajax.networks.utils import dense


class QNetwork(nn.Module):
    """Q(obs) -> [..., n_actions]; ``dueling`` splits the head into value and advantage."""

    n_actions: int
    architecture: Sequence[Any] = ("64", "relu", "64", "relu")
    kernel_init: str | None = None
    dueling: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        if self.n_actions < 1:
            raise ValueError(f"QNetwork needs n_actions >= 1, got {self.n_actions}")
        h = Torso(tuple(self.architecture), self.kernel_init)(obs)
        head = dense(self.n_actions, self.kernel_init, None, nn.initializers.lecun_normal())
        if not self.dueling:
            return head(h)
        adv = head(h)
        value = dense(1, self.kernel_init, None, nn.initializers.lecun_normal())(h)
        return value + adv - adv.mean(-1, keepdims=True)


def q_values(state: LoadedTrainState, params, obs: jax.Array) -> jax.Array:
    """Every action's value at ``obs`` [..., O] -> [..., n_actions]."""
    return state.apply_fn({"params": params}, obs)


def epsilon_greedy(q: jax.Array, epsilon: jax.Array, key) -> jax.Array:
    """argmax_a q with probability 1 - epsilon, else a uniform action (Mnih et al. 2015, Methods)."""
    k_explore, k_action = jax.random.split(key)
    lead = q.shape[:-1]
    random = jax.random.randint(k_action, lead, 0, q.shape[-1])
    explore = jax.random.uniform(k_explore, lead) < epsilon
    return jnp.where(explore, random, jnp.argmax(q, axis=-1))


def linear_epsilon(start: float, end: float, steps, t) -> jax.Array:
    """epsilon decayed linearly from ``start`` to ``end`` over ``steps``, then held (SB3, PQN)."""
    frac = jnp.clip(jnp.asarray(t, jnp.float32) / max(float(steps), 1.0), 0.0, 1.0)
    return start + frac * (end - start)
