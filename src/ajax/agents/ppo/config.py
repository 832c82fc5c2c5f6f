"""PPO configuration (Schulman et al., arXiv:1707.06347; CleanRL/rejax defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.networks.utils import ACTIVATIONS
from ajax.training.config import LoopConfig
from ajax.validation import between, nonnegative, one_of, positive, require


@dataclass(frozen=True)
class PPOConfig(LoopConfig):
    """Clipped-surrogate PPO with GAE.

    Attributes:
        n_envs: parallel envs per rollout.
        n_steps: steps per env per rollout.
        num_epochs / num_minibatches: passes over each rollout and its split.
        learning_rate: Adam step size, annealed linearly to 0 when ``anneal_lr``.
        gamma / gae_lambda: discount and GAE lambda.
        clip_eps: surrogate clip; value_clip_eps clips the value update alike (None: off).
        ent_coef / vf_coef: loss weights; max_grad_norm: global gradient clip.
        hidden / activation: two hidden layers of actor and critic.
        normalize_advantages: per-minibatch advantage standardisation.
    """

    n_envs: int = 8
    n_steps: int = 128
    num_epochs: int = 4
    num_minibatches: int = 4
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    value_clip_eps: float | None = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64
    activation: str = "tanh"
    normalize_advantages: bool = True
    eval_freq: int = 10_240

    RULES = {
        "n_steps": positive(),
        "num_epochs": positive(),
        "num_minibatches": positive(),
        "learning_rate": positive(),
        "gamma": between(0.0, 1.0),
        "gae_lambda": between(0.0, 1.0),
        "clip_eps": positive(),
        "value_clip_eps": positive(optional=True),
        "ent_coef": nonnegative(),
        "vf_coef": nonnegative(),
        "max_grad_norm": positive(),
        "hidden": positive(),
        "activation": one_of(*ACTIVATIONS),
    }

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
