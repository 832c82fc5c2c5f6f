"""The report of ``dreamerv3_vs_official.py``: each run's curve and final return, the bar of
issue 36 with its statistics, and the outputs (the final-return table, the plot, the JSON).
Pure functions of the runs' records; the runs themselves are the main script's."""

from __future__ import annotations

import itertools
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np

# ----------------------------------------------------------------------------- curves


def official_curve(episodes, grid) -> list[float]:
    """At each step of ``grid``, the mean over envs of each env's last episode finished by
    then (``episodes``: ``[step, score, length, env]`` rows); NaN before any finished. The
    statistic Ajax records as ``train_return`` (EpisodeTracker.last_return_mean)."""
    rows = sorted(episodes, key=lambda e: e[0])
    last, values, i = {}, [], 0
    for g in grid:
        while i < len(rows) and rows[i][0] <= g:
            last[rows[i][3]] = rows[i][1]
            i += 1
        values.append(float(np.mean(list(last.values()))) if last else float("nan"))
    return values


def final_return(grid, values, total_steps: int, frac: float) -> float:
    """Mean of ``values`` at the grid steps in the last ``frac`` of the run (at least the last
    point); NaN where no episode had finished."""
    grid, values = np.asarray(grid, float), np.asarray(values, float)
    mask = grid > total_steps * (1 - frac)
    if not mask.any():
        mask[-1] = True
    tail = values[mask]
    return float(np.nanmean(tail)) if np.isfinite(tail).any() else float("nan")


def summarize(official: list[float], ajax: list[float]) -> dict:
    """Means, sample standard deviations, the pooled one and the bar of issue 36."""
    o = np.asarray([v for v in official if np.isfinite(v)], float)
    a = np.asarray([v for v in ajax if np.isfinite(v)], float)
    std = lambda x: float(np.std(x, ddof=1)) if len(x) > 1 else 0.0  # noqa: E731
    out = {
        "official_mean": float(o.mean()) if len(o) else None,
        "official_std": std(o) if len(o) else None,
        "ajax_mean": float(a.mean()) if len(a) else None,
        "ajax_std": std(a) if len(a) else None,
    }
    if len(o) and len(a):
        pooled = math.sqrt((std(o) ** 2 + std(a) ** 2) / 2)
        out.update(
            pooled_std=pooled,
            mean_bar=float(o.mean()) - pooled,
            mean_ok=bool(a.mean() >= o.mean() - pooled),
            worst_ok=bool(a.min() >= o.min()),
        )
        out["passes"] = out["mean_ok"] and out["worst_ok"]
        out["permutation_p"] = permutation_p(o, a)
        # P(worst_ok) for two agents drawing finals from one distribution: the lowest of the
        # pooled seeds is an official one
        out["worst_ok_if_same"] = len(o) / (len(o) + len(a))
    return out


def permutation_p(official: np.ndarray, ajax: np.ndarray) -> float:
    """Exact two-sided permutation p-value of the difference in mean final return: the share
    of all relabellings of the pooled seeds whose |mean difference| is at least the observed
    one (C(6, 3) = 20 of them at 3 seeds a side)."""
    pooled, k = np.concatenate([official, ajax]), len(official)
    observed = abs(official.mean() - ajax.mean())
    diffs = [
        abs(pooled[list(idx)].mean() - np.delete(pooled, list(idx)).mean())
        for idx in itertools.combinations(range(len(pooled)), k)
    ]
    return float(np.mean([d >= observed - 1e-12 for d in diffs]))


# ----------------------------------------------------------------------------- merging runs


def seed_labels(settings: dict) -> list[int]:
    """The seeds a report's columns stand for (``--first-seed`` onwards, or a merged list)."""
    first = settings.get("first_seed", 0)
    return list(settings.get("seed_list") or range(first, first + settings["seeds"]))


_PER_SEED = {"official": ("curves", "finals", "seeds", "updates", "train_start_step",
                          "logger_matches_adapter", "all_episodes_mean_final"),
             "ajax": ("curves", "finals", "eval_curves", "seeds")}  # fmt: skip


def combine(parts: list[dict]) -> dict:
    """One report from reports of the same settings on disjoint seeds (``--first-seed``):
    per-seed lists concatenated in seed order, wall times summed, the bar recomputed over all
    seeds. A task needs to be in only some parts (its rows then hold those parts' seeds).
    Refuses parts whose settings (other than the seeds) or a task's grids differ."""

    def fixed(settings: dict) -> dict:
        return {k: v for k, v in settings.items() if k not in ("seeds", "first_seed", "seed_list")}

    base = fixed(parts[0]["settings"])
    for p in parts:
        if fixed(p["settings"]) != base:
            raise ValueError(f"cannot combine runs of different settings: {fixed(p['settings'])}"
                             f" vs {base}")  # fmt: skip
    labels = [seed_labels(p["settings"]) for p in parts]
    flat = [x for lab in labels for x in lab]
    if len(set(flat)) != len(flat):
        raise ValueError(f"cannot combine runs that share seeds: {labels}")
    order = sorted(range(len(parts)), key=lambda i: labels[i][0])
    parts, labels, flat = [parts[i] for i in order], [labels[i] for i in order], sorted(flat)
    out = {"settings": {**base, "seeds": len(flat), "first_seed": flat[0], "seed_list": flat},
           "tasks": {}}  # fmt: skip
    for task in dict.fromkeys(t for p in parts for t in p["tasks"]):
        rows = [(p["tasks"][task], lab) for p, lab in zip(parts, labels, strict=True)
                if task in p["tasks"]]  # fmt: skip
        if any(r["grid"] != rows[0][0]["grid"] for r, _ in rows):
            raise ValueError(f"{task}: every part needs the task on the same curve grid")
        merged = out["tasks"][task] = {"grid": rows[0][0]["grid"]}
        for side, keys in _PER_SEED.items():
            sides = [({"seeds": lab, **r[side]}, lab) for r, lab in rows if r.get(side)]
            if len(sides) != len(rows):
                continue
            m = merged[side] = dict(sides[0][0])
            for key in keys:
                if key in m:
                    m[key] = [x for sd, _ in sides for x in sd.get(key, [])]
            m["wall_s"] = sum(sd["wall_s"] for sd, _ in sides)
            m["failures"] = [f for sd, _ in sides for f in sd.get("failures", [])]
        if merged.get("official") and merged.get("ajax"):
            merged["summary"] = summarize(merged["official"]["finals"], merged["ajax"]["finals"])
    return out


# ----------------------------------------------------------------------------- outputs


def _fmt(v) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.1f}"


def markdown(results: dict) -> str:
    """The final-return table (one row per task and side, one column per seed) and the bar."""
    s = results["settings"]
    n = s["seeds"]
    labels = seed_labels(s)
    lines = [
        f"DreamerV3, official vs Ajax at equal budget: size{s['size']}, batch "
        f"{s['batch_size']} x {s['batch_length']}, train ratio {s['train_ratio']:g}, "
        f"{s['steps']:,} env steps, {s['envs']} env(s), {n} seed(s). Final return: mean of the "
        f"last-episode curve over the last {s['final_frac']:.0%} of the run.",
        "",
        "| task | side | " + " | ".join(f"seed {i}" for i in labels) + " | mean | std | wall s |",
        "|---|---|" + "---|" * (n + 3),
    ]
    for task, r in results["tasks"].items():
        for side, label in (("official", "official"), ("ajax", "Ajax")):
            got = r.get(side) or {"finals": []}
            by_seed = dict(zip(got.get("seeds", labels), got["finals"], strict=False))
            finals = [by_seed.get(seed) for seed in labels]
            summ = r.get("summary", {})
            lines.append(
                f"| {task} | {label} | " + " | ".join(_fmt(v) for v in finals)
                + f" | {_fmt(summ.get(side + '_mean'))} | {_fmt(summ.get(side + '_std'))}"
                + f" | {_fmt(r[side].get('wall_s') if r.get(side) else None)} |"
            )  # fmt: skip
    lines.append("")
    for task, r in results["tasks"].items():
        summ = r.get("summary", {})
        if "passes" in summ:
            lines.append(
                f"- {task}: Ajax mean {summ['ajax_mean']:.1f} vs official mean - pooled std "
                f"{summ['mean_bar']:.1f} ({'ok' if summ['mean_ok'] else 'below'}); Ajax worst "
                f"{min(v for v in r['ajax']['finals'] if math.isfinite(v)):.1f} vs official "
                f"worst {min(v for v in r['official']['finals'] if math.isfinite(v)):.1f} "
                f"({'ok' if summ['worst_ok'] else 'below'}): "
                f"{'passes' if summ['passes'] else 'fails'} the bar; difference of the means: "
                f"permutation p = {summ['permutation_p']:.2f}; the worst-seed test alone is "
                f"passed with probability {summ['worst_ok_if_same']:.2f} by an agent identical "
                "to the official"
            )  # fmt: skip
        for side in ("official", "ajax"):
            for why in (r.get(side) or {}).get("failures", []):
                lines.append(f"- {task} {side}: - ({why})")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    """One panel per task: per-seed curves (thin) and their mean (thick), both sides."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(results["tasks"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        r = results["tasks"][task]
        for side, color, label in (("official", "C0", "official"), ("ajax", "C1", "Ajax")):
            if not r.get(side) or not r[side].get("curves"):
                continue
            grid = np.asarray(r["grid"], float)
            curves = np.asarray(r[side]["curves"], float)
            marker = "." if len(grid) <= 20 else None  # a curve of one finite point shows
            for curve in curves:
                ax.plot(grid, curve, color=color, alpha=0.3, lw=1, marker=marker)
            with warnings.catch_warnings():  # all-NaN columns (no episode finished yet)
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(curves, axis=0)
            ax.plot(grid, mean, color=color, lw=2.5, marker=marker,
                    label=f"{label} (mean of {len(curves)})")  # fmt: skip
        ax.set_title(task)
        ax.set_xlabel("env steps")
        ax.set_ylabel("episode return (last finished, sampled policy)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    s = results["settings"]
    fig.suptitle(f"DreamerV3 size{s['size']}, batch {s['batch_size']}x{s['batch_length']}, "
                 f"ratio {s['train_ratio']:g}, {s['envs']} env(s)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)


def write_outputs(results: dict, out: Path, name: str) -> dict[str, Path]:
    """``name``.png (:func:`plot`), .md (:func:`markdown`) and .json (every number) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {ext: out / f"{name}.{ext}" for ext in ("png", "md", "json")}
    plot(results, paths["png"])
    paths["md"].write_text(markdown(results))
    paths["json"].write_text(json.dumps(results, indent=1))
    return paths


def main(argv=None) -> int:
    """``combine A.json B.json ... --out DIR [--name NAME]``: one report from runs of disjoint
    seeds (the JSONs ``dreamerv3_vs_official.py`` writes)."""
    import argparse

    parser = argparse.ArgumentParser(prog="equal_budget_report.py")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("combine", help="merge reports of the same settings on disjoint seeds")
    c.add_argument("parts", nargs="+", type=Path)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--name", default="dreamerv3_vs_official")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.parts if not p.is_file()]
    if missing:
        parser.error(f"no such report: {', '.join(missing)}")
    try:
        results = combine([json.loads(p.read_text()) for p in args.parts])
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        parser.error(f"cannot combine: {e}")
    paths = write_outputs(results, args.out, args.name)
    print(markdown(results))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
