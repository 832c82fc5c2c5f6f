"""Renamed config fields (a config's ``RENAMED``): the world models' ``lr`` is ``learning_rate``,
as in every other agent, and the old name still works for one release, on the command line
(with a warning) and in the run.json of runs saved before the rename."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ajax import cli
from ajax.agents.dreamerv3 import DreamerV3Config
from ajax.agents.tdmpc2 import PlannerConfig, TDMPC2Config
from ajax.cli_flags import UsageError, renamed_flags
from ajax.training.run_dir import RunDirError, identity, load_spec
from ajax.validation import ConfigError, Validated, renamed_fields

ENVS = {"tdmpc2": "Pendulum-v1", "dreamerv3": "CartPole-v1"}
CLASSES = {"tdmpc2": TDMPC2Config, "dreamerv3": DreamerV3Config}
WARNING = "warning: --lr is deprecated (renamed --learning-rate); it will be removed in 0.3.0"


class _Parsed(Exception):
    pass


def _parsed_config(monkeypatch, capsys, agent: str, flags: list[str], tmp_path):
    """``ajax train AGENT --env ENV FLAGS``'s config and stderr lines, stopped where the CLI
    builds the algorithm (nothing compiles, nothing is written)."""
    seen = {}

    def stop(agent, env, config, env_options=None):
        seen["config"] = config
        raise _Parsed

    monkeypatch.setattr(cli, "_make_algo", stop)
    out = tmp_path / "out"
    argv = ["train", agent, "--env", ENVS[agent], "--out", str(out), *flags]
    with pytest.raises(_Parsed):
        cli.cmd_train(argv[1:])
    assert not out.exists()
    return seen["config"], capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("agent", ["tdmpc2", "dreamerv3"])
def test_lr_flag_is_learning_rate_with_one_warning(agent, monkeypatch, capsys, tmp_path):
    new, err = _parsed_config(monkeypatch, capsys, agent, ["--learning-rate", "1e-3"], tmp_path)
    assert new.learning_rate == 1e-3 and err == []
    for flags in (["--lr", "1e-3"], ["--lr=1e-3"]):
        old, err = _parsed_config(monkeypatch, capsys, agent, flags, tmp_path)
        assert old == new and err == [WARNING]
    assert isinstance(new, CLASSES[agent])
    assert "lr" not in {f.name for f in dataclasses.fields(CLASSES[agent])}


@pytest.mark.parametrize("agent", ["tdmpc2", "dreamerv3"])
@pytest.mark.parametrize(
    "flags",
    [["--lr", "1e-3", "--learning-rate", "1e-3"], ["--learning-rate=2e-3", "--lr=1e-3"]],
    ids=["spaced", "inline"],
)
def test_lr_and_learning_rate_together_is_one_line_exit_2(agent, flags, capsys, tmp_path):
    out = tmp_path / "out"
    argv = ["train", agent, "--env", ENVS[agent], "--out", str(out), *flags]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0] == (
        "ajax: error: --lr and --learning-rate set the same field (--lr is its deprecated "
        "name): give only --learning-rate"
    )
    assert not out.exists()


def test_agents_without_the_rename_refuse_lr(capsys):
    """The alias is the world models' (their configs' RENAMED), not a flag of every agent."""
    assert cli.main(["train", "sac", "--env", "Pendulum-v1", "--lr", "1e-3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown option --lr" in err[0], err


def _old_run(tmp_path, agent: str, **config) -> dict:
    """A run directory as the releases before the rename wrote it: run.json's config says
    "lr"."""
    values = dataclasses.asdict(CLASSES[agent]())
    values = {("lr" if k == "learning_rate" else k): v for k, v in values.items()}
    values.update(config)
    spec = {"agent": agent, "env": ENVS[agent], "steps": 100, "seed": 0, "n_seeds": 1,
            "checkpoint_every": 5, "config": values, "env_options": {}}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(spec))
    return spec


@pytest.mark.parametrize("agent", ["tdmpc2", "dreamerv3"])
def test_run_json_with_lr_reads_back_as_learning_rate(agent, tmp_path):
    _old_run(tmp_path, agent, lr=1e-3)
    spec = load_spec(tmp_path)
    config = cli._config_from(spec.agent, spec.config)  # what resume, eval and collect build
    assert config == CLASSES[agent](learning_rate=1e-3)
    # The spec keeps the keys as saved: the identity of the run's checkpoints (made before the
    # rename) still matches on resume.
    assert identity(spec)["config"]["lr"] == 1e-3


def test_run_json_with_lr_and_learning_rate_is_a_run_dir_error(tmp_path):
    _old_run(tmp_path, "tdmpc2", lr=1e-3, learning_rate=2e-3)
    spec = load_spec(tmp_path)
    with pytest.raises(RunDirError, match="has both 'lr' and 'learning_rate'.*keep only"):
        cli._config_from(spec.agent, spec.config)


# A nested config with a renamed field (type hints resolve at module level).
@dataclasses.dataclass(frozen=True)
class _Inner(Validated):
    step: float = 1.0
    fast: bool = False
    RENAMED = {"stepsize": "step", "quick": "fast"}


@dataclasses.dataclass(frozen=True)
class _Outer(Validated):
    inner: _Inner = _Inner()
    planner: PlannerConfig = PlannerConfig()


def test_renamed_fields_maps_old_keys_and_recurses_into_nested_configs():
    values = {"inner": {"stepsize": 2.0}, "planner": {"horizon": 2}}
    assert renamed_fields(_Outer, values) == {"inner": {"step": 2.0}, "planner": {"horizon": 2}}
    assert values == {"inner": {"stepsize": 2.0}, "planner": {"horizon": 2}}  # not changed
    assert renamed_fields(TDMPC2Config, {"lr": 1e-3}) == {"learning_rate": 1e-3}
    with pytest.raises(ConfigError, match="keep only 'learning_rate'"):
        renamed_fields(DreamerV3Config, {"lr": 1e-3, "learning_rate": 1e-3})


def test_renamed_nested_flag_keeps_its_path_and_switch(capsys):
    """A nested config's renamed field: --outer.old becomes --outer.new (and --outer.no-old
    --outer.no-new for a switch)."""
    tokens = ["--inner.quick", "--inner.no-quick", "--env", "x"]
    assert renamed_flags(_Outer, tokens) == ["--inner.fast", "--inner.no-fast", "--env", "x"]
    assert capsys.readouterr().err.strip().splitlines() == [
        "warning: --inner.quick is deprecated (renamed --inner.fast); it will be removed in 0.3.0"
    ]
    with pytest.raises(UsageError, match="give only --inner.fast"):
        renamed_flags(_Outer, ["--inner.quick", "--inner.fast"])
