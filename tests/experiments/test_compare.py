"""ajax compare: tables from hand-written run directories, the output formats, one-line
errors, sweeps, the published-curve overlay and the PNG. No training here."""

from __future__ import annotations

import csv
import io
import json

import pytest

from ajax.cli import main
from ajax.experiments import compare, reference
from ajax.experiments.report import format_table, plot_groups, write_report

# Final per-seed scores (step 1000): A's IQM 25 (middle two of 10 20 30 100), mean 40,
# median 25; B's 20, 20, 20. P(A > B) over the 16 pairs: 10 beats 5, 20 two, 30 three,
# 100 four: 10 / 16 = 0.625.
A = [[0.0, 1.0, 2.0, 3.0], [10.0, 20.0, 30.0, 100.0]]
B = [[1.0, 1.0, 1.0, 1.0], [5.0, 15.0, 25.0, 35.0]]
ENV = "dmc:cartpole-swingup"


def make_run(path, rows, env=ENV, action_repeat=2, extra=None):
    """A run directory as ajax.training.run writes it: run.json and metrics.jsonl."""
    path.mkdir(parents=True)
    spec = {"agent": "sac", "env": env, "steps": 1000, "seed": 0, "n_seeds": len(rows[0]),
            "config": {"action_repeat": action_repeat}, "env_options": {}}  # fmt: skip
    (path / "run.json").write_text(json.dumps(spec))
    lines = []
    for k, returns in enumerate(rows):
        record = {"step": 500 * (k + 1), "eval_return": sum(returns) / len(returns),
                  "eval_returns": returns, "actor_loss": 0.1, "wall_time_s": 1.0}  # fmt: skip
        lines.append(json.dumps({**record, **(extra or {})}))
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def runs(tmp_path):
    return make_run(tmp_path / "a", A), make_run(tmp_path / "b", B)


def run_cli(capsys, *args):
    status = main(["compare", *map(str, args), "--reps", "200"])
    out, err = capsys.readouterr()
    return status, out, err


def test_table_numbers(runs):
    loaded = compare.load_targets(list(runs))
    assert [r.label for r in loaded] == ["a", "b"]
    a, b = compare.summarise_runs(loaded, reps=200)
    assert (a.seeds, a.env_steps, a.env) == (4, 2000, ENV)  # step 1000 x action repeat 2
    assert {k: v.point for k, v in a.scores.items()} == {"iqm": 25.0, "mean": 40.0, "median": 25.0}
    assert {k: v.point for k, v in b.scores.items()} == {"iqm": 20.0, "mean": 20.0, "median": 20.0}
    assert all(v.low <= v.point <= v.high for v in a.scores.values())
    (pair,) = compare.improvements(loaded, reps=200)
    assert (pair.x, pair.y, pair.p.point) == ("a", "b", 0.625)


def test_markdown_table(runs, capsys):
    status, out, _ = run_cli(capsys, *runs)
    assert status == 0
    assert "| run | env | seeds | env steps | IQM | mean | median |" in out
    assert f"| a | {ENV} | 4 | 2000 | 25 [" in out
    assert "| a | b | 0.625 [" in out


def test_csv_table(runs, capsys):
    status, out, _ = run_cli(capsys, *runs, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert status == 0 and len(rows) == 7  # 2 runs x 3 statistics + 1 pair
    mean_a = next(r for r in rows if r["run"] == "a" and r["statistic"] == "mean")
    assert (float(mean_a["value"]), mean_a["seeds"], mean_a["env_steps"]) == (40.0, "4", "2000")
    pair = rows[-1]
    assert (pair["kind"], pair["run"], pair["versus"], float(pair["value"])) == (
        "improvement", "a", "b", 0.625)  # fmt: skip


def test_json_table(runs, capsys):
    status, out, _ = run_cli(capsys, *runs, "--format=json", "--ci", "0.9")
    data = json.loads(out)
    assert status == 0 and data["level"] == 0.9
    assert data["runs"][0]["iqm"]["point"] == 25.0 and data["runs"][1]["median"]["point"] == 20.0
    assert data["improvement"] == [{"x": "a", "y": "b", "p": data["improvement"][0]["p"]}]
    assert data["improvement"][0]["p"]["point"] == 0.625


def test_other_metric_and_scalar_metric(runs, capsys):
    status, out, _ = run_cli(capsys, runs[0], "--metric", "actor_loss", "--format", "json")
    data = json.loads(out)
    assert status == 0 and data["runs"][0]["seeds"] == 1 and data["runs"][0]["mean"]["point"] == 0.1


def test_sweep_points_are_runs(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    make_run(sweep / "points" / "p0", A)
    make_run(sweep / "points" / "p1", B)
    points = [{"name": "learning_rate=1e-4", "dir": "points/p0", "values": {"learning_rate": 1e-4}},
              {"name": "learning_rate=3e-4", "dir": "points/p1", "values": {"learning_rate": 3e-4}}]  # fmt: skip
    (sweep / "sweep.json").write_text(json.dumps({"points": points}))
    status, out, _ = run_cli(capsys, sweep, "--format", "json")
    data = json.loads(out)
    assert status == 0
    assert [r["run"] for r in data["runs"]] == ["learning_rate=1e-4", "learning_rate=3e-4"]
    assert data["improvement"][0]["p"]["point"] == 0.625


def test_errors_are_one_line_exit_2(tmp_path, runs, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "badsweep").mkdir()
    (tmp_path / "badsweep" / "sweep.json").write_text("{}")
    (tmp_path / "fig.png").mkdir()  # a directory named like the figure
    cases = [
        ([tmp_path / "nope"], "does not exist"),
        ([tmp_path / "empty"], "neither a run directory (no run.json) nor a sweep directory "
                               "(no sweep.json)"),
        ([tmp_path / "badsweep"], "sweep.json is malformed"),
        ([runs[0], "--metric", "score"], "unknown metric 'score'"),
        ([runs[0], "--reference", "muzero"], "unknown --reference 'muzero'; sources: tdmpc2"),
        ([runs[0], "--format", "xml"], "unknown --format 'xml'; formats: md, csv, json"),
        ([runs[0], "--ci", "1.5"], "--ci must be in (0, 1)"),
        ([runs[0], "--reps", "many"], "--reps takes an integer, got 'many'"),
        ([runs[0], "--bins", "3"], "unknown option --bins"),
        ([runs[0], runs[0]], "is named twice"),
        ([runs[0], "--out", tmp_path / "fig.pdf"], "--out names a PNG"),
        ([runs[0], "--out", tmp_path / "fig.png"], "is a directory; name the PNG"),
        ([runs[0], "--out", runs[0] / "run.json" / "fig.png"], "which is not a directory"),
        ([runs[0], "--out", "/proc/ajax-no-such/fig.png"], "cannot write --out"),  # no table
        ([runs[0], "--reps", "1000000000"], "--reps must be in [1, 100000]"),
        ([runs[0], "--seed", "-1"], "--seed must be in [0, 4294967295]"),
        ([], "name at least one run or sweep directory"),
    ]  # fmt: skip
    for args, message in cases:
        status = main(["compare", *map(str, args)])
        out, err = capsys.readouterr()
        assert status == 2 and out == "", args
        assert err.count("\n") == 1 and err.startswith("ajax: error: "), err
        assert message in err, (message, err)
    main(["compare", str(runs[0]), "--metric", "score"])
    err = capsys.readouterr().err
    assert "metrics present: actor_loss, eval_return" in err


def test_help(capsys):
    assert main(["compare", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: ajax compare RUN_OR_SWEEP...")


def test_reference_mapping_for_cartpole_swingup():
    curve = reference.reference_curve("tdmpc2", ENV)
    assert (curve.source, curve.suite, curve.task) == ("tdmpc2", "tdmpc2", "cartpole-swingup")
    assert curve.file == "tdmpc2/results/tdmpc2/cartpole-swingup.csv"
    assert curve.seeds == (1, 2, 3) and curve.x[0] == 0 and curve.x[-1] == 4_000_000
    assert curve.y.shape == (3, len(curve.x))
    assert curve.low[-1] <= curve.mean[-1] <= curve.high[-1]
    assert reference.reference_curve("sac", ENV).file == "tdmpc2/results/sac/cartpole-swingup.csv"
    dv3 = reference.reference_curve("dreamerv3", ENV)
    assert (dv3.suite, dv3.task) == ("dmc_proprio", "dmc_cartpole_swingup")
    assert reference.reference_curve("dreamerv3", ENV, pixels=True).suite == "dmc_vision"
    assert reference.dmc_task("dmc:ball_in_cup-catch", "tdmpc2") == "cup-catch"
    assert reference.dmc_task("dmc:finger-turn_easy", "tdmpc2") == "finger-turn-easy"
    assert reference.sources_for("dmc:ball_in_cup-catch") == ("tdmpc2", "dreamerv3", "sac")
    assert reference.sources_for("Pendulum-v1") == ()


def test_reference_row_in_the_table(runs, capsys):
    status, out, err = run_cli(capsys, runs[0], "--reference", "tdmpc2", "--format", "json")
    data = json.loads(out)
    published = data["runs"][1]
    assert status == 0 and err == ""
    # the published point nearest the run's 2000 env steps is step 0, 3 seeds
    assert (published["run"], published["seeds"], published["env_steps"]) == (
        "tdmpc2 (published)", 3, 0)  # fmt: skip


def test_no_published_curve_is_one_line(tmp_path, capsys):
    run = make_run(tmp_path / "pend", A, env="Pendulum-v1", action_repeat=1)
    status, out, err = run_cli(capsys, run, "--reference", "tdmpc2")
    assert status == 0 and "| pend | Pendulum-v1 | 4 | 1000 |" in out
    assert err == "no published tdmpc2 curve for Pendulum-v1\n"


def test_atari_steps_and_human_normalised_scores(tmp_path, capsys):
    run = make_run(tmp_path / "pong", A, env="atari:Pong", action_repeat=1)
    status, out, _ = run_cli(capsys, run, "--format", "json", "--reference", "dreamerv3")
    data = json.loads(out)
    row = data["runs"][0]
    assert status == 0 and row["env_steps"] == 4000  # 4 frames per agent step
    random, human = reference.atari_scores()["atari_pong"]
    assert (random, human) == (-20.7, 14.6)
    expected = (25.0 - random) / (human - random)
    assert row["human_normalised"]["iqm"]["point"] == pytest.approx(expected)
    assert data["runs"][1]["run"] == "dreamerv3 (published)"
    assert reference.atari_task("atari:UpNDown") == "atari_up_n_down"


def test_png_is_written(runs, tmp_path, capsys):
    fig = tmp_path / "out" / "fig.png"
    status, _, err = run_cli(capsys, *runs, "--out", fig, "--reference", "sac")
    assert status == 0 and f"wrote {fig}" in err
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_groups_and_format_table_for_a_sweep(runs, tmp_path):
    loaded = compare.load_targets(list(runs))
    plot_groups(tmp_path / "curves.png", loaded, statistic="iqm", reps=50,
                references={ENV: reference.reference_curve("tdmpc2", ENV)})  # fmt: skip
    assert (tmp_path / "curves.png").stat().st_size > 0
    table = format_table(compare.summarise_runs(loaded, reps=50), [], "md")
    assert "| b | dmc:cartpole-swingup | 4 | 2000 | 20 [" in table


def test_write_report_for_a_sweep_directory(runs, tmp_path):
    summaries = write_report(tmp_path / "sweep", compare.load_targets(list(runs)), reps=50)
    assert [s.label for s in summaries] == ["a", "b"]
    assert json.loads((tmp_path / "sweep" / "summary.json").read_text())["runs"][0]["run"] == "a"
    assert (tmp_path / "sweep" / "summary.csv").read_text().startswith("kind,run,versus,")
    assert (tmp_path / "sweep" / "curves.png").is_file()
