"""A sweep written as ordinary run directories (``ajax sweep``).

``OUT/sweep.json`` names the grid and its points; each point ``OUT/<NN>_<field>=<value>...`` is
an ordinary run directory (``run.json`` with the point's config, ``metrics.jsonl``,
``checkpoints/``, ``summary.json``, ``curve.png``), so ``ajax resume``, ``eval`` and ``check``
work on it. ``OUT/points.json`` and ``OUT/points.csv`` hold each point's values, status and
final evaluation per seed (``ajax sweep`` adds the statistics table and the curves:
:func:`ajax.experiments.report.write_report`).

The points of one program (:mod:`ajax.training.sweep`) run together; each chunk's record is
split among their loggers and each segment's state among their checkpoints. A point that
diverges stops being saved (its last finite checkpoint stays, its ``summary.json`` says
``diverged``) while the others go on.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from ajax.training import driver
from ajax.training.checkpoint import save_checkpoint
from ajax.training.io import write_json_atomic, write_text_atomic
from ajax.training.logger import RunLogger
from ajax.training.run import summarise
from ajax.training.run_dir import (
    RunSpec,
    enclosing_run,
    identity,
    is_run_dir,
    prepare_run_dir,
    refuse_dataset_out,
)
from ajax.training.sweep import Sweep, point_slice, point_structures, start_group

SWEEP_FILE = "sweep.json"


def point_name(values: dict) -> str:
    """A grid point as ``field=value,...``."""
    return ",".join(f"{k}={v}" for k, v in values.items())


def point_dir(index: int, values: dict) -> str:
    """A grid point's directory name: its index, then ``field=value`` joined by ``_``."""
    return f"{index:02d}_" + "_".join(f"{k}={v}" for k, v in values.items())


class Prepared(NamedTuple):
    """What :func:`summarise <ajax.training.run.summarise>` reads of a point's run."""

    seeds: list[int]
    n_chunks: int
    per_chunk: int
    primary: bool = True


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse an ``--out`` inside a run directory, one that is a run directory, one that is or
    is inside an episode dataset, and one holding a sweep unless ``overwrite``."""
    inside = enclosing_run(out, itself=True)
    if inside is not None:
        raise FileExistsError(f"{out} is (inside) the run directory {inside[0]}: a sweep "
                              "written there would overwrite it; pick another --out")  # fmt: skip
    refuse_dataset_out(out, "a sweep")
    if (out / SWEEP_FILE).exists() and not overwrite:
        raise FileExistsError(f"{out} already holds a sweep; pass --overwrite to replace it "
                              "or pick another --out")  # fmt: skip
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(20, "it exists and is not a directory", str(out))


def run_sweep(algo, base: RunSpec, sw: Sweep, out: Path, overwrite: bool = False,
              progress: bool = True, checkpoint_every: int | None = None) -> list[dict]:  # fmt: skip
    """Write and run ``sw``: every point's run directory first, then each program; returns
    each point's summary (grid order) and writes the sweep's table."""
    check_out(out, overwrite)
    specs = [dataclasses.replace(base, config=dataclasses.asdict(c)) for c in sw.configs]
    dirs = [out / point_dir(i, v) for i, v in enumerate(sw.points)]
    for d, spec in zip(dirs, specs, strict=True):
        prepare_run_dir(d, spec, overwrite)
    write_json_atomic(out / SWEEP_FILE, {
        "agent": base.agent, "env": base.env, "steps": base.steps, "seed": base.seed,
        "n_seeds": base.n_seeds, "traced": sw.traced,
        "points": [{"name": point_name(v), "dir": d.name, "values": v}
                   for v, d in zip(sw.points, dirs, strict=True)],
    })  # fmt: skip
    summaries: list[dict] = [{}] * len(sw.points)
    for group, p in sw.programs:
        ran = _run_program(group, p, [specs[i] for i in group.indices],
                           [dirs[i] for i in group.indices], progress, checkpoint_every)  # fmt: skip
        for i, summary in zip(group.indices, ran, strict=True):
            summaries[i] = summary
    write_table(out, sw.points, summaries)
    return summaries


def _run_program(group, p: driver.Plan, specs: list[RunSpec], dirs: list[Path], progress: bool,
                 checkpoint_every: int | None) -> list[dict]:  # fmt: skip
    """One program's points: their loggers, checkpoints and summaries."""
    base = specs[0]
    n_seeds, steps = base.n_seeds, base.steps
    start = start_group(group, steps, p)
    total = start.n_chunks * start.per_chunk
    loggers = [RunLogger(d, total, progress=progress and j == 0) for j, d in enumerate(dirs)]
    structures = point_structures(group, steps)
    made_by = [identity(s) for s in specs]
    diverged: dict[int, driver.Diverged] = {}

    def on_record(record):
        for j, logger in enumerate(loggers):
            part = point_slice(record, j, n_seeds)
            logger(part)
            if j not in diverged:
                try:
                    driver.check_finite(jax.tree.map(lambda x: np.asarray(x)[None], part), {})
                except driver.Diverged as err:
                    diverged[j] = err

    def save(done, state):
        for j, d in enumerate(dirs):
            if j in diverged:
                continue
            point = jax.tree.unflatten(structures[j], point_slice(state.state, j, n_seeds))
            try:
                driver.check_finite({"step": np.zeros((1, n_seeds))}, point.agent)
            except driver.Diverged as err:
                diverged[j] = err
                continue
            loggers[j].check()
            save_checkpoint(d / "checkpoints", done, point, identity=made_by[j])

    try:
        driver.run(group.algo, start, p, 0, checkpoint_every or base.checkpoint_every,
                   on_record, save, check=False)  # fmt: skip
    finally:
        for logger in loggers:
            logger.close()
    out = []
    for j, (spec, d) in enumerate(zip(specs, dirs, strict=True)):
        loggers[j].check()
        prepared = Prepared(p.seeds[:n_seeds], start.n_chunks, start.per_chunk)
        if j in diverged:
            err = diverged[j]
            summary = {"agent": spec.agent, "env": spec.env, "status": "diverged",
                       "diverged": err.name, "step": err.step, "seeds": prepared.seeds}  # fmt: skip
            write_json_atomic(d / "summary.json", summary)
        else:
            summary = summarise(spec, d, prepared, loggers[j])
        out.append(summary)
    return out


def write_table(out: Path, points: list[dict], summaries: list[dict]) -> None:
    """``points.json`` and ``points.csv``: each point's values, status and final evaluation
    (mean and per seed)."""
    rows = []
    for values, s in zip(points, summaries, strict=True):
        rows.append({"point": point_name(values), **values, "status": s.get("status"),
                     "final_eval_return": s.get("final_eval_return"),
                     "final_eval_returns": s.get("final_eval_returns"),
                     "env_steps_per_s": s.get("env_steps_per_s")})  # fmt: skip
    write_json_atomic(out / "points.json", {"points": rows})
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (" ".join(f"{x:.4g}" for x in v) if isinstance(v, list) else v)
                         for k, v in row.items()})  # fmt: skip
    write_text_atomic(out / "points.csv", buffer.getvalue())


def is_sweep_dir(path: Path) -> bool:
    return (Path(path) / SWEEP_FILE).is_file() and not is_run_dir(Path(path))
