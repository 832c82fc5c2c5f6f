"""Loop settings shared by the agents (how data is collected, stored and evaluated)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LoopConfig:
    """Collection and evaluation settings of every agent.

    Attributes:
        n_envs: parallel environments stepped in lockstep.
        eval_freq: env steps (all envs together) between deterministic evaluations; also the
            length of one jitted chunk of the run, so logs and checkpoints fall on its multiples.
        eval_episodes: episodes per evaluation, run in parallel on separate env copies.
    """

    n_envs: int = 1
    eval_freq: int = 2_000
    eval_episodes: int = 10

    def __post_init__(self):
        for name in ("n_envs", "eval_freq", "eval_episodes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


@dataclass(frozen=True)
class OffPolicyConfig(LoopConfig):
    """Replay settings of the off-policy agents (SAC, TD3).

    Attributes:
        buffer_size: replay capacity in transitions (all envs together).
        batch_size: transitions per gradient step.
        learning_starts: env steps of uniformly random actions before the first update.
        train_freq: env steps (per env) between update phases.
        gradient_steps: gradient steps per update phase (the update-to-data ratio with
            ``train_freq=1, n_envs=1``).
    """

    buffer_size: int = 1_000_000
    batch_size: int = 256
    learning_starts: int = 1_000
    train_freq: int = 1
    gradient_steps: int = 1

    def __post_init__(self):
        super().__post_init__()
        for name in ("buffer_size", "batch_size", "train_freq", "gradient_steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.learning_starts < self.batch_size:
            raise ValueError(
                f"learning_starts ({self.learning_starts}) must be >= batch_size "
                f"({self.batch_size}) so the first update has a full batch"
            )
