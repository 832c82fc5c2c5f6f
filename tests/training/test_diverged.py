"""The non-finite guard: a NaN loss stops the run with exit 3, names the loss and the step,
keeps the last finite checkpoint and marks summary.json as diverged."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

from ajax.cli import main
from ajax.training.run import Diverged, check_finite


def test_check_finite_names_first_bad_loss_and_step():
    records = {
        "step": np.array([[100, 100], [200, 200]]),
        "loss/rew": np.array([[1.0, 1.0], [1.0, np.nan]]),
        "loss/con": np.array([[1.0, 1.0], [np.inf, 1.0]]),
        "eval_return": np.array([[np.nan, 1.0], [1.0, 1.0]]),  # not a loss: ignored
    }
    with pytest.raises(Diverged, match="loss/con became non-finite by step 200"):
        check_finite(records, {"w": jnp.ones(3)})
    ok = {k: v[:1] for k, v in records.items() if k != "eval_return"}
    check_finite(ok, {"w": jnp.ones(3), "count": jnp.zeros((), jnp.int32)})
    with pytest.raises(Diverged, match=r"parameter \['w'\]"):
        check_finite(ok, {"w": jnp.array([1.0, jnp.nan])})


def test_huge_learning_rate_exits_3_and_keeps_finite_checkpoints(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "train", "sac", "--env", "Pendulum-v1", "--steps", "600", "--hidden", "16",
        "--batch-size", "32", "--learning-starts", "100", "--buffer-size", "1000",
        "--eval-freq", "200", "--eval-episodes", "1", "--learning-rate", "1e12",
        "--checkpoint-every", "1", "--out", str(out), "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ajax: diverged: ") and "step 200" in err[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["step"] == 200
    assert not (out / "checkpoints").exists()  # the first chunk already diverged
