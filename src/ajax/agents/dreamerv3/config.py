"""DreamerV3 hyperparameters: model sizes as presets, the losses' constants, replay and optimiser.

Defaults are the official configuration (danijar/dreamerv3@e3f0224 dreamerv3/configs.yaml:
``defaults`` and the ``size1m`` ... ``size400m`` blocks) and arXiv:2301.04104v2 Table 4, except
three run settings that would not fit a small machine: ``model_size`` "12m" (``defaults`` has
the size200m widths, configs.yaml:91-101), ``n_envs`` 1 (``run.envs`` 16, :55) and
``eval_policy`` "mode" (the official policy always samples). The size presets change the
widths only: RSSM deter / hidden / classes and the MLP units of every head. The official run
protocols (``atari100k``, ``dmc_proprio``, ...) set all of these at once:
:meth:`DreamerV3Config.from_protocol`, :mod:`ajax.agents.dreamerv3.protocols`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar

from ajax.agents.dreamerv3 import protocols
from ajax.agents.dreamerv3.networks import RSSMConfig
from ajax.distributional import TwoHot
from ajax.training.api import SequenceReplayConfig
from ajax.validation import Rule, at_least, between, nonnegative, one_of, positive, require

# configs.yaml size presets: (deter, hidden, classes, units). The CNN depth equals units / 16
# (4 ... 96: ``Architecture.depth``) and only matters for image inputs.
MODEL_SIZES: dict[str, tuple[int, int, int, int]] = {
    "1m": (512, 64, 4, 64),
    "12m": (2048, 256, 16, 256),
    "25m": (3072, 384, 24, 384),
    "50m": (4096, 512, 32, 512),
    "100m": (6144, 768, 48, 768),
    "200m": (8192, 1024, 64, 1024),
    "400m": (12288, 1536, 96, 1536),
}


def _is_regex(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, TypeError):
        return False
    return True


@dataclasses.dataclass(frozen=True)
class Architecture:
    """The widths of one model (computed from ``model_size`` and the width fields, never stored)."""

    deter: int
    hidden: int
    classes: int
    units: int
    cnn_depth: int = 0

    @property
    def depth(self) -> int:
        """The CNN's base channel count (configs.yaml ``.*\\.depth``): units / 16 unless set."""
        return self.cnn_depth or self.units // 16


@dataclasses.dataclass(frozen=True)
class DreamerV3Config(SequenceReplayConfig):
    """DreamerV3 (configs.yaml ``defaults``; paper Table 4).

    Attributes:
        model_size: one of ``MODEL_SIZES`` (configs.yaml size1m ... size400m).
        stoch, blocks, unimix, free_nats: RSSM latents (32 categoricals), GRU blocks, the 1 %
            uniform mixture and the free nats of the dyn/rep KL (rssm.py, configs.yaml:91).
        enc_layers, dec_layers, head_layers, ac_layers: MLP depths of the encoder and decoder (3),
            the reward and continue heads (1) and the actor and critic (3).
        bins: two-hot bins of the reward and value heads (symexp spacing, 255).
        batch_size, batch_length: B x T replayed per update (16 x 64); ``replay_context`` more
            rows in front of each window carry the stored latent that starts it (1).
        train_ratio: replayed steps per env step; updates per env step are
            train_ratio / (batch_size x batch_length) (32: one update per 32 env steps).
        buffer_size: replay capacity in rows (all envs; capped by the run's length).
        replay_on: "device" keeps the replay with the run; "host" keeps every row field but the
            flags in host memory (:mod:`ajax.buffers.host_store`), for pixel replays larger
            than the device's memory, at the cost of copying each batch to the device.
        imag_length: H, imagination horizon (15).
        horizon: 333; the discount 1 - 1/horizon is folded into the continue label (contdisc).
        lam: lambda of the returns (0.95). actent: entropy bonus (3e-4).
        slowreg: weight of the regulariser towards the slow critic; slow_rate: its EMA rate.
        retnorm_rate, retnorm_limit: the return normaliser (percentile EMA rate, scale floor).
        learning_rate, agc, eps, beta1, beta2, warmup: LaProp with per-tensor AGC (configs.yaml
            opt; its ``lr`` is ``learning_rate`` here, called ``lr`` up to 0.2.0, see
            ``RENAMED``).
        scale_*: loss scales (configs.yaml loss_scales: rec, rew, con, dyn 1; rep 0.1;
            policy, value 1; repval 0.3).
        minstd, maxstd: bounded-normal std range of continuous policies.
        enc_spaces, dec_spaces: which parts of a mixed observation (an image with vector
            features) the encoder reads and the decoder predicts, a regular expression over
            "image" and "vector" (``".*"``: both, as the reference, whose encoder and decoder
            take every observation key, agent.py:38-40; it has no such setting at e3f0224,
            its DMC-vision env drops the state keys instead, configs.yaml:186, which
            ``--protocol dmc_vision`` does). Observations of one part need ".*" or that
            part's name.
        deter, hidden, classes, units, depth: a custom model's widths, as the official
            ``.*\\.rssm`` / ``.*\\.units`` / ``.*\\.depth`` flags set them; 0 (the default)
            takes ``model_size``'s (depth: units / 16).
        action_repeat: (LoopConfig's) 1 in every official protocol: ``env.dmc.repeat`` is 1 at
            e3f0224 (configs.yaml:36; dreamerv3 1.5.0 had 2), and an Atari step's 4 frames are
            inside the atari env.
        eval_policy: how evaluation (and ``ajax eval``) acts: "mode" takes the actor's mode
            (the bounded normal's mean, the categorical's argmax), "sample" samples it as the
            official policy does in every mode (agent.py:126), which is how its published
            scores, training episodes, were played.
        protocol: the official protocol this config started from (:meth:`from_protocol`), or
            None; recorded so a run's config says where its settings came from.
    """

    model_size: str = "12m"
    stoch: int = 32
    blocks: int = 8
    unimix: float = 0.01
    free_nats: float = 1.0
    enc_layers: int = 3
    dec_layers: int = 3
    head_layers: int = 1
    ac_layers: int = 3
    bins: int = 255
    batch_size: int = 16
    batch_length: int = 64
    replay_context: int = 1
    train_ratio: float = 32.0
    buffer_size: int = 5_000_000
    imag_length: int = 15
    horizon: float = 333.0
    lam: float = 0.95
    actent: float = 3e-4
    slowreg: float = 1.0
    slow_rate: float = 0.02
    retnorm_rate: float = 0.01
    retnorm_limit: float = 1.0
    learning_rate: float = 4e-5
    agc: float = 0.3
    eps: float = 1e-20
    beta1: float = 0.9
    beta2: float = 0.999
    warmup: int = 1000
    scale_rec: float = 1.0
    scale_rew: float = 1.0
    scale_con: float = 1.0
    scale_dyn: float = 1.0
    scale_rep: float = 0.1
    scale_policy: float = 1.0
    scale_value: float = 1.0
    scale_repval: float = 0.3
    minstd: float = 0.1
    maxstd: float = 1.0
    eval_episodes: int = 4
    enc_spaces: str = ".*"
    dec_spaces: str = ".*"
    deter: int = 0
    hidden: int = 0
    classes: int = 0
    units: int = 0
    depth: int = 0
    eval_policy: str = "mode"
    protocol: str | None = None

    # run options no other agent has, with what they set (the CLI names the owner when another
    # agent is given one, :func:`ajax.cli_args.check_agent_only`)
    OWN_FLAGS: ClassVar[dict[str, str]] = {
        "eval_policy": "whether DreamerV3's evaluation samples or takes the mode",
    }

    # the official run protocols (ajax train --protocol NAME), :mod:`.protocols`
    PROTOCOLS: ClassVar[dict[str, protocols.Protocol]] = protocols.PROTOCOLS

    # old field name -> new: still taken from the command line (with a warning) and from the
    # run.json of older runs until 0.3.0 (ajax.validation.renamed_fields)
    RENAMED: ClassVar[dict[str, str]] = {"lr": "learning_rate"}
    # no float is traced by a sweep (ajax.training.sweep): its modules keep settings
    # (normaliser rates, unimix, optimiser checks) as static metadata or Python checks, so every
    # value runs a program of its own
    SWEEP_TRACED: ClassVar[tuple[str, ...]] = ()

    RULES = {
        "model_size": one_of(*MODEL_SIZES),
        "eval_policy": one_of("mode", "sample"),
        "protocol": Rule(choices=tuple(protocols.PROTOCOLS), optional=True),
        **{
            name: at_least(1)
            for name in (
                "stoch",
                "blocks",
                "bins",
                "batch_size",
                "buffer_size",
                "imag_length",
                "enc_layers",
                "dec_layers",
                "head_layers",
                "ac_layers",
            )
        },  # fmt: skip
        **{name: nonnegative() for name in ("deter", "hidden", "classes", "units", "depth")},
        # The replay-value loss bootstraps along the replayed window (T - 1 returns).
        "batch_length": at_least(2),
        "replay_context": one_of(0, 1),
        "train_ratio": positive(),
        "horizon": Rule(lo=1, lo_open=True),
        "unimix": between(0.0, 1.0, hi_open=True),
        **{name: between(0.0, 1.0, hi_open=True) for name in ("beta1", "beta2")},
        **{name: between(0.0, 1.0) for name in ("lam", "slow_rate", "retnorm_rate")},
        **{name: positive() for name in ("learning_rate", "retnorm_limit", "minstd", "maxstd")},
        **{
            name: nonnegative()
            for name in (
                "actent",
                "slowreg",
                "agc",
                "eps",
                "warmup",
                "free_nats",
                "scale_rec",
                "scale_rew",
                "scale_con",
                "scale_dyn",
                "scale_rep",
                "scale_policy",
                "scale_value",
                "scale_repval",
            )
        },  # fmt: skip
    }

    def relations(self) -> None:
        super().relations()
        require(self, self.minstd <= self.maxstd, "minstd", f"<= maxstd ({self.maxstd})")
        items = self.n_envs * (self.buffer_size // self.n_envs - self.window + 1)
        require(
            self,
            items >= self.batch_size * self.batch_length,
            "buffer_size",
            f"enough rows per env for batch_size x batch_length = "
            f"{self.batch_size * self.batch_length} windows of {self.window} rows over "
            f"{self.n_envs} env(s) (training waits for them)",
            "raise --buffer-size or lower --batch-size / --batch-length",
        )
        require(self, self.arch.deter % self.blocks == 0, "blocks",
                f"a divisor of deter ({self.arch.deter})")  # fmt: skip
        require(self, self.bins % 2 == 1 and self.bins >= 3, "bins", "odd and >= 3 (two-hot)")
        for name in ("enc_spaces", "dec_spaces"):
            require(self, _is_regex(getattr(self, name)), name, "a regular expression",
                    "e.g. '.*' (every part) or 'image'")  # fmt: skip

    @classmethod
    def preset(cls, size: str, **overrides) -> DreamerV3Config:
        """The official model of ``size``: "1m", "12m", "25m", "50m", "100m", "200m", "400m"."""
        return cls(model_size=str(size).lower(), **overrides)

    @classmethod
    def from_protocol(cls, name: str, **overrides) -> DreamerV3Config:
        """The official protocol ``name`` ("atari100k", "dmc_proprio", "dmc_vision", "crafter",
        "bsuite", "atari"; :data:`~ajax.agents.dreamerv3.protocols.PROTOCOLS`), with
        ``overrides`` over its fields. Its env settings and steps are applied where the env is
        built (:class:`~ajax.agents.dreamerv3.DreamerV3`, ``ajax train --protocol``)."""
        return cls(**{**protocols.get(name).config, "protocol": name, **overrides})

    @property
    def first_train_step(self) -> int:
        """The env step (all envs) of the first update: the official driver trains once the
        replay holds batch_size x batch_length windows (embodied/run/train.py:71), and an env
        adds one window per row from its ``window``-th row on (embodied/core/replay.py:108-111),
        so n_envs x (window - 1) steps more."""
        return self.batch_size * self.batch_length + self.n_envs * (self.window - 1)

    @property
    def arch(self) -> Architecture:
        preset = Architecture(*MODEL_SIZES[self.model_size])
        custom = {k: getattr(self, k) for k in ("deter", "hidden", "classes", "units")}
        widths = {k: v or getattr(preset, k) for k, v in custom.items()}
        return Architecture(**widths, cnn_depth=self.depth)

    @property
    def window(self) -> int:
        """Rows per sampled window: the context row(s) plus batch_length."""
        return self.batch_length + self.replay_context

    @property
    def updates_per_step(self) -> float:
        """train_ratio / (batch_size x batch_length): updates per env step."""
        return self.train_ratio / (self.batch_size * self.batch_length)

    def rssm(self, action_dim: int, discrete: bool) -> RSSMConfig:
        a = self.arch
        return RSSMConfig(
            a.deter, a.hidden, a.classes, action_dim, discrete, stoch=self.stoch,
            blocks=self.blocks, unimix=self.unimix,
        )  # fmt: skip

    def two_hot(self) -> TwoHot:
        return TwoHot.dreamerv3(self.bins)
