"""The table and the figure of a comparison: markdown, CSV or JSON, and a PNG of curves with
bootstrap bands and the published curves beside them (:mod:`ajax.experiments.compare`)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from ajax.experiments import reference, stats
from ajax.experiments.compare import STATS, Improvement, RunData, Summary, summarise_runs
from ajax.training.io import save_figure, write_text_atomic

FORMATS = ("md", "csv", "json")


def _fmt(i: stats.Interval) -> str:
    return f"{i.point:.4g} [{i.low:.4g}, {i.high:.4g}]"


def _markdown(summaries: list[Summary], pairs: list[Improvement], level: float) -> str:
    hns = any(s.normalised for s in summaries)
    names = [k.upper() if k == "iqm" else k for k in STATS]
    head = ["run", "env", "seeds", "env steps", *names]
    head += [f"HNS {k}" for k in names] if hns else []
    lines = [f"Final scores, {level:.0%} stratified-bootstrap intervals:", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]  # fmt: skip
    for s in summaries:
        cells = [s.label, s.env, str(s.seeds), str(s.env_steps)]
        cells += [_fmt(s.scores[k]) for k in STATS]
        cells += [_fmt(s.normalised[k]) if s.normalised else "" for k in STATS] if hns else []
        lines.append("| " + " | ".join(cells) + " |")
    if pairs:
        lines += ["", "Probability of improvement of X over Y (final scores):", "",
                  "| X | Y | P(X > Y) |", "|---|---|---|"]  # fmt: skip
        lines += [f"| {p.x} | {p.y} | {_fmt(p.p)} |" for p in pairs]
    return "\n".join(lines) + "\n"


def _rows(summaries: list[Summary], pairs: list[Improvement]) -> list[dict]:
    """The long form: one row per (run, statistic) and per pair."""
    rows = []
    for s in summaries:
        named = [(k, v) for k, v in s.scores.items()]
        named += [(f"hns_{k}", v) for k, v in (s.normalised or {}).items()]
        for name, i in named:
            rows.append({"kind": "score", "run": s.label, "versus": "", "env": s.env,
                         "seeds": s.seeds, "env_steps": s.env_steps, "statistic": name,
                         "value": i.point, "low": i.low, "high": i.high, "level": i.level})  # fmt: skip
    for p in pairs:
        rows.append({"kind": "improvement", "run": p.x, "versus": p.y, "env": "", "seeds": "",
                     "env_steps": "", "statistic": "P(run > versus)", "value": p.p.point,
                     "low": p.p.low, "high": p.p.high, "level": p.p.level})  # fmt: skip
    return rows


def _json(summaries: list[Summary], pairs: list[Improvement]) -> str:
    pack = lambda i: {"point": i.point, "low": i.low, "high": i.high}
    runs = [{"run": s.label, "env": s.env, "seeds": s.seeds, "env_steps": s.env_steps,
             **{k: pack(v) for k, v in s.scores.items()},
             **({"human_normalised": {k: pack(v) for k, v in s.normalised.items()}}
                if s.normalised else {})} for s in summaries]  # fmt: skip
    level = summaries[0].scores["iqm"].level if summaries else None
    out = {"level": level, "runs": runs,
           "improvement": [{"x": p.x, "y": p.y, "p": pack(p.p)} for p in pairs]}  # fmt: skip
    return json.dumps(out, indent=2) + "\n"


def format_table(summaries: list[Summary], pairs: list[Improvement], fmt: str = "md",
                 level: float = 0.95) -> str:  # fmt: skip
    """The final-score table and the pairs' probability of improvement as ``md`` (two tables),
    ``csv`` (long form: kind, run, versus, env, seeds, env_steps, statistic, value, low, high,
    level) or ``json`` (``{"level", "runs": [...], "improvement": [...]}``)."""
    if fmt == "md":
        return _markdown(summaries, pairs, level)
    if fmt == "json":
        return _json(summaries, pairs)
    if fmt == "csv":
        buf = io.StringIO()
        rows = _rows(summaries, pairs)
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["kind"])
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()
    raise ValueError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")


def curve_band(run: RunData, statistic: str = "mean", reps: int = 1000, level: float = 0.95,
               seed: int | np.random.Generator | None = 0):  # fmt: skip
    """``(x, point, low, high)`` of ``statistic`` over the finite seeds at each point."""
    rng = stats.rng_of(seed)
    keep, rows = [], []
    for i, row in enumerate(run.y):
        finite = row[np.isfinite(row)]
        if finite.size:
            interval = stats.bootstrap_ci(finite, statistic, reps, level, rng)
            keep.append(i)
            rows.append((interval.point, interval.low, interval.high))
    arr = np.array(rows, float).reshape(-1, 3)
    return run.x[keep], arr[:, 0], arr[:, 1], arr[:, 2]


def _draw_reference(ax, curve: reference.Curve, color, until: float | None = None) -> None:
    """The published mean (dashed) and per-seed range; with ``until``, only up to the first
    published point at or past it, so a short run stays readable beside a 4M-step curve."""
    keep = np.isfinite(curve.mean)
    if until is not None:
        past = curve.x[keep & (curve.x >= until)]
        keep &= curve.x <= (past[0] if past.size else np.inf)
    x = curve.x[keep]
    ax.plot(x, curve.mean[keep], color=color, lw=1.5, ls="--", marker="s", ms=4, zorder=1,
            label=f"{curve.source} published mean ({len(curve.seeds)} seeds)")  # fmt: skip
    ax.fill_between(x, curve.low[keep], curve.high[keep], color=color, alpha=0.12, zorder=0,
                    label=f"{curve.source} per-seed range")  # fmt: skip
    ax.vlines(x, curve.low[keep], curve.high[keep], color=color, lw=1, alpha=0.6, zorder=1)


def plot_groups(path: str | Path, runs: list[RunData], statistic: str = "mean",
                references: dict[str, reference.Curve] | None = None, reps: int = 1000,
                level: float = 0.95, seed: int | np.random.Generator | None = 0,
                title: str | None = None, clip_reference: bool = True) -> None:  # fmt: skip
    """Save a PNG: one panel per env, each run's ``statistic`` over seeds against env steps
    with its ``level`` bootstrap band, and ``references[env]`` (a published curve) dashed with
    its per-seed range, drawn up to the first published point past the runs' last env step
    (``clip_reference=False``: all of it). Written atomically, like
    :func:`ajax.training.io.plot_curve`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(run.env for run in runs))
    cols = min(3, len(envs))
    rows = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.4 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    rng = stats.rng_of(seed)
    for k, env in enumerate(envs):
        ax = axes.flat[k]
        for j, run in enumerate(r for r in runs if r.env == env):
            c = colors[j % len(colors)]
            x, point, low, high = curve_band(run, statistic, reps, level, rng)
            label = f"{run.label} ({statistic}, {run.y.shape[1]} seeds)"
            ax.plot(x, point, color=c, lw=2, marker="o", ms=3, zorder=3, label=label)
            ax.fill_between(x, low, high, color=c, alpha=0.25, zorder=2)
        ref = (references or {}).get(env)
        if ref is not None:
            last = max(float(r.x.max()) for r in runs if r.env == env and r.x.size)
            _draw_reference(ax, ref, "0.3", last if clip_reference else None)
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.set_ylabel(runs[0].metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(envs) :]:
        ax.set_visible(False)
    fig.suptitle(title or f"{runs[0].metric}: {statistic} over seeds, {level:.0%} bootstrap CI")
    fig.tight_layout()
    _save(fig, Path(path))


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)


def write_report(out_dir: str | Path, runs: list[RunData], reps: int = 2000,
                 level: float = 0.95, seed: int = 0) -> list[Summary]:  # fmt: skip
    """What a sweep writes beside its points: ``summary.csv``, ``summary.json`` (final
    scores and pairwise improvement, :func:`format_table`) and ``curves.png``."""
    from ajax.experiments.compare import improvements

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = summarise_runs(runs, reps, level, seed)
    pairs = improvements(runs, reps, level, seed)
    for fmt, name in (("csv", "summary.csv"), ("json", "summary.json")):
        write_text_atomic(out_dir / name, format_table(summaries, pairs, fmt, level))
    plot_groups(out_dir / "curves.png", runs, reps=min(reps, 1000), level=level, seed=seed)
    return summaries
