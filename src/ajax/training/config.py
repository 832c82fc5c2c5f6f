"""Loop settings shared by the agents (how data is collected, stored and evaluated)."""

from __future__ import annotations

from dataclasses import dataclass

from ajax.validation import Validated, between, nonnegative, one_of, positive, require


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

    @classmethod
    def for_env(cls, env: str, env_options: dict | None = None, **overrides):
        """The config of the agent's default preset for the env id ``env`` (tuned settings,
        :mod:`ajax.presets`; the plain defaults where it has none), then ``overrides``.
        ``env_options`` are the image options the env is built with (a preset may be for
        ``pixels=True`` only). The preset's env options (e.g. ``normalize_obs``) are not part
        of a config: ``Agent(env, config="auto")`` applies them too."""
        from ajax import presets

        return presets.for_env(cls, env, env_options, **overrides)

    @classmethod
    def from_preset(cls, name: str, **overrides):
        """The config of the agent's preset ``name`` (``ajax presets AGENT`` lists them), then
        ``overrides``; ValueError naming the agent's presets for another name."""
        from ajax import presets

        return presets.from_preset(cls, name, **overrides)

    def relations(self) -> None:
        super().relations()  # cooperative: composed pieces (Discounted, ...) may add rules
        require(
            self,
            self.eval_freq >= self.n_envs,
            "eval_freq",
            f">= n_envs ({self.n_envs}): a chunk is eval_freq // n_envs vector steps",
        )


@dataclass(frozen=True)
class Discounted(Validated):
    """The discount of an agent with a discounted return (a piece its config composes in; the
    average-reward agents, ASAC and APO, leave it out).

    Attributes:
        gamma: discount.
    """

    gamma: float = 0.99

    RULES = {"gamma": between(0.0, 1.0)}


@dataclass(frozen=True)
class ReplayConfig(LoopConfig):
    """Settings of every agent on the shared replay loop (:mod:`ajax.training.loop`).

    Attributes:
        buffer_size: replay capacity (transitions, or rows of a sequence replay; all envs
            together).
        batch_size: replay items per gradient step (transitions, or sequences of a sequence
            replay).
    """

    buffer_size: int = 1_000_000
    batch_size: int = 256

    RULES = {"buffer_size": positive(), "batch_size": positive()}


@dataclass(frozen=True)
class SequenceReplayConfig(ReplayConfig):
    """A sequence replay (:mod:`ajax.buffers.sequence`), whose rows may live in host memory.

    Attributes:
        replay_on: "device" keeps the replay with the run; "host" keeps every row field but the
            flags in host memory (:mod:`ajax.buffers.host_store`), for replays larger than the
            accelerator's memory.
    """

    replay_on: str = "device"

    RULES = {"replay_on": one_of("device", "host")}


@dataclass(frozen=True)
class OffPolicyConfig(ReplayConfig):
    """The SARS' transition agents' settings (SAC, TD3, DQN, REDQ, CrossQ, ASAC): an item
    replay in device memory (no ``replay_on``), random actions first, then update phases.

    Attributes:
        learning_starts: env steps of uniformly random actions before the first update.
        train_freq: env steps (per env) between update phases.
        gradient_steps: gradient steps per update phase (the update-to-data ratio with
            ``train_freq=1, n_envs=1``).
    """

    learning_starts: int = 1_000
    train_freq: int = 1
    gradient_steps: int = 1

    RULES = {
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
