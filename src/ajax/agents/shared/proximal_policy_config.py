"""The PPO family's configuration (Schulman et al., arXiv:1707.06347; CleanRL/rejax defaults):
:class:`ProximalPolicyBase`, what PPO and APO share (feedforward), and
:class:`ProximalPolicyConfig`, that with a discount (:class:`~ajax.training.api.Discounted`) and
an optional memory cell (:class:`Recurrent`), the base of ``PPOConfig``. APO, undiscounted and
feedforward, takes the base alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.modules.pid_actor import PIDPolicy, pid_python_only
from ajax.networks.memory import KINDS, MemoryConfig
from ajax.networks.utils import ACTIVATIONS
from ajax.training.api import Discounted, LoopConfig
from ajax.validation import Rule, Validated, between, nonnegative, one_of, positive, require


@dataclass(frozen=True)
class ProximalPolicyBase(LoopConfig):
    """Clipped-surrogate PPO with GAE: the family's fields, defaults and rules (PPO's; the
    discount is :class:`~ajax.training.api.Discounted`'s).

    Attributes:
        n_envs: parallel envs per rollout.
        n_steps: steps per env per rollout.
        num_epochs / num_minibatches: passes over each rollout and its split.
        learning_rate: Adam step size, annealed linearly to 0 when ``anneal_lr``.
        gae_lambda: GAE lambda.
        clip_eps: surrogate clip; value_clip_eps clips the value update alike (None: off).
        ent_coef / vf_coef: loss weights; max_grad_norm: global gradient clip.
        hidden / activation: two hidden layers of actor and critic.
        normalize_advantages: per-minibatch advantage standardisation.
        actor_architecture: None (the MLP above), or a :class:`~ajax.modules.pid_actor.PIDPolicy`
            (continuous actions, no memory): a PID on the env's error terms, Normal around
            its output (spec 002; Python API only).
    """

    n_envs: int = 8
    n_steps: int = 128
    num_epochs: int = 4
    num_minibatches: int = 4
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    value_clip_eps: float | None = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64
    activation: str = "tanh"
    normalize_advantages: bool = True
    actor_architecture: PIDPolicy | None = None

    PYTHON_ONLY: ClassVar[dict[str, str]] = pid_python_only("PPO", "PPOConfig")
    eval_freq: int = 10_240

    RULES = {
        "n_steps": positive(),
        "num_epochs": positive(),
        "num_minibatches": positive(),
        "learning_rate": positive(),
        "gae_lambda": between(0.0, 1.0),
        "clip_eps": positive(),
        "value_clip_eps": positive(optional=True),
        "ent_coef": nonnegative(),
        "vf_coef": nonnegative(),
        "max_grad_norm": positive(),
        "hidden": positive(),
        "activation": one_of(*ACTIVATIONS),
    }

    @property
    def memory_config(self) -> MemoryConfig | None:
        """The actor's and the critic's cell: None, feedforward (see :class:`Recurrent`)."""
        return None

    def relations(self) -> None:
        super().relations()
        require(
            self,
            (self.n_envs * self.n_steps) % self.num_minibatches == 0,
            "num_minibatches",
            f"a divisor of n_envs * n_steps = {self.n_envs * self.n_steps}",
        )
        rollout = self.n_envs * self.n_steps
        require(self, self.eval_freq >= rollout, "eval_freq",
                f">= n_envs * n_steps = {rollout} (evaluations fall between whole rollouts)")  # fmt: skip


@dataclass(frozen=True)
class Recurrent(Validated):
    """An optional memory cell in actor and critic (a piece of PPO's config).

    Attributes:
        memory: None (feedforward), or the memory cell (``gru``, ``lstm``, ``transformer``,
            ``mamba``; :mod:`ajax.networks.memory`) after the hidden layers of actor and critic,
            each with its own cell (SB3 RecurrentPPO's default, ``shared_lstm=False``).
            Minibatches then split the rollout by env, whole sequences each.
        memory_hidden: the cell's width (purejaxrl's PPO-RNN: a 128-unit GRU).
    """

    memory: str | None = None
    memory_hidden: int = 128

    RULES = {"memory": Rule(choices=KINDS, optional=True), "memory_hidden": positive()}

    @property
    def memory_config(self) -> MemoryConfig | None:
        """The actor's and the critic's cell (None: feedforward)."""
        if self.memory is None:
            return None
        return MemoryConfig(kind=self.memory, hidden_size=self.memory_hidden)

    def relations(self) -> None:
        super().relations()
        heads = MemoryConfig.num_heads
        require(self, self.memory != "transformer" or self.memory_hidden % heads == 0,
                "memory_hidden", f"a multiple of the transformer's {heads} heads")  # fmt: skip


@dataclass(frozen=True)
class ProximalPolicyConfig(Recurrent, ProximalPolicyBase, Discounted):
    """PPO's settings: the family's, discounted, with an optional memory cell."""

    def relations(self) -> None:
        super().relations()
        require(self, self.actor_architecture is None or self.memory is None,
                "actor_architecture", "None with memory: a PID actor's memory is its integral "
                "and difference terms", "drop memory or the PIDPolicy")  # fmt: skip
        if self.memory is not None:
            require(self, self.n_envs % self.num_minibatches == 0, "num_minibatches",
                    f"a divisor of n_envs = {self.n_envs} with memory (minibatches are whole "
                    "sequences of some envs)", "lower --num-minibatches or raise --n-envs")  # fmt: skip
