"""The ``ajax`` command line: train / resume / eval / envs / agents, and its error reporting."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ajax.cli import main

# A tiny SAC run on Pendulum-v1: 2 chunks of 100 env steps, a checkpoint after each.
TINY_SAC = [
    "--hidden", "16", "--batch-size", "32", "--learning-starts", "32", "--buffer-size", "256",
    "--eval-freq", "100", "--eval-episodes", "1", "--checkpoint-every", "1", "--no-progress",
]  # fmt: skip


# Tiny runs of the agents whose policy carries state (planner warm start, RSSM latent, the
# recurrent PPO's cells).
TINY = {
    "ppo": [
        "--env", "MemoryChain-bsuite", "--memory", "gru", "--memory-hidden", "8", "--hidden", "8",
        "--n-envs", "2", "--n-steps", "25", "--num-minibatches", "2", "--eval-freq", "50",
        "--eval-episodes", "1",
    ],
    "tdmpc2": [
        "--env", "Pendulum-v1", "--model-size", "1", "--enc-dim", "16", "--mlp-dim", "16",
        "--latent-dim", "16", "--batch-size", "8", "--planner.num-samples", "16",
        "--planner.num-pi-trajs", "2", "--planner.num-elites", "4", "--planner.iterations", "1",
        "--seed-steps", "40", "--eval-freq", "50", "--eval-episodes", "1",
    ],
    "dreamerv3": [
        "--env", "CartPole-v1", "--model-size", "1m", "--batch-size", "2", "--batch-length",
        "8", "--train-ratio", "16", "--eval-freq", "50", "--eval-episodes", "1",
    ],
}  # fmt: skip


# dreamerv3 ~125 s, tdmpc2 ~100-130 s (compiles dominate): both slow for the default run's
# 15-minute budget; recurrent PPO's carry-aware policy goes through the same eval path.
@pytest.mark.parametrize(
    "agent",
    ["ppo", pytest.param("tdmpc2", marks=pytest.mark.slow),
     pytest.param("dreamerv3", marks=pytest.mark.slow)],
)  # fmt: skip
def test_train_then_eval_for_agents_with_policy_state(agent, tmp_path, capsys):
    """``ajax eval`` on a run whose policy carries state: TD-MPC2 (it used to crash on its
    state), DreamerV3, recurrent PPO."""
    out = tmp_path / agent
    argv = ["train", agent, "--steps", "100", "--n-seeds", "2", "--no-progress", "--out", str(out)]
    assert main(argv + TINY[agent]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("eval return over 2 episodes: mean ") and "per seed" in line
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["seeds"] == [0, 1]


@pytest.mark.slow  # ~25 CPU s each (two compiled runs); the default run covers SAC's CLI path
@pytest.mark.parametrize(
    "agent, flags",
    [
        ("dqn", ["--learning-starts", "32", "--batch-size", "32", "--eval-freq", "100"]),
        ("pqn", ["--n-envs", "4", "--n-steps", "25", "--num-minibatches", "4", "--eval-freq", "100"]),
    ],
)  # fmt: skip
def test_train_then_eval_discrete_agents(agent, flags, tmp_path, capsys):
    out = tmp_path / agent
    argv = ["train", agent, "--env", "CartPole-v1", "--steps", "200", "--n-seeds", "2",
            "--hidden", "16", "--eval-episodes", "1", "--no-progress", "--out", str(out)]  # fmt: skip
    assert main(argv + flags) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2"]) == 0
    assert "per seed" in capsys.readouterr().out
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2


def _error(capsys, argv) -> str:
    """Run ``ajax argv``; assert exit status 2 and one ``ajax: error:`` line; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ajax: error: "), err
    return err[0]


@pytest.mark.slow  # ~120 CPU s: four compiled runs (train, resume, eval, overwrite)
def test_train_resume_eval_and_overwrite(tmp_path, capsys):
    """``ajax train`` writes metrics.jsonl, summary.json, curve.png and checkpoints/; a run
    stopped after its first chunk resumes to the end; ``ajax eval`` scores the newest checkpoint;
    --out holding a run is refused without --overwrite and replaced with it."""
    out = tmp_path / "run"
    argv = ["train", "sac", "--env", "Pendulum-v1", "--steps", "200", "--out", str(out)]
    assert main(argv + TINY_SAC) == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [100, 200]
    for r in lines:
        assert {"step", "eval_return", "train_return", "wall_time_s"} <= set(r)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["agent"] == "sac" and summary["env"] == "Pendulum-v1"
    assert summary["steps"] == 200 and summary["seeds"] == [0]
    assert summary["final_eval_returns"] == [lines[-1]["eval_return"]]
    assert summary["final_eval_return"] == pytest.approx(lines[-1]["eval_return"])
    for key in ("wall_time_s", "env_steps_per_s"):
        assert summary[key] > 0
    assert (out / "curve.png").stat().st_size > 0
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if p.name.isdigit()) == ["1", "2"]

    # Simulate a stop after chunk 1: its checkpoint is the newest, the second line never written.
    shutil.rmtree(out / "checkpoints" / "2")
    (out / "metrics.jsonl").write_text(json.dumps(lines[0]) + "\n")
    (out / "summary.json").unlink()
    assert main(["resume", str(out)]) == 0
    resumed = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in resumed] == [100, 200]
    assert resumed[-1]["eval_return"] == pytest.approx(lines[-1]["eval_return"], rel=1e-5)
    assert json.loads((out / "summary.json").read_text())["steps"] == 200

    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2"]) == 0
    assert "eval return over 2 episodes" in capsys.readouterr().out

    message = _error(capsys, argv + TINY_SAC)
    assert "already holds a run" in message and "--overwrite" in message
    assert main(argv[:5] + ["100"] + argv[6:] + TINY_SAC + ["--overwrite"]) == 0
    assert json.loads((out / "summary.json").read_text())["steps"] == 100
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1
    assert "note:" not in capsys.readouterr().err  # 100 steps: one whole chunk

    # 150 steps round up to two chunks of 100, and the run says so
    assert main(argv[:5] + ["150"] + argv[6:] + TINY_SAC + ["--overwrite"]) == 0
    assert json.loads((out / "summary.json").read_text())["steps"] == 200
    err = capsys.readouterr().err
    assert "note: a run goes in whole chunks of 100 env steps" in err and "runs 200" in err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", "dqm", "--env", "Pendulum-v1"], "unknown agent 'dqm'"),
        (["train", "dqn", "--env", "Pendulum-v1"], "needs a discrete action space"),
        (["train", "pqn", "--env", "Pendulum-v1"], "needs a discrete action space"),
        (["train", "redq", "--env", "CartPole-v1"], "needs a continuous action space"),
        (["train", "crossq", "--env", "CartPole-v1"], "needs a continuous action space"),
        (["train", "redq", "--num-min", "11"], "num_min = 11 is invalid: it must be <= num_crit"),
        (["train", "crossq", "--tau", "0.005"], "CrossQ has no target network"),
        (["train", "pqn", "--env", "CartPole-v1", "--buffer-size", "10"], "pqn has no replay"),
        (["train", "sac", "--actor-architecture", "pid"], "set it from Python"),
        (["train", "ppo", "--memory", "rnn"], "memory"),
        (["train", "sac", "--env", "Pendulum-v2"], "did you mean 'Pendulum-v1'"),
        (["train", "sac", "--env", "CartPole-v1"], "needs a continuous action space"),
        (["train", "td3", "--env", "CartPole-v1"], "needs a continuous action space"),
        (["train", "asac", "--env", "CartPole-v1"], "needs a continuous action space"),
        (["train", "avg", "--env", "CartPole-v1"], "needs a continuous action space"),
        (["train", "asac", "--gamma", "0.99"], "ASAC is undiscounted"),
        (["train", "apo", "--gamma", "0.99"], "APO is undiscounted"),
        (["train", "apo", "--memory", "gru"], "APO's actor and critic are feedforward"),
        (["train", "sac", "--critic-norm", "batchrenorm"], "use crossq for BatchRenorm critics"),
        (["train", "redq", "--critic-norm", "batchrenorm"], "REDQ cannot train BatchRenorm"),
        (["train", "crossq", "--critic-norm", "layernorm"], "needs BatchRenorm critics"),
        (["train", "sac", "--pretrain", "x"], "MCPretrain around an expert function"),
        (["train", "redq", "--imitation", "x"], "ExpertImitation around an expert function"),
        (["train", "sac", "--steps", "0"], "--steps must be a positive"),
        (["train", "sac", "--steps", "-5"], "--steps must be a positive"),
        (["train", "sac", "--not-a-field", "1"], "valid config fields: --action-repeat, --batch-size"),
        (["train", "sac", "--tau", "2.0"], "SACConfig.tau = 2.0 is invalid: it must be in (0, 1]"),
        (["train", "dreamerv3", "--steps", "100000000", "--buffer-size", "100000000"],
         "lower --buffer-size"),
        (["train", "dqn", "--env", "Breakout-MinAtar", "--buffer-size", "2000000000"],
         "lower --buffer-size (about"),  # within int32 (the config's limit), past any memory
        (["train", "sac", "--buffer-size", "2000000000", "--n-seeds", "1000"],
         "lower --buffer-size (about"),
        (["train", "sac", "--buffer-size", "100000000000"], "lower --buffer-size to <= 2147483647"),
        (["train", "dreamerv3", "--env", "CartPole-v1", "--frame-stack", "3"],
         "frame_stack needs image observations"),
        (["train", "dreamerv3", "--env", "Breakout-MinAtar", "--grayscale"],
         "grayscale needs RGB images"),
        (["train", "dreamerv3", "--env", "CartPole-v1", "--pixels"],
         "pixels= renders dm_control cameras"),
        (["train", "dreamerv3", "--env", "CartPole-v1", "--proprio"],
         "proprio= adds the state features to rendered images: add pixels="),
        (["train", "dreamerv3", "--env", "Breakout-MinAtar", "--enc-spaces", "vector"],
         "enc_spaces='vector' selects none of this env's observation parts ['image']"),
        (["train", "dreamerv3", "--env", "Breakout-MinAtar", "--dec-spaces", "("],
         "dec_spaces = '(' is invalid: it must be a regular expression"),
        (["train", "ppo", "--env", "Breakout-MinAtar"], "ppo has no image encoder"),
        (["train", "sac", "--env", "gymnasium:Pendulum-v1", "--seed-batching", "map"],
         "--seed-batching map is for JAX envs"),
        (["train", "sac", "--seed-batching", "loop"], "invalid value 'loop' for --seed-batching: it takes one of vmap, map"),
        (["train", "tdmpc2", "--env", "dmc:cartpole-swingup", "--pixels", "--model-size", "1"],
         "pixel encoder gives 512 features"),
        (["train", "dreamerv3", "--replay-on", "gpu"],
         "replay_on = 'gpu' is invalid: it must be one of 'device', 'host'"),
        (["train", "dreamerv3", "--replay-on", "host", "--devices", "2"],
         "--replay-on host keeps each seed's replay rows in this process's memory"),
        (["train", "tdmpc2", "--multitask", "--dataset", "x", "--replay-on", "host"],
         "drop --replay-on"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["eval"], "usage: ajax eval DIR"),
    ],
    ids=[
        "agent", "dqn-continuous", "pqn-continuous", "redq-discrete", "crossq-discrete",
        "redq-subset", "crossq-tau", "pqn-replay", "pid-python-only", "ppo-memory-kind",
        "env", "sac-discrete", "td3-discrete", "asac-discrete", "avg-discrete",
        "asac-gamma", "apo-gamma", "apo-memory", "sac-batchrenorm", "redq-batchrenorm", "crossq-layernorm", "sac-pretrain", "redq-imitation",
        "zero-steps", "negative-steps",
        "config-field", "config-value", "replay-too-large", "dqn-replay-too-large", "sac-replay-too-large", "sac-replay-past-int32", "frame-stack-vector", "grayscale-channels", "pixels-gymnax",
        "proprio-without-pixels", "enc-spaces-none", "dec-spaces-regex", "ppo-images",
        "seed-batching-host", "seed-batching-value", "tdmpc2-pixels", "replay-on-value", "replay-on-devices", "replay-on-multitask",
        "command", "eval-usage",
    ],
)  # fmt: skip
def test_bad_input_is_one_error_line_exit_2(capsys, argv, expected):
    assert expected in _error(capsys, argv)


def test_unknown_config_field_lists_valid_fields(capsys):
    message = _error(capsys, ["train", "sac", "--not-a-field", "1"])
    for field in ("--learning-rate", "--tau", "--hidden", "--gradient-steps"):
        assert field in message


def test_resume_and_eval_need_a_run_dir(tmp_path, capsys):
    assert "not a run directory" in _error(capsys, ["resume", str(tmp_path)])
    assert "not a run directory" in _error(capsys, ["eval", str(tmp_path)])


def test_agents_and_envs_listings(capsys):
    assert main(["agents"]) == 0
    agents = capsys.readouterr().out
    for name in ("sac", "td3", "ppo", "dqn", "pqn", "redq", "crossq"):
        assert name in agents
    assert main(["envs"]) == 0
    envs = capsys.readouterr().out
    for env_id in ("Pendulum-v1", "CartPole-v1", "CartpoleSwingup"):
        assert env_id in envs


@pytest.mark.parametrize("cmd", ["resume", "eval", "check", "collect", "envs", "agents"])
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_shows_its_help(cmd, flag, capsys):
    """``ajax eval --help`` is help, not a run directory named --help (exit 0, stdout only)."""
    assert main([cmd, flag]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"usage: ajax {cmd}") and not captured.err


def test_a_closed_output_pipe_ends_quietly(monkeypatch, capsys):
    """``ajax agents | head -1``: the reader went away; no BrokenPipeError traceback, exit 0."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    stream = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stdout", stream)
    assert main(["agents"]) == 0
    stream.close()  # the pipe's descriptor now writes to os.devnull
    assert "Traceback" not in capsys.readouterr().err


def test_python_dash_m_ajax_subprocess():
    """``python -m ajax``: listing works; bad input exits 2 with one error line."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    ok = subprocess.run(
        [sys.executable, "-m", "ajax", "agents"], capture_output=True, text=True, env=env
    )
    assert ok.returncode == 0 and "sac" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "ajax", "train", "sac", "--env", "CartPole-v1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent,
    )
    assert bad.returncode == 2
    errors = [ln for ln in bad.stderr.splitlines() if ln.startswith("ajax: error:")]
    assert len(errors) == 1 and "continuous" in errors[0]


def test_image_flags_are_recorded_for_resume_and_eval():
    """`--pixels --frame-stack 3 --resize 64` go into run.json's env_options (what resume and
    eval rebuild the env with); a run without them records none, so run dirs from before the
    field existed keep their identity."""
    from ajax.cli import TrainArgs
    from ajax.training.run_dir import RunSpec, identity

    args = TrainArgs(pixels=True, frame_stack=3, resize=64)
    assert args.env_options() == {"pixels": True, "frame_stack": 3, "resize": [64, 64]}
    assert TrainArgs().env_options() == {}
    assert TrainArgs(pixels=True, proprio=True).env_options() == {"pixels": True, "proprio": True}
    plain = identity(RunSpec(agent="sac", env="Pendulum-v1", steps=10))
    assert "env_options" not in plain
    spec = RunSpec(agent="sac", env="Pendulum-v1", steps=10, env_options=args.env_options())
    assert identity(spec)["env_options"]["frame_stack"] == 3


def test_eval_of_a_host_env_run(tmp_path, capsys):
    """`ajax eval` restores a host run (gymnasium) into a host runner and scores it there."""
    out = tmp_path / "host"
    argv = ["train", "sac", "--env", "gymnasium:Pendulum-v1", "--steps", "64", "--hidden",
            "16", "--batch-size", "16", "--learning-starts", "16", "--buffer-size", "64",
            "--eval-freq", "64", "--eval-episodes", "1", "--out", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2"]) == 0
    line = capsys.readouterr().out
    assert "eval return over 2 episodes" in line and float(line.split("mean ")[1].split()[0]) < 0
