"""The official DreamerV3 run protocols as data: one name gives the paper's settings.

Each entry is a block of danijar/dreamerv3@e3f0224 ``dreamerv3/configs.yaml`` applied over
``defaults`` (``main.py --configs NAME``), with the env settings of its ``env.<suite>`` block
and wrapper (``embodied/envs/*.py``). A protocol sets DreamerV3Config fields (model size, train
ratio, envs, action repeat, the evaluation's policy), the run's env steps and the env options
of the families Ajax builds. Facts that hold for every entry:

- A block without a ``size*`` anchor keeps the ``defaults`` widths (configs.yaml:91-101: deter
  8192, hidden 1024, classes 64, units 1024, depth 64), which are ``size200m`` (:145-148).
- ``run.envs`` is 16 unless the block sets it (configs.yaml:55).
- ``env.dmc.repeat`` is 1 (configs.yaml:36; ``DMC(repeat=1)``, embodied/envs/dmc.py:22); the 4
  frames of an Atari step are inside the atari env (configs.yaml:30, :33), so every protocol's
  ``action_repeat`` is 1.
- ``run.steps`` counts the driver's env steps, every env's and the reset steps included
  (embodied/run/train.py:59, :95), as Ajax's ``--steps`` does.
- The policy samples in every mode (dreamerv3/agent.py:126) and the published scores are the
  training episodes' (train.py:46-51), so every protocol evaluates with ``eval_policy="sample"``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

SAMPLE = {"eval_policy": "sample", "action_repeat": 1}


@dataclasses.dataclass(frozen=True)
class Protocol:
    """One official protocol.

    Attributes:
        source: the configs.yaml lines (and env wrapper) it follows.
        config: the DreamerV3Config fields it sets.
        steps: env steps of the whole run (configs.yaml ``run.steps``); None: the block sets
            none (``defaults``' 1e10 means "until stopped").
        observation: "vector" or "image": what its env must give (an image with vector
            features counts as an image).
        family: the env family it needs, or None for any env giving ``observation``.
        env_ids: the only ids it takes, or () for any id of ``family``.
        env_options: make_env options it sets, per family (the block's env settings).
        example: an env id it takes, for error messages.
    """

    source: str
    config: dict[str, Any]
    steps: int | None
    observation: str
    family: str | None = None
    env_ids: tuple[str, ...] = ()
    env_options: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    example: str = ""

    def steps_for(self, env_id: str) -> int | None:
        """The run's env steps on ``env_id``: :attr:`steps`, the same for every env."""
        return self.steps


PROTOCOLS: dict[str, Protocol] = {
    "atari": Protocol(
        source="configs.yaml:162-164 (run), :30 (env.atari), embodied/envs/atari.py",
        config={"model_size": "200m", "train_ratio": 32.0, "n_envs": 16, **SAMPLE},
        steps=51_000_000,
        observation="image",
        family="atari",
        env_options={"atari": {"atari_settings": "atari"}},
        example="atari:Pong",
    ),
    "atari100k": Protocol(
        source="configs.yaml:170-172 (run), :33 (env.atari100k), embodied/envs/atari.py",
        config={"model_size": "200m", "train_ratio": 256.0, "n_envs": 1, **SAMPLE},
        steps=110_000,
        observation="image",
        family="atari",
        env_options={"atari": {"atari_settings": "atari100k"}},
        example="atari:Pong",
    ),
    # Crafter is the crafter package there (embodied/envs/crafter.py, 64 x 64 renders); Ajax
    # builds Craftax-Classic, Crafter reimplemented in JAX, rendered 63 x 63 and resized.
    "crafter": Protocol(
        source="configs.yaml:174-176 (run), :32 (env.crafter), embodied/envs/crafter.py",
        config={"model_size": "200m", "train_ratio": 512.0, "n_envs": 1, **SAMPLE},
        steps=1_100_000,
        observation="image",
        family="craftax",
        env_ids=("craftax:Craftax-Classic-Pixels-v1",),
        env_options={"craftax": {"resize": (64, 64)}},
        example="craftax:Craftax-Classic-Pixels-v1",
    ),
    "dmc_proprio": Protocol(
        source="configs.yaml:178-182 (size1m, env.dmc.image False), :36 (env.dmc), :55 (envs)",
        config={"model_size": "1m", "train_ratio": 1024.0, "n_envs": 16, **SAMPLE},
        steps=1_100_000,
        observation="vector",
        example="dmc:walker-walk",
    ),
    "dmc_vision": Protocol(
        source="configs.yaml:184-187 (env.dmc.proprio False), :36 (env.dmc), :55 (envs)",
        config={"model_size": "200m", "train_ratio": 256.0, "n_envs": 16, **SAMPLE},
        steps=1_100_000,
        observation="image",
        env_options={"dmc": {"pixels": True}},
        example="dmc:walker-walk",
    ),
    "bsuite": Protocol(
        source="configs.yaml:189-191, embodied/envs/bsuite.py",
        config={"model_size": "200m", "train_ratio": 1024.0, "n_envs": 1, **SAMPLE},
        steps=None,
        observation="vector",
        family="bsuite",
    ),
}


def get(name: str) -> Protocol:
    """The protocol ``name``; ValueError naming the known ones."""
    if name not in PROTOCOLS:
        raise ValueError(
            f"unknown protocol {name!r}; the official protocols are {', '.join(PROTOCOLS)} "
            "(danijar/dreamerv3 configs.yaml): pass one of them to --protocol"
        )
    return PROTOCOLS[name]


def check_env_id(name: str, env_id: str) -> str:
    """The family of the id ``env_id`` if protocol ``name`` can train on it, else ValueError
    naming the fix (an env family Ajax lacks, another family, an id it does not take)."""
    from ajax.environments.registry import FAMILIES, resolve_env_id

    protocol = get(name)
    if protocol.family is not None and protocol.family not in FAMILIES:
        raise ValueError(
            f"protocol {name!r} trains on {protocol.family}'s own environments "
            f"({protocol.source}), which Ajax does not build; pick another protocol, or set "
            f"its fields as flags ({_as_flags(protocol.config)})"
        )
    family, _ = resolve_env_id(env_id)
    check_family(name, env_id, family)
    return family


def check_family(name: str, env_id: str, family: str) -> None:
    """ValueError naming the fix unless protocol ``name`` takes ``env_id`` of ``family``."""
    protocol = get(name)
    if (protocol.family not in (None, family)) or (
        protocol.env_ids and env_id not in protocol.env_ids
    ):
        takes = ", ".join(protocol.env_ids) or f"{protocol.family} envs"
        raise ValueError(
            f"protocol {name!r} trains on {takes} ({protocol.source}); {env_id!r} is not one: "
            f"pass e.g. --env {protocol.example or '(none here)'}"
        )


def check_observation(name: str, env_id: str, image: bool) -> None:
    """ValueError naming the fix unless the env's observations are the protocol's kind."""
    protocol = get(name)
    wanted = protocol.observation
    if (wanted == "image") == image:
        return
    given = "images" if image else "vectors"
    other = [n for n, p in PROTOCOLS.items() if p.observation != wanted and p.family is None]
    hint = "" if not other else f", or --protocol {other[0]} (it takes {given})"
    raise ValueError(
        f"protocol {name!r} trains on {wanted} observations ({protocol.source}); {env_id!r} "
        f"gives {given}: pass e.g. --env {protocol.example}{hint}"
    )


def env_options(name: str, family: str) -> dict[str, Any]:
    """The make_env options protocol ``name`` sets on an env of ``family`` ({} for none)."""
    return dict(get(name).env_options.get(family, {}))


def _as_flags(config: dict[str, Any]) -> str:
    return " ".join(f"--{k.replace('_', '-')} {v:g}" if isinstance(v, float)
                    else f"--{k.replace('_', '-')} {v}" for k, v in config.items())  # fmt: skip
