"""Resuming an interrupted run ends bitwise where the uninterrupted run ends."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import ajax.training.run as run_module
from ajax.agents.sac import SAC, SACConfig
from ajax.training.io import read_jsonl
from ajax.training.run import RunSpec, execute, prepare_run_dir

CONFIG = SACConfig(
    hidden=16, batch_size=32, learning_starts=32, buffer_size=256, eval_freq=50, eval_episodes=1
)
SPEC = RunSpec(
    agent="sac",
    env="Pendulum-v1",
    steps=200,
    checkpoint_every=1,
    n_seeds=2,
    config=dataclasses.asdict(CONFIG),
)


class Stop(Exception):
    """The simulated interruption."""


@pytest.mark.slow  # ~195 CPU s on the loaded dev machine: three executes, each compiles
def test_sac_resume_is_bitwise_identical(tmp_path, monkeypatch):
    """Stop a 4-chunk SAC run after chunk 2's checkpoint; resume; compare with the full run."""
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    prepare_run_dir(full_dir, SPEC, overwrite=False)
    _, full = execute(SAC("Pendulum-v1", CONFIG), SPEC, full_dir, progress=False)

    prepare_run_dir(cut_dir, SPEC, overwrite=False)
    save = run_module.save_checkpoint

    def save_then_stop(directory, step, state, **kw):
        save(directory, step, state, **kw)
        if step == 2:
            raise Stop

    monkeypatch.setattr(run_module, "save_checkpoint", save_then_stop)
    with pytest.raises(Stop):
        execute(SAC("Pendulum-v1", CONFIG), SPEC, cut_dir, progress=False)
    monkeypatch.setattr(run_module, "save_checkpoint", save)
    assert [r["step"] for r in read_jsonl(cut_dir / "metrics.jsonl")] == [50, 100]

    summary, resumed = execute(
        SAC("Pendulum-v1", CONFIG), SPEC, cut_dir, progress=False, resume=True
    )
    assert summary["steps"] == 200
    full_leaves = jax.tree_util.tree_leaves_with_path(full)
    resumed_leaves = jax.tree.leaves(resumed)
    assert len(full_leaves) == len(resumed_leaves)
    for (path, a), b in zip(full_leaves, resumed_leaves, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=str(path))
    full_log, cut_log = (
        read_jsonl(full_dir / "metrics.jsonl"),
        read_jsonl(cut_dir / "metrics.jsonl"),
    )
    assert [r["step"] for r in cut_log] == [50, 100, 150, 200]
    assert [r["eval_returns"] for r in cut_log] == [r["eval_returns"] for r in full_log]
