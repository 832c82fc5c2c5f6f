"""TD-MPC2 hyperparameters: the world model, the MPPI planner and the optimisation constants.

Defaults are the official single-task configuration (nicklashansen/tdmpc2@e9f5932
tdmpc2/config.yaml, unchanged since the paper-era 5f6fade) and arXiv:2310.16828v2 Table 8. The five
model sizes of the paper's scaling study are :meth:`TDMPC2Config.preset` (common/__init__.py
MODEL_SIZE, which overrides the yaml's architecture fields). The official DMC run protocol (action
repeat 2, 500-step episodes, evaluation every 50,000 steps, the published curves' length) is
:meth:`TDMPC2Config.from_protocol` (``ajax train tdmpc2 --protocol dmc``), from
:mod:`ajax.agents.tdmpc2.protocols`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ajax.agents.tdmpc2 import protocols
from ajax.distributional import TwoHot
from ajax.returns import discount_from_horizon
from ajax.training.api import SequenceReplayConfig
from ajax.validation import (
    ConfigError,
    Rule,
    Validated,
    at_least,
    between,
    nonnegative,
    one_of,
    positive,
    require,
)

# Architecture of each model size (M parameters): tdmpc2/common/__init__.py MODEL_SIZE. num_q is 5
# unless the size says otherwise.
_MODEL_SIZES: dict[int, dict[str, int]] = {
    1: dict(enc_dim=256, mlp_dim=384, latent_dim=128, num_enc_layers=2, num_q=2),
    5: dict(enc_dim=256, mlp_dim=512, latent_dim=512, num_enc_layers=2),
    19: dict(enc_dim=1024, mlp_dim=1024, latent_dim=768, num_enc_layers=3),
    48: dict(enc_dim=1792, mlp_dim=1792, latent_dim=768, num_enc_layers=4),
    317: dict(enc_dim=4096, mlp_dim=4096, latent_dim=1376, num_enc_layers=5, num_q=8),
}


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(f"TDMPC2Config: {message}")


@dataclasses.dataclass(frozen=True)
class PlannerConfig(Validated):
    """MPPI planning constants (config.yaml "planning"; paper Sec. 3.2 and Table 8).

    Attributes:
        horizon: planning horizon H (also the length of the training rollouts).
        iterations: MPPI iterations per step before the large-action heuristic, see
            :meth:`num_iterations`.
        num_samples: action sequences N scored per iteration, policy trajectories included.
        num_pi_trajs: P sequences rolled out by the policy prior, fixed over the iterations.
        num_elites: E best sequences of each iteration that refit the sampling distribution.
        min_std, max_std: bounds of the per-step sampling std; every plan starts at max_std.
        temperature: multiplies the elite values inside the softmax (score = exp(tau (V - max V))).
    """

    horizon: int = 3
    iterations: int = 6
    num_samples: int = 512
    num_pi_trajs: int = 24
    num_elites: int = 64
    min_std: float = 0.05
    max_std: float = 2.0
    temperature: float = 0.5

    FLAG_PREFIX = "planner."  # set as --planner.<field> (a field of TDMPC2Config)
    RULES = {
        **{name: at_least(1) for name in ("horizon", "iterations", "num_samples", "num_elites")},
        "num_pi_trajs": nonnegative(),
        "min_std": positive(),
        "max_std": positive(),
        "temperature": positive(),
    }

    def relations(self) -> None:
        require(
            self,
            self.num_pi_trajs < self.num_samples,
            "num_pi_trajs",
            f"< num_samples ({self.num_samples})",
        )
        require(
            self,
            self.num_elites <= self.num_samples,
            "num_elites",
            f"<= num_samples ({self.num_samples})",
        )
        require(self, self.min_std <= self.max_std, "min_std", f"<= max_std ({self.max_std})")

    @property
    def num_candidates(self) -> int:
        """N - P Gaussian candidates drawn per iteration."""
        return self.num_samples - self.num_pi_trajs

    def num_iterations(self, action_dim: int) -> int:
        """iterations + 2 when action_dim >= 20 (tdmpc2.py:34, "heuristic for large action spaces")."""
        _require(action_dim >= 1, f"action_dim must be >= 1, got {action_dim}")
        return self.iterations + 2 * int(action_dim >= 20)


@dataclasses.dataclass(frozen=True)
class Architecture:
    """Network widths of one model size (MODEL_SIZE row); see :attr:`TDMPC2Config.arch`."""

    enc_dim: int
    mlp_dim: int
    latent_dim: int
    num_enc_layers: int
    num_q: int


@dataclasses.dataclass(frozen=True)
class TDMPC2Config(SequenceReplayConfig):
    """TD-MPC2's configuration for state observations (single task).

    Frozen and hashable, so a flax module can hold it as a field. Build the paper's model sizes
    with :meth:`preset`; the plain constructor is the yaml default (the 5M model).

    The loop and replay fields are :class:`~ajax.training.api.SequenceReplayConfig`'s
    (``n_envs``: environments stepped in lockstep, n_envs updates per vector step, UTD 1;
    ``action_repeat``; ``eval_freq`` and ``eval_episodes``, planned episodes in eval mode;
    ``buffer_size`` in transitions; ``batch_size``, sampled subsequences per update;
    ``replay_on``), with their defaults.

    Attributes:
        model_size: the paper's model size in M parameters (1, 5, 19, 48, 317); it sets the
            widths below unless they are given. Read the widths in use from :attr:`arch`.
        enc_dim, mlp_dim, latent_dim: widths of the encoder, of every other MLP and of the latent
            (None: from model_size).
        num_enc_layers: the state encoder has max(num_enc_layers - 1, 1) hidden layers.
        num_q: Q-ensemble size (random pairs need >= 2; None: 5, or the size's own).
        simnorm_dim: SimNorm group size V; latent_dim must be a multiple.
        num_channels: filters of each conv of the pixel encoder (32); its output, 4 x 4 x
            num_channels for 64 x 64 frames, is the latent, so it must equal latent_dim.
        num_bins, vmin, vmax: two-hot bins of the reward and Q heads, in symlog space.
        log_std_min, log_std_max: bounds of the policy's log std.
        dropout: dropout rate after the first layer of each Q member.
        task_dim: width of the task embedding of a multi-task model (config.yaml ``task_dim``;
            unused by single-task runs, where the reference sets it to 0).
        task_sampling: how a multi-task offline run draws a window's episode: "episode"
            (uniform over all episodes, the official SliceSampler's rule, the default) or
            "task" (a task uniformly, then one of its episodes, so every task fills an equal
            share of the batch). The two draw alike when every task holds as many episodes;
            on a dataset whose tasks differ in episode count and length, "episode" gives the
            tasks of few long episodes a small share (deviations.md T56). Unused by
            single-task runs.
        planner: the MPPI constants.
        learning_rate, enc_lr_scale, grad_clip_norm: Adam rate, the encoder's rate multiplier
            and the global clip norm of both optimisers (``learning_rate`` was called ``lr``
            up to 0.2.0; see ``RENAMED``).
        tau: EMA rate of the target Qs (also the RunningScale rate).
        rho: temporal weight rho^t of the H-step losses.
        consistency_coef, reward_coef, value_coef, entropy_coef: loss weights.
        discount_denom, discount_min, discount_max: the discount heuristic, see :meth:`discount`.
        episodic: learn a termination head and treat termination as absorbing in the TD target
            and in planning (HEAD's ``episodic``); off in the paper.
        termination_coef: weight of the termination loss (episodic only).
        seed_steps: agent steps of uniform random actions before learning, then as many
            pretraining updates; None gives max(1000, 5 T).
        protocol: the official protocol this config started from (:meth:`from_protocol`), or
            None; recorded so a run's config says where its settings came from. "dmc" is
            nicklashansen/tdmpc2's DMC run: action repeat 2, 500-step episodes, 10 evaluation
            episodes every 50,000 steps, 2M agent steps (7M on dog and humanoid: the published 4M and
            14M env steps), model size 5.
    """

    model_size: int = 5
    enc_dim: int | None = None
    mlp_dim: int | None = None
    latent_dim: int | None = None
    num_enc_layers: int | None = None
    num_q: int | None = None
    simnorm_dim: int = 8
    num_channels: int = 32
    num_bins: int = 101
    vmin: float = -10.0
    vmax: float = 10.0
    log_std_min: float = -10.0
    log_std_max: float = 2.0
    dropout: float = 0.01
    task_dim: int = 96
    task_sampling: str = "episode"
    planner: PlannerConfig = PlannerConfig()
    learning_rate: float = 3e-4
    enc_lr_scale: float = 0.3
    grad_clip_norm: float = 20.0
    tau: float = 0.01
    rho: float = 0.5
    consistency_coef: float = 20.0
    reward_coef: float = 0.1
    value_coef: float = 0.1
    entropy_coef: float = 1e-4
    discount_denom: float = 5.0
    discount_min: float = 0.95
    discount_max: float = 0.995
    episodic: bool = False
    termination_coef: float = 1.0
    seed_steps: int | None = None
    protocol: str | None = None

    # the official run protocols (ajax train --protocol NAME), :mod:`.protocols`
    PROTOCOLS: ClassVar[dict[str, protocols.Protocol]] = protocols.PROTOCOLS

    # old field name -> new: still taken from the command line (with a warning) and from the
    # run.json of older runs until 0.3.0 (ajax.validation.renamed_fields)
    RENAMED: ClassVar[dict[str, str]] = {"lr": "learning_rate"}
    # the floats a sweep traces (ajax.training.sweep); the others run one program per value:
    # the normalisers, two-hot bins and discount rule keep them as static metadata or Python
    # checks (tests/training/test_sweep.py traces these two)
    SWEEP_TRACED: ClassVar[tuple[str, ...]] = ("learning_rate", "grad_clip_norm")
    RULES = {
        "model_size": one_of(*sorted(_MODEL_SIZES)),
        "task_sampling": one_of("episode", "task"),
        **{name: Rule(lo=1, optional=True)
           for name in ("enc_dim", "mlp_dim", "latent_dim", "num_enc_layers")},
        "num_q": Rule(lo=2, optional=True),  # Q reductions draw a pair
        **{name: at_least(1) for name in ("simnorm_dim", "num_channels", "task_dim")},
        "seed_steps": Rule(lo=1, optional=True),
        "protocol": Rule(choices=tuple(protocols.PROTOCOLS), optional=True),
        "dropout": between(0.0, 1.0, hi_open=True),
        "discount_min": between(0.0, 1.0, lo_open=True, hi_open=True),
        "discount_max": between(0.0, 1.0, lo_open=True, hi_open=True),
        **{name: positive() for name in ("learning_rate", "grad_clip_norm", "discount_denom")},
        "tau": between(0.0, 1.0),
        "vmax": positive(),  # the two-hot range [-vmax, vmax] (vmin == -vmax: relations)
        "rho": between(0.0, 1.0, lo_open=True),
        **{name: nonnegative() for name in ("enc_lr_scale", "termination_coef", "consistency_coef",
                                            "reward_coef", "value_coef", "entropy_coef")},
    }  # fmt: skip

    def __post_init__(self):
        if isinstance(self.planner, dict):  # a config read back from run.json
            object.__setattr__(self, "planner", PlannerConfig(**self.planner))
        super().__post_init__()

    def relations(self) -> None:
        super().relations()
        arch = self.arch
        require(
            self,
            arch.latent_dim % self.simnorm_dim == 0,
            "simnorm_dim",
            f"a divisor of latent_dim ({arch.latent_dim}): the latent must be a multiple of "
            "simnorm_dim, as SimNorm splits it into groups of that size",
        )
        require(
            self,
            self.vmin == -self.vmax,
            "vmin",
            f"-vmax ({-self.vmax}): the two-hot range must be symmetric",
        )
        require(
            self,
            self.log_std_min < self.log_std_max,
            "log_std_min",
            f"< log_std_max ({self.log_std_max})",
        )
        require(
            self,
            self.discount_min <= self.discount_max,
            "discount_min",
            f"<= discount_max ({self.discount_max})",
        )
        require(self, self.num_bins >= 3 and self.num_bins % 2 == 1, "num_bins",
                "odd and >= 3: the two-hot bins need a centre bin at 0")  # fmt: skip

    @classmethod
    def preset(cls, size: int, **overrides) -> TDMPC2Config:
        """The paper's model of ``size`` M parameters: 1, 5, 19, 48 or 317 (MODEL_SIZE table).

        Keyword ``overrides`` replace any field afterwards (e.g. ``planner=PlannerConfig(...)``).
        """
        return cls(model_size=size, **overrides)  # the rules name a size that does not exist

    @classmethod
    def from_protocol(cls, name: str, **overrides) -> TDMPC2Config:
        """The official protocol ``name`` ("dmc": :data:`~ajax.agents.tdmpc2.protocols.PROTOCOLS`,
        each field citing nicklashansen/tdmpc2's file and line), with ``overrides`` over its
        fields. Its env settings (the 500-step episodes) are applied where the env is built
        (:class:`~ajax.agents.tdmpc2.TDMPC2`) and its run length by ``ajax train --protocol``
        (:meth:`~ajax.agents.tdmpc2.protocols.Protocol.steps_for`)."""
        return cls(**{**protocols.get(name).config, "protocol": name, **overrides})

    @property
    def arch(self) -> Architecture:
        """The widths in use: ``model_size``'s row of MODEL_SIZE, with any width field set here
        (not None) taking precedence. Computed on access, never stored."""
        row = {"num_q": 5, **_MODEL_SIZES[self.model_size]}
        given = {k: getattr(self, k) for k in row if getattr(self, k) is not None}
        return Architecture(**{**row, **given})

    def seed_steps_for(self, episode_length: int) -> int:
        """Env steps of uniform random actions: ``seed_steps`` or max(1000, 5 T) (config.yaml)."""
        if self.seed_steps is not None:
            return self.seed_steps
        return max(1000, 5 * episode_length)

    def two_hot(self) -> TwoHot:
        """The reward and Q heads' two-hot: num_bins bins on [vmin, vmax] in symlog space."""
        return TwoHot.tdmpc2(num_bins=self.num_bins, limit=float(self.vmax))

    def discount(self, episode_length: int) -> float:
        """gamma(T) = clip(1 - discount_denom / T, discount_min, discount_max) (HEAD tdmpc2.py:57-70).

        The horizon form h = T / discount_denom of :func:`ajax.returns.discount_from_horizon`.
        """
        _require(episode_length > 0, f"episode_length must be > 0, got {episode_length}")
        return discount_from_horizon(
            episode_length / self.discount_denom, lo=self.discount_min, hi=self.discount_max
        )
