"""Smoke runs of ``ajax train`` for SAC, TD3 and PPO on a gymnax env, an MJX (playground) env
and a host dm_control env: each must finish and write its summary.

All are marked slow: each run compiles a whole training chunk, ~30 CPU s for gymnax on the
2-core development machine, more for MJX (CartpoleSwingup), so nine runs do not fit the default
suite's budget next to the learning tests.
"""

from __future__ import annotations

import json

import pytest

from ajax.cli import main

TINY = {
    "sac": ["--hidden", "16", "--batch-size", "16", "--learning-starts", "16",
            "--buffer-size", "128"],
    "td3": ["--hidden", "16", "--batch-size", "16", "--learning-starts", "16",
            "--buffer-size", "128"],
    "ppo": ["--hidden", "16", "--n-envs", "2", "--n-steps", "16", "--num-minibatches", "2"],
}  # fmt: skip
ENVS = {"sac": "Pendulum-v1", "td3": "Pendulum-v1", "ppo": "CartPole-v1"}


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["sac", "td3", "ppo"])
@pytest.mark.parametrize("env", ["gymnax", "CartpoleSwingup", "dmc:cartpole-swingup"])
def test_ajax_train_smoke(tmp_path, agent, env):
    env_id = ENVS[agent] if env == "gymnax" else env
    out = tmp_path / "run"
    argv = ["train", agent, "--env", env_id, "--steps", "64", "--out", str(out)]
    argv += TINY[agent] + ["--eval-freq", "32", "--eval-episodes", "1", "--no-progress"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 64 and summary["agent"] == agent
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
