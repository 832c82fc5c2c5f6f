"""The official TD-MPC2 protocol as a preset (``--protocol dmc``, issue 40 part 4): its values
pinned against nicklashansen/tdmpc2@e9f5932 (config.yaml, envs/dmcontrol.py, the published
curves), the env it builds, ``ajax train tdmpc2 --protocol dmc`` end to end, and the bad input
around ``--protocol`` (exit 2, one line naming the fix)."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from pathlib import Path

import pytest
from tests.test_presets import _one_error, _stub_run

from ajax.agents.tdmpc2 import TDMPC2, TDMPC2Config
from ajax.agents.tdmpc2.agent import episode_length
from ajax.agents.tdmpc2.protocols import PROTOCOLS
from ajax.cli import main

REFERENCE = Path(__file__).parents[3] / "../shared/reference/tdmpc2"
# dm_control domains of the published curves (the rest of results/ is Meta-World, ManiSkill2,
# MyoSuite); the official task names (cup-catch) keep the domain first as Ajax's ids do
DMC_DOMAINS = {"acrobot", "cartpole", "cheetah", "cup", "dog", "finger", "fish", "hopper",
               "humanoid", "pendulum", "quadruped", "reacher", "walker"}  # fmt: skip


def test_the_dmc_protocol_sets_the_official_run_settings():
    """The numbers themselves (each cited in ajax/agents/tdmpc2/protocols.py)."""
    assert set(PROTOCOLS) == {"dmc"}
    cfg = TDMPC2Config.from_protocol("dmc")
    assert (cfg.action_repeat, cfg.eval_freq, cfg.eval_episodes) == (2, 50_000, 10)
    assert (cfg.model_size, cfg.batch_size, cfg.buffer_size, cfg.n_envs) == (5, 256, 1_000_000, 1)
    assert cfg.protocol == "dmc" and cfg.seed_steps is None
    assert cfg.seed_steps_for(500) == 2_500  # max(1000, 5 x 500), envs/__init__.py:82
    assert cfg.discount(500) == pytest.approx(0.99)
    protocol = PROTOCOLS["dmc"]
    assert protocol.steps_for("dmc:walker-walk") == 2_000_000
    assert protocol.steps_for("dmc:cartpole-swingup") == 2_000_000
    assert protocol.steps_for("dmc:dog-run") == 7_000_000
    assert protocol.steps_for("dmc:humanoid-walk") == 7_000_000
    assert protocol.env_options == {"dmc": {"max_episode_steps": 1000}}
    overridden = TDMPC2Config.from_protocol("dmc", eval_freq=1_000, model_size=1)
    assert (overridden.eval_freq, overridden.model_size, overridden.action_repeat) == (1_000, 1, 2)
    with pytest.raises(ValueError, match="unknown protocol 'nope'; tdmpc2's official protocols"):
        TDMPC2Config.from_protocol("nope")
    with pytest.raises(ValueError, match="protocol = 'nope' is invalid"):
        TDMPC2Config(protocol="nope")


def _yaml_value(text: str, key: str) -> str:
    match = re.search(rf"^{key}:\s*(\S+)", text, re.MULTILINE)
    assert match, key
    return match.group(1)


def test_the_dmc_protocol_matches_the_official_code_when_it_is_here():
    """Read config.yaml, the DMControl wrapper and the published curves of the reference
    checkout itself (skipped where it is absent): every field the yaml sets equals the
    protocol's config, the repeat and time limit are the wrapper's, and each DMC curve ends at
    the protocol's run length for its task (agent steps)."""
    if not (REFERENCE / "tdmpc2/config.yaml").exists():
        pytest.skip("the official checkout is not next to this repository")
    yaml = (REFERENCE / "tdmpc2/config.yaml").read_text()
    cfg = TDMPC2Config.from_protocol("dmc")
    number = lambda key: float(_yaml_value(yaml, key).replace("_", ""))  # noqa: E731
    flat = {**dataclasses.asdict(cfg), **dataclasses.asdict(cfg.planner),
            **dataclasses.asdict(cfg.arch), "lr": cfg.learning_rate}  # fmt: skip
    keys = ["eval_episodes", "eval_freq", "batch_size", "reward_coef", "value_coef",
            "termination_coef", "consistency_coef", "rho", "lr", "enc_lr_scale",
            "grad_clip_norm", "tau", "discount_denom", "discount_min", "discount_max",
            "buffer_size", "iterations", "num_samples", "num_elites", "num_pi_trajs", "horizon",
            "min_std", "max_std", "temperature", "log_std_min", "log_std_max", "entropy_coef",
            "num_bins", "vmin", "vmax", "num_enc_layers", "enc_dim", "num_channels", "mlp_dim",
            "latent_dim", "num_q", "dropout", "simnorm_dim"]  # fmt: skip
    for key in keys:
        assert flat[key] == pytest.approx(number(key)), key
    assert _yaml_value(yaml, "episodic") == "false" and cfg.episodic is False
    assert _yaml_value(yaml, "obs") == "state"
    dmcontrol = (REFERENCE / "tdmpc2/envs/dmcontrol.py").read_text()
    assert "for _ in range(2):" in dmcontrol and cfg.action_repeat == 2
    assert "Timeout(env, max_episode_steps=500)" in dmcontrol
    limit = PROTOCOLS["dmc"].env_options["dmc"]["max_episode_steps"]
    assert limit // cfg.action_repeat == 500
    assert "max(1000, 5*cfg.episode_length)" in (REFERENCE / "tdmpc2/envs/__init__.py").read_text()
    ends = {}
    for path in sorted((REFERENCE / "results/tdmpc2").glob("*.csv")):
        if path.stem.split("-")[0] in DMC_DOMAINS:
            with path.open() as f:
                ends[path.stem] = max(int(float(row["step"])) for row in csv.DictReader(f))
    assert len(ends) >= 30 and "walker-walk" in ends and "dog-run" in ends
    for task, end in ends.items():  # the csv counts env steps (issue 45): agent steps x 2
        assert PROTOCOLS["dmc"].steps_for(f"dmc:{task}") * cfg.action_repeat == end, task


def test_the_protocol_builds_the_official_env():
    """dmc:walker-walk under the protocol: 2 repeats, 500 agent steps an episode, so 2,500 seed
    steps and the discount of 500-step episodes; flags (env options given) win."""
    pytest.importorskip("dm_control")
    algo = TDMPC2("dmc:walker-walk", TDMPC2Config.from_protocol("dmc", model_size=1))
    assert algo.env_options == {"action_repeat": 2, "max_episode_steps": 1000}
    assert episode_length(algo.env) == 500 and episode_length(algo.eval_env) == 500
    assert algo.config.seed_steps_for(episode_length(algo.env)) == 2_500
    algo.env.close()
    algo.eval_env.close()
    with pytest.raises(ValueError, match="'Pendulum-v1' is not one: pass e.g. --env dmc:walker"):
        TDMPC2("Pendulum-v1", TDMPC2Config.from_protocol("dmc"))
    with pytest.raises(ValueError, match="trains on state observations.*drop --pixels"):
        TDMPC2("dmc:walker-walk", TDMPC2Config.from_protocol("dmc", model_size=5), pixels=True)


def test_train_protocol_dmc_runs_the_published_settings(tmp_path, monkeypatch, capsys):
    """``ajax train tdmpc2 --protocol dmc --env dmc:walker-walk``: the protocol's config, its
    4M steps, its env options and its name in run.json; ``--steps`` and fields override it; a
    dmc: id without flags gets it as the default preset; the 14M curves for dog and humanoid;
    ``ajax resume`` and ``ajax check`` read it back. (The run itself is stubbed.)"""
    pytest.importorskip("dm_control")
    seen = _stub_run(monkeypatch)
    out = tmp_path / "a"
    argv = ["train", "tdmpc2", "--protocol", "dmc", "--env", "dmc:walker-walk", "--out", str(out)]
    assert main(argv) == 0
    config, spec, algo = seen[-1]
    assert config == TDMPC2Config.from_protocol("dmc") and spec.steps == 2_000_000
    assert spec.preset is None and algo.env_options["max_episode_steps"] == 1000
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["config"]["protocol"] == "dmc" and recorded["steps"] == 2_000_000
    assert recorded["config"]["action_repeat"] == 2 and recorded["config"]["eval_freq"] == 50_000
    assert recorded["env_options"] == {"max_episode_steps": 1000}
    assert main(["resume", str(out)]) == 0  # run.json's config and env options, read back
    assert seen[-1][0] == config and seen[-1][2].env_options == algo.env_options
    capsys.readouterr()
    assert main(["check", str(out)]) == 1  # needs care: nothing trained, so no checkpoint
    assert "protocol dmc" in capsys.readouterr().out.splitlines()[0]
    argv = ["train", "tdmpc2", "--protocol=dmc", "--env", "dmc:walker-walk", "--steps", "5000",
            "--eval-freq", "1000", "--model-size", "1", "--out", str(tmp_path / "b")]  # fmt: skip
    assert main(argv) == 0
    config, spec, _ = seen[-1]
    assert (spec.steps, config.eval_freq, config.model_size) == (5_000, 1_000, 1)
    assert (config.action_repeat, config.protocol) == (2, "dmc")
    default = ["train", "tdmpc2", "--env", "dmc:cartpole-balance", "--out", str(tmp_path / "c")]
    assert main(default) == 0
    config, spec, _ = seen[-1]
    assert (config.protocol, spec.steps, spec.preset) == ("dmc", 2_000_000, "tdmpc2-dmc")
    argv = ["train", "tdmpc2", "--protocol", "dmc", "--env", "dmc:humanoid-walk", "--out",
            str(tmp_path / "d")]  # fmt: skip
    assert main(argv) == 0 and seen[-1][1].steps == 7_000_000
    for _, _, algo in seen:
        algo.env.close()
        algo.eval_env.close()


def test_presets_listing_names_the_protocol(capsys):
    assert main(["presets", "tdmpc2", "--env", "dmc:walker-walk"]) == 0
    out = capsys.readouterr().out
    assert "tdmpc2-dmc" in out and "--protocol dmc" in out


@pytest.mark.slow  # about 100 s on 2 shared cores, nearly all of it compiling the host loop
def test_a_tiny_protocol_run_trains(tmp_path, capsys):
    """A real run of the protocol on dmc:cartpole-balance with tiny widths: 2 chunks of 50
    agent steps (100 simulator steps each), each evaluated on one 500-step episode; run.json
    records the protocol."""
    pytest.importorskip("dm_control")
    out = tmp_path / "run"
    tiny = ["--model-size", "1", "--enc-dim", "16", "--mlp-dim", "16", "--latent-dim", "16",
            "--batch-size", "8", "--planner.num-samples", "16", "--planner.num-pi-trajs", "2",
            "--planner.num-elites", "4", "--planner.iterations", "1", "--seed-steps", "40",
            "--eval-freq", "50", "--eval-episodes", "1", "--no-progress"]  # fmt: skip
    argv = ["train", "tdmpc2", "--protocol", "dmc", "--env", "dmc:cartpole-balance", "--steps",
            "100", "--out", str(out), *tiny]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["config"]["protocol"] == "dmc" and recorded["config"]["action_repeat"] == 2
    metrics = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "eval_return" in m][-1] == 100


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", "tdmpc2", "--env", "dmc:walker-walk", "--protocol", "nope"],
         "unknown protocol 'nope'; tdmpc2's official protocols are dmc"),
        (["train", "tdmpc2", "--env", "dmc:walker-walk", "--protocol", "dmc_proprio"],
         "unknown protocol 'dmc_proprio'; tdmpc2's official protocols are dmc"),
        (["train", "tdmpc2", "--env", "Pendulum-v1", "--protocol", "dmc"],
         "protocol 'dmc' trains on dmc envs"),
        (["train", "sac", "--env", "Pendulum-v1", "--protocol", "dmc"],
         "--protocol picks an official run protocol of dreamerv3, tdmpc2; sac has none: drop "
         "--protocol"),
        (["train", "ppo", "--env", "CartPole-v1", "--protocol=dmc_proprio"],
         "ppo has none: drop --protocol"),
    ],
    ids=["unknown", "dreamerv3-name", "not-dmc", "sac", "ppo"],
)  # fmt: skip
def test_bad_protocol_input_is_one_line(argv, expected, tmp_path, capsys):
    out = tmp_path / "out"
    err = _one_error(capsys, argv + ["--steps", "100", "--out", str(out)])
    assert expected in err, err
    assert not out.exists()


def test_the_offline_multitask_variant_refuses_the_protocol(tmp_path):
    """The protocol is single-task online training; the offline multi-task variant names the
    fix before it reads the dataset."""
    from ajax.agents.tdmpc2.multitask import MultitaskTDMPC2

    with pytest.raises(ValueError, match="protocol 'dmc' is single-task online.*drop --protocol"):
        MultitaskTDMPC2(tmp_path / "none", TDMPC2Config.from_protocol("dmc"))
