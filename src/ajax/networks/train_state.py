"""Train state of a network: parameters, optimizer, optional target copy and running statistics.

B10 of spec 000: a target (TD-MPC2's target Q, rate 0.01) or slow (DreamerV3's slow critic,
rate 0.02) network is an EMA of the online parameters over every leaf, norm scales and biases
included, started as an exact copy. :func:`ema_update` is that rule; :meth:`LoadedTrainState.soft_update`
applies it to the state's own target.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

Params = Any


def ema_update(target: Params, online: Params, rate: float) -> Params:
    """theta_tgt <- rate * theta + (1 - rate) * theta_tgt over all leaves (spec 000 B10).

    ``optax.incremental_update(new, old, step_size)``; the target receives no gradient.
    """
    if isinstance(rate, int | float) and not 0.0 <= rate <= 1.0:  # a traced rate is not checked
        raise ValueError(f"EMA rate must be in [0, 1], got {rate}")
    return optax.incremental_update(
        jax.lax.stop_gradient(online), jax.lax.stop_gradient(target), rate
    )


class ActionUnits(flax.struct.PyTreeNode):
    """Affine map of the agent's [-1, 1] actions onto an env box: ``c + h * a``."""

    low: jax.Array
    high: jax.Array

    def __call__(self, action: jax.Array) -> jax.Array:
        """``action`` in [-1, 1] -> the box's units (-1 -> low, 1 -> high)."""
        return (self.high + self.low) / 2 + (self.high - self.low) / 2 * action


class ObsStats(flax.struct.PyTreeNode):
    """Observation mean and variance applied as ``(obs - mean) / sqrt(var + eps)``."""

    mean: jax.Array
    var: jax.Array
    eps: float = flax.struct.field(pytree_node=False, default=1e-8)

    def normalize(self, obs: jax.Array) -> jax.Array:
        """``obs`` standardised feature-wise."""
        return (obs - self.mean) / jnp.sqrt(self.var + self.eps)


class LoadedTrainState(flax.struct.PyTreeNode):
    """A network's apply function, parameters and optimizer, with optional extras.

    ``target_params`` is a copy for bootstrapping (``None`` when unused); ``batch_stats`` holds
    running statistics (BatchRenorm) updated by :meth:`apply_train`; ``hidden_state`` is the
    carry of a recurrent network while acting (``None`` when feedforward); ``action_units`` an
    :class:`ActionUnits` map under which a critic reads actions in the env's units (TD3's);
    ``obs_stats`` an :class:`ObsStats` the network normalises its observations with.
    """

    step: jax.Array
    params: Params
    opt_state: optax.OptState
    target_params: Params = None
    batch_stats: Params = None
    hidden_state: Any = None
    action_units: Any = None
    obs_stats: Any = None
    apply_fn: Callable = flax.struct.field(pytree_node=False, default=None)
    tx: optax.GradientTransformation = flax.struct.field(pytree_node=False, default=None)

    @classmethod
    def create(
        cls,
        *,
        apply_fn: Callable,
        params: Params,
        tx: optax.GradientTransformation,
        target: bool = False,
        batch_stats: Params = None,
        hidden_state: Any = None,
    ) -> LoadedTrainState:
        """A fresh state; ``target=True`` starts ``target_params`` as an exact copy."""
        state = cls(
            step=jnp.zeros((), jnp.int32),
            params=params,
            opt_state=tx.init(params),
            batch_stats=batch_stats,
            hidden_state=hidden_state,
            apply_fn=apply_fn,
            tx=tx,
        )
        return state.with_target() if target else state

    def with_target(self) -> LoadedTrainState:
        """This state with ``target_params`` an exact copy of ``params`` (B10's start).

        Copies, not aliases of the online buffers, so that the state can be donated to a jit.
        """
        return self.replace(target_params=jax.tree.map(jnp.copy, self.params))

    def variables(self, params: Params | None = None) -> dict:
        """The flax variables dict for ``params`` (default: the online ones)."""
        out = {"params": self.params if params is None else params}
        if self.batch_stats is not None:
            out["batch_stats"] = self.batch_stats
        return out

    def apply_gradients(self, grads: Params) -> LoadedTrainState:
        """One optimizer step."""
        updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
        return self.replace(
            step=self.step + 1,
            params=optax.apply_updates(self.params, updates),
            opt_state=opt_state,
        )

    def soft_update(self, tau: float) -> LoadedTrainState:
        """Move ``target_params`` towards the online parameters by ``tau`` (:func:`ema_update`)."""
        if self.target_params is None:
            raise ValueError(
                "soft_update needs a target: create the state with target=True or call with_target()"
            )
        return self.replace(target_params=ema_update(self.target_params, self.params, tau))

    def apply_train(self, params: Params, *args, **kwargs) -> tuple[Any, Params]:
        """Apply in training mode: returns ``(output, new batch_stats)``.

        Running statistics train exactly when the ``batch_stats`` collection is mutable; a network
        without them returns ``None`` as its new statistics.
        """
        if self.batch_stats is None:
            return self.apply_fn({"params": params}, *args, **kwargs), None
        out, updates = self.apply_fn(
            self.variables(params), *args, mutable=["batch_stats"], **kwargs
        )
        return out, updates["batch_stats"]
