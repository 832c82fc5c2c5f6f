"""AVG configuration (action value gradient; Vasan et al. 2024, arXiv:2411.15370)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.modules.pid_actor import PIDPolicy, pid_python_only
from ajax.networks.utils import ACTIVATIONS
from ajax.training.api import LoopConfig
from ajax.validation import between, increasing, nonnegative, one_of, positive


@dataclass(frozen=True)
class AVGConfig(LoopConfig):
    """Incremental actor-critic: one update per env step on that step alone, no replay buffer,
    no target network (docs/model_free.md M11).

    Defaults from the paper's hyper-parameters: Adam with beta_1 = 0 (actor lr 0.0063, critic lr
    0.0087), a fixed entropy weight 0.07, gamma 0.99, two 256-unit leaky-ReLU layers with
    penultimate normalisation in both networks, observation normalisation and scaled TD errors.

    Attributes:
        actor_lr / critic_lr: Adam step sizes.
        beta_1: Adam's first-moment decay (the paper's 0: no momentum on one-sample gradients).
        gamma: discount.
        alpha: fixed entropy weight.
        hidden / activation: the two hidden layers of actor and critic.
        normalize_obs: running-moment observation normalisation inside the agent.
        scale_td: divide rewards by sigma = sqrt(Var[r] + Var[gamma_t] E[G^2]) (Schaul et al.
            2021's return-based scale, AVG's scaled TD error).
        log_std_bounds: clip of the actor's log-std.
        actor_architecture: None (the MLP above), or a :class:`~ajax.modules.pid_actor.PIDPolicy`
            (squashed like the MLP; spec 002 ``ajax.modules.pid_actor``).
    """

    actor_lr: float = 0.0063
    critic_lr: float = 0.0087
    beta_1: float = 0.0
    gamma: float = 0.99
    alpha: float = 0.07
    hidden: int = 256
    activation: str = "leaky_relu"
    normalize_obs: bool = True
    scale_td: bool = True
    log_std_bounds: tuple[float, float] = (-20.0, 2.0)
    eval_freq: int = 5_000
    actor_architecture: PIDPolicy | None = None

    PYTHON_ONLY: ClassVar[dict[str, str]] = pid_python_only("AVG", "AVGConfig")

    RULES = {
        "actor_lr": positive(),
        "critic_lr": positive(),
        "beta_1": between(0.0, 1.0, hi_open=True),
        "gamma": between(0.0, 1.0),
        "alpha": nonnegative(),
        "hidden": positive(),
        "activation": one_of(*ACTIVATIONS),
        "log_std_bounds": increasing(),  # arity and item types: the annotation (validate)
    }

    @property
    def n_steps(self) -> int:
        """One env step per update: AVG is incremental."""
        return 1
