"""The published learning curves of the official code, as a compact package-data extract.

``reference_data/curves.json.gz`` holds, per (source, suite, task), the env-step axis and one row
of scores per seed, taken from ``tdmpc2/results/<algo>/<task>.csv`` (tdmpc2@e9f5932) and
``dreamerv3/scores/<suite>-dreamerv3.json.gz`` (dreamerv3@e3f0224); ``reference_data/
PROVENANCE.md`` says how. Every x axis counts environment (simulator) steps, action repeat
included: the tdmpc2 CSVs already multiply the trainer's step by the DMC wrapper's action repeat
2 (nicklashansen/tdmpc2 issue 45), and DreamerV3's Atari 100k axis counts frames (100k agent steps
x repeat 4 = 400k).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import re
import warnings
from importlib import resources

import numpy as np

SOURCES = ("tdmpc2", "dreamerv3", "sac")
# Which of a source's suites answers an env id first (a pixel run prefers dmc_vision).
_DMC_SUITES = {
    "tdmpc2": ("tdmpc2",),
    "sac": ("tdmpc2",),
    "dreamerv3": ("dmc_proprio", "tdmpc2"),
}
_PIXEL_DMC_SUITES = {"dreamerv3": ("dmc_vision", "dmc_proprio", "tdmpc2")}
# tdmpc2/envs/dmcontrol.py make_env's domain aliases, read the other way.
_TDMPC2_DOMAINS = {"ball_in_cup": "cup", "point_mass": "pointmass"}


@dataclasses.dataclass(frozen=True)
class Curve:
    """A published curve: ``y[seed, i]`` at ``x[i]`` env steps (NaN where a seed has none)."""

    source: str
    suite: str
    task: str
    file: str
    seeds: tuple[int, ...]
    x: np.ndarray
    y: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        """Mean over seeds (NaN where no seed has a point)."""
        return _over_seeds(np.nanmean, self.y)

    @property
    def low(self) -> np.ndarray:
        """The lowest seed at each point."""
        return _over_seeds(np.nanmin, self.y)

    @property
    def high(self) -> np.ndarray:
        """The highest seed at each point."""
        return _over_seeds(np.nanmax, self.y)


def _over_seeds(reduce, y: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():  # an empty bin (every seed NaN) stays NaN, quietly
        warnings.simplefilter("ignore", RuntimeWarning)
        return reduce(y, axis=0)


@functools.cache
def _curves() -> dict[tuple[str, str, str], Curve]:
    blob = resources.files("ajax.experiments").joinpath("reference_data/curves.json.gz")
    rows = json.loads(gzip.decompress(blob.read_bytes()))["curves"]
    out = {}
    for r in rows:
        y = np.array([[np.nan if v is None else v for v in row] for row in r["y"]], float)
        curve = Curve(r["source"], r["suite"], r["task"], r["file"], tuple(r["seeds"]),
                      np.array(r["x"], float), y)  # fmt: skip
        out[(curve.source, curve.suite, curve.task)] = curve
    return out


@functools.cache
def atari_scores() -> dict[str, tuple[float, float]]:
    """``{task: (random, human)}`` from dreamerv3/baselines.yaml's ``atari57_gamer`` block."""
    blob = resources.files("ajax.experiments").joinpath("reference_data/atari_scores.json")
    return {k: (float(v[0]), float(v[1])) for k, v in json.loads(blob.read_text()).items()}


def dmc_task(env_id: str, suite: str) -> str | None:
    """The paper's name of a ``dmc:<domain>-<task>`` id in ``suite``: ``dmc:ball_in_cup-catch``
    is ``cup-catch`` in tdmpc2's results and ``dmc_ball_in_cup_catch`` in DreamerV3's scores."""
    if not env_id.startswith("dmc:") or "-" not in env_id:
        return None
    domain, task = env_id[4:].split("-", 1)
    if suite == "tdmpc2":
        return f"{_TDMPC2_DOMAINS.get(domain, domain)}-{task.replace('_', '-')}"
    return f"dmc_{domain}_{task}"


def atari_task(env_id: str) -> str | None:
    """``atari:MsPacman`` -> ``atari_ms_pacman`` (DreamerV3's task names); else None."""
    if not env_id.startswith("atari:"):
        return None
    game = env_id[6:]
    return "atari_" + re.sub(r"(?<!^)(?=[A-Z])", "_", game).lower()


def _candidates(source: str, env_id: str, pixels: bool) -> list[tuple[str, str]]:
    if env_id.startswith("atari:"):
        return [("atari100k", atari_task(env_id))] if source == "dreamerv3" else []
    suites = (_PIXEL_DMC_SUITES if pixels else _DMC_SUITES).get(source, _DMC_SUITES[source])
    return [(s, dmc_task(env_id, s)) for s in suites if dmc_task(env_id, s)]


def check_source(source: str) -> None:
    if source not in SOURCES:
        raise ValueError(f"unknown reference source {source!r}; sources: {', '.join(SOURCES)}")


def reference_curve(source: str, env_id: str, pixels: bool = False) -> Curve | None:
    """The published ``source`` curve for an Ajax env id, or None where there is none.

    ``source`` is ``tdmpc2``, ``dreamerv3`` or ``sac``. DMC ids read tdmpc2's results (TD-MPC2,
    SAC and DreamerV3 at 4M env steps); for ``dreamerv3`` DreamerV3's own ``dmc_proprio`` scores
    come first (``dmc_vision`` first when ``pixels``). ``atari:<Game>`` reads ``atari100k``.
    """
    check_source(source)
    curves = _curves()
    for suite, task in _candidates(source, env_id, pixels):
        if (source, suite, task) in curves:
            return curves[(source, suite, task)]
    return None


def sources_for(env_id: str, pixels: bool = False) -> tuple[str, ...]:
    """The sources with a published curve for ``env_id``."""
    return tuple(s for s in SOURCES if reference_curve(s, env_id, pixels) is not None)


def human_normalised(task: str, score: np.ndarray | float) -> np.ndarray | None:
    """``(score - random) / (human - random)`` for an Atari task, else None."""
    pair = atari_scores().get(task)
    if pair is None:
        return None
    random, human = pair
    return (np.asarray(score, float) - random) / (human - random)
