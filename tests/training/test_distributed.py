"""One run over several processes (issue 14, item 3): two CPU processes on 127.0.0.1 (gloo).

Two ``ajax train sac --n-seeds 2`` processes, one seed on each process's device, must write
what one process writes with the same seeds over two (forced CPU) devices, bitwise: both run
the same per-device program. The checkpoints process 0 wrote resume in one process, and a
one-process run's checkpoints resume in two. Bad input (a coordinator that does not answer,
a process that never joins, a process id out of range) is exit 2 and one line, within the
timeout, never a hang or an abort.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from ajax.cli import _config_from, _make_algo
from ajax.training.evaluation import restore_run

TINY = ["--env", "Pendulum-v1", "--steps", "200", "--n-seeds", "2", "--hidden", "16",
        "--batch-size", "32", "--learning-starts", "32", "--buffer-size", "256",
        "--eval-freq", "100", "--eval-episodes", "1", "--checkpoint-every", "1",
        "--no-progress"]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(devices: int = 1) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    # the suite's flags (conftest.py's LLVM -O1) without any device count, then this one's
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
    if devices > 1:
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    env["XLA_FLAGS"] = " ".join(flags)
    return env


def _ajax(args: list[str], devices: int = 1) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ajax", *args],
        env=_env(devices), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _together(args: list[str], processes: int = 2, timeout: int = 300) -> list[tuple]:
    """``ajax ARGS`` as ``processes`` processes of one run; (returncode, stdout, stderr) each."""
    flags = ["--coordinator", f"127.0.0.1:{_free_port()}", "--num-processes", str(processes)]
    procs = [_ajax([*args, *flags, "--process-id", str(i)]) for i in range(processes)]
    outputs = [p.communicate(timeout=timeout) for p in procs]
    return [(p.returncode, *o) for p, o in zip(procs, outputs, strict=True)]


def _one(args: list[str], devices: int = 1) -> None:
    proc = _ajax(args, devices)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]


def _evals(out: Path) -> list:
    return [
        json.loads(ln)["eval_returns"] for ln in (out / "metrics.jsonl").read_text().splitlines()
    ]


def _state(out: Path):
    return restore_run(out, _make_algo, _config_from).state


def _cut_newest(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    shutil.rmtree(dst / "checkpoints" / "2")


@pytest.mark.slow  # ~120 s on 2 cores: two processes and a reference run compile
def test_two_processes_train_two_seeds_as_one_process_does(tmp_path):
    many, one = tmp_path / "two-processes", tmp_path / "one-process"
    results = _together(["train", "sac", *TINY, "--out", str(many)])
    for code, _, err in results:
        assert code == 0, err[-3000:]
    assert "final eval return" in results[0][1]  # process 0 reports, the others do not
    assert "final eval return" not in results[1][1]
    _one(["train", "sac", *TINY, "--out", str(one), "--devices", "2"], devices=2)
    assert _evals(many) == _evals(one)
    for a, b in zip(jax.tree.leaves(_state(many)), jax.tree.leaves(_state(one)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert sorted(p.name for p in (many / "checkpoints").iterdir()) == ["1", "2", "MANIFEST.json"]

    # process 0's checkpoints resume in one process (one device: float rounding only)
    _cut_newest(many, tmp_path / "resume-in-one")
    _one(["resume", str(tmp_path / "resume-in-one")])
    np.testing.assert_allclose(_evals(tmp_path / "resume-in-one"), _evals(many), rtol=1e-4)


@pytest.mark.slow  # ~40 CPU s: two more compiled runs
def test_a_one_process_runs_checkpoints_resume_in_two_processes(tmp_path):
    one = tmp_path / "one-process"
    _one(["train", "sac", *TINY, "--out", str(one), "--devices", "2"], devices=2)
    _cut_newest(one, tmp_path / "resume-in-two")
    for code, _, err in _together(["resume", str(tmp_path / "resume-in-two")]):
        assert code == 0, err[-3000:]
    assert _evals(tmp_path / "resume-in-two") == _evals(one)


@pytest.mark.slow  # ~40 CPU s
def test_two_processes_split_one_runs_batch_as_one_process_with_two_devices(tmp_path):
    """``--parallel data`` over two processes (the update batch split, gradients all-reduced
    through gloo) writes bitwise what one process with two devices in that layout writes."""
    many, one = tmp_path / "two-processes", tmp_path / "one-process"
    args = ["train", "sac", *TINY, "--n-seeds", "1", "--parallel", "data"]
    for code, _, err in _together([*args, "--out", str(many)]):
        assert code == 0, err[-3000:]
    _one([*args, "--out", str(one), "--devices", "2"], devices=2)
    assert _evals(many) == _evals(one)
    for a, b in zip(jax.tree.leaves(_state(many)), jax.tree.leaves(_state(one)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _one_line_error(code: int, err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("ajax: error:")]
    assert code == 2 and len(lines) == 1, err[-2000:]
    return lines[0]


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--num-processes", "2", "--process-id", "1"],
         "did not answer within 3 s; start process 0 there first"),
        (["--num-processes", "2", "--process-id", "0"],
         "process(es) [1] did not join"),
        (["--num-processes", "2", "--process-id", "2"], "process_id"),
    ],
    ids=["no-coordinator", "missing-process", "bad-process-id"],
)  # fmt: skip
def test_processes_that_cannot_meet_exit_2_within_the_timeout(flags, expected, tmp_path):
    args = ["train", "sac", *TINY, "--out", str(tmp_path / "o"), "--coordinator-timeout", "3"]
    start = time.monotonic()
    proc = _ajax([*args, "--coordinator", f"127.0.0.1:{_free_port()}", *flags])
    _, err = proc.communicate(timeout=60)
    assert expected in _one_line_error(proc.returncode, err)
    assert time.monotonic() - start < 30
    assert not (tmp_path / "o").exists()


def test_coordinator_without_processes_is_refused(tmp_path):
    proc = _ajax(["train", "sac", *TINY, "--out", str(tmp_path / "o"), "--num-processes", "2"])
    _, err = proc.communicate(timeout=60)
    assert "coordinator" in _one_line_error(proc.returncode, err)
