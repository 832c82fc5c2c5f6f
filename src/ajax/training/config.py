"""Loop settings shared by the agents (how data is collected, stored and evaluated)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.validation import Validated, nonnegative, positive, require


@dataclass(frozen=True)
class LoopConfig(Validated):
    """Collection and evaluation settings of every agent.

    Attributes:
        n_envs: parallel environments stepped in lockstep.
        eval_freq: env steps (all envs together) between deterministic evaluations; also the
            length of one jitted chunk of the run, so logs and checkpoints fall on its multiples.
        eval_episodes: episodes per evaluation, run in parallel on separate env copies.
        action_repeat: env steps per agent step, rewards summed, stopping at an episode's end
            (TD-MPC2's official DMC runs use 2; DreamerV3's use 1 at e3f0224, configs.yaml:36
            ``env.dmc.repeat``, where dreamerv3 1.5.0 had 2). An option of the env
            built from the id (``make_env(..., action_repeat=)``), in training and evaluation;
            ``--steps``, ``eval_freq`` and the time limit then count agent steps.
    """

    n_envs: int = 1
    eval_freq: int = 2_000
    eval_episodes: int = 10
    action_repeat: int = 1

    RULES = {
        "n_envs": positive(),
        "eval_freq": positive(),
        "eval_episodes": positive(),
        "action_repeat": positive(),
    }

    def relations(self) -> None:
        require(
            self,
            self.eval_freq >= self.n_envs,
            "eval_freq",
            f">= n_envs ({self.n_envs}): a chunk is eval_freq // n_envs vector steps",
        )


@dataclass(frozen=True)
class OffPolicyConfig(LoopConfig):
    """Replay settings of the off-policy agents (SAC, TD3, DQN, REDQ, CrossQ).

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

    RULES = {
        "buffer_size": positive(),
        "batch_size": positive(),
        "train_freq": positive(),
        "gradient_steps": positive(),
        "learning_starts": nonnegative(),
    }

    def relations(self) -> None:
        super().relations()
        require(
            self,
            self.learning_starts >= self.batch_size,
            "learning_starts",
            f">= batch_size ({self.batch_size}) so the first update has a full batch",
        )
        require(
            self,
            self.buffer_size >= self.batch_size,
            "buffer_size",
            f">= batch_size ({self.batch_size})",
            "raise --buffer-size or lower --batch-size",
        )
