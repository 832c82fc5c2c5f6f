"""Running an agent into a run directory: logs, checkpoints, resume, summary and curve.

A run directory holds ``run.json`` (what was asked: agent, env, config, steps, seeds),
``metrics.jsonl``, ``checkpoints/`` (orbax, atomic), and at the end ``summary.json`` and
``curve.png``. The run is split into segments of ``checkpoint_every`` chunks; each segment is one
jitted scan over its chunks (vmapped over seeds), so resuming from a checkpoint replays the same
compiled computation and ends with the same parameters as an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ajax.training.algorithm import Algorithm, n_chunks_for, segment_fn
from ajax.training.checkpoint import latest_step, restore_checkpoint, save_checkpoint
from ajax.training.io import plot_curve, read_json, read_jsonl, truncate_jsonl, write_json_atomic
from ajax.training.logger import RunLogger
from ajax.validation import Validated, between, positive, require

RUN_FILE = "run.json"


@dataclasses.dataclass(frozen=True)
class RunSpec(Validated):
    """What a run was asked to do; saved as ``run.json`` so ``ajax resume`` can rebuild it."""

    agent: str
    env: str
    steps: int
    seed: int = 0
    n_seeds: int = 1
    checkpoint_every: int = 5
    config: dict = dataclasses.field(default_factory=dict, hash=False)

    RULES = {
        "steps": positive(),
        "seed": between(0, 2**31 - 1),
        "n_seeds": positive(),
        "checkpoint_every": positive(),
    }

    def relations(self) -> None:
        require(self, self.seed + self.n_seeds <= 2**31, "seed",
                f"<= 2**31 - n_seeds = {2**31 - self.n_seeds} (seeds are int32)")  # fmt: skip


def is_run_dir(path: Path) -> bool:
    return (path / RUN_FILE).exists() or (path / "metrics.jsonl").exists()


def prepare_run_dir(out: Path, spec: RunSpec, overwrite: bool) -> None:
    """Create ``out`` for a new run; refuse one that holds another run unless ``overwrite``."""
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(20, "it exists and is not a directory", str(out))
    if out.exists() and is_run_dir(out):
        if not overwrite:
            raise FileExistsError(
                f"{out} already holds a run; pass --overwrite to replace it, or "
                f"'ajax resume {out}' to continue it"
            )
        import shutil

        for child in ("checkpoints", "tensorboard"):
            shutil.rmtree(out / child, ignore_errors=True)
        for child in ("metrics.jsonl", "summary.json", "curve.png", RUN_FILE):
            (out / child).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / RUN_FILE, dataclasses.asdict(spec))


def load_spec(out: Path) -> RunSpec:
    if not (out / RUN_FILE).exists():
        raise FileNotFoundError(f"{out} is not a run directory (no {RUN_FILE})")
    return RunSpec(**read_json(out / RUN_FILE))


class Diverged(RuntimeError):
    """A loss or a parameter went NaN or inf; the last finite checkpoint is kept."""

    def __init__(self, name: str, step: int):
        self.name, self.step = name, step
        super().__init__(
            f"{name} became non-finite by step {step}; the run stopped and its last finite "
            "checkpoint is kept (lower the learning rate or check the environment's rewards)"
        )


def check_finite(records: dict, agent_state) -> None:
    """Raise :class:`Diverged` naming the first non-finite loss metric (by chunk) or, failing
    that, the first non-finite parameter leaf. ``records`` leaves are ``[chunks, seeds]``."""
    steps = np.asarray(records["step"]).reshape(len(records["step"]), -1)
    metrics = {k: np.asarray(v) for k, v in records.items() if "loss" in k}
    for chunk in range(steps.shape[0]):
        for name, value in sorted(metrics.items()):
            if not np.all(np.isfinite(value[chunk])):
                raise Diverged(name, int(steps[chunk].max()))
    for path, leaf in jax.tree_util.tree_leaves_with_path(agent_state):
        if jnp.issubdtype(leaf.dtype, jnp.floating) and not bool(jnp.all(jnp.isfinite(leaf))):
            raise Diverged(f"parameter {jax.tree_util.keystr(path)}", int(steps[-1].max()))


def _run_jax(algo, spec, chunks, state, done_chunks, logger, ckpt_dir):
    """JAX env: segments of ``checkpoint_every`` chunks, each one jitted scan; a segment whose
    losses or parameters went non-finite is not checkpointed (:class:`Diverged`)."""
    segments: dict[int, Any] = {}
    while done_chunks < chunks.n_chunks:
        n = min(spec.checkpoint_every, chunks.n_chunks - done_chunks)
        if n not in segments:
            segments[n] = jax.jit(segment_fn(chunks.run_chunk, n, logger))
        state, records = segments[n](state)
        jax.block_until_ready(state)
        check_finite(records, state.agent)
        done_chunks += n
        if ckpt_dir is not None:
            save_checkpoint(ckpt_dir, done_chunks, state)
    return state


def _run_host(run, n_chunks, done_chunks, spec, logger, ckpt_dir):
    """Host env: one Python-driven chunk at a time around the same jitted learner."""
    while done_chunks < n_chunks:
        record = run.run_chunk()
        logger(record)
        check_finite(jax.tree.map(lambda x: np.asarray(x)[None], record), run.state.agent)
        done_chunks += 1
        if ckpt_dir is not None and (
            done_chunks % spec.checkpoint_every == 0 or done_chunks == n_chunks
        ):
            save_checkpoint(ckpt_dir, done_chunks, run.state)
    return run.state


def execute(
    algo: Algorithm,
    spec: RunSpec,
    out: Path | None,
    progress: bool = True,
    resume: bool = False,
    wandb_project: str | None = None,
) -> tuple[dict[str, Any], Any]:
    """Train as ``spec`` says, writing into ``out``; returns ``(summary, final state)``."""
    seeds = list(range(spec.seed, spec.seed + spec.n_seeds))
    if algo.is_jax:
        chunks = algo.make_chunks(spec.steps)
        keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(seeds))
        state = jax.jit(jax.vmap(chunks.init))(keys)
        per_chunk, n_chunks = chunks.steps_per_chunk, chunks.n_chunks
    else:
        run = algo.host_run(spec.steps, seeds)
        state, per_chunk = run.state, run.steps_per_chunk
        n_chunks = n_chunks_for(spec.steps, per_chunk)
    done_chunks, wall_offset = 0, 0.0
    ckpt_dir = None if out is None else out / "checkpoints"
    if resume and ckpt_dir is not None and latest_step(ckpt_dir) is not None:
        done_chunks = latest_step(ckpt_dir)
        state = restore_checkpoint(ckpt_dir, state, done_chunks)
        truncate_jsonl(out / "metrics.jsonl", done_chunks * per_chunk)
        previous = read_jsonl(out / "metrics.jsonl")
        wall_offset = previous[-1]["wall_time_s"] if previous else 0.0
    logger = RunLogger(
        out,
        n_chunks * per_chunk,
        done_chunks * per_chunk,
        progress=progress,
        wandb_project=wandb_project,
        wall_time_offset=wall_offset,
    )
    try:
        if algo.is_jax:
            state = _run_jax(algo, spec, chunks, state, done_chunks, logger, ckpt_dir)
        else:
            run.state = state
            state = _run_host(run, n_chunks, done_chunks, spec, logger, ckpt_dir)
    except Diverged as err:
        if out is not None:
            diverged = {"agent": spec.agent, "env": spec.env, "status": "diverged",
                        "diverged": err.name, "step": err.step, "seeds": seeds}  # fmt: skip
            write_json_atomic(out / "summary.json", diverged)
        raise
    finally:
        logger.close()
    records = read_jsonl(out / "metrics.jsonl") if out is not None else logger.records
    final = np.asarray(records[-1]["eval_returns"], dtype=float)
    summary = {
        "agent": spec.agent,
        "env": spec.env,
        "status": "finished",
        "steps": n_chunks * per_chunk,
        "seeds": seeds,
        "final_eval_return": float(np.nanmean(final)),
        "final_eval_returns": final.tolist(),
        "wall_time_s": round(logger.wall_time(), 3),
        "env_steps_per_s": round(logger.steps_per_second() * spec.n_seeds, 1),
    }
    if out is not None:
        write_json_atomic(out / "summary.json", summary)
        plot_curve(out / "curve.png", records, f"{spec.agent} on {spec.env}")
    return summary, state
