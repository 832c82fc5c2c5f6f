"""Presets (issue 41): the registry, how ``ajax train`` picks and applies one (flags > preset >
defaults), the one-line notice, run.json, resume, ``--preset none``, ``ajax presets``, the
Python API, and bad input (exit 2, one line naming the fix, nothing written). Nothing here
trains: the CLI's run is stubbed where it would start."""

from __future__ import annotations

import dataclasses
import json
import tomllib

import pytest

import ajax
import ajax.training.run as run_lib
from ajax import agents, presets
from ajax.agents.dqn import DQN, DQNConfig
from ajax.agents.ppo import PPOConfig
from ajax.cli import main


def _stub_run(monkeypatch) -> list:
    """Stub the run ``ajax train`` / ``ajax resume`` start; returns the (config, spec, algo)
    each call handed it."""
    seen = []

    def execute(algo, spec, out, **kwargs):
        seen.append((algo.config, spec, algo))
        summary = {"final_eval_return": 0.0, "seeds": [0], "steps": spec.steps,
                   "wall_time_s": 0.0, "eval_every": algo.config.eval_freq}  # fmt: skip
        return summary, None

    monkeypatch.setattr(run_lib, "execute", execute)
    return seen


def _one_error(capsys, argv) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ajax: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return err[0]


# ------------------------------------------------------------------------------- the registry


def test_every_preset_builds_a_valid_config_of_its_agent():
    """Each entry names a registered agent, sets only fields its config has (valid values),
    and a protocol the config knows; ``extends`` merges the parent's fields."""
    for preset in presets.registry().values():
        cls = agents.get(preset.agent).config_cls
        config = presets.make_config(preset, cls)
        for key, value in preset.fields().items():
            got = getattr(config, key)
            assert got == (tuple(value) if isinstance(value, list) else value), (preset.name, key)
        assert preset.source and preset.envs, preset.name
        if preset.protocol:
            assert config.protocol == preset.protocol
    child, parent = presets.registry()["dqn-cartpole"], presets.registry()["dqn-cartpole-rlzoo"]
    assert child.config == {**parent.config, "learning_rate": 5e-4, "gradient_steps": 64}


def test_at_most_one_default_per_agent_and_env():
    """No env id (or image setting) has two default presets of one agent."""
    for agent in {p.agent for p in presets.registry().values()}:
        defaults = [p for p in presets.of_agent(agent) if p.default]
        for a in defaults:
            for b in defaults:
                if a is b or a.when != b.when:
                    continue
                clash = [e for e in a.envs if not any(c in e for c in "*?[") and b.matches_id(e)]
                assert not clash, (a.name, b.name, clash)


def test_the_registry_ships_as_package_data():
    from importlib import resources
    from pathlib import Path

    folder = resources.files("ajax").joinpath("preset_data")
    texts = [f.read_text() for f in folder.iterdir() if f.name.endswith(".toml")]
    assert len(presets.parse(*texts)) == len(presets.registry()) >= 30
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "preset_data/*.toml" in pyproject["tool"]["setuptools"]["package-data"]["ajax"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[[preset]]\nname = "a"\nagent = "dqn"\nenvs = ["X"]\nsource = "s"\nbogus = 1\n',
         "unknown keys ['bogus']"),
        ('[[preset]]\nname = "none"\nagent = "dqn"\nenvs = ["X"]\nsource = "s"\n', "reserved"),
        ('[[preset]]\nname = "a"\nagent = "dqn"\nenvs = ["X"]\nsource = "s"\nextends = "b"\n',
         "extends 'b', which is missing"),
    ],
)  # fmt: skip
def test_bad_registry_entries_are_named(text, expected):
    with pytest.raises(ValueError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        presets.parse(text)


def test_a_name_repeated_across_registry_files_is_refused():
    good = '[[preset]]\nname = "a"\nagent = "dqn"\nenvs = ["X"]\nsource = "s"\n'
    assert list(presets.parse(good)) == ["a"]
    with pytest.raises(ValueError, match="repeated name"):
        presets.parse(good, good)


# ------------------------------------------------------------------------------ resolution


def test_resolution_default_none_and_by_name():
    assert presets.choose("dqn", "CartPole-v1").name == "dqn-cartpole"
    assert presets.choose("dqn", "gymnasium:CartPole-v1").name == "dqn-cartpole"
    assert presets.choose("dqn", "Breakout-MinAtar").name == "dqn-minatar"
    assert presets.choose("dqn", "CartPole-v1", "none") is None
    assert presets.choose("dqn", "CartPole-v1", "dqn-cartpole-rlzoo").steps == 50_000
    assert presets.choose("sac", "Pendulum-v1", "sac-pendulum-rlzoo").name == "sac-pendulum-rlzoo"
    assert presets.choose("td3", "CartpoleSwingup") is None  # no preset: the defaults
    # the size1m protocol is a default; the 200m ones only by name, and image flags must match
    assert presets.choose("dreamerv3", "dmc:walker-walk").protocol == "dmc_proprio"
    assert presets.choose("dreamerv3", "dmc:walker-walk", None, {"pixels": True}) is None
    chosen = presets.choose(
        "dreamerv3", "dmc:walker-walk", "dreamerv3-dmc-vision", {"pixels": True}
    )
    assert chosen.protocol == "dmc_vision"
    assert presets.choose("dreamerv3", "atari:pong") is None


def test_python_api_for_env_from_preset_and_auto():
    assert DQNConfig.for_env("CartPole-v1") == DQNConfig.from_preset("dqn-cartpole")
    assert DQNConfig.for_env("CartPole-v1").learning_rate == 5e-4
    assert DQNConfig.for_env("CartPole-v1", hidden=32).hidden == 32
    assert DQNConfig.for_env("SpaceInvaders-MinAtar").learning_starts == 5_000
    assert DQNConfig.for_env("FourRooms-misc") == DQNConfig()  # no preset: the defaults
    assert DQNConfig.cartpole() == DQNConfig.from_preset("dqn-cartpole-rlzoo")
    assert PPOConfig.for_env("Pendulum-v1").value_clip_eps is None
    with pytest.raises(ValueError, match="'sac-pendulum' is not a preset of dqn; its presets"):
        DQNConfig.from_preset("sac-pendulum")
    algo = DQN(env="CartPole-v1", config="auto")
    assert algo.config == DQNConfig.for_env("CartPole-v1")
    ppo = ajax.PPO(env="Pendulum-v1", config="auto")
    assert ppo.env_options == {"normalize_obs": True} and ppo.config.gamma == 0.9
    assert ajax.TD3(env="CartpoleSwingup", config="auto").config == ajax.TD3.config_cls()


# ---------------------------------------------------------------- ajax train with a preset


def test_flags_override_the_preset_which_overrides_the_defaults(tmp_path, monkeypatch, capsys):
    """--learning-rate (a flag) wins over the preset's 5e-4; batch_size is the preset's; double
    the config's default; the preset's 100k steps apply unless --steps is given. stdout has one
    line naming the preset and its source before the run."""
    seen = _stub_run(monkeypatch)
    out = tmp_path / "run"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--learning-rate", "1e-3", "--out", str(out)]
    assert main(argv) == 0
    config, spec, _ = seen[-1]
    assert (config.learning_rate, config.batch_size, config.double) == (1e-3, 64, True)
    assert spec.steps == 100_000 and spec.preset == "dqn-cartpole"
    lines = capsys.readouterr().out.splitlines()
    notice = [ln for ln in lines if ln.startswith("preset ")]
    assert len(notice) == 1 and lines[0] == notice[0], lines
    assert notice[0].startswith("preset dqn-cartpole (") and "--preset none" in notice[0]
    assert "source: README agent table" in notice[0]
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["preset"] == "dqn-cartpole" and recorded["config"]["learning_rate"] == 1e-3
    argv = ["train", "dqn", "--env", "CartPole-v1", "--steps", "500", "--out", str(tmp_path / "s")]
    assert main(argv) == 0 and seen[-1][1].steps == 500


def test_preset_none_runs_the_plain_defaults(tmp_path, monkeypatch, capsys):
    seen = _stub_run(monkeypatch)
    out = tmp_path / "run"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--preset", "none", "--out", str(out)]
    assert main(argv) == 0
    config, spec, _ = seen[-1]
    assert config == DQNConfig() and spec.steps == 20_000 and spec.preset is None
    assert not any(ln.startswith("preset ") for ln in capsys.readouterr().out.splitlines())
    assert json.loads((out / "run.json").read_text())["preset"] is None


def test_preset_by_name_and_its_env_options_are_recorded_and_resumed(tmp_path, monkeypatch, capsys):
    """--preset NAME picks a non-default preset; a preset's env options (PPO on Pendulum:
    normalize_obs) reach the env and run.json; resume rebuilds the same config and env, and
    ``ajax check`` names the preset."""
    seen = _stub_run(monkeypatch)
    out = tmp_path / "run"
    argv = ["train", "ppo", "--env", "Pendulum-v1", "--preset", "ppo-pendulum-rlzoo", "--out",
            str(out)]  # fmt: skip
    assert main(argv) == 0
    config, spec, algo = seen[-1]
    assert (config.n_envs, config.n_steps, config.anneal_lr) == (4, 1024, False)
    assert spec.steps == 100_000 and spec.preset == "ppo-pendulum-rlzoo"
    out2 = tmp_path / "default"
    assert main(["train", "ppo", "--env", "Pendulum-v1", "--out", str(out2)]) == 0
    config, spec, algo = seen[-1]
    assert algo.env_options == {"normalize_obs": True} and spec.preset == "ppo-pendulum"
    assert json.loads((out2 / "run.json").read_text())["env_options"] == {"normalize_obs": True}
    capsys.readouterr()
    assert main(["resume", str(out2)]) == 0
    resumed_config, resumed_spec, resumed_algo = seen[-1]
    assert resumed_config == config and resumed_spec.preset == "ppo-pendulum"
    assert resumed_algo.env_options == {"normalize_obs": True}
    assert not any(ln.startswith("preset ") for ln in capsys.readouterr().out.splitlines())
    assert main(["check", str(out2)]) == 1  # the stubbed run wrote no checkpoint: needs care
    lines = capsys.readouterr().out.splitlines()
    assert "preset ppo-pendulum" in lines[0] and "no checkpoint" in "\n".join(lines)


def test_a_protocol_preset_is_the_protocol(tmp_path, monkeypatch):
    """DreamerV3 on a dmc: id gets the dmc_proprio protocol (its fields, steps, sampling
    evaluation) as ``--protocol dmc_proprio`` would; an explicit --protocol replaces it."""
    pytest.importorskip("dm_control")
    seen = _stub_run(monkeypatch)
    argv = ["train", "dreamerv3", "--env", "dmc:cartpole-balance", "--buffer-size", "100000",
            "--out", str(tmp_path / "a")]  # fmt: skip
    assert main(argv) == 0
    config, spec, algo = seen[-1]
    assert (config.protocol, config.model_size, config.n_envs) == ("dmc_proprio", "1m", 16)
    assert spec.steps == 1_100_000 and spec.preset == "dreamerv3-dmc-proprio"
    algo.env.close()
    algo.eval_env.close()


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", "dqn", "--env", "CartPole-v1", "--preset", "dqn-cartpol"],
         "unknown preset 'dqn-cartpol'; did you mean 'dqn-cartpole'? dqn's presets: "
         "dqn-acrobot-rlzoo, dqn-cartpole,"),
        (["train", "dqn", "--env", "CartPole-v1", "--preset", "sac-pendulum"],
         "preset 'sac-pendulum' is for sac, not dqn: pick one of dqn's"),
        (["train", "dqn", "--env", "Acrobot-v1", "--preset", "dqn-cartpole"],
         "preset 'dqn-cartpole' is made for CartPole-v1, gymnasium:CartPole-v1, not "
         "'Acrobot-v1' as given: pass --env CartPole-v1, or --preset dqn-acrobot-rlzoo"),
        (["train", "dqn", "--env", "FourRooms-misc", "--preset", "dqn-minatar"],
         "pass an --env matching *-MinAtar, or --preset none"),
    ],
    ids=["unknown", "other-agent", "other-env", "other-env-glob"],
)  # fmt: skip
def test_bad_preset_is_one_line_exit_2_and_writes_nothing(argv, expected, tmp_path, capsys):
    out = tmp_path / "out"
    assert expected in _one_error(capsys, argv + ["--out", str(out)])
    assert not out.exists()


def test_preset_given_to_resume_is_one_line(tmp_path, capsys, monkeypatch):
    _stub_run(monkeypatch)
    out = tmp_path / "run"
    assert main(["train", "dqn", "--env", "CartPole-v1", "--out", str(out)]) == 0
    before = (out / "run.json").read_text()
    for flags in (["--preset", "none"], ["--preset=dqn-cartpole"]):
        message = _one_error(capsys, ["resume", str(out), *flags])
        assert "--preset is for 'ajax train'" in message and "drop --preset" in message
    assert (out / "run.json").read_text() == before


# ---------------------------------------------------------------------------- ajax presets


def test_presets_listing(capsys):
    assert main(["presets"]) == 0
    everything = capsys.readouterr().out
    assert "sac-pendulum  [sac;" in everything and "dreamerv3-atari100k" in everything
    assert main(["presets", "dqn", "--env", "CartPole-v1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    headers = [ln for ln in lines if not ln.startswith(" ")]
    assert headers == ["dqn-cartpole  [dqn; CartPole-v1, gymnasium:CartPole-v1; default]",
                       "dqn-cartpole-rlzoo  [dqn; CartPole-v1, gymnasium:CartPole-v1]"]  # fmt: skip
    assert any(ln.strip().startswith("source: rl-zoo hyperparams/dqn.yml") for ln in lines)
    assert any("learning_rate=0.0005" in ln for ln in lines)
    assert main(["presets", "sac", "--env", "CartpoleSwingup"]) == 0
    assert capsys.readouterr().out.startswith("no preset for sac on CartpoleSwingup")
    assert "unknown agent 'nope'" in _one_error(capsys, ["presets", "nope"])
    assert "usage: ajax presets" in _one_error(capsys, ["presets", "dqn", "sac"])


def test_train_args_and_identity_know_the_preset():
    """``--preset`` is a run option (no agent's config has a field of that name), and the
    preset is not part of a run's identity: the config it gave is."""
    from ajax.cli_args import TrainArgs
    from ajax.training.run_dir import RunSpec, identity

    assert "preset" in {f.name for f in dataclasses.fields(TrainArgs)}
    for cls in (a.config_cls for a in agents.available().values()):
        assert "preset" not in {f.name for f in dataclasses.fields(cls)}
    spec = RunSpec(agent="dqn", env="CartPole-v1", steps=10, preset="dqn-cartpole")
    assert identity(spec) == identity(dataclasses.replace(spec, preset=None))
