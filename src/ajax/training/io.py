"""Crash-safe files of a run: atomic JSON, append-only JSONL, the learning-curve plot."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np


def _jsonable(value: Any) -> Any:
    """Plain Python for numpy/jax scalars and arrays; NaN and inf become None (strict JSON)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return _jsonable(np.asarray(value).tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json_atomic(path: str | Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(_jsonable(data), f, indent=2, allow_nan=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: str | Path) -> dict:
    with open(path) as f:
        return json.load(f)


def append_jsonl(path: str | Path, record: Mapping[str, Any]) -> None:
    """Append one JSON object as one line, flushed and synced (a kill loses at most that line)."""
    line = json.dumps(_jsonable(record), allow_nan=False) + "\n"
    with open(path, "a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path: str | Path) -> list[dict]:
    """Every complete line of a JSONL file (a torn last line from a kill is skipped)."""
    out = []
    if not Path(path).exists():
        return out
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def truncate_jsonl(path: str | Path, max_step: int) -> None:
    """Keep only the records with ``step <= max_step`` (resume from an older checkpoint)."""
    records = [r for r in read_jsonl(path) if r.get("step", 0) <= max_step]
    fd, tmp = tempfile.mkstemp(dir=Path(path).parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def plot_curve(path: str | Path, records: Iterable[Mapping[str, Any]], title: str) -> None:
    """Eval return against env steps, one line per seed and their mean, saved atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in records if r.get("eval_returns") is not None]
    fig, ax = plt.subplots(figsize=(6, 4))
    if rows:
        steps = np.array([r["step"] for r in rows])
        per_seed = np.array([r["eval_returns"] for r in rows], dtype=float)
        for s in range(per_seed.shape[1]):
            ax.plot(steps, per_seed[:, s], alpha=0.4, lw=1, label=f"seed {s}")
        ax.plot(steps, np.nanmean(per_seed, axis=1), color="k", lw=2, label="mean")
        ax.legend(fontsize=7)
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
