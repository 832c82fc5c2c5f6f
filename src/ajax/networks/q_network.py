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

from ajax.networks.actor_critic import CNNSpec, Torso, reference_cnn
from ajax.networks.train_state import LoadedTrainState
from ajax.networks.utils import dense


class QNetwork(nn.Module):
    """Q(obs) -> [..., n_actions]; ``dueling`` splits the head into value and advantage.

    With ``cnn`` and ``image_shape`` the flat observation's packed image goes through a
    :class:`~ajax.networks.actor_critic.CNNEncoder` before the MLP layers of ``architecture``.
    """

    n_actions: int
    architecture: Sequence[Any] = ("64", "relu", "64", "relu")
    kernel_init: str | None = None
    dueling: bool = False
    cnn: CNNSpec | None = None
    image_shape: tuple[int, int, int] | None = None

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        if self.n_actions < 1:
            raise ValueError(f"QNetwork needs n_actions >= 1, got {self.n_actions}")
        h = Torso(
            tuple(self.architecture), self.kernel_init, cnn=self.cnn, image_shape=self.image_shape
        )(obs)
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


def q_body(
    architecture: tuple, image_shape: tuple[int, int, int] | None, cnn: CNNSpec | None, norm=False
) -> tuple[tuple, CNNSpec | None]:
    """The (MLP tokens, conv spec) of a Q-network on vector or image observations.

    On images (``image_shape`` set) the conv stack is ``cnn`` or, when None, the reference one
    for that size (:func:`~ajax.networks.actor_critic.reference_cnn`: MinAtar's 16-channel 3x3
    convolution and 128-unit layer, Young & Tian 2019, Sec. 4), with LayerNorm when ``norm``
    (PQN); its projection replaces the MLP, as in both papers. On vectors: ``architecture``.
    """
    if image_shape is None:
        return architecture, None
    spec = cnn if cnn is not None else reference_cnn(image_shape)._replace(layer_norm=norm)
    return (), spec
