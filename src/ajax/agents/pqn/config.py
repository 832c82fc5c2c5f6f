"""PQN configuration (Gallici et al. 2024, arXiv:2407.04811; purejaxql's CartPole setting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ajax.training.api import LoopConfig
from ajax.validation import at_least, between, one_of, positive, require

_NO_REPLAY = (
    "does not apply: pqn has no replay buffer (it learns from the rollouts of its n_envs vmapped "
    "envs); drop the flag, or use dqn for a replay-based Q-learner"
)


@dataclass(frozen=True)
class PQNConfig(LoopConfig):
    """Parallel Q-learning: a LayerNorm Q-network trained on Q(lambda) targets of vmapped envs,
    no replay buffer and no target network.

    Attributes:
        n_envs / n_steps: envs stepped in parallel and steps per env per rollout.
        num_epochs / num_minibatches: passes over each rollout and its split.
        optimizer: "radam" or "adam". purejaxql's pqn scripts chain a global-norm clip and
            optax.radam (mttga/purejaxql@0436c80 pqn_gymnax.py). On CartPole-v1 over 18 seeds
            (0-1, 10-17, 20-27) at these defaults, Adam ended 2 seeds below 450 (best of the
            last two evaluations 139 and 305: the greedy policy dips for a few evaluations late
            in the run), RAdam none (docs/model_free.md M16).
        learning_rate: step size, decayed linearly to 0 over the run when ``anneal_lr``.
            3e-4 was chosen on CartPole-v1 here (1e-4 reached 500 on one of two seeds in 500k
            steps, 3e-4 on both); purejaxql's CartPole config uses 1e-4 with hidden 256 and
            rewards x 0.1 (preset ``pqn-cartpole-purejaxql``).
        gamma / q_lambda: discount and the lambda of the Q(lambda) return.
        hidden / num_layers: width and depth of the Dense -> LayerNorm -> ReLU body.
        epsilon_start / epsilon_end / exploration_fraction: epsilon decays linearly over that
            fraction of the run's updates.
        max_grad_norm: global gradient-norm clip.
    """

    n_envs: int = 32
    n_steps: int = 64
    num_epochs: int = 4
    num_minibatches: int = 16
    optimizer: str = "radam"
    learning_rate: float = 3e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    q_lambda: float = 0.95
    hidden: int = 128
    num_layers: int = 2
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    exploration_fraction: float = 0.2
    max_grad_norm: float = 10.0
    eval_freq: int = 16_384

    # sets the decay's length in updates (an int): a sweep runs one program per value
    SWEEP_STATIC: ClassVar[tuple[str, ...]] = ("exploration_fraction",)
    REFUSED_FLAGS: ClassVar[dict[str, str]] = dict.fromkeys(
        ("buffer_size", "batch_size", "learning_starts", "train_freq", "gradient_steps",
         "target_update_interval"),
        _NO_REPLAY,
    )  # fmt: skip

    RULES = {
        "n_steps": positive(),
        "num_epochs": positive(),
        "num_minibatches": positive(),
        "optimizer": one_of("radam", "adam"),
        "learning_rate": positive(),
        "gamma": between(0.0, 1.0),
        "q_lambda": between(0.0, 1.0),
        "hidden": positive(),
        "num_layers": at_least(1),
        "epsilon_start": between(0.0, 1.0),
        "epsilon_end": between(0.0, 1.0),
        "exploration_fraction": between(0.0, 1.0, lo_open=True),
        "max_grad_norm": positive(),
    }

    def relations(self) -> None:
        super().relations()
        rollout = self.n_envs * self.n_steps
        require(self, rollout % self.num_minibatches == 0, "num_minibatches",
                f"a divisor of n_envs * n_steps = {rollout}")  # fmt: skip
        require(self, self.eval_freq >= rollout, "eval_freq",
                f">= n_envs * n_steps = {rollout} (evaluations fall between whole rollouts)")  # fmt: skip
        require(self, self.epsilon_end <= self.epsilon_start, "epsilon_end",
                f"<= epsilon_start ({self.epsilon_start}): exploration decays")  # fmt: skip
