"""Host-side logging of a run: progress bar, ``metrics.jsonl``, TensorBoard
(:mod:`ajax.training.tensorboard`), optional W&B."""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ajax.training.io import append_jsonl
from ajax.training.tensorboard import ScalarWriter


def _mean(x) -> float | None:
    arr = np.asarray(x, dtype=np.float64)
    if arr.size == 0 or np.all(np.isnan(arr)):
        return None
    return float(np.nanmean(arr))


class RunLogger:
    """Receives one record per chunk (arrays with a leading seed axis) as the jitted run goes.

    Writes one ``metrics.jsonl`` line per record with ``step``, ``eval_return`` (mean over
    seeds), ``eval_returns`` (per seed), ``train_return``, ``wall_time_s`` and the agent's
    metrics; mirrors scalars to TensorBoard (and W&B when ``wandb_project`` is set); drives a
    progress bar with steps, steps/s, last eval return and ETA.

    A write the OS refuses (a full disk) is kept in ``failure`` and stops every later write
    (the records reach the logger from inside the jitted run, which must not raise);
    :meth:`check` raises it, which the run does before each checkpoint and at its end.
    """

    def __init__(
        self,
        out_dir: str | Path | None,
        total_steps: int,
        start_step: int = 0,
        progress: bool = True,
        tensorboard: bool = True,
        wandb_project: str | None = None,
        wall_time_offset: float = 0.0,
    ):
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.total_steps = total_steps
        self.start_step = start_step
        self.step = start_step
        self.t0 = time.time()
        self.wall_offset = wall_time_offset
        self.records: list[dict] = []
        self._tb = None
        self._wandb = None
        self.failure: OSError | None = None
        if self.out_dir is not None and tensorboard:
            with self._writing():
                self._tb = ScalarWriter(self.out_dir / "tensorboard")
        if wandb_project is not None:
            import wandb  # optional dependency: only imported when asked for

            self._wandb = wandb.init(project=wandb_project, dir=str(self.out_dir or "."))
        self._bar = None
        if progress:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total_steps,
                initial=start_step,
                unit="step",
                dynamic_ncols=True,
                smoothing=0.3,
            )

    def wall_time(self) -> float:
        return self.wall_offset + time.time() - self.t0

    def __call__(self, record: dict[str, Any]) -> None:
        step = int(np.max(np.asarray(record["step"])))
        flat: dict[str, Any] = {
            "step": step,
            "eval_return": _mean(record["eval_return"]),
            "eval_returns": [
                None if math.isnan(v) else v
                for v in np.atleast_1d(np.asarray(record["eval_return"], dtype=float)).tolist()
            ],
            "train_return": _mean(record["train_return"]),
            "wall_time_s": round(self.wall_time(), 3),
        }
        for k, v in record.items():
            if k not in ("step", "eval_return", "train_return"):
                flat[k] = _mean(v)
        self.records.append(flat)
        if self.out_dir is not None and self.failure is None:
            with self._writing():
                append_jsonl(self.out_dir / "metrics.jsonl", flat)
        if self._tb is not None and self.failure is None:
            with self._writing():
                self._tb.add_scalars({k: v for k, v in flat.items() if isinstance(v, float)}, step)
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in flat.items() if isinstance(v, float)}, step=step)
        if self._bar is not None:
            self._bar.update(min(step, self.total_steps) - self._bar.n)
            ev = flat["eval_return"]
            self._bar.set_postfix_str(f"eval {ev:.1f}" if ev is not None else "eval n/a")
        self.step = step

    @contextlib.contextmanager
    def _writing(self):
        """Keep the first :class:`OSError` of a write in ``failure`` instead of raising it."""
        try:
            yield
        except OSError as err:
            self.failure = self.failure or err

    def check(self) -> None:
        """Raise the first write the OS refused, if any."""
        if self.failure is not None:
            raise self.failure

    def steps_per_second(self) -> float:
        elapsed = time.time() - self.t0
        return (self.step - self.start_step) / elapsed if elapsed > 0 else 0.0

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._wandb is not None:
            self._wandb.finish()
