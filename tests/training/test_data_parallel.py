"""One run's batch over four forced CPU devices (issue 14, item 2: ``--parallel data``), in a
subprocess (``sharded_runs.py AGENT OUT data``); bad input of the data layout in-process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.training.sharded import measure

from ajax.cli import main


@pytest.mark.parametrize(
    "agent, flops",
    [
        ("sac", False),
        pytest.param("tdmpc2", False, marks=pytest.mark.slow),
        pytest.param("sac", True, marks=pytest.mark.slow),
        pytest.param("tdmpc2", True, marks=pytest.mark.slow),
        pytest.param("dreamerv3", True, marks=pytest.mark.slow),
    ],
    ids=["sac", "tdmpc2", "sac-flops", "tdmpc2-flops", "dreamerv3-flops"],
)
def test_data_parallel_over_four_devices_matches_one_device(agent, flops, tmp_path: Path):
    """One run's update batch (and env batch) split over 4 devices, parameters replicated: the
    one-device maths up to reassociated batch sums (integer state bitwise, parameters within
    1e-4, eval returns within 1e-4 relative), and each device runs under half the FLOPs of a
    chunk (measured shares: SAC 0.30, TD-MPC2 0.37, DreamerV3 0.27 of one device's; what is
    not split is the replicated evaluation, acting and the planner over one env). Without the
    FLOPs, 4 envs, whose env state must come back split over the devices: SAC in the default
    run (one small program), TD-MPC2 in the slow one."""
    r = measure(agent, tmp_path, "data-flops" if flops else "data")
    assert r["devices"] == 4
    assert r["ints_equal"]
    assert r["param_diff"] < 1e-4, r["param_diff"]
    np.testing.assert_allclose(r["eval_four"], r["eval_one"], rtol=1e-4, atol=1e-4)
    if flops:  # two more compiles of a chunk, so only in the slow run
        assert r["flops_share"] < 0.5, r["flops_share"]
    else:  # 4 envs: the env state comes back split, one env per device
        assert r["env_shard"] == [1], r["env_shard"]


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", "ppo", "--env", "CartPole-v1"], "ppo has no data-parallel layout"),
        (["train", "sac", "--batch-size", "31", "--learning-starts", "31"],
         "--batch-size 31 does not divide over --devices 2"),
        (["train", "sac", "--n-envs", "3"], "--n-envs 3 does not divide over --devices 2"),
    ],
    ids=["not-a-replay-agent", "batch", "envs"],
)  # fmt: skip
def test_data_layout_bad_input_is_one_line(argv, expected, tmp_path, capsys):
    flags = ["--steps", "10", "--out", str(tmp_path / "o"), "--devices", "2", "--parallel", "data"]
    assert main(argv + flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "o").exists()
