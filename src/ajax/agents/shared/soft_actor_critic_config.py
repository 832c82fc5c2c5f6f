"""The soft actor-critic family's configuration (Haarnoja et al., arXiv:1812.05905; defaults of
stable-baselines3's SAC), composed of pieces: :class:`SoftActorCriticBase` (what every member
has), :class:`~ajax.training.api.Discounted` (gamma), :class:`TargetCritic` (tau) and
:class:`CriticNorm` (critic_norm). ``SACConfig`` and ``REDQConfig`` take them all
(:class:`SoftActorCriticConfig`); CrossQ, which has no target network and always BatchRenorm
critics, leaves out ``TargetCritic`` and ``CriticNorm``; ASAC, which is undiscounted, leaves out
``Discounted``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.agents.shared.guidance import ExpertImitation, MCPretrain
from ajax.modules.pid_actor import PIDPolicy, pid_python_only
from ajax.training.api import Discounted, OffPolicyConfig
from ajax.validation import Rule, Validated, at_least, between, increasing, positive, require


@dataclass(frozen=True)
class TargetCritic(Validated):
    """A target critic tracking the critics by an EMA (a piece of the family's configs).

    Attributes:
        tau: target-critic EMA rate (SB3: 0.005).
    """

    tau: float = 0.005

    RULES = {"tau": between(0.0, 1.0, lo_open=True)}


@dataclass(frozen=True)
class CriticNorm(Validated):
    """An optional normalisation after each critic hidden layer (a piece of the family's configs;
    CrossQ's critics are always BatchRenorm, which its update trains).

    Attributes:
        critic_norm: None, or "layernorm" after each critic hidden layer (RLPD's critic).
    """

    critic_norm: str | None = None

    RULES = {"critic_norm": Rule(choices=("layernorm", "batchrenorm"), optional=True)}

    def relations(self) -> None:
        super().relations()
        require(
            self,
            self.critic_norm != "batchrenorm",
            "critic_norm",
            f"None or 'layernorm': {type(self).__name__.removesuffix('Config')} cannot train "
            "BatchRenorm's running statistics (only CrossQ's joint batch does)",
            "use crossq for BatchRenorm critics, or --critic-norm layernorm",
        )


@dataclass(frozen=True)
class SoftActorCriticBase(OffPolicyConfig):
    """Soft actor-critic with automatic entropy tuning: the fields, defaults and rules every
    member of the family has (SAC's; see the module docstring for gamma and tau).

    Attributes:
        learning_rate: Adam step size of actor, critics and temperature (SB3: 3e-4).
        num_critics: size of the Q ensemble; the target takes the min over all members.
        hidden: width of the two hidden layers of actor and critics.
        init_alpha: initial temperature (SB3 ``ent_coef="auto"`` starts at 1.0).
        target_entropy: ``None`` is the heuristic ``-action_dim``.
        log_std_bounds: the actor's log-std clip (SB3: [-20, 2]).
        actor_architecture: None (the MLP above), or a :class:`~ajax.modules.pid_actor.PIDPolicy`:
            the actor is then a PID controller with learned gains on the error terms a
            ``make_env(..., pid_error_fn=...)`` env puts first (spec 002; Python API only).
        pretrain: None, or an :class:`~ajax.agents.shared.guidance.MCPretrain`: before learning,
            fit the critics on a known expert's Monte-Carlo returns and clone its actions into
            the actor (spec 002's expert guidance; Python API only, JAX envs only).
        imitation: None, or an :class:`~ajax.agents.shared.guidance.ExpertImitation`: the actor
            loss gains a fading pull toward an expert's actions (Python API only).
    """

    learning_rate: float = 3e-4
    num_critics: int = 2
    hidden: int = 256
    init_alpha: float = 1.0
    target_entropy: float | None = None
    log_std_bounds: tuple[float, float] = (-20.0, 2.0)
    actor_architecture: PIDPolicy | None = None
    pretrain: MCPretrain | None = None
    imitation: ExpertImitation | None = None

    # Whether init fits an MCPretrain (a discounted Q ensemble without running statistics).
    PRETRAINS: ClassVar[bool] = True
    PYTHON_ONLY: ClassVar[dict[str, str]] = {
        **pid_python_only("SAC", "SACConfig"),
        "pretrain": "takes an MCPretrain around an expert function: set it from Python, e.g. "
        "ajax.SAC('Pendulum-v1', SACConfig(pretrain=MCPretrain(expert=f)))",
        "imitation": "takes an ExpertImitation around an expert function: set it from Python, "
        "e.g. ajax.SAC('Pendulum-v1', SACConfig(imitation=ExpertImitation(expert=f)))",
    }

    RULES = {
        "learning_rate": positive(),
        "num_critics": at_least(1),
        "hidden": positive(),
        "init_alpha": positive(),
        "log_std_bounds": increasing(),  # arity and item types: the annotation (validate)
    }

    def relations(self) -> None:
        super().relations()
        require(
            self,
            self.pretrain is None or self.PRETRAINS,
            "pretrain",
            f"None: {type(self).__name__.removesuffix('Config')} does not fit an MCPretrain "
            "(it needs SAC's discounted critics without running statistics)",
            "use ajax.SAC or ajax.REDQ for MC pretraining",
        )
        require(
            self,
            self.pretrain is None or self.pretrain.rollout_steps * self.n_envs <= self.buffer_size,
            "pretrain",
            "an expert rollout that fits the replay (its rows seed it): rollout_steps x n_envs "
            f"<= buffer_size = {self.buffer_size}",
            "lower MCPretrain.rollout_steps or raise buffer_size",
        )


@dataclass(frozen=True)
class SoftActorCriticConfig(SoftActorCriticBase, Discounted, TargetCritic, CriticNorm):
    """The whole family's settings: discounted, with a target critic and an optional critic
    norm (SAC, REDQ)."""
