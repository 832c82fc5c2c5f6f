"""Crash-safe files of a run: atomic JSON, append-only JSONL, the learning-curve plot."""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ajax.failures import naming


def jsonable(value: Any) -> Any:
    """Plain Python for numpy/jax scalars and arrays; NaN and inf become None (strict JSON)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return jsonable(np.asarray(value).tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _open_temp(path: Path) -> tuple[int, str]:
    """A temporary file beside ``path`` with the mode a plain ``open`` would give (mkstemp's
    0600 would leave summary.json and run.json private while the rest of the run is not)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~_umask())
    return fd, tmp


def _replace_atomic(path: Path, write) -> None:
    """``write(f)`` into a temporary file beside ``path``, synced, then renamed over it; the
    temporary is removed if anything fails (the error names ``path``)."""
    fd, tmp = _open_temp(path)
    try:
        with naming(path), os.fdopen(fd, "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_atomic(path, lambda f: json.dump(jsonable(data), f, indent=2, allow_nan=False))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_atomic(path, lambda f: f.write(text))


def read_json(path: str | Path) -> dict:
    with open(path) as f:
        return json.load(f)


def append_whole(path: str | Path, data: bytes) -> None:
    """Append ``data`` in one ``write``, synced; a write the OS refuses or cuts short (a full
    disk) is cut back off, so the file never ends with a part of ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(fd).st_size
        with naming(path):
            try:
                if os.write(fd, data) != len(data):  # a short write: the disk filled up
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, size)
                raise
    finally:
        os.close(fd)


def append_jsonl(path: str | Path, record: Mapping[str, Any]) -> None:
    """Append one JSON object as one whole line (:func:`append_whole`: a kill loses at most
    that line, a full disk none of it)."""
    append_whole(path, (json.dumps(jsonable(record), allow_nan=False) + "\n").encode())


def _is_record(value: Any) -> bool:
    """A metrics line: a JSON object with an integer ``step``."""
    step = value.get("step") if isinstance(value, dict) else None
    return isinstance(step, int) and not isinstance(step, bool)


def split_jsonl(path: Path) -> tuple[list[dict], list[str]]:
    records, malformed = [], []
    if not path.exists():
        return records, malformed
    with open(path) as f:
        for line in f:
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                value = None
            if _is_record(value):
                records.append(value)
            elif line.strip():
                malformed.append(line if line.endswith("\n") else line + "\n")
    return records, malformed


def read_jsonl(path: str | Path) -> list[dict]:
    """Every well-formed record of a metrics file (a torn last line from a kill, or any line
    that is not an object with an integer ``step``, is skipped)."""
    return split_jsonl(Path(path))[0]


def truncate_jsonl(path: str | Path, max_step: int) -> list[dict]:
    """Keep only the records with ``step <= max_step`` (resume from a checkpoint) and return
    them. Malformed lines are appended to ``<name>.malformed`` beside it, not dropped; records
    after ``max_step`` are dropped because the resumed run writes them again."""
    path = Path(path)
    records, malformed = split_jsonl(path)
    records = [r for r in records if r["step"] <= max_step]
    if malformed:
        kept = path.with_name(path.name + ".malformed")
        with naming(kept), open(kept, "a") as f:
            f.writelines(malformed)
            f.flush()
            os.fsync(f.fileno())
    if not path.exists():
        return records
    _replace_atomic(path, lambda f: f.writelines(json.dumps(r) + "\n" for r in records))
    return records


def plot_curve(path: str | Path, records: Iterable[Mapping[str, Any]], title: str) -> None:
    """Eval return against env steps, one line per seed and their mean, saved atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in records if isinstance(r.get("eval_returns"), list)]
    rows = [r for r in rows if len(r["eval_returns"]) == len(rows[-1]["eval_returns"])]
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
    save_figure(fig, Path(path), dpi=100)


def save_figure(fig, path: Path, dpi: int = 100) -> None:
    """Save a matplotlib figure to ``path`` atomically (a temporary PNG beside it, renamed over
    it; removed if anything fails) and close it."""
    import matplotlib.pyplot as plt

    tmp = path.with_name(f".{path.stem}.tmp.png")
    try:
        with naming(path):
            fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
