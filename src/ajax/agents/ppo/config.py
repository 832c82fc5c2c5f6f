"""PPO configuration (Schulman et al., arXiv:1707.06347; CleanRL/rejax defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.training.config import LoopConfig


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

    def __post_init__(self):
        super().__post_init__()
        if (self.n_envs * self.n_steps) % self.num_minibatches:
            raise ValueError(
                f"n_envs * n_steps ({self.n_envs * self.n_steps}) must be divisible by "
                f"num_minibatches ({self.num_minibatches})"
            )
        if self.n_steps <= 0 or self.num_epochs <= 0:
            raise ValueError("n_steps and num_epochs must be positive")
        if not 0.0 <= self.gae_lambda <= 1.0:
            raise ValueError(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
