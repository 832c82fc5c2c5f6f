"""Make ``curves.json.gz`` and ``atari_scores.json`` beside this file from the official trees.

Run from the repository root (it reads ``../shared/reference``, never copies code from it)::

    PYTHONPATH=src python src/ajax/experiments/reference_data/make_extract.py \
        --reference /work/shared/reference

Numbers only: for each (source, suite, task) the env-step axis and one row of scores per seed.
PROVENANCE.md beside this file says what each source file holds and how it is binned here.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TDMPC2_ALGOS = ("tdmpc2", "dreamerv3", "sac")  # tdmpc2/results/<algo>/<task>.csv
DREAMER_SUITES = {  # dreamerv3/scores/<suite>-dreamerv3.json.gz -> bin width in env steps
    "dmc_proprio": None,  # already on one 10k grid shared by every seed
    "dmc_vision": 10_000,  # every 2 env steps: averaged into 10k-step bins
    "atari100k": 10_000,  # at episode ends, per seed: averaged into 10k-frame bins
}
ALIASES = {"cup": "ball_in_cup", "pointmass": "point_mass"}  # tdmpc2/envs/dmcontrol.py make_env


def dmc_tasks() -> set[tuple[str, str]]:
    from dm_control import suite

    return set(suite.ALL_TASKS)


def tdmpc2_to_dmc(name: str) -> tuple[str, str]:
    """``cup-catch`` -> ``("ball_in_cup", "catch")``: the inverse of Ajax's id mapping."""
    domain, task = name.split("-", 1)
    return ALIASES.get(domain, domain), task.replace("-", "_")


def _rounded(rows: np.ndarray) -> list[list[float | None]]:
    return [[None if np.isnan(v) else round(float(v), 2) for v in row] for row in rows]


def tdmpc2_curves(root: Path, known: set[tuple[str, str]]) -> list[dict]:
    out = []
    for algo in TDMPC2_ALGOS:
        for path in sorted((root / "tdmpc2" / "results" / algo).glob("*.csv")):
            if tdmpc2_to_dmc(path.stem) not in known:
                continue  # Meta-World, ManiSkill2, MyoSuite and TD-MPC2's custom DMC tasks
            by_seed: dict[int, dict[int, float]] = defaultdict(dict)
            with open(path) as f:
                for row in csv.DictReader(f):
                    by_seed[int(row["seed"])][int(float(row["step"]))] = float(row["reward"])
            xs = sorted({x for d in by_seed.values() for x in d})
            seeds = sorted(by_seed)
            y = np.array([[by_seed[s].get(x, np.nan) for x in xs] for s in seeds])
            out.append({
                "source": algo, "suite": "tdmpc2", "task": path.stem, "seeds": seeds, "x": xs,
                "y": _rounded(y), "file": str(path.relative_to(root)),
            })  # fmt: skip
    return out


def _binned(xs: np.ndarray, ys: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Mean of ``ys`` in each bin ``(edges[i], edges[i + 1]]``; NaN for an empty bin."""
    idx = np.searchsorted(edges, xs, side="left") - 1
    out = np.full(len(edges) - 1, np.nan)
    for i in range(len(out)):
        hit = ys[idx == i]
        if hit.size:
            out[i] = hit.mean()
    return out


def dreamer_curves(root: Path) -> list[dict]:
    out = []
    for suite, width in DREAMER_SUITES.items():
        path = root / "dreamerv3" / "scores" / f"{suite}-dreamerv3.json.gz"
        runs = json.loads(gzip.decompress(path.read_bytes()))
        by_task: dict[str, list[dict]] = defaultdict(list)
        for run in runs:
            by_task[run["task"]].append(run)
        for task, task_runs in sorted(by_task.items()):
            task_runs.sort(key=lambda r: r["seed"])
            pairs = [(np.array(r["xs"], float),
                      np.array([np.nan if v is None else v for v in r["ys"]], float))
                     for r in task_runs]  # fmt: skip
            if width is None:
                xs = sorted({float(x) for x, _ in pairs for x in x})
                y = np.array([[dict(zip(x, v, strict=True)).get(p, np.nan) for p in xs]
                              for x, v in pairs])  # fmt: skip
            else:
                top = max(x.max() for x, _ in pairs)
                edges = np.arange(0, top + width, width, dtype=float)
                xs = list(edges[1:])
                y = np.array([_binned(x, v, edges) for x, v in pairs])
            out.append({
                "source": "dreamerv3", "suite": suite, "task": task,
                "seeds": [r["seed"] for r in task_runs], "x": [int(x) for x in xs],
                "y": _rounded(y), "file": str(path.relative_to(root)),
            })  # fmt: skip
    return out


def atari_scores(root: Path, tasks: set[str]) -> dict[str, list[float]]:
    """``{task: [random, human]}`` from dreamerv3/baselines.yaml's ``atari57_gamer`` block."""
    scores, inside = {}, False
    for line in (root / "dreamerv3" / "baselines.yaml").read_text().splitlines():
        if not line.startswith(" "):
            inside = line.strip() == "atari57_gamer:"
        elif inside and ":" in line:
            name, values = line.strip().split(":", 1)
            if name in tasks:
                scores[name] = json.loads(values)
    return scores


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=Path("../shared/reference"))
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write (default: here)")
    args = parser.parse_args(argv)
    root, out = args.reference.resolve(), args.out
    if not (root / "tdmpc2" / "results").is_dir() or not (root / "dreamerv3" / "scores").is_dir():
        raise SystemExit(f"{root} holds no tdmpc2/results or dreamerv3/scores; pass --reference")
    curves = tdmpc2_curves(root, dmc_tasks()) + dreamer_curves(root)
    out.mkdir(parents=True, exist_ok=True)
    blob = json.dumps({"curves": curves}, separators=(",", ":")).encode()
    (out / "curves.json.gz").write_bytes(gzip.compress(blob, mtime=0))
    atari = {c["task"] for c in curves if c["suite"] == "atari100k"}
    (out / "atari_scores.json").write_text(json.dumps(atari_scores(root, atari), indent=1) + "\n")
    print(f"{len(curves)} curves, {len(blob)} bytes of JSON before gzip")


if __name__ == "__main__":
    main()
