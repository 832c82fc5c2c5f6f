"""Aggregates over seeds with stratified bootstrap confidence intervals.

Agarwal, Schwarzer, Castro, Courville and Bellemare, "Deep Reinforcement Learning at the Edge
of the Statistical Precipice", NeurIPS 2021; their ``rliable`` package (google-research/rliable,
``rliable/metrics.py`` and ``rliable/library.py``) is the reference for every definition here.
It is not a dependency: ``rliable.library`` imports ``arch``, and the arch release pip resolves
beside this project's pins (7.2.0) fails to import under pandas 3 (``deprecate_kwarg() missing
1 required positional argument``). The numbers are tested against hand-worked cases, pinned
for fixed seeds, and checked against rliable's own functions where ``rliable.library`` imports
(tests/experiments/test_stats.py).

Scores are a matrix ``[runs, tasks]`` (one column for one env); every function also takes a
batch ``[..., runs, tasks]`` and returns one value per leading index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

Statistic = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass(frozen=True)
class Interval:
    """A point estimate and its ``level`` percentile-bootstrap confidence interval."""

    point: float
    low: float
    high: float
    level: float


def as_scores(scores) -> np.ndarray:
    """``scores`` as a float matrix ``[runs, tasks]`` (a vector is one task's runs)."""
    out = np.asarray(scores, dtype=float)
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim < 2 or out.shape[-2] == 0 or out.shape[-1] == 0:
        raise ValueError(f"scores must be [runs, tasks] with at least one of each, got {out.shape}")
    if not np.all(np.isfinite(out)):
        raise ValueError("scores hold NaN or inf; drop those runs first")
    return out


def _flat(scores: np.ndarray) -> np.ndarray:
    return scores.reshape(*scores.shape[:-2], -1)


def iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean: the mean of all run x task scores after dropping the lowest and the
    highest ``int(0.25 * n)`` of the ``n`` (rliable ``metrics.aggregate_iqm``, which calls
    ``scipy.stats.trim_mean(scores, 0.25)``: the same cut, written here in numpy so that scipy
    stays a test-only dependency)."""
    flat = np.sort(_flat(np.asarray(scores, float)), axis=-1)
    cut = int(0.25 * flat.shape[-1])
    return flat[..., cut : flat.shape[-1] - cut].mean(axis=-1)


def mean(scores: np.ndarray) -> np.ndarray:
    """Mean over tasks of each task's mean over runs (rliable ``metrics.aggregate_mean``)."""
    return np.asarray(scores, float).mean(axis=-2).mean(axis=-1)


def median(scores: np.ndarray) -> np.ndarray:
    """Median of all run x task scores. rliable's ``aggregate_median`` is the median over
    tasks of per-task means, which for one task is the mean; over seeds of one env this is
    the median seed, which is what a comparison of runs wants."""
    return np.median(_flat(np.asarray(scores, float)), axis=-1)


AGGREGATES: dict[str, Statistic] = {"iqm": iqm, "mean": mean, "median": median}


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y): for each task the Mann-Whitney U statistic of X over Y divided by
    ``runs_x * runs_y`` (a pair counts 1 when x > y, 1/2 when tied), averaged over tasks
    (Agarwal et al. 2021, section 4.3; rliable ``metrics.probability_of_improvement``).

    ``x`` is ``[..., runs_x, tasks]`` and ``y`` ``[..., runs_y, tasks]``."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    a, b = x[..., :, None, :], y[..., None, :, :]
    wins = (a > b) + 0.5 * (a == b)  # [..., runs_x, runs_y, tasks]
    return wins.mean(axis=(-3, -2)).mean(axis=-1)


def rng_of(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A numpy Generator: ``seed`` itself, or a new one seeded with it (None: fresh entropy)."""
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def stratified_resample(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` bootstrap replicates ``[reps, ..., runs, tasks]``: each task's runs drawn with
    replacement from that task's own runs (the stratified bootstrap of Agarwal et al. 2021,
    rliable ``library.StratifiedBootstrap`` with ``task_bootstrap=False``)."""
    runs, tasks = scores.shape[-2:]
    idx = rng.integers(0, runs, size=(reps, *scores.shape))
    return np.take_along_axis(np.broadcast_to(scores, idx.shape), idx, axis=-2)


def percentile_interval(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles over the first axis
    (numpy's linear interpolation; arch's ``conf_int(method="percentile")``, which rliable uses)."""
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(samples, [tail, 100 - tail], axis=0)
    return low, high


def _check(reps: int, level: float) -> None:
    if not isinstance(reps, int) or reps < 1:
        raise ValueError(f"reps must be an int >= 1, got {reps!r}")
    if not 0 < level < 1:
        raise ValueError(f"the confidence level must be in (0, 1), got {level!r}")


def bootstrap_ci(scores, statistic: Statistic | str = "iqm", reps: int = 2000,
                 level: float = 0.95, seed: int | np.random.Generator | None = 0):  # fmt: skip
    """``statistic`` of ``scores`` and its stratified-bootstrap percentile interval.

    ``scores`` is ``[runs, tasks]`` (an :class:`Interval`) or a batch ``[..., runs, tasks]``
    (a tuple of arrays ``(point, low, high)``, each replicate resampled independently per batch
    index). ``statistic`` is a name of :data:`AGGREGATES` or a function of the same shape."""
    _check(reps, level)
    fn = AGGREGATES[statistic] if isinstance(statistic, str) else statistic
    scores = as_scores(scores)
    point = fn(scores)
    low, high = percentile_interval(fn(stratified_resample(scores, reps, rng_of(seed))), level)
    if scores.ndim == 2:
        return Interval(float(point), float(low), float(high), level)
    return point, low, high


def probability_of_improvement_ci(x, y, reps: int = 2000, level: float = 0.95,
                                  seed: int | np.random.Generator | None = 0) -> Interval:  # fmt: skip
    """P(X > Y) and its interval: X's and Y's runs resampled independently within each task
    (rliable ``library.StratifiedIndependentBootstrap``, as ``get_interval_estimates`` does
    for a pair of algorithms)."""
    _check(reps, level)
    x, y = as_scores(x), as_scores(y)
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x has {x.shape[-1]} tasks and y {y.shape[-1]}; they must match")
    rng = rng_of(seed)
    samples = probability_of_improvement(
        stratified_resample(x, reps, rng), stratified_resample(y, reps, rng)
    )
    low, high = percentile_interval(samples, level)
    return Interval(float(probability_of_improvement(x, y)), float(low), float(high), level)
