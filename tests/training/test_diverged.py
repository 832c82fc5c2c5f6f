"""The non-finite guard: a NaN loss stops the run with exit 3, names the loss and the step,
keeps the last finite checkpoint and marks summary.json as diverged. Also the run's other
warnings: a run longer than asked (whole chunks) and one that ends before its first update."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config
from ajax.agents.ppo import PPO
from ajax.agents.sac import SAC, SACConfig
from ajax.agents.tdmpc2 import TDMPC2
from ajax.cli import main
from ajax.training.run import (
    Diverged,
    check_finite,
    kept_after_divergence,
    no_learning_note,
    rounding_note,
)


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
    # the first chunk already diverged: the message says no checkpoint exists, and what to do
    assert "no checkpoint exists" in err[0] and f"--out {out} --overwrite" in err[0]
    assert "checkpoint is kept" not in err[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["step"] == 200
    assert summary["checkpoint"] is None and not (out / "checkpoints").exists()
    assert main(["check", str(out)]) == 1  # an honest check: diverged, and no checkpoint
    care = [x for x in capsys.readouterr().out.splitlines() if x.startswith("needs care: ")]
    assert len(care) == 2 and "it has no checkpoint" in care[0]
    assert care[1].startswith("needs care: it diverged: ") and "loss" in care[1]
    assert "by step 200" in care[1]


def test_a_divergence_after_a_checkpoint_names_the_kept_one(tmp_path):
    kept = kept_after_divergence(tmp_path, 3, 50)
    where = tmp_path / "checkpoints" / "3"
    assert kept == f"its last finite checkpoint ({where}, step 150) is kept"
    assert "no checkpoint exists" in kept_after_divergence(tmp_path, None, 50)


def test_rounding_note_says_when_a_run_is_longer_than_asked():
    """Runs go in whole chunks: 150 steps in chunks of 100 run 200 (and the line says how to
    get an exact length); a whole number of chunks says nothing."""
    assert rounding_note(200, 100, 2) is None
    note = rounding_note(150, 100, 2)
    assert note.startswith("note: a run goes in whole chunks of 100 env steps")
    assert "--steps 150 runs 200" in note and "a multiple of 100" in note
    assert "--steps 100 runs 1,000,000" in rounding_note(100, 1_000_000, 1)


def test_no_learning_note_says_when_a_run_ends_before_its_first_update():
    """The replay agents' first update (learning_starts, TD-MPC2's seed steps, DreamerV3's
    filled replay) against the run's length; the rollout agents update from the start."""
    assert SAC("Pendulum-v1", SACConfig(learning_starts=700)).first_update() == (
        700, "--learning-starts")  # fmt: skip
    assert TDMPC2("Pendulum-v1").first_update() == (1000, "--seed-steps")  # max(1000, 5 x 200)
    cfg = DreamerV3Config.preset("1m", batch_size=4, batch_length=16)
    assert DreamerV3("CartPole-v1", cfg).first_update() == (cfg.first_train_step, "--batch-size"
                                                           " x --batch-length")  # fmt: skip
    # 4 x 16 steps, and one env adds a window per row from its 17th (replay_context 1)
    assert cfg.first_train_step == 4 * 16 + 16
    assert PPO("CartPole-v1").first_update() is None
    assert no_learning_note(1000, (1000, "--learning-starts")) is None
    assert no_learning_note(5000, None) is None
    note = no_learning_note(500, (1000, "--learning-starts"))
    assert note == ("note: the first update comes at env step 1,000 (--learning-starts), and "
                    "this run ends at 500: it collects without learning; give more --steps or "
                    "a smaller --learning-starts")  # fmt: skip
