"""Sweeps in one program (issue 40 part 1): each grid point is the plain run with its values
(bitwise under ``seed_batching="map"``, float rounding vmapped), float fields are traced in one
program for every agent that says so, the others run one program per value, and bad grids are
refused before anything runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
import pytest

from ajax import PPO, SAC, agents
from ajax.agents.ppo import PPOConfig
from ajax.agents.sac import SACConfig
from ajax.cli import main
from ajax.training.sweep import SweepError, Swept, field_kinds, split_grid, swept_chunks

SAC_SMALL = SACConfig(hidden=32, batch_size=32, learning_starts=100, eval_freq=250,
                      eval_episodes=1, buffer_size=1000)  # fmt: skip
PPO_SMALL = PPOConfig(n_envs=4, n_steps=32, eval_freq=256, eval_episodes=1, hidden=32)
RATES = [1e-4, 3e-4, 1e-3]


def leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(leaves(a), leaves(b), strict=True))


def check_points_are_plain_runs(cls, env, config, steps, rates, n_seeds, exact=True):
    """``rates`` x ``n_seeds`` in one mapped program: every point's final state and metrics are
    bitwise the plain (mapped) run with that rate (``exact``), or equal to float rounding."""
    result = cls(env, config).sweep({"learning_rate": rates}, n_seeds=n_seeds,
                                    total_steps=steps, seed_batching="map")  # fmt: skip
    assert result.points == [{"learning_rate": r} for r in rates]
    assert result.metrics["eval_return"].shape[:2] == (len(rates), n_seeds)
    for g, rate in enumerate(rates):
        plain = cls(env, dataclasses.replace(config, learning_rate=rate))
        run = plain.train(0, steps, n_seeds=n_seeds, seed_batching="map")
        if not exact:
            for x, y in zip(leaves(run.state.agent), leaves(result.states[g].agent), strict=True):
                np.testing.assert_allclose(x, y, rtol=1e-3, atol=1e-5)
            continue
        assert same(run.state.agent, result.states[g].agent), rate
        np.testing.assert_array_equal(run.metrics["eval_return"], result.metrics["eval_return"][g])
    # the rates made a difference: the points are not one run several times
    assert not same(result.states[0].agent, result.states[-1].agent)


@pytest.mark.slow  # 35-70 s; the SAC/PPO 3 x 4 grids check the same under map (slow too)
def test_each_point_is_bitwise_the_plain_run_under_map():
    check_points_are_plain_runs(SAC, "Pendulum-v1", SAC_SMALL, 300, RATES[1:], 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cls", "env", "config", "steps"),
    [(SAC, "Pendulum-v1", SAC_SMALL, 1000), (PPO, "CartPole-v1", PPO_SMALL, 2048)],
    ids=["sac", "ppo"],
)
def test_the_issue_grids_are_bitwise_the_plain_runs(cls, env, config, steps):
    """The issue's check: 3 learning rates x 4 seeds of SAC on Pendulum-v1 and PPO on
    CartPole-v1, each point bitwise the plain run under map. (A one-seed plain run is not
    mapped, and XLA may fold its values as constants: it agrees to float rounding.)"""
    check_points_are_plain_runs(cls, env, config, steps, RATES, 4)


@pytest.mark.slow
def test_vmapped_points_agree_with_the_plain_runs_to_float_rounding():
    """Vmapped, a point agrees with its plain (vmapped) run as vmapped seeds do: to float
    rounding, which a short run keeps small (documented in ajax.training.sweep)."""
    steps = 300
    result = SAC("Pendulum-v1", SAC_SMALL).sweep({"learning_rate": RATES[:2]}, n_seeds=2,
                                                 total_steps=steps)  # fmt: skip
    for g, rate in enumerate(RATES[:2]):
        run = SAC("Pendulum-v1", dataclasses.replace(SAC_SMALL, learning_rate=rate)).train(
            0, steps, n_seeds=2
        )
        for x, y in zip(leaves(run.state.agent), leaves(result.states[g].agent), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_a_shape_field_runs_one_program_per_value():
    """``hidden`` changes shapes: one program per value, each the plain run (map), in grid
    order with a traced field beside it."""
    grid = {"hidden": [16, 24], "learning_rate": [3e-4, 1e-3]}
    traced, static = split_grid(SACConfig, grid)
    assert list(traced) == ["learning_rate"] and list(static) == ["hidden"]
    result = SAC("Pendulum-v1", SAC_SMALL).sweep(grid, n_seeds=2, total_steps=300,
                                                 seed_batching="map")  # fmt: skip
    assert result.points == [
        {"hidden": 16, "learning_rate": 3e-4}, {"hidden": 16, "learning_rate": 1e-3},
        {"hidden": 24, "learning_rate": 3e-4}, {"hidden": 24, "learning_rate": 1e-3},
    ]  # fmt: skip
    for g, point in enumerate(result.points):
        run = SAC("Pendulum-v1", dataclasses.replace(SAC_SMALL, **point)).train(
            0, 300, n_seeds=2, seed_batching="map"
        )
        assert same(run.state.agent, result.states[g].agent), point


LIGHT = {"dqn": "CartPole-v1", "pqn": "CartPole-v1", "ppo": "CartPole-v1", "udrl": "CartPole-v1"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n == "tdmpc2" else n  # tdmpc2: 35-65 s
     for n in sorted(agents.available())],
)  # fmt: skip
def test_every_traced_field_traces(name):
    """The fields ``--help`` calls traced go through the agent's init and chunk as tracers (an
    abstract trace): a float that sets a shape or a branch must be in its ``SWEEP_STATIC``."""
    cls = agents.available()[name]
    traced, _, _ = field_kinds(cls.config_cls)
    algo = cls(env=LIGHT.get(name, "Pendulum-v1"))
    present = {f: np.float32(getattr(algo.config, f)) for f in traced
               if getattr(algo.config, f) is not None}  # fmt: skip
    if not present:
        pytest.skip(f"{name} traces no field (SWEEP_STATIC)")
    chunks = swept_chunks(algo, 4 * algo.config.eval_freq)
    state = jax.eval_shape(chunks.init, Swept(jax.random.PRNGKey(0), present))
    jax.eval_shape(chunks.run_chunk, state)


def test_field_kinds_of_sac():
    traced, static, refused = field_kinds(SACConfig)
    assert {"learning_rate", "tau", "gamma", "init_alpha"} <= set(traced)
    assert {"hidden", "batch_size", "critic_norm", "n_envs"} <= set(static)
    assert {"pretrain", "imitation"} <= set(refused)


def test_bad_grids_are_refused():
    with pytest.raises(SweepError, match="no field 'learnin_rate'"):
        split_grid(SACConfig, {"learnin_rate": [1e-3]})
    with pytest.raises(SweepError, match="pretrain cannot be swept"):
        split_grid(SACConfig, {"pretrain": [None]})
    with pytest.raises(SweepError, match="twice"):
        split_grid(SACConfig, {"tau": [0.1, 0.1]})
    with pytest.raises(SweepError, match="no values"):
        split_grid(SACConfig, {"tau": []})


def _cli(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


SWEEP = ["sweep", "sac", "--env", "Pendulum-v1", "--hidden", "32", "--batch-size", "32",
         "--learning-starts", "100", "--eval-freq", "250", "--eval-episodes", "1",
         "--buffer-size", "1000", "--steps", "500", "--no-progress"]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "learnin_rate=1e-3"], "no field 'learnin_rate'"),
        (["--set", "learning_rate=-1e-3"], "learning_rate"),
        (["--set", "learning_rate=abc"], "--set learning_rate"),
        (["--set", "learning_rate"], "is not FIELD=V1,V2"),
        (["--set", "pretrain=x"], "cannot be swept"),
        (["--set", "tau=0.1", "--set", "tau=0.2"], "given twice"),
        (["--set", "tau=0.1,0.1"], "twice"),
        ([], "give at least one --set"),
        (["--set", "learning_rate=1e-3", "--parallel", "data", "--devices", "1"], "--parallel"),
        (["--set", "learning_rate=1e-3", "--wandb-project", "p"], "wandb"),
    ],
)
def test_cli_refuses_bad_grids_with_one_line(extra, message, tmp_path, capsys):
    out = tmp_path / "sw"
    code, _, err = _cli([*SWEEP, "--out", str(out), *extra], capsys)
    assert code == 2
    assert err.startswith("ajax: error:") and err.count("\n") == 1, err
    assert message in err
    assert not out.exists()


def test_a_grid_too_large_for_memory_is_refused(monkeypatch, tmp_path, capsys):
    """The replay memory check counts every run of the program: points x seeds."""
    from ajax.training import algorithm

    one = SAC("Pendulum-v1", SAC_SMALL).replay_nbytes(500)
    monkeypatch.setattr(algorithm, "device_bytes", lambda: (int(2.5 * one), "the device"))
    code, _, err = _cli([*SWEEP, "--out", str(tmp_path / "sw"), "--set",
                         "learning_rate=1e-4,3e-4,1e-3"], capsys)  # fmt: skip
    assert code == 2 and "3 grid points x 1 seeds" in err, err
    assert not (tmp_path / "sw").exists()


def test_cli_writes_a_run_directory_per_point(tmp_path, capsys):
    """Each point is an ordinary run directory (check and resume work on it); the sweep
    directory holds sweep.json and the table."""
    out = tmp_path / "sw"
    code, text, err = _cli([*SWEEP, "--out", str(out), "--set", "learning_rate=3e-4,1e-3",
                            "--n-seeds", "2"], capsys)  # fmt: skip
    assert code == 0, err
    assert "2 grid point(s) x 2 seed(s) in 1 program(s)" in text
    sweep = json.loads((out / "sweep.json").read_text())
    assert [p["values"] for p in sweep["points"]] == [{"learning_rate": 3e-4},
                                                      {"learning_rate": 1e-3}]  # fmt: skip
    table = (out / "points.csv").read_text().splitlines()
    assert table[0].startswith("point,learning_rate,status,final_eval_return")
    stats = (out / "summary.csv").read_text()
    assert "score,learning_rate=0.0003,,Pendulum-v1,2,500,iqm" in stats
    assert "improvement,learning_rate=0.0003,learning_rate=0.001" in stats
    assert len(table) == 3
    for point in sweep["points"]:
        d = out / point["dir"]
        spec = json.loads((d / "run.json").read_text())
        assert spec["config"]["learning_rate"] == point["values"]["learning_rate"]
        assert spec["n_seeds"] == 2
        assert json.loads((d / "summary.json").read_text())["status"] == "finished"
        assert main(["check", str(d)]) == 0
    assert (out / "curves.png").stat().st_size > 0
    # again without --overwrite: refused, nothing touched
    code, _, err = _cli([*SWEEP, "--out", str(out), "--set", "learning_rate=3e-4"], capsys)
    assert code == 2 and "already holds a sweep" in err


def test_cli_help_names_the_traced_and_static_fields(capsys):
    code, text, _ = _cli(["sweep", "sac", "--help"], capsys)
    assert code == 0
    traced = text.split("fields swept in one program")[1].split("fields that change")[0]
    static = text.split("fields that change shapes")[1].split("not sweepable")[0]
    assert "learning_rate" in traced and "hidden" not in traced
    assert "hidden" in static and "learning_rate" not in static


@pytest.mark.slow  # 37 s on 2 cores
def test_resume_continues_a_point(tmp_path, capsys):
    """A point killed before its end resumes as an ordinary run from its last checkpoint."""
    out = tmp_path / "sw"
    code, _, err = _cli([*SWEEP, "--out", str(out), "--set", "learning_rate=3e-4,1e-3",
                         "--checkpoint-every", "1"], capsys)  # fmt: skip
    assert code == 0, err
    point = out / json.loads((out / "sweep.json").read_text())["points"][1]["dir"]
    ckpts = sorted(int(p.name) for p in (point / "checkpoints").iterdir() if p.name.isdigit())
    assert ckpts[-1] == 2
    # cut the point back to its first checkpoint, as a kill after it would leave it
    import shutil

    shutil.rmtree(point / "checkpoints" / "2")
    manifest = point / "checkpoints" / "MANIFEST.json"
    data = json.loads(manifest.read_text())
    data["steps"] = {k: v for k, v in data["steps"].items() if k != "2"}
    manifest.write_text(json.dumps(data))
    assert main(["resume", str(point)]) == 0
    assert json.loads((point / "summary.json").read_text())["status"] == "finished"
    assert Path(point / "checkpoints" / "2").exists()


def test_a_host_env_is_refused():
    """A sweep batches its runs in one jitted program: a host env (dm_control, ...) cannot."""
    from types import SimpleNamespace

    from ajax.training.sweep import plan_sweep

    host = SimpleNamespace(is_jax=False, env_id="dmc:cartpole-swingup")
    with pytest.raises(SweepError, match="host env"):
        plan_sweep(host, {"tau": [0.1]}, 100, 0, 1, None, "seeds", "vmap", None)


@pytest.mark.slow
def test_a_tdmpc2_learning_rate_sweep_is_bitwise_the_plain_runs():
    """TD-MPC2 traces its learning rate (``SWEEP_TRACED``): 2 rates x 2 seeds of a tiny model in
    one mapped program, each point the plain run to float rounding, not bitwise: the encoder's
    rate ``learning_rate * enc_lr_scale`` rounds once in float64 in a plain run and in float32
    when traced (measured: a last-digit difference after 300 steps). 300 steps: its replay holds
    whole episodes (Pendulum's are 200 steps), so nothing is learnt before the first ends."""
    from ajax.agents.tdmpc2 import TDMPC2, PlannerConfig, TDMPC2Config

    tiny = TDMPC2Config.preset(
        1, enc_dim=16, mlp_dim=16, latent_dim=16, batch_size=8, seed_steps=40, eval_freq=50,
        eval_episodes=1,
        planner=PlannerConfig(num_samples=16, num_pi_trajs=2, num_elites=4, iterations=2),
    )  # fmt: skip
    check_points_are_plain_runs(TDMPC2, "Pendulum-v1", tiny, 300, [3e-4, 1e-3], 2, exact=False)
