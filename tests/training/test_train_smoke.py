"""Smoke runs of ``ajax train`` for SAC, TD3 and PPO on a gymnax env, an MJX (playground) env
and a host dm_control env, and for TD-MPC2 on the same three: each must finish and write its
summary.

All are marked slow: each run compiles a whole training chunk, ~30 CPU s for gymnax on the
2-core development machine, more for MJX (CartpoleSwingup), so twelve runs do not fit the default
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
    "tdmpc2": ["--enc-dim", "16", "--mlp-dim", "16", "--latent-dim", "16", "--batch-size", "8",
               "--seed-steps", "24", "--planner.num-samples", "16", "--planner.num-pi-trajs",
               "2", "--planner.num-elites", "4", "--planner.iterations", "2"],
}  # fmt: skip
ENVS = {"sac": "Pendulum-v1", "td3": "Pendulum-v1", "ppo": "CartPole-v1", "tdmpc2": "Pendulum-v1"}
CASES = [
    (agent, env)
    for agent in ("sac", "td3", "ppo", "tdmpc2")
    for env in ("gymnax", "CartpoleSwingup", "dmc:cartpole-swingup")
]


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "env"), CASES)
def test_ajax_train_smoke(tmp_path, agent, env):
    env_id = ENVS[agent] if env == "gymnax" else env
    # TD-MPC2 samples completed episodes only: 256 steps finish one 200-step Pendulum episode,
    # so its updates run too (CartpoleSwingup's 1000-step episodes leave it planning only).
    steps = 256 if (agent, env) == ("tdmpc2", "gymnax") else 64
    out = tmp_path / "run"
    argv = ["train", agent, "--env", env_id, "--steps", str(steps), "--out", str(out)]
    argv += TINY[agent] + ["--eval-freq", str(steps // 2), "--eval-episodes", "1"]
    assert main(argv + ["--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == steps and summary["agent"] == agent
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
