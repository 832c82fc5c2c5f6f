"""Runs and sweeps side by side: final scores over seeds with bootstrap intervals, the
probability of improvement between runs, learning curves with bands, published curves beside.

:func:`load_targets` reads run directories (``run.json`` + ``metrics.jsonl``, as
:mod:`ajax.training.run` writes them) and sweep directories (``sweep.json`` naming one run
directory per grid point); :func:`summarise_runs` and :func:`improvements` compute the tables
that :mod:`ajax.experiments.report` formats and plots (``ajax compare``; a sweep's own summary
calls :func:`ajax.experiments.report.write_report`). Statistics: :mod:`ajax.experiments.stats`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np

from ajax.experiments import reference, stats
from ajax.training.io import read_json, read_jsonl

SKIPPED = {"step", "wall_time_s"}  # bookkeeping fields of a metrics record, never a metric
STATS = ("iqm", "mean", "median")


class CompareError(ValueError):
    """Bad input of a comparison (a missing directory, an unknown metric): one line."""


@dataclasses.dataclass(frozen=True)
class RunData:
    """One run's metric: ``y[i, seed]`` at ``x[i]`` env steps (NaN where a seed has none)."""

    label: str
    path: Path
    agent: str
    env: str
    pixels: bool
    metric: str
    x: np.ndarray
    y: np.ndarray


@dataclasses.dataclass(frozen=True)
class Summary:
    """A final-score row: each statistic over the seeds at ``env_steps`` (the last point)."""

    label: str
    env: str
    seeds: int
    env_steps: int
    scores: dict[str, stats.Interval]
    normalised: dict[str, stats.Interval] | None = None  # Atari: human-normalised


@dataclasses.dataclass(frozen=True)
class Improvement:
    """P(X > Y) over the final scores of two runs, with its bootstrap interval."""

    x: str
    y: str
    p: stats.Interval


def env_steps_per_step(env: str, config: dict, env_options: dict | None = None) -> int:
    """Env (simulator) steps per agent step: the run's ``action_repeat`` (its config field, or
    the env option it becomes), times the 4 frames an ``atari:`` env steps per agent step
    (:mod:`ajax.environments.atari`)."""
    repeat = int(config.get("action_repeat") or (env_options or {}).get("action_repeat") or 1)
    return repeat * (4 if env.startswith("atari:") else 1)


def metric_names(records: list[dict]) -> list[str]:
    """The metrics a run logged: numeric fields, and ``name`` for each per-seed list ``names``."""
    names = set()
    for r in records:
        for key, value in r.items():
            if key in SKIPPED:
                continue
            if isinstance(value, list) and key.endswith("s"):
                names.add(key[:-1])
            elif isinstance(value, int | float) and not isinstance(value, bool):
                names.add(key)
    return sorted(names)


def _seed_values(record: dict, metric: str) -> list | None:
    """Per-seed values of ``metric`` in one record: its ``<metric>s`` list, else the scalar."""
    many = record.get(metric + "s")
    if isinstance(many, list):
        return many
    one = record.get(metric)
    return None if one is None and metric not in record else [one]


def load_run(path: str | Path, metric: str = "eval_return", label: str | None = None) -> RunData:
    """A run directory's ``metric`` against env steps (:class:`CompareError` if unreadable)."""
    path = Path(path)
    if not (path / "run.json").is_file():
        raise CompareError(f"{path} is not a run directory (no run.json); pass a run or sweep")
    try:
        spec = read_json(path / "run.json")
    except json.JSONDecodeError as err:
        raise CompareError(f"{path / 'run.json'} is not valid JSON ({err}); restore it") from None
    records = read_jsonl(path / "metrics.jsonl")
    if not records:
        raise CompareError(f"{path} has no metrics yet (metrics.jsonl is empty or missing)")
    rows = [(r["step"], v) for r in records if (v := _seed_values(r, metric)) is not None]
    if not rows:
        raise CompareError(f"unknown metric {metric!r} in {path}; metrics present: "
                           f"{', '.join(metric_names(records))}")  # fmt: skip
    width = max(len(v) for _, v in rows)
    y = np.full((len(rows), width), np.nan)
    for i, (_, values) in enumerate(rows):
        y[i, : len(values)] = [np.nan if v is None else v for v in values]
    env = str(spec.get("env", "?"))
    scale = env_steps_per_step(env, spec.get("config") or {}, spec.get("env_options"))
    return RunData(label or path.name, path, str(spec.get("agent", "?")), env,
                   bool((spec.get("env_options") or {}).get("pixels")), metric,
                   np.array([s for s, _ in rows], float) * scale, y)  # fmt: skip


def sweep_points(path: Path) -> list[tuple[str, Path]]:
    """``(name, run dir)`` of each point of a sweep directory's ``sweep.json``."""
    try:
        points = read_json(path / "sweep.json")["points"]
        return [(str(p["name"]), path / p["dir"]) for p in points]
    except (KeyError, TypeError, json.JSONDecodeError) as err:
        raise CompareError(f"{path / 'sweep.json'} is malformed ({err!r}); expected "
                           '{"points": [{"name": ..., "dir": ...}, ...]}') from None  # fmt: skip


def load_targets(paths: list[str | Path], metric: str = "eval_return") -> list[RunData]:
    """Every run named: a run directory is one run, a sweep directory one run per point
    (labelled by the point's name; a label used twice is prefixed with its parent's name)."""
    found: list[tuple[str, Path]] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise CompareError(f"{path} does not exist; pass a run directory or a sweep directory")
        if (path / "sweep.json").is_file():
            found += sweep_points(path)
        elif (path / "run.json").is_file():
            found.append((path.name, path))
        else:
            raise CompareError(f"{path} is neither a run directory (no run.json) nor a sweep "
                               "directory (no sweep.json)")  # fmt: skip
    seen = [p.resolve() for _, p in found]
    twice = next((p for k, p in enumerate(seen) if p in seen[:k]), None)
    if twice is not None:
        raise CompareError(f"{twice} is named twice; name each run or sweep point once")
    counts: dict[str, int] = {}
    for name, _ in found:
        counts[name] = counts.get(name, 0) + 1
    return [load_run(p, metric, f"{p.resolve().parent.name}/{n}" if counts[n] > 1 else n)
            for n, p in found]  # fmt: skip


def final_scores(run: RunData) -> tuple[int, np.ndarray]:
    """The env step of the last point with a finite seed, and those seeds' scores."""
    for i in range(len(run.x) - 1, -1, -1):
        row = run.y[i][np.isfinite(run.y[i])]
        if row.size:
            return int(run.x[i]), row
    raise CompareError(f"{run.path}: every {run.metric} value is missing or not finite")


def _intervals(scores: np.ndarray, reps: int, level: float, seed) -> dict[str, stats.Interval]:
    rng = stats.rng_of(seed)
    return {name: stats.bootstrap_ci(scores, name, reps, level, rng) for name in STATS}


def _normalised(env: str, scores: dict[str, stats.Interval]) -> dict[str, stats.Interval] | None:
    task = reference.atari_task(env)
    if task is None or task not in reference.atari_scores():
        return None
    hns = lambda v: float(reference.human_normalised(task, v))
    return {k: stats.Interval(hns(i.point), hns(i.low), hns(i.high), i.level)
            for k, i in scores.items()}  # fmt: skip


def summarise_runs(runs: list[RunData], reps: int = 2000, level: float = 0.95,
                   seed: int | np.random.Generator | None = 0) -> list[Summary]:  # fmt: skip
    """One :class:`Summary` per run: IQM, mean and median of its final scores over seeds with
    their ``level`` stratified-bootstrap intervals (``reps`` replicates from ``seed``), and on
    an ``atari:`` env the same human-normalised (dreamerv3/baselines.yaml, atari57_gamer)."""
    rng = stats.rng_of(seed)
    out = []
    for run in runs:
        step, scores = final_scores(run)
        intervals = _intervals(scores, reps, level, rng)
        out.append(Summary(run.label, run.env, int(scores.size), step, intervals,
                           _normalised(run.env, intervals)))  # fmt: skip
    return out


def reference_summary(run: RunData, source: str, reps: int = 2000, level: float = 0.95,
                      seed: int | np.random.Generator | None = 0) -> Summary | None:  # fmt: skip
    """The published ``source`` seeds at the published point nearest the run's last env step."""
    curve = reference.reference_curve(source, run.env, run.pixels)
    if curve is None:
        return None
    step, _ = final_scores(run)
    order = np.argsort(np.abs(curve.x - step))
    for i in order:
        row = curve.y[:, i][np.isfinite(curve.y[:, i])]
        if row.size:
            intervals = _intervals(row, reps, level, seed)
            return Summary(f"{source} (published)", run.env, int(row.size), int(curve.x[i]),
                           intervals, _normalised(run.env, intervals))  # fmt: skip
    return None


def improvements(runs: list[RunData], reps: int = 2000, level: float = 0.95,
                 seed: int | np.random.Generator | None = 0) -> list[Improvement]:  # fmt: skip
    """P(X > Y) of the final scores for every ordered pair of runs on the same env."""
    rng = stats.rng_of(seed)
    finals = {run.label: final_scores(run)[1] for run in runs}
    return [Improvement(a.label, b.label, stats.probability_of_improvement_ci(
                finals[a.label], finals[b.label], reps, level, rng))
            for a, b in itertools.combinations(runs, 2) if a.env == b.env]  # fmt: skip
