"""PID output head: a stateful, learnable PID layer on a network's output.

Busetto et al. 2024 (arXiv:2411.06482, §4.1) close their in-context controller with a PID layer:
the transformer emits a signal ``z_k`` and the applied input is

    u_k = K_P z_k + K_I sum_{j<=k} z_j + K_D (z_k - z_{k-1})

with three learnable gains. The integral term drives the steady-state error on step references
to zero. Not to be confused with :mod:`ajax.modules.pid_actor`, a PID policy on the observation's
tracking-error terms: here the PID acts on the network's own output, so it carries its integral
and previous signal from step to step, like a memory cell.

The interface mirrors :class:`ajax.networks.memory.MemoryCell`: time-major ``(T, B, n)`` signals
with ``(T, B)`` reset flags, a zero carry from :func:`init_pid_carry`, and
``__call__(carry, z, resets) -> (new_carry, u)``. Acting step by step is the ``T = 1`` case of
the same code path, so training on sequences and acting cannot diverge.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

Array = jax.Array


@struct.dataclass
class PIDCarry:
    """The head's state per batch entry: ``integral`` = sum_{j<=t} z_j, ``previous`` = z_t."""

    integral: Array  # (B, n)
    previous: Array  # (B, n)


def init_pid_carry(batch_size: int, n_outputs: int) -> PIDCarry:
    """Zero carry: no accumulated integral, previous signal z_{-1} = 0."""
    zeros = jnp.zeros((batch_size, n_outputs), jnp.float32)
    return PIDCarry(integral=zeros, previous=zeros)


def pid_output_step(
    carry: PIDCarry,
    z_t: Array,
    reset_t: Array,
    kp: Array,
    ki: Array,
    kd: Array,
    anti_windup: float | None,
) -> tuple[PIDCarry, Array]:
    """One PID step: u_t = kp z_t + ki I_t + kd (z_t - z_{t-1}), with I_t = I_{t-1} + z_t.

    A reset clears I and z_{t-1} before z_t is read. Conditional integration: where the tentative
    pre-squash output exceeds ``anti_windup`` in magnitude and the increment ``ki z_t`` pushes it
    further out, the integral keeps its old value; an increment of the other sign (unwinding)
    always accumulates.
    """
    keep = ~reset_t[:, None]
    integral = jnp.where(keep, carry.integral, 0.0)
    previous = jnp.where(keep, carry.previous, 0.0)
    direct = kp * z_t + kd * (z_t - previous)
    tentative = integral + z_t
    u = direct + ki * tentative
    if anti_windup is not None:
        winding = (jnp.abs(u) > anti_windup) & (ki * z_t * u > 0.0)
        tentative = jnp.where(winding, integral, tentative)
        u = direct + ki * tentative
    return PIDCarry(integral=tentative, previous=z_t), u


class PIDOutputHead(nn.Module):
    """Learnable PID on a time-major signal z; see the module docstring.

    Attributes:
        n_outputs: signal width n, one gain triple per channel (the paper's single-input case is
            ``n_outputs=1``).
        use_p, use_i, use_d: enable the proportional, integral and derivative terms; a disabled
            term has no parameter (its gain is a constant 0).
        kp_init, ki_init, kd_init: the gains' initial values. The defaults (1, 0, 0) start the
            head as the identity whichever terms are enabled; training grows the others.
        anti_windup: pre-squash output magnitude beyond which the integral stops accumulating in
            the saturating direction (conditional integration); ``None`` disables it. Behind a
            ``tanh``, about 3 (tanh within 0.5 % of its rail) stops the integral from winding up
            while the input is pinned, so the loop does not overshoot when it leaves the rail.
    """

    n_outputs: int
    use_p: bool = True
    use_i: bool = True
    use_d: bool = True
    kp_init: float = 1.0
    ki_init: float = 0.0
    kd_init: float = 0.0
    anti_windup: float | None = None

    def _gain(self, name: str, used: bool, value: float) -> Array:
        if not used:
            return jnp.zeros((self.n_outputs,), jnp.float32)
        return self.param(name, nn.initializers.constant(value), (self.n_outputs,), jnp.float32)

    def _check(self, carry: PIDCarry, z: Array, resets: Array) -> None:
        if self.n_outputs < 1:
            raise ValueError(f"PIDOutputHead needs n_outputs >= 1, got {self.n_outputs}")
        if self.anti_windup is not None and not self.anti_windup > 0:
            raise ValueError(
                f"anti_windup must be > 0 (or None to disable it), got {self.anti_windup}"
            )
        if z.ndim != 3 or z.shape[-1] != self.n_outputs:
            raise ValueError(
                f"z must be time-major (T, B, {self.n_outputs}), got shape {z.shape}; "
                "a single step is T=1: z[None]"
            )
        if resets.shape != z.shape[:2]:
            raise ValueError(f"resets must have shape (T, B) = {z.shape[:2]}, got {resets.shape}")
        if carry.integral.shape != z.shape[1:] or carry.previous.shape != z.shape[1:]:
            raise ValueError(
                f"carry must be (B, n) = {z.shape[1:]}, got {carry.integral.shape}; "
                "build it with init_pid_carry(batch_size, n_outputs)"
            )

    def initialize_carry(self, batch_size: int) -> PIDCarry:
        """Zero carry for ``batch_size`` entries (:func:`init_pid_carry`)."""
        return init_pid_carry(batch_size, self.n_outputs)

    @nn.compact
    def __call__(self, carry: PIDCarry, z: Array, resets: Array) -> tuple[PIDCarry, Array]:
        """z: (T, B, n), resets: (T, B) -> (new_carry, u (T, B, n)).

        A reset at step t clears the integral and the previous signal before z_t is consumed,
        so u_t is computed as at the start of an episode.
        """
        self._check(carry, z, resets)
        kp = self._gain("kp", self.use_p, self.kp_init)
        ki = self._gain("ki", self.use_i, self.ki_init)
        kd = self._gain("kd", self.use_d, self.kd_init)

        def step(c, inputs):
            z_t, reset_t = inputs
            return pid_output_step(c, z_t, reset_t, kp, ki, kd, self.anti_windup)

        return jax.lax.scan(step, carry, (z, resets.astype(bool)))
