"""PID policies: an actor that is a PID controller with learned gains.

The actor reads the error terms that :class:`ajax.environments.pid_terms.PIDTermsWrapper` puts
first in the observation, laid out as ``[e (n_errors), I (n_errors), D (n_errors)]``: the
errors, their integrals, then their differences. Its pre-squash action, per action dimension a,
is::

    u_a = sum_j Kp[a, j] e_j + Ki[a, j] I_j + Kd[a, j] D_j

A :class:`PIDPolicy` passed as ``actor_architecture`` selects it in any continuous-action agent.
Two kinds of gains:

- ``gains="fixed"``: the gains are the actor's parameters, a linear map with no bias and no
  hidden layer, so the trained policy deploys as a plain saturated PID whose gains
  :func:`pid_gains` reads off (Lawrence et al. 2022, "Deep reinforcement learning with shallow
  controllers: an experimental application to PID tuning"; cited from memory, unverified).
- ``gains="observation"``: an MLP predicts the gains from the whole observation (gain
  scheduling); a constant network gives back the fixed policy.

u is in agent units like any actor's mean: the agent squashes (tanh) or clips it to [-1, 1] and
:func:`ajax.environments.utils.agent_action_to_env` maps that onto the env box as ``c + h * a``,
c = (high + low) / 2, h = (high - low) / 2. The gains are thus normalised: in env units a PID
has gains ``h * K`` (small-signal) and offset c, and zero gains (the start) command the box's
centre. The stochastic actor explores with a learned, state-independent log-std.

Spec 002 places it at :mod:`ajax.modules.pid_actor`, which re-exports this module: it lives
among the networks, which build it, so that ``ajax.networks`` imports nothing from
``ajax.modules``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.networks.utils import parse_architecture
from ajax.validation import PYTHON_ARGUMENT, Validated, at_least, field_error, one_of, require

Array = jax.Array
GAIN_KINDS = ("fixed", "observation")


@dataclasses.dataclass(frozen=True)
class PIDPolicy(Validated):
    """A PID actor, passed as an agent's ``actor_architecture``.

    Attributes:
        n_errors: errors the :class:`PIDTermsWrapper` tracks; its terms are the first
            ``3 * n_errors`` observation entries, ``[e, I, D]``.
        gains: ``"fixed"`` (learned constants) or ``"observation"`` (an MLP of ``architecture``
            predicts them from the observation).
        architecture: the gain network's hidden layers (``"observation"`` only; empty: gains
            affine in the observation), tokens as :func:`ajax.networks.utils.parse_architecture`
            reads them.
    """

    n_errors: int = 1
    gains: str = "fixed"
    architecture: tuple = ()

    ARGUMENT = PYTHON_ARGUMENT
    RULES = {"n_errors": at_least(1), "gains": one_of(*GAIN_KINDS)}

    def __post_init__(self):
        if isinstance(self.architecture, str):  # tuple() would split it into characters
            raise field_error(
                "PIDPolicy",
                "architecture",
                self.architecture,
                "a sequence of layer tokens, not a string",
                "write e.g. PIDPolicy(architecture=('64', 'relu'))",
                argument=PYTHON_ARGUMENT,
            )
        # A tuple keeps the policy hashable (a flax module field, a jit-static argument).
        object.__setattr__(self, "architecture", tuple(self.architecture))
        super().__post_init__()

    def relations(self) -> None:
        super().relations()
        require(
            self,
            self.gains != "fixed" or not self.architecture,
            "architecture",
            "empty with gains='fixed', which has no gain network",
            "use gains='observation' for an MLP over the observation, or drop architecture",
        )


def pid_terms(obs: Array, n_errors: int) -> Array:
    """The (e, I, D) terms at the head of ``obs``: (..., obs_dim) -> (..., 3, n_errors)."""
    if obs.shape[-1] < 3 * n_errors:
        raise ValueError(
            f"a PID actor with n_errors={n_errors} reads the first {3 * n_errors} observation "
            f"entries [e, I, D], but the observation has only {obs.shape[-1]}; wrap the env in "
            "PIDTermsWrapper or lower n_errors"
        )
    return obs[..., : 3 * n_errors].reshape(obs.shape[:-1] + (3, n_errors))


def pid_law(gains: Array, terms: Array) -> Array:
    """u_a = sum_j Kp[a,j] e_j + Ki[a,j] I_j + Kd[a,j] D_j.

    gains: (..., 3, A, n) stacked (Kp, Ki, Kd); terms: (..., 3, n) stacked (e, I, D) -> (..., A).
    """
    return jnp.einsum("...kan,...kn->...a", gains, terms)


class PIDLaw(nn.Module):
    """The PID output u for an observation, shape (..., action_dim)."""

    policy: PIDPolicy
    action_dim: int

    @nn.compact
    def gains(self, obs: Array) -> Array:
        """Kp, Ki, Kd stacked: (..., 3, action_dim, n_errors)."""
        shape = (3, self.action_dim, self.policy.n_errors)
        if self.policy.gains == "fixed":
            fixed = self.param("gains", nn.initializers.zeros, shape, jnp.float32)
            return jnp.broadcast_to(fixed, obs.shape[:-1] + shape)
        x = obs
        for layer in parse_architecture(self.policy.architecture):
            x = layer(x)
        # A zero last layer starts every gain at zero, as the fixed gains do.
        flat = nn.Dense(
            3 * self.action_dim * self.policy.n_errors,
            kernel_init=nn.initializers.zeros,
            bias_init=nn.initializers.zeros,
            name="gain_head",
        )(x)
        return flat.reshape(obs.shape[:-1] + shape)

    def __call__(self, obs: Array) -> Array:
        if self.action_dim < 1:
            raise ValueError(f"PIDLaw needs action_dim >= 1, got {self.action_dim}")
        terms = pid_terms(obs, self.policy.n_errors)
        return pid_law(self.gains(obs), terms)


class PIDActor(nn.Module):
    """Stochastic PID actor: a diagonal Normal around the PID output.

    Squashed by :class:`~ajax.networks.networks.Squashed` in the agents that bound their
    actions. The log-std is one learned parameter per action dimension, state-independent,
    clipped to ``log_std_bounds`` (low, high) when given.
    """

    policy: PIDPolicy
    action_dim: int
    log_std_init: float = 0.0
    log_std_bounds: tuple[float, float] | None = None

    def setup(self):
        if self.log_std_bounds is not None:
            low, high = self.log_std_bounds
            if not low < high:
                raise ValueError(f"log_std_bounds must be (low, high), low < high; got {low, high}")
        self.law = PIDLaw(self.policy, self.action_dim)
        self.log_std = self.param(
            "log_std", nn.initializers.constant(self.log_std_init), (self.action_dim,), jnp.float32
        )

    def gains(self, obs: Array) -> Array:
        """Kp, Ki, Kd stacked: (..., 3, action_dim, n_errors)."""
        return self.law.gains(obs)

    def __call__(self, obs: Array) -> distrax.MultivariateNormalDiag:
        u = self.law(obs)
        log_std = self.log_std
        if self.log_std_bounds is not None:
            log_std = jnp.clip(log_std, *self.log_std_bounds)
        scale = jnp.broadcast_to(jnp.exp(log_std), u.shape)
        return distrax.MultivariateNormalDiag(loc=u, scale_diag=scale)


def pid_python_only(agent: str, config: str) -> dict[str, str]:
    """The ``PYTHON_ONLY`` entry of a config that takes a :class:`PIDPolicy`: the CLI refuses
    ``--actor-architecture`` with this line, since the error function lives in Python."""
    return {
        "actor_architecture": "takes a PIDPolicy, which needs an env built with "
        "make_env(..., pid_error_fn=f): set it from Python, e.g. "
        f"ajax.{agent}(make_env(id, pid_error_fn=f), {config}(actor_architecture=PIDPolicy()))",
    }


def check_pid_actor(continuous: bool, memory: Any) -> None:
    """Reject what a PID actor cannot be: a discrete policy or a recurrent one (its memory is
    the wrapper's integral and difference)."""
    if not continuous:
        raise ValueError(
            "a PIDPolicy actor outputs continuous actions; this env's actions are discrete: "
            "use a continuous-action env or another actor_architecture"
        )
    if memory is not None:
        raise ValueError(
            "a PIDPolicy actor is feedforward (PIDTermsWrapper's integral and difference are "
            f"its memory); got memory={memory!r}: set memory=None"
        )


def _find_law(tree: Any) -> list[Mapping]:
    if not isinstance(tree, Mapping):
        return []
    if "law" in tree and isinstance(tree["law"], Mapping):
        return [tree["law"]]
    return [law for value in tree.values() for law in _find_law(value)]


def pid_gains(actor_params: Any) -> dict[str, Array]:
    """``{"kp", "ki", "kd"}`` of a fixed-gain PID actor, each (..., action_dim, n_errors).

    Leading axes (e.g. seeds) are kept. Accepts the actor's variables with or without their
    ``"params"`` level. The gains are normalised, from the errors to agent units [-1, 1]; on an
    env box [low, high] the env-unit gains are (high - low) / 2 times these. Observation gains
    depend on the observation: read them with
    ``PIDActor(policy, action_dim).apply(params, obs, method="gains")``.
    """
    laws = _find_law(actor_params)
    if len(laws) != 1:
        raise ValueError(
            f"expected the parameters of one PIDActor (a 'law' entry), found {len(laws)}"
        )
    if "gains" not in laws[0]:
        raise ValueError(
            "these are observation-conditioned gains (no fixed 'gains' parameter): read them "
            'with PIDActor(policy, action_dim).apply(params, obs, method="gains")'
        )
    stacked = laws[0]["gains"]
    return {name: stacked[..., k, :, :] for k, name in enumerate(("kp", "ki", "kd"))}
