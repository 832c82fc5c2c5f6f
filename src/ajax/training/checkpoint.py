"""Atomic, verified checkpoints of a whole training state (agent, env, replay, keys) with orbax.

orbax writes each step into a temporary directory and renames it when complete, so a crash or a
kill during a save leaves the previous checkpoint intact. After orbax has finished, a manifest
(``MANIFEST.json``, written atomically) records a SHA-256 over every file of the step and the
identity of the run that made it (:func:`save_checkpoint`). Restoring verifies the digest;
a damaged, unreadable or unrecorded step is moved aside into ``checkpoints.damaged/`` (never
deleted) and the newest good one is used (:func:`restore_newest_good`).

A save that fails (a full disk) removes its half-written temporary and raises the OS's error,
once, as an :class:`OSError` naming the step (:func:`~ajax.failures.from_orbax`);
orbax's own logging of it is silenced.

Keys are stored as raw uint32 data. orbax refuses zero-size arrays (MJX states hold some, e.g.
``data.act`` of a model without actuator activations), so those are stored as one placeholder
element and restored from the template, which already holds their (empty) value.

A replay keeping its rows in host memory (:mod:`ajax.buffers.host_store`) is saved whole: the
checkpoint holds ``{"state": ..., "host_replay": [rings of each store]}``, and a restore loads
the rings into the template's stores, which the restored state then refers to.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import logging
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from ajax.buffers.host_store import host_stores
from ajax.failures import from_orbax
from ajax.training.io import read_json, write_json_atomic

MANIFEST = "MANIFEST.json"
DAMAGED = "checkpoints.damaged"
TEMPORARY = ".orbax-checkpoint-tmp"  # orbax's suffix for a step it is still writing


@dataclasses.dataclass(frozen=True)
class CheckpointStatus:
    """One step directory as found on disk: ``state`` is "ok", "damaged" or "unverified"."""

    step: int
    state: str
    detail: str
    bytes: int


def _manager(directory: str | Path, max_to_keep: int | None = 2) -> ocp.CheckpointManager:
    # Each process manages its own (host-array) checkpoints alone: process 0 saves, every
    # process may restore; no barrier waits for processes that never call in.
    me = jax.process_index()
    options = ocp.CheckpointManagerOptions(
        max_to_keep=max_to_keep,
        create=False,
        enable_async_checkpointing=False,
        multiprocessing_options=ocp.options.MultiprocessingOptions(
            primary_host=me, active_processes={me}
        ),
    )
    return ocp.CheckpointManager(Path(directory).absolute(), options=options)


def _storable(x) -> np.ndarray:
    x = np.asarray(x)
    return np.zeros((1,), x.dtype) if x.size == 0 else x


def _with_host_rows(tree: Any, rows: Callable) -> Any:
    """``tree`` alone, or beside ``rows(store)`` of each host store it refers to."""
    stores = host_stores(tree)
    return tree if not stores else {"state": tree, "host_replay": [rows(s) for s in stores]}


def digest(step_dir: Path) -> dict:
    """SHA-256 over every file of a step directory (relative path and bytes, sorted)."""
    h, total, files = hashlib.sha256(), 0, 0
    for path in sorted(p for p in Path(step_dir).rglob("*") if p.is_file()):
        h.update(str(path.relative_to(step_dir)).encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
                total += len(block)
        files += 1
    return {"sha256": h.hexdigest(), "bytes": total, "files": files}


def load_manifest(directory: str | Path) -> tuple[dict | None, str | None]:
    """``(manifest, problem)``: the manifest (``{"identity": ..., "steps": {step: digest}}``)
    and None; ``(None, None)`` when there is none; ``(None, why)`` when it is invalid."""
    path = Path(directory) / MANIFEST
    if not path.exists():
        return None, None
    try:
        manifest = read_json(path)
    except ValueError as err:
        return None, f"not valid JSON ({str(err).splitlines()[0][:120]})"
    except OSError as err:
        return None, f"unreadable ({err.strerror or err})"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("steps"), dict):
        return None, "not a manifest (no 'steps' object)"
    steps = manifest["steps"].values()
    if not all(isinstance(d, dict) and {"sha256", "bytes"} <= set(d) for d in steps):
        return None, "not a manifest (a step without its 'sha256' and 'bytes')"
    return manifest, None


def read_manifest(directory: str | Path) -> dict | None:
    """The manifest, or None if absent or invalid (then no step can be verified)."""
    return load_manifest(directory)[0]


def temporaries(directory: str | Path, step: int | None = None) -> list[Path]:
    """orbax's unfinished step directories (``<step>.orbax-checkpoint-tmp*``, of ``step`` or
    of any), left by a save that was killed or failed."""
    directory = Path(directory)
    pattern = f"{'*' if step is None else step}{TEMPORARY}*"
    return sorted(directory.glob(pattern)) if directory.is_dir() else []


def remove_temporaries(directory: str | Path, step: int | None = None) -> None:
    """Remove :func:`temporaries`: half-written data, never a checkpoint."""
    for path in temporaries(directory, step):
        shutil.rmtree(path, ignore_errors=True)


def _files(paths: list[Path]) -> set[tuple[str, int]]:
    return {(str(f), f.stat().st_size) for p in paths for f in p.rglob("*") if f.is_file()}


def _discard(directory: Path, step: int, poll_s: float = 0.2, limit_s: float = 10.0) -> None:
    """Remove a failed save's temporary once nothing writes into it any more: tensorstore's
    writes outlive the failure orbax raised (they would make the folder again). Their tasks
    are collected here, where orbax's logging is quiet, not later at random."""
    deadline, seen = time.monotonic() + limit_s, None
    while time.monotonic() < deadline and seen != (now := _files(temporaries(directory, step))):
        seen = now
        time.sleep(poll_s)
    remove_temporaries(directory, step)
    gc.collect()  # "Task exception was never retrieved", logged when the tasks go


def _drop_closed_loop() -> None:
    """Keep ``RuntimeError: Event loop is closed`` out of ``sys.unraisablehook``: each write of a
    failed save that ends after orbax closed its event loop reports it, from a tensorstore
    thread. Every other unraisable error reaches the hook as before."""
    hook = sys.unraisablehook
    if getattr(hook, "drops_closed_loop", False):
        return

    def unraisablehook(unraisable):
        value = unraisable.exc_value
        if not (isinstance(value, RuntimeError) and str(value) == "Event loop is closed"):
            hook(unraisable)

    unraisablehook.drops_closed_loop = True
    sys.unraisablehook = unraisablehook


def steps_on_disk(directory: str | Path) -> list[int]:
    """Finalised step directories, oldest first (orbax's temporaries are not all digits)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit())


def save_checkpoint(
    directory: str | Path,
    step: int,
    state: Any,
    max_to_keep: int = 2,
    identity: dict | None = None,
) -> None:
    """Save ``state`` (a pytree of arrays) as checkpoint ``step``, then record its digest and
    ``identity`` (what made it) in the manifest; returns when both are on disk."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)  # orbax creates none with active_processes
    remove_temporaries(directory, step)  # a killed or failed save's: never a checkpoint
    host = _with_host_rows(jax.tree.map(_storable, jax.device_get(state)), lambda s: s.arrays())
    _drop_closed_loop()
    with _quiet_orbax():
        try:
            with _manager(directory, max_to_keep) as mngr:
                mngr.save(step, args=ocp.args.StandardSave(host), force=True)
                mngr.wait_until_finished()
        except Exception as err:  # noqa: BLE001 (orbax wraps the OS's errors in its own)
            _discard(directory, step)
            os_error = from_orbax(err, directory / str(step))
            if os_error is None:
                raise
            raise os_error from err
    record(directory, step, identity)


def record(directory: str | Path, step: int, identity: dict | None = None) -> None:
    """Record step ``step``'s digest in the manifest with ``identity`` (default: the one it
    holds), keeping the digests it holds of the other steps still on disk."""
    directory = Path(directory)
    old = read_manifest(directory) or {"steps": {}}
    kept = {
        str(s): old["steps"][str(s)] for s in steps_on_disk(directory) if str(s) in old["steps"]
    }
    kept[str(step)] = digest(directory / str(step))
    manifest = {"format": 1, "identity": identity or old.get("identity"), "steps": kept}
    write_json_atomic(directory / MANIFEST, manifest)


def identity_of(directory: str | Path) -> dict | None:
    """What the run's checkpoints were made with (agent, env, seeds, config, version)."""
    manifest = read_manifest(directory)
    return None if manifest is None else manifest.get("identity")


def _statuses(directory: str | Path, manifest: dict | None,
              problem: str | None = None) -> Iterator[CheckpointStatus]:  # fmt: skip
    """The verification state of each step on disk, newest first, hashed one at a time (a
    restore stops hashing at the first good step); ``problem`` is why there is no manifest."""
    for step in reversed(steps_on_disk(directory)):
        found = digest(Path(directory) / str(step))
        if manifest is None:
            state = "unverified"
            detail = f"{MANIFEST} is {problem}" if problem else f"no {MANIFEST}"
        elif str(step) not in manifest["steps"]:
            state, detail = "unverified", "not in the manifest (the save did not finish)"
        elif manifest["steps"][str(step)]["sha256"] != found["sha256"]:
            want = manifest["steps"][str(step)]
            state = "damaged"
            detail = f"checksum mismatch ({found['bytes']} bytes on disk, {want['bytes']} written)"
        else:
            state, detail = "ok", "checksum verified"
        yield CheckpointStatus(step, state, detail, found["bytes"])


def check_steps(directory: str | Path) -> list[CheckpointStatus]:
    """The verification state of every step on disk, newest first (``ajax check``)."""
    return list(_statuses(directory, *load_manifest(directory)))


def _aside(directory: Path, name: str) -> Path:
    """A new folder ``../checkpoints.damaged/<name>[.n]`` beside the checkpoints."""
    dest_root = directory.parent / DAMAGED
    dest_root.mkdir(exist_ok=True)
    n = 0
    while (dest := dest_root / (name if n == 0 else f"{name}.{n}")).exists():
        n += 1
    return dest


def move_aside(directory: str | Path, step: int, reason: str) -> Path:
    """Move step ``step`` into ``../checkpoints.damaged/`` with a note of why; never deletes."""
    directory = Path(directory)
    dest = _aside(directory, str(step))
    shutil.move(str(directory / str(step)), dest)
    (dest / "WHY.txt").write_text(reason + "\n")
    return dest


def move_manifest_aside(directory: str | Path, reason: str) -> Path:
    """Move an invalid manifest into ``../checkpoints.damaged/MANIFEST.json/`` with a note of
    why, as :func:`move_aside` does a step; the next save writes a new one."""
    directory = Path(directory)
    dest = _aside(directory, MANIFEST)
    dest.mkdir()
    shutil.move(str(directory / MANIFEST), dest / MANIFEST)
    (dest / "WHY.txt").write_text(reason + "\n")
    return dest


def latest_step(directory: str | Path) -> int | None:
    """The newest finalised checkpoint's step on disk (verified or not), or None."""
    steps = steps_on_disk(directory)
    return steps[-1] if steps else None


@contextlib.contextmanager
def _quiet_orbax():
    """A failed save or restore makes orbax and absl log many tracebacks; the caller reports
    one line."""
    loggers = [logging.getLogger(name) for name in ("absl", "orbax", "asyncio")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def restore_checkpoint(directory: str | Path, template: Any, step: int | None = None) -> Any:
    """Restore checkpoint ``step`` (default: the newest) into the structure of ``template``,
    without verifying it (see :func:`restore_newest_good`)."""
    step = latest_step(directory) if step is None else step
    if step is None:
        raise FileNotFoundError(f"no checkpoint in {directory}")
    host = jax.tree.map(_storable, jax.device_get(template))
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, host)
    stores = host_stores(template)
    rings = lambda s: jax.tree.map(ocp.utils.to_shape_dtype_struct, s.arrays())
    abstract = _with_host_rows(abstract, rings)
    with _quiet_orbax(), _manager(directory) as mngr:
        restored = mngr.restore(step, args=ocp.args.StandardRestore(abstract))
    if stores:
        for store, rings in zip(stores, restored["host_replay"], strict=True):
            store.load(rings)
        restored = restored["state"]
    return jax.tree.map(
        lambda t, r: jax.numpy.asarray(t if t.size == 0 else r, dtype=t.dtype), template, restored
    )


def restore_newest_good(
    directory: str | Path,
    template: Any,
    move_damaged: bool = True,
    warn: Callable[[str], None] = print,
) -> tuple[int | None, Any]:
    """The newest checkpoint that verifies and restores, as ``(step, state)``; ``(None,
    template)`` when there is none. Each damaged, unrecorded or unreadable newer step is reported
    through ``warn`` and moved aside (``move_damaged``; ``ajax eval`` only skips it).

    Without any manifest (runs from before manifests existed) the newest step is restored
    unverified and a failure is raised, not moved aside: nothing says the data is at fault.
    An invalid manifest is damage: it is named and moved aside (``move_damaged``), and the
    newest step that restores is used, unverified (a step that does not is moved aside).
    """
    manifest, invalid = load_manifest(directory)
    if manifest is None and invalid is None and latest_step(directory) is not None:
        warn(f"note: {Path(directory) / MANIFEST} is missing; restoring unverified checkpoints")
        step = latest_step(directory)
        return step, restore_checkpoint(directory, template, step)
    if invalid is not None:
        why = f"{MANIFEST} is {invalid}"
        where = f"; moved to {move_manifest_aside(directory, why)}" if move_damaged else ""
        warn(f"warning: {Path(directory) / MANIFEST} is {invalid}{where}; restoring the newest "
             "checkpoint that reads, unverified")  # fmt: skip
    for status in _statuses(directory, manifest, invalid):
        trusted = status.state == "ok" or invalid is not None
        problem = None if trusted else f"{status.state}: {status.detail}"
        if problem is None:
            try:
                return status.step, restore_checkpoint(directory, template, status.step)
            except Exception as err:  # noqa: BLE001 (any unreadable file is damage)
                problem = f"unreadable: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
        where = ""
        if move_damaged:
            where = f"; moved to {move_aside(directory, status.step, problem)}"
        warn(f"warning: checkpoint {status.step} is {problem}{where}; trying an older one")
    return None, template
