"""A full disk (issue 39): the run stops with one ``ajax: error:`` line naming the path and the
cause, exit 4, no half-written checkpoint and no torn metrics line, and ``ajax resume``
finishes once space is freed; ``ajax check`` says "needs care", with the reason, for a
leftover temporary checkpoint, a diverged run and a run without checkpoints.

The full disk is a real tmpfs where the test may mount one (root), and otherwise a write that
fails with ``ENOSPC`` where the run's own writes reach the OS (``ajax.training.io``'s
``os.write``; orbax's ``CheckpointManager.save``, raising what tensorstore raises)."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest

from ajax.agents.sac import SACConfig
from ajax.cli import main
from ajax.failures import describe, from_orbax
from ajax.training import io, run_dir
from ajax.training import run as run_lib
from ajax.training.check import check_run
from ajax.training.checkpoint import check_steps, save_checkpoint, steps_on_disk, temporaries
from ajax.training.io import append_jsonl, write_json_atomic
from ajax.training.run_dir import RunSpec, identity, prepare_run_dir

# A tiny SAC run: 4 chunks of 50 env steps, a checkpoint after each (the integrity tests' run).
TINY = [
    "--env", "Pendulum-v1", "--steps", "200", "--hidden", "16", "--batch-size", "32",
    "--learning-starts", "32", "--buffer-size", "256", "--eval-freq", "50",
    "--eval-episodes", "1", "--checkpoint-every", "1", "--no-progress",
]  # fmt: skip
NO_SPACE = "no space left on device"


def _train(out: Path) -> list[str]:
    return ["train", "sac", *TINY, "--out", str(out)]


def _one_error_line(capfd, argv, code=4) -> str:
    """Run the CLI: its exit status is ``code`` and stderr (every fd-level byte, orbax's and
    tensorstore's threads included) is one ``ajax: error:`` line, without a traceback."""
    assert main(argv) == code
    err = capfd.readouterr().err
    lines = [x for x in err.strip().splitlines() if "%|" not in x]  # resume's progress bar
    assert len(lines) == 1 and lines[0].startswith("ajax: error: "), err
    return lines[0]


def _steps(metrics: Path) -> list[int]:
    """The steps of ``metrics.jsonl``, every line whole (a torn line fails here)."""
    text = metrics.read_text()
    assert text == "" or text.endswith("\n")
    return [json.loads(line)["step"] for line in text.splitlines()]


class _DiskFillsAt:
    """``ajax.training.io``'s ``os`` with a disk that fills up at its ``at``-th write: that
    write is cut short (half its bytes land), every later one fails with ENOSPC."""

    def __init__(self, at: int):
        self.calls, self.at = 0, at

    def __getattr__(self, name):
        return getattr(os, name)

    def write(self, fd, data):
        self.calls += 1
        if self.calls < self.at:
            return os.write(fd, data)
        if self.calls == self.at:
            return os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _orbax_full_at(step: int):
    """``CheckpointManager.save`` failing at ``step`` as on a full disk: a half-written
    temporary, and tensorstore's error text."""
    real = ocp.CheckpointManager.save

    def save(self, s, *args, **kwargs):
        if s != step:
            return real(self, s, *args, **kwargs)
        tmp = Path(self.directory) / f"{s}.orbax-checkpoint-tmp" / "default.orbax-checkpoint-tmp"
        tmp.mkdir(parents=True)
        (tmp / "d").write_bytes(b"\0" * 1000)
        raise ValueError(
            f'RESOURCE_EXHAUSTED: Error writing "agent/0" in OCDBT database at local file "{tmp}/"'
            ": Failed to write 540423 bytes to file 17: No space left on device "
            "[os_error_code='28']"
        )

    return save


def test_a_full_disk_stops_the_run_with_one_line_and_resume_finishes(tmp_path, capfd, monkeypatch):
    out = tmp_path / "run"
    ckpt, metrics = out / "checkpoints", out / "metrics.jsonl"
    # writes: the TensorBoard file's header, then per chunk a metrics line and its scalars;
    # the 4th (chunk 2's metrics line) fills the disk halfway through
    monkeypatch.setattr(io, "os", _DiskFillsAt(4))
    line = _one_error_line(capfd, _train(out))
    assert f"cannot write {metrics}: {NO_SPACE}" in line
    assert f"its last good checkpoint ({ckpt / '1'}) is kept" in line
    assert f"'ajax resume {out}' continues it" in line
    assert _steps(metrics) == [50] and steps_on_disk(ckpt) == [1]  # no checkpoint past them
    monkeypatch.undo()
    assert main(["check", str(out)]) == 0  # the last good checkpoint verifies
    assert main(["resume", str(out)]) == 0  # space freed: the run finishes
    assert _steps(metrics) == [50, 100, 150, 200] and steps_on_disk(ckpt) == [3, 4]
    assert json.loads((out / "summary.json").read_text())["status"] == "finished"


def test_a_checkpoint_the_disk_cannot_hold_leaves_no_temporary(tmp_path, monkeypatch):
    ckpt = tmp_path / "checkpoints"
    save_checkpoint(ckpt, 1, {"w": jnp.ones(3)})
    monkeypatch.setattr(ocp.CheckpointManager, "save", _orbax_full_at(2))
    with pytest.raises(OSError) as err:
        save_checkpoint(ckpt, 2, {"w": jnp.ones(3)})
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(ckpt / "2")
    assert temporaries(ckpt) == [] and [s.state for s in check_steps(ckpt)] == ["ok"]


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs at ``tmp_path/disk``, unmounted afterwards; skipped where none can be
    mounted (not root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root: the ENOSPC test above stands in")
    mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "ajax-test", str(disk)]
    if subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here: the ENOSPC test above stands in")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.mark.slow  # 26 s; the ENOSPC test above runs the same path in the default run
def test_a_real_full_disk_during_a_checkpoint(small_disk, capfd, monkeypatch):
    """orbax writing onto a full tmpfs: its writer threads fail, and what they print (absl
    errors, "Event loop is closed" tracebacks) stays out of the one line."""
    out = small_disk / "run"
    real_save = run_lib.save_checkpoint

    def save_then_fill(directory, step, state, **kwargs):
        real_save(directory, step, state, **kwargs)
        if step == 1:  # leave room for the next metrics line, not for a checkpoint
            free = shutil.disk_usage(small_disk).free
            (small_disk / "filler").write_bytes(b"\0" * (free - 8192))

    monkeypatch.setattr(run_lib, "save_checkpoint", save_then_fill)
    line = _one_error_line(capfd, _train(out))
    assert f"cannot write {out / 'checkpoints' / '2'}: {NO_SPACE}" in line
    assert temporaries(out / "checkpoints") == [] and steps_on_disk(out / "checkpoints") == [1]
    assert _steps(out / "metrics.jsonl") in ([50], [50, 100])
    monkeypatch.undo()
    (small_disk / "filler").unlink()
    assert main(["resume", str(out)]) == 0
    assert _steps(out / "metrics.jsonl") == [50, 100, 150, 200]


def test_appended_lines_are_whole_or_absent(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, {"step": 1})
    monkeypatch.setattr(io, "os", _DiskFillsAt(1))
    with pytest.raises(OSError, match="No space left") as err:
        append_jsonl(path, {"step": 2, "eval_return": 1.5})
    assert err.value.filename == str(path)  # a write names no file: the run's report needs it
    assert path.read_text() == '{"step": 1}\n'


def test_tensorboard_scalars_are_whole_tfrecords_of_events(tmp_path):
    """:class:`ScalarWriter`'s file, read back as TensorBoard reads it (length, CRC, event)."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import masked_crc32c

    from ajax.training.tensorboard import ScalarWriter

    writer = ScalarWriter(tmp_path / "tensorboard")
    writer.add_scalars({"eval_return": -1.5, "loss/critic": 0.25}, step=100)
    data, events = writer.path.read_bytes(), []
    while data:
        (n,) = struct.unpack("Q", data[:8])
        assert struct.unpack("I", data[8:12])[0] == masked_crc32c(data[:8])
        assert struct.unpack("I", data[12 + n : 16 + n])[0] == masked_crc32c(data[12 : 12 + n])
        events.append(Event.FromString(data[12 : 12 + n]))
        data = data[16 + n :]
    assert events[0].file_version == "brain.Event:2" and events[1].step == 100
    assert {v.tag: v.simple_value for v in events[1].summary.value} == {
        "eval_return": -1.5, "loss/critic": 0.25}  # fmt: skip


def _fills_the_disk(*args, **kwargs):
    """A writer that gets a few bytes out, then meets a full disk (naming no file, as a
    write to an open file does)."""
    target = args[1] if len(args) > 1 else args[0]
    if hasattr(target, "write"):
        target.write(b"GIF8")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_gif_or_a_dataset_on_a_full_disk_names_its_file_and_leaves_no_temporary(
    tmp_path, monkeypatch
):
    from PIL import Image

    from ajax.buffers.dataset import Episodes, TaskMeta, write_task
    from ajax.training.video import write_gif

    monkeypatch.setattr(Image.Image, "save", _fills_the_disk)
    with pytest.raises(OSError, match="No space left") as err:
        write_gif(tmp_path / "eval.gif", np.zeros((2, 8, 8, 3), np.uint8))
    assert err.value.filename == str(tmp_path / "eval.gif") and list(tmp_path.iterdir()) == []

    monkeypatch.setattr(np, "savez", _fills_the_disk)
    eps = Episodes(obs=np.zeros((1, 3, 3), np.float32), action=np.zeros((1, 2, 1), np.float32),
                   reward=np.zeros((1, 2), np.float32), terminated=np.zeros((1, 2), bool),
                   length=np.full((1,), 2, np.int32))  # fmt: skip
    with pytest.raises(OSError, match="No space left") as err:
        write_task(tmp_path / "ds", TaskMeta("pend", "Pendulum-v1", 3, 1, 2, 1), eps)
    assert err.value.filename == str(tmp_path / "ds" / "pend.npz")
    assert list((tmp_path / "ds").iterdir()) == []


def test_os_errors_read_as_one_line_with_the_cause():
    full = OSError(errno.ENOSPC, "No space left on device", "/data/run/x")
    fix = "free space on that disk and run the command again"
    assert describe(full) == f"/data/run/x: {NO_SPACE}; {fix}"
    read_only = OSError(errno.EROFS, "Read-only file system", "/data/run/x")
    assert "make it writable" in describe(read_only)
    wrapped = ValueError("RESOURCE_EXHAUSTED: ... No space left on device [os_error_code='28']")
    assert from_orbax(wrapped, "/c/3").errno == errno.ENOSPC
    assert from_orbax(ValueError("a bug"), "/c/3") is None  # not an OS error: raised as it is


# ----------------------------------------------------------------------------- ajax check

CONFIG = SACConfig(hidden=16, batch_size=32, learning_starts=32, buffer_size=256, eval_freq=50)
SPEC = RunSpec(agent="sac", env="Pendulum-v1", steps=200, config=dataclasses.asdict(CONFIG))


def _run_dir(tmp_path, checkpoints=(1,)) -> Path:
    """A run directory as a run leaves it (no training: ``ajax check`` only reads)."""
    out = tmp_path / "run"
    prepare_run_dir(out, SPEC, overwrite=False)
    for step in checkpoints:
        save_checkpoint(out / "checkpoints", step, {"w": jnp.ones(3)}, identity=identity(SPEC))
        append_jsonl(out / "metrics.jsonl", {"step": 50 * step})
    return out


def _care(out: Path) -> list[str]:
    lines, good = check_run(out)
    reasons = [x.removeprefix("needs care: ") for x in lines if x.startswith("needs care: ")]
    verdict = "verdict: needs care" if reasons else "verdict: good"
    assert good == (not reasons) and lines[-1].startswith(verdict)
    return reasons


def test_check_is_good_for_a_run_with_a_verified_checkpoint(tmp_path):
    assert _care(_run_dir(tmp_path)) == []


def test_check_names_a_leftover_temporary_checkpoint(tmp_path):
    out = _run_dir(tmp_path)
    (out / "checkpoints" / "2.orbax-checkpoint-tmp" / "default").mkdir(parents=True)
    (reason,) = _care(out)
    assert "2.orbax-checkpoint-tmp is a temporary checkpoint" in reason
    assert "'ajax resume' removes it" in reason


def test_check_names_a_diverged_run(tmp_path):
    out = _run_dir(tmp_path)
    write_json_atomic(out / "summary.json", {"status": "diverged", "diverged": "loss/critic",
                                             "step": 100, "checkpoint": 1})  # fmt: skip
    (reason,) = _care(out)
    assert reason.startswith("it diverged: loss/critic became non-finite by step 100")


def test_check_names_a_run_without_checkpoints(tmp_path):
    (reason,) = _care(_run_dir(tmp_path, checkpoints=()))
    assert reason.startswith("it has no checkpoint")
    assert main(["check", str(tmp_path / "run")]) == 1


def test_a_full_disk_while_creating_the_run_directory_is_exit_4(tmp_path, capfd, monkeypatch):
    """run.json cannot be written: the machine failed (exit 4), not the --out flag (exit 2)."""
    out = tmp_path / "run"

    def full(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path / "run.json"))

    monkeypatch.setattr(run_dir, "prepare_run_dir", full)
    line = _one_error_line(capfd, _train(out))
    assert f"{out / 'run.json'}: {NO_SPACE}" in line, line
