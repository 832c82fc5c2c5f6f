"""Running an agent into a run directory: logs, checkpoints, resume, summary and curve.

A run directory holds ``run.json`` (what was asked: agent, env, config, steps, seeds),
``metrics.jsonl``, ``checkpoints/`` (orbax, atomic), and at the end ``summary.json`` and
``curve.png``. The run is split into segments of ``checkpoint_every`` chunks; each segment is one
jitted scan over its chunks (vmapped over seeds), so resuming from a checkpoint replays the same
compiled computation and ends with the same parameters as an uninterrupted run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ajax.failures import run_write_failed
from ajax.training import driver
from ajax.training.algorithm import Algorithm
from ajax.training.checkpoint import (
    latest_step,
    read_manifest,
    record,
    remove_temporaries,
    save_checkpoint,
)
from ajax.training.distributed import is_primary
from ajax.training.driver import Diverged, check_finite  # noqa: F401  (raised and used here)
from ajax.training.io import (
    plot_curve,
    read_jsonl,
    truncate_jsonl,
    write_json_atomic,
)
from ajax.training.logger import RunLogger
from ajax.training.run_dir import RunDirError, RunSpec, check_identity, identity


def warn(message: str) -> None:
    print(message, file=sys.stderr)


def _quiet(message: str) -> None:
    del message


class Prepared(NamedTuple):
    """A run ready to go (:func:`prepare`): its layout (:class:`~ajax.training.driver.Plan`),
    its start (:class:`~ajax.training.driver.Start`, fresh or restored), where it stands, and
    how its segments are saved."""

    plan: driver.Plan
    start: driver.Start
    done_chunks: int
    wall_offset: float
    save: Any  # save(done_chunks, state), or None when nothing is written
    primary: bool

    @property
    def seeds(self) -> list[int]:
        return self.plan.seeds

    @property
    def per_chunk(self) -> int:
        return self.start.per_chunk

    @property
    def n_chunks(self) -> int:
        return self.start.n_chunks


def prepare(algo: Algorithm, spec: RunSpec, out: Path | None, resume: bool = False,
            ignore_version: bool = False, devices: int | None = None, parallel: str = "seeds",
            seed_batching: str = "vmap", plan: driver.Plan | None = None) -> Prepared:  # fmt: skip
    """Check the run (identity on resume, before any compile; then :func:`driver.plan
    <ajax.training.driver.plan>` unless ``plan`` is the one the caller made), build its first
    state (:func:`~ajax.training.driver.start`), and on ``resume`` restore the newest good
    checkpoint over it and cut ``metrics.jsonl`` back to that checkpoint's step."""
    ckpt_dir = None if out is None else out / "checkpoints"
    if resume and ckpt_dir is not None:
        check_identity(spec, ckpt_dir, ignore_version)  # before any compile
        if is_primary():  # a killed or failed save's half-written step: never a checkpoint
            remove_temporaries(ckpt_dir)
    if plan is None:
        plan = driver.plan(algo, spec.steps, spec.seed, spec.n_seeds, devices, parallel,
                           seed_batching)  # fmt: skip
    start = driver.start(algo, spec.steps, plan)
    save, primary = None, is_primary()  # process 0 writes the run directory, the others nothing
    if ckpt_dir is not None and primary:
        made_by = identity(spec)

        def save(step, state):
            save_checkpoint(ckpt_dir, step, state, identity=made_by)

    done_chunks, wall_offset = 0, 0.0
    if resume and ckpt_dir is not None:
        # every process reads the same newest good step; only process 0 moves damage aside
        step, start = driver.restore(ckpt_dir, start, plan, primary, warn if primary else _quiet)
        if step is not None and primary and read_manifest(ckpt_dir) is None:
            record(ckpt_dir, step, identity(spec))  # it restored (unverified): recorded now
        done_chunks = step or 0
        if done_chunks > start.n_chunks:
            raise RunDirError(f"checkpoint {done_chunks} is past the run's {start.n_chunks} chunks")
        per_chunk = start.per_chunk
        previous = truncate_jsonl(out / "metrics.jsonl", done_chunks * per_chunk) if primary else []
        times = [
            r["wall_time_s"] for r in previous if isinstance(r.get("wall_time_s"), float | int)
        ]
        wall_offset = float(times[-1]) if times else 0.0
    return Prepared(plan, start, done_chunks, wall_offset, save, primary)


def rounding_note(steps: int, per_chunk: int, n_chunks: int) -> str | None:
    """The line that says a run is longer than asked: it goes in whole chunks of ``per_chunk``
    env steps (one evaluation each), so ``steps`` rounds up; None when nothing rounds."""
    if n_chunks * per_chunk == steps:
        return None
    return (f"note: a run goes in whole chunks of {per_chunk:,} env steps (one evaluation "
            f"each), so --steps {steps:,} runs {n_chunks * per_chunk:,}; give --steps a multiple "
            f"of {per_chunk:,} or a smaller --eval-freq for an exact length")  # fmt: skip


def no_learning_note(steps: int, first: tuple[int, str] | None) -> str | None:
    """The line that says a run of ``steps`` env steps ends before its first update
    (``first``: :meth:`~ajax.training.algorithm.Algorithm.first_update`); None otherwise."""
    if first is None or first[0] <= steps:
        return None
    step, setting = first
    return (f"note: the first update comes at env step {step:,} ({setting}), and this run ends "
            f"at {steps:,}: it collects without learning; give more --steps or a smaller "
            f"{setting}")  # fmt: skip


def kept_after_divergence(out: Path, checkpoint: int | None, per_chunk: int) -> str:
    """What a diverged run leaves: its newest checkpoint (all are finite: a segment is checked
    before it is saved), or none, and then how to start again."""
    if checkpoint is None:
        return (f"no checkpoint exists (it diverged before its first); start it again with "
                f"'ajax train ... --out {out} --overwrite'")  # fmt: skip
    return (f"its last finite checkpoint ({out / 'checkpoints' / str(checkpoint)}, step "
            f"{checkpoint * per_chunk}) is kept")  # fmt: skip


def run_prepared(algo: Algorithm, spec: RunSpec, out: Path | None, p: Prepared, logger):
    """Run ``p`` to its end (:func:`~ajax.training.driver.run`), logging each chunk and
    saving each segment of ``spec.checkpoint_every`` chunks; returns the final state. A
    divergence writes a ``diverged`` summary and re-raises :class:`Diverged`, saying whether a
    checkpoint is kept. A write the logger could not make (a full disk) is raised before the
    next checkpoint, so no checkpoint is ahead of ``metrics.jsonl``."""
    save = p.save
    if save is not None:

        def save(step, state):
            logger.check()
            p.save(step, state)

    try:
        state, _ = driver.run(algo, p.start, p.plan, p.done_chunks, spec.checkpoint_every,
                              logger, save)  # fmt: skip
    except Diverged as err:
        if out is None or not p.primary:
            raise
        kept = latest_step(out / "checkpoints")
        diverged = {"agent": spec.agent, "env": spec.env, "status": "diverged",
                    "diverged": err.name, "step": err.step, "seeds": p.seeds,
                    "checkpoint": kept}  # fmt: skip
        write_json_atomic(out / "summary.json", diverged)
        raise Diverged(err.name, err.step, kept_after_divergence(out, kept, p.per_chunk)) from None
    finally:
        logger.close()
    logger.check()
    return state


def summarise(spec: RunSpec, out: Path | None, p: Prepared, logger) -> dict[str, Any]:
    """The run's ``summary.json`` (written with ``curve.png`` when there is a run directory)."""
    written = out is not None and p.primary
    records = read_jsonl(out / "metrics.jsonl") if written else logger.records
    last = records[-1].get("eval_returns") if records else None
    final = np.asarray(last if isinstance(last, list) else [np.nan] * spec.n_seeds, dtype=float)
    summary = {
        "agent": spec.agent,
        "env": spec.env,
        "status": "finished",
        "steps": p.n_chunks * p.per_chunk,
        "eval_every": p.per_chunk,
        "seeds": p.seeds,
        "final_eval_return": float(np.nanmean(final)),
        "final_eval_returns": final.tolist(),
        "wall_time_s": round(logger.wall_time(), 3),
        "env_steps_per_s": round(logger.steps_per_second() * spec.n_seeds, 1),
    }
    if written:
        write_json_atomic(out / "summary.json", summary)
        plot_curve(out / "curve.png", records, f"{spec.agent} on {spec.env}")
    return summary


def execute(
    algo: Algorithm,
    spec: RunSpec,
    out: Path | None,
    progress: bool = True,
    resume: bool = False,
    wandb_project: str | None = None,
    ignore_version: bool = False,
    devices: int | None = None,
    parallel: str = "seeds",
    seed_batching: str = "vmap",
    plan: driver.Plan | None = None,
) -> tuple[dict[str, Any], Any]:
    """Train as ``spec`` says, writing into ``out``; returns ``(summary, final state)``:
    :func:`prepare`, :func:`run_prepared`, :func:`summarise`.

    ``resume`` continues from the newest checkpoint that verifies (damaged ones are moved aside,
    see :func:`ajax.training.checkpoint.restore_newest_good`) after checking it was made by
    this spec, and cuts ``metrics.jsonl`` back to that checkpoint's step (to 0 without one).
    ``devices`` spreads the run over that many devices, by seed or, with ``parallel="data"``,
    by env and update batch; neither is part of the run's identity (a checkpoint is host
    arrays, so a run saved on 4 devices resumes on any device count that fits the layout), and
    nor is ``seed_batching`` (:func:`~ajax.training.sharding.per_seed`). ``plan``, when the
    caller validated the run already (:func:`ajax.training.driver.plan`), replaces those three.

    A write into ``out`` that the OS refuses (a full disk) stops the run with a
    :class:`~ajax.failures.WriteFailed` naming the path, the cause and the resume
    that continues it; the last good checkpoint and whole ``metrics.jsonl`` lines stay.
    """
    try:
        p = prepare(algo, spec, out, resume, ignore_version, devices, parallel, seed_batching,
                    plan)  # fmt: skip
        if p.primary:
            ran = p.n_chunks * p.per_chunk
            notes = (rounding_note(spec.steps, p.per_chunk, p.n_chunks),
                     no_learning_note(ran, algo.first_update()))  # fmt: skip
            for note in filter(None, notes):
                warn(note)
        logger = RunLogger(
            out if p.primary else None,
            p.n_chunks * p.per_chunk,
            p.done_chunks * p.per_chunk,
            progress=progress and p.primary,
            wandb_project=wandb_project if p.primary else None,
            wall_time_offset=p.wall_offset,
        )
        logger.check()
        state = run_prepared(algo, spec, out, p, logger)
        return summarise(spec, out, p, logger), state
    except OSError as err:  # a write the OS refused: the one line says how to go on
        if out is None:
            raise
        raise run_write_failed(err, out, latest_step(out / "checkpoints")) from err
