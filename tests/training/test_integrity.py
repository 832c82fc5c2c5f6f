"""Verified checkpoints with fallback, resume that checks what it resumes, metrics repair,
file modes and ``ajax check`` (issue 15, items 3 and 4)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.sac import SAC, SACConfig
from ajax.cli import main
from ajax.training.checkpoint import (
    DAMAGED,
    MANIFEST,
    check_steps,
    restore_newest_good,
    save_checkpoint,
)
from ajax.training.io import read_jsonl
from ajax.training.run import execute
from ajax.training.run_dir import RunSpec, prepare_run_dir

CONFIG = SACConfig(
    hidden=16, batch_size=32, learning_starts=32, buffer_size=256, eval_freq=50, eval_episodes=1
)
SPEC = RunSpec(agent="sac", env="Pendulum-v1", steps=200, checkpoint_every=1,
               config=dataclasses.asdict(CONFIG))  # fmt: skip


def _largest_file(step_dir):
    return max((p for p in step_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


DAMAGE = {
    "8-bytes-overwritten": lambda d: _overwrite(_largest_file(d), 8),
    "data-file-truncated": lambda d: _truncate(_largest_file(d)),
    "metadata-truncated": lambda d: _truncate(d / "default" / "_METADATA"),
    "default-removed": lambda d: shutil.rmtree(d / "default"),
}


def _overwrite(path, n):
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + n] = bytes((b + 1) % 256 for b in data[mid : mid + n])
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _tree(value):
    return {"w": jnp.full((64, 64), value, jnp.float32), "step": jnp.asarray(int(value))}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_newest_checkpoint_is_moved_aside_and_the_previous_restored(tmp_path, kind):
    ckpt = tmp_path / "checkpoints"
    for step in (1, 2):
        save_checkpoint(ckpt, step, _tree(float(step)), identity={"run": "x"})
    assert [s.state for s in check_steps(ckpt)] == ["ok", "ok"]
    DAMAGE[kind](ckpt / "2")
    assert check_steps(ckpt)[0].state == "damaged"
    messages = []
    step, state = restore_newest_good(ckpt, _tree(0.0), warn=messages.append)
    assert step == 1 and float(state["w"][0, 0]) == 1.0
    assert len(messages) == 1 and "checkpoint 2 is damaged: checksum mismatch" in messages[0]
    moved = tmp_path / DAMAGED / "2"
    assert moved.is_dir() and "checksum mismatch" in (moved / "WHY.txt").read_text()
    assert [s.step for s in check_steps(ckpt)] == [1]


def test_unreadable_or_unrecorded_steps_fall_back(tmp_path):
    """A step whose digest matches but orbax cannot read, and a step the manifest never
    recorded (killed between orbax's rename and the manifest write), are both moved aside."""
    ckpt = tmp_path / "checkpoints"
    for step in (1, 2, 3):
        save_checkpoint(ckpt, step, _tree(float(step)), max_to_keep=3)
    manifest = json.loads((ckpt / MANIFEST).read_text())
    _truncate(_largest_file(ckpt / "2"))
    from ajax.training.checkpoint import digest

    manifest["steps"]["2"] = digest(ckpt / "2")  # damage the checksum cannot see
    del manifest["steps"]["3"]
    (ckpt / MANIFEST).write_text(json.dumps(manifest))
    messages = []
    step, _ = restore_newest_good(ckpt, _tree(0.0), warn=messages.append)
    assert step == 1
    assert "checkpoint 3 is unverified: not in the manifest" in messages[0]
    assert "checkpoint 2 is unreadable" in messages[1]
    assert sorted(p.name for p in (tmp_path / DAMAGED).iterdir()) == ["2", "3"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 4-chunk SAC run (checkpoints 3 and 4 kept) and its final state."""
    out = tmp_path_factory.mktemp("run") / "run"
    prepare_run_dir(out, SPEC, overwrite=False)
    _, state = execute(SAC("Pendulum-v1", CONFIG), SPEC, out, progress=False)
    return out, state


@pytest.fixture
def run_dir(finished, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(finished[0], out)
    return out


def test_files_are_world_readable_like_the_rest(finished):
    out, _ = finished
    mask = os.umask(0)
    os.umask(mask)
    for name in ("run.json", "summary.json", "metrics.jsonl", "checkpoints/" + MANIFEST):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o666 & ~mask, name


def test_resume_after_8_bytes_overwritten_ends_bitwise_as_the_uninterrupted_run(
    finished, run_dir, capsys
):
    _, full = finished
    _overwrite(_largest_file(run_dir / "checkpoints" / "4"), 8)
    assert main(["check", str(run_dir)]) == 1
    assert "checkpoint 4: damaged" in capsys.readouterr().out
    summary, resumed = execute(
        SAC("Pendulum-v1", CONFIG), SPEC, run_dir, progress=False, resume=True
    )
    assert "checkpoint 4 is damaged" in capsys.readouterr().err
    assert (run_dir / DAMAGED / "4").is_dir()
    for a, b in zip(jax.tree.leaves(full), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [50, 100, 150, 200]
    assert main(["check", str(run_dir)]) == 0
    report = capsys.readouterr().out
    assert "checkpoint 4: ok" in report and "moved aside" in report and "verdict: good" in report


def _edit_run_json(out, **changes):
    data = json.loads((out / "run.json").read_text())
    for key, value in changes.items():
        if key.startswith("config."):
            data["config"][key.removeprefix("config.")] = value
        else:
            data[key] = value
    (out / "run.json").write_text(json.dumps(data))


def _one_error_line(capsys, argv, code=2):
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ajax: error: "), err
    return err[0]


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"config.eval_freq": 100}, "config.eval_freq 50 (checkpoint) vs 100 (run.json)"),
        ({"n_seeds": 2}, "n_seeds 1 (checkpoint) vs 2 (run.json)"),
        ({"config.hidden": 32}, "config.hidden 16 (checkpoint) vs 32 (run.json)"),
        ({"env": "MountainCarContinuous-v0"}, "env 'Pendulum-v1' (checkpoint)"),
        ({"agent": "td3"}, "TD3Config does not know"),
        ({"config.batch_size": 0}, "SACConfig.batch_size = 0 is invalid"),
        ({"config.no_such_field": 1}, "does not know; remove them"),
        ({"bogus": 1}, "unexpected content (['bogus'])"),
        ({"n_seeds": 0}, "RunSpec.n_seeds = 0 is invalid"),
    ],
    ids=["eval_freq", "n_seeds", "hidden", "env", "agent", "batch0", "unknown-config",
         "unknown-field", "seeds0"],
)  # fmt: skip
def test_resume_refuses_a_run_json_that_differs_from_the_checkpoints(
    run_dir, capsys, changes, expected
):
    _edit_run_json(run_dir, **changes)
    assert expected in _one_error_line(capsys, ["resume", str(run_dir)])
    assert not (run_dir / DAMAGED).exists()  # a mismatch is not damage: nothing moved


def test_resume_refuses_invalid_json_and_another_version_unless_told(run_dir, capsys):
    (run_dir / "run.json").write_text('{"agent": "sac",')
    assert "is not valid JSON" in _one_error_line(capsys, ["resume", str(run_dir)])
    json_ok = dataclasses.asdict(SPEC)
    (run_dir / "run.json").write_text(json.dumps(json_ok))
    manifest_path = run_dir / "checkpoints" / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["identity"]["ajax_version"] = "0.0.1"
    manifest_path.write_text(json.dumps(manifest))
    message = _one_error_line(capsys, ["resume", str(run_dir)])
    assert "ajax_version '0.0.1' (checkpoint)" in message and "--ignore-version" in message
    assert main(["resume", str(run_dir), "--ignore-version"]) == 0


def test_an_invalid_manifest_is_named_moved_aside_and_the_run_resumes(finished, run_dir, capsys):
    """MANIFEST.json overwritten with invalid JSON is damage like a checkpoint's: named in one
    line, moved aside with why, and the newest step that restores is used and recorded."""
    ckpt = run_dir / "checkpoints"
    (ckpt / MANIFEST).write_text('{"format": 1, "steps": {"3": ')
    assert main(["check", str(run_dir)]) == 1
    assert f"needs care: {MANIFEST} is not valid JSON" in capsys.readouterr().out
    summary, resumed = execute(
        SAC("Pendulum-v1", CONFIG), SPEC, run_dir, progress=False, resume=True
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{ckpt / MANIFEST} is not valid JSON" in err[0], err
    moved = run_dir / DAMAGED / MANIFEST
    assert f"moved to {moved}" in err[0] and "not valid JSON" in (moved / "WHY.txt").read_text()
    for a, b in zip(jax.tree.leaves(finished[1]), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert main(["check", str(run_dir)]) == 0  # a new manifest records the restored step
    assert "verdict: good" in capsys.readouterr().out


@pytest.mark.slow  # 25-45 s
def test_resume_without_checkpoints_restarts_the_metrics(run_dir):
    shutil.rmtree(run_dir / "checkpoints")
    execute(SAC("Pendulum-v1", CONFIG), SPEC, run_dir, progress=False, resume=True)
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [50, 100, 150, 200]


@pytest.mark.slow  # 25-50 s
def test_malformed_metrics_lines_are_kept_aside_and_resume_goes_on(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    record = json.loads(lines[2])
    record.pop("wall_time_s")
    bad = ["[1, 2]", "garbage {", json.dumps({"no": "step"})]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines[:2] + bad + [json.dumps(record)]) + "\n")
    shutil.rmtree(run_dir / "checkpoints" / "4")
    summary, _ = execute(SAC("Pendulum-v1", CONFIG), SPEC, run_dir, progress=False, resume=True)
    assert summary["status"] == "finished"
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [50, 100, 150, 200]
    kept = (run_dir / "metrics.jsonl.malformed").read_text().splitlines()
    assert kept == bad
