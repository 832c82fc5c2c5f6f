"""The DreamerV3 harnesses beside the official code (issue 36 items 4 and 5): flags, the
official driver's output parsing and failure lines, the gymnasium adapter, the speed tables,
and the equal-budget curves, table and plot from fake runs. None of it needs the official
interpreter (CI has none); the runs themselves are the benchmarks' job."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from bench_loader import BENCH, load_benchmark

_load = load_benchmark


@pytest.fixture(scope="module")
def driver():
    return _load("dreamerv3_official")


@pytest.fixture(scope="module")
def vs():
    return _load("dreamerv3_vs_official")


def _fake_repo(root: Path) -> Path:
    """A folder that passes the flag check (dreamerv3/agent.py exists) but cannot run."""
    (root / "dreamerv3").mkdir(parents=True)
    (root / "dreamerv3" / "agent.py").write_text("")
    return root


# ----------------------------------------------------------------------------- the driver


def test_driver_imports_the_standard_library_only(driver):
    """The adapter, the parser and the flags load in any interpreter: JAX, elements and the
    official code are imported inside the functions that run in the official one."""
    source = (BENCH / "dreamerv3_official.py").read_text()
    top = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all(line.split()[1].split(".")[0] in sys.stdlib_module_names or
               line.startswith("from __future__") for line in top), top  # fmt: skip


def test_parse_lines_keeps_only_measurement_rows(driver):
    out = "\n".join([
        "Observations",
        "{not json",
        '{"no_kind": 1}',
        '  {"kind": "train", "train_ms": 12.5}',
        "Train cost analysis: {'flops': 1}",
        '{"kind": "policy", "policy_ms": 1.5}',
        "[1, 2]",
    ])  # fmt: skip
    assert driver.parse_lines(out) == [
        {"kind": "train", "train_ms": 12.5},
        {"kind": "policy", "policy_ms": 1.5},
    ]


def test_last_error_line_quotes_the_traceback_end(driver):
    err = (
        "---\nError in '_worker' (AssertionError: (32, 1, 1, 9)):\nTraceback (most recent call"
        ' last):\n  File "x.py", line 1\n    assert a\nAssertionError: (32, 1, 1, 9)\n\n'
    )
    assert driver.last_error_line(err) == "AssertionError: (32, 1, 1, 9)"
    assert driver.last_error_line("just this\n") == "just this"
    assert driver.last_error_line("") == "(no output)"
    assert driver.last_error_line("jax.errors.JaxRuntimeError: OOM\n").startswith("jax.errors")


def test_logger_scores_match_the_adapter_up_to_float32_sums(driver, tmp_path):
    """The official logger sums rewards in float32, the adapter in float64 (Pendulum)."""
    episodes = [[201, -1551.197305161968, 200, 0], [402, -1200.5, 200, 0]]
    (tmp_path / "scores.jsonl").write_text(
        '{"step": 201, "episode/score": -1551.197308063507}\n'
        '{"step": 300, "fps/policy": 3.0}\n'
        '{"step": 402, "episode/score": -1200.5}\n'
    )
    logged = driver.logger_scores(tmp_path)
    assert logged == [[201, -1551.197308063507], [402, -1200.5]]
    assert driver.scores_match(logged, episodes)
    assert not driver.scores_match(logged[:1], episodes)  # an episode missing
    assert not driver.scores_match([[202, -1551.2], logged[1]], episodes)  # another step
    assert not driver.scores_match([[201, -1500.0], logged[1]], episodes)  # another score
    assert driver.logger_scores(tmp_path / "nothing") == []


@pytest.mark.parametrize(
    "argv, says",
    [
        (["speed", "--repo", "/no/such/repo"], "holds no dreamerv3/agent.py"),
        (["speed", "--repo", "{repo}", "--size", "3m"], "invalid choice"),
        (["speed", "--repo", "{repo}", "--dtype", "float16"], "invalid choice"),
        (["run", "--repo", "{repo}"], "--steps"),
        (["run", "--repo", "{repo}", "--steps", "0"], "must be >= 1"),
        (["walk", "--repo", "{repo}"], "invalid choice"),
    ],
)
def test_driver_bad_flags_exit_2_with_one_line(driver, argv, says, tmp_path, capsys):
    repo = str(_fake_repo(tmp_path))
    with pytest.raises(SystemExit) as exit_:
        driver.main([a.replace("{repo}", repo) for a in argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and err[-1].startswith("dreamerv3_official.py"), err


def test_gymnasium_adapter_follows_the_embodied_env_protocol(driver):
    """reset -> is_first with reward 0; steps until is_last (terminal on a fall); the next step
    resets by itself; each finished episode is recorded at the logger's step."""
    clock = {"step": 0}
    episodes = []
    env = driver.GymnasiumEnv("CartPole-v1", index=1, seed=3, step_fn=lambda: clock["step"],
                              episodes=episodes)  # fmt: skip
    obs = env.step({"reset": True, "action": 0})
    assert obs["is_first"] and not obs["is_last"] and obs["reward"] == 0.0
    assert obs["vector"].shape == (4,) and obs["vector"].dtype == np.float32
    length = 0
    while True:  # always push left: the pole falls within a few dozen steps
        clock["step"] += 2  # two envs in lockstep
        obs = env.step({"reset": False, "action": np.int32(0)})
        length += 1
        assert not obs["is_first"]
        if obs["is_last"]:
            break
    assert obs["is_terminal"] and obs["reward"] == 1.0
    assert episodes == [[clock["step"] + 2, float(length), length, 1]]
    again = env.step({"reset": False, "action": np.int32(0)})
    assert again["is_first"] and again["reward"] == 0.0
    env.close()
    # the first reset is seeded: the same seed gives the same first observation
    twin = driver.GymnasiumEnv("CartPole-v1", seed=3)
    first = twin.step({"reset": True, "action": 0})["vector"]
    assert np.array_equal(first, driver.GymnasiumEnv("CartPole-v1", seed=3).step(
        {"reset": True, "action": 0})["vector"])  # fmt: skip


def test_gymnasium_adapter_continuous_actions_and_truncation(driver):
    """Pendulum never terminates: its 200th step is last but not terminal."""
    env = driver.GymnasiumEnv("Pendulum-v1", seed=0, episodes=[])
    env.step({"reset": True, "action": np.zeros(1, np.float32)})
    for t in range(200):
        obs = env.step({"reset": False, "action": np.array([0.5], np.float32)})
        assert obs["is_last"] == (t == 199)
    assert not obs["is_terminal"]
    assert len(env._episodes) == 1 and env._episodes[0][2] == 200


# ----------------------------------------------------------------------------- the speed script


@pytest.fixture(scope="module")
def speed():
    return _load("dreamerv3_speed")


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--official-python", sys.executable], "go together"),
        (["--official-python", "/no/such/python", "--official-repo", "."], "not an executable"),
        (["--official-python", sys.executable, "--official-repo", "."], "holds no dreamerv3"),
        (["--official-dtypes", "float16"], "invalid choice"),
        (["--sizes", "3m"], "invalid choice"),
        (["--run-steps", "0"], "must be >= 1"),
        (["--batch-length", "1"], "must be >= 2"),
        (["--run-ratio", "0"], "must be > 0"),
    ],
)
def test_speed_bad_flags_exit_2_with_one_line(speed, argv, says, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["dreamerv3_speed.py", *argv])
    with pytest.raises(SystemExit) as exit_:
        speed.main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and err[-1].startswith("dreamerv3_speed.py: error:"), err


def _speed_args(speed, tmp_path, **kw):
    args = speed.build_parser().parse_args([])
    args.official_python, args.official_repo = sys.executable, str(_fake_repo(tmp_path))
    args.sizes, args.official_dtypes, args.official_timeout = ["1m"], ["float32"], 60.0
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def test_official_code_that_fails_exits_2_with_its_last_line(speed, tmp_path, capsys):
    """A checkout the driver cannot run (here: this interpreter has no ``elements``, the repo no
    code) ends the benchmark with exit 2 and one line quoting the driver's last error line."""
    with pytest.raises(SystemExit) as exit_:
        speed.official_times(_speed_args(speed, tmp_path))
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the official DreamerV3 failed" in err[0], err
    assert "Error" in err[0]  # the driver's own last line, e.g. ModuleNotFoundError


def test_official_call_reads_rows_and_reasons(speed, tmp_path, monkeypatch):
    fake = tmp_path / "fake_driver.py"
    fake.write_text(
        "import sys\nprint('banner')\n"
        "if sys.argv[1] == 'speed':\n"
        '    print(\'{"kind": "train", "train_ms": 3.0}\')\n'
        "else:\n    raise ValueError('no run here')\n"
    )
    monkeypatch.setattr(speed, "DRIVER", fake)
    rows, why = speed.official_call(sys.executable, ".", ["speed"], 60)
    assert rows == [{"kind": "train", "train_ms": 3.0}] and why is None
    rows, why = speed.official_call(sys.executable, ".", ["run"], 60)
    assert rows == [] and why == "ValueError: no run here"


def test_speed_tables_ratio_against_the_faster_official_setting(speed):
    args = speed.build_parser().parse_args(["--sizes", "1m", "12m"])
    ajax = {
        "1m": dict(params=637_446, compile_s=8.0, train_ms=500.0, gflop=20.0, policy_ms=0.5),
        "12m": dict(params=12_000_000, compile_s=12.0, train_ms=3000.0, gflop=400.0,
                    policy_ms=1.0),
    }  # fmt: skip

    def row(**kw):
        return {"size": "1m", "dtype": "float32", "params": 637_446, "build_s": 20.0,
                "jax": "0.4.33", **kw}  # fmt: skip

    official = {
        ("train", "1m", "float32"): row(train_ms=1000.0),
        ("train", "1m", "bfloat16"): row(dtype="bfloat16", train_ms=1500.0),
        ("policy", "1m", "float32"): row(policy_ms=2.0, compile_s=24.0),
        ("policy", "1m", "bfloat16"): row(policy_ms=2.5, compile_s=30.0),
        ("train", "12m", "float32"): "JaxRuntimeError: out of memory",
        ("policy", "12m", "float32"): "JaxRuntimeError: out of memory",
        ("train", "12m", "bfloat16"): "timed out after 1800 s",
        ("policy", "12m", "bfloat16"): "timed out after 1800 s",
        ("run",): {"steps_per_s": 2.0, "steps": 1400, "train_start_step": 1088,
                   "updates": 157, "build_s": 30.0, "wall_s": 200.0},
    }  # fmt: skip
    lines = speed.format_tables(args, ajax, {"jitted": 5.0, "host": 4.0}, official, 100.0)
    text = "\n".join(lines)
    one_m = next(x for x in lines if x.split()[:1] == ["1m"] and "637,446" in x)
    assert one_m.split()[-2] == "2.00"  # 1000 ms (f32, the faster) / 500 ms
    # x max: 1000 ms over 20 GFLOP at the plain matmul's 100 GFLOP/s (200 ms)
    assert one_m.split()[-1] == "5.00"
    twelve = next(x for x in lines if x.split()[:1] == ["12m"] and "12,000,000" in x)
    assert twelve.split()[-4:] == ["-", "-", "-", "-"]
    policy = [x for x in lines if x.split()[:2] == ["1m", "0.50"]]
    assert policy and policy[0].split()[-1] == "4.00"
    assert "official train 12m float32: - (JaxRuntimeError: out of memory)" in text
    jitted = next(x for x in lines if "Ajax jitted" in x)
    assert jitted.split()[-1] == "2.50"  # 5.0 / 2.0 env steps/s
    # without the official side: every official cell is "-"
    bare = speed.format_tables(args, ajax, {"jitted": 5.0}, {}, 100.0)
    assert next(x for x in bare if "637,446" in x).split()[-1] == "-"


def test_run_plan_times_from_the_first_record_after_training_starts(speed):
    cfg = SimpleNamespace(n_envs=1, window=65, first_train_step=1088)
    assert speed.run_plan(cfg, 300) == (100, 1100, 1400)
    cfg = SimpleNamespace(n_envs=4, window=9, first_train_step=16 + 4 * 8)
    assert speed.run_plan(cfg, 100) == (400, 400, 800)
    assert speed.train_start(SimpleNamespace(n_envs=2, window=65)) == 130


# ----------------------------------------------------------------------------- equal budget


def test_official_curve_is_the_mean_of_each_envs_last_episode(vs):
    episodes = [[30, 10.0, 9, 0], [45, 20.0, 20, 1], [120, 40.0, 30, 0], [260, 80.0, 50, 1]]
    assert np.allclose(vs.official_curve(episodes, [20, 100, 200, 300]),
                       [np.nan, 15.0, 30.0, 60.0], equal_nan=True)  # fmt: skip


def test_final_return_averages_the_last_fraction(vs):
    grid = [100, 200, 300, 400, 500]
    assert vs.final_return(grid, [1, 2, 3, 4, 5], 500, 0.4) == 4.5  # steps 400 and 500
    assert vs.final_return(grid, [1, 2, 3, 4, 5], 500, 0.01) == 5.0
    assert math.isnan(vs.final_return(grid, [np.nan] * 5, 500, 0.4))


def test_summarize_applies_the_issue_bar(vs):
    s = vs.summarize([100.0, 200.0, 300.0], [150.0, 200.0, 250.0])
    assert s["official_mean"] == 200.0 and s["ajax_mean"] == 200.0
    assert math.isclose(s["pooled_std"], math.sqrt((100.0**2 + 50.0**2) / 2))
    assert s["mean_ok"] and s["worst_ok"] and s["passes"]
    s = vs.summarize([100.0, 200.0, 300.0], [50.0, 400.0, 450.0])  # one Ajax seed below
    assert s["mean_ok"] and not s["worst_ok"] and not s["passes"]
    assert "passes" not in vs.summarize([], [1.0])


def test_permutation_p_counts_the_relabellings_as_extreme_as_observed(vs):
    """3 + 3 seeds: C(6, 3) = 20 relabellings. [1, 2, 3] against [4, 5, 6]: only the observed
    split and its mirror reach |difference| 3, so p = 2 / 20; equal samples give p = 1. The
    worst-seed test alone passes an identical agent with probability 3 / 6."""
    assert vs.permutation_p(np.array([1.0, 2, 3]), np.array([4.0, 5, 6])) == 0.1
    assert vs.permutation_p(np.array([1.0, 2, 3]), np.array([1.0, 2, 3])) == 1.0
    s = vs.summarize([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert s["permutation_p"] == 0.1 and s["worst_ok_if_same"] == 0.5


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--sides", "ajax", "--tasks", "Acrobot-v1"], "invalid choice"),
        (["--sides", "ajax", "--seeds", "0"], "--seeds must be >= 1"),
        (["--sides", "ajax", "--first-seed", "-1"], "--first-seed must be >= 0"),
        (["--sides", "ajax", "--final-frac", "0"], "--final-frac"),
        (["--sides", "ajax", "--envs", "3", "--curve-every", "500"], "multiple of --envs"),
        (["--sides", "ajax", "--steps", "100", "--curve-every", "500"], "at most --steps"),
        (["--sides", "ajax", "--batch-length", "1"], "--batch-length must be >= 2"),
        ([], "needs --official-python and --official-repo"),
        (["--official-python", "/no/such/python", "--official-repo", "."], "not an executable"),
        (["--official-python", sys.executable, "--official-repo", "."], "holds no dreamerv3"),
    ],
)
def test_vs_bad_flags_exit_2_with_one_line(vs, argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        vs.parse_args(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and err[-1].startswith("dreamerv3_vs_official.py: error:"), err


def test_vs_end_to_end_on_fake_runs(vs, tmp_path, monkeypatch, capsys):
    """main() with both sides faked: curves on Ajax's grid, the table, the PNG and the JSON;
    a failed official seed is listed and makes the exit status 1."""
    grid = [200, 400, 600, 800, 1000]

    def fake_ajax(args, task):
        curves = [[10.0, 20.0, 40.0, 60.0, 80.0], [12.0, 25.0, np.nan, 70.0, 90.0]]
        return dict(grid=grid, curves=curves, eval_curves=curves, eval_policy="sample",
                    env=task, wall_s=12.0)  # fmt: skip

    def fake_official(args, task, seed):
        if seed == 1 and task == "Pendulum-v1":
            return None, "AssertionError: boom (log: x.log)"
        eps = [[150 + 100 * i, 10.0 * (i + 1) + seed, 20, 0] for i in range(9)]
        return dict(episodes=eps, seed=seed, wall_s=30.0, updates=400, train_start_step=24,
                    logger_matches_adapter=True), None  # fmt: skip

    monkeypatch.setattr(vs, "run_ajax", fake_ajax)
    monkeypatch.setattr(vs, "run_official", fake_official)
    out = tmp_path / "out"
    argv = ["--official-python", sys.executable, "--official-repo", str(_fake_repo(tmp_path)),
            "--seeds", "2", "--steps", "1000", "--curve-every", "200", "--out", str(out),
            "--final-frac", "0.4"]  # fmt: skip
    assert vs.main(argv) == 1
    results = json.loads((out / "dreamerv3_vs_official.json").read_text())
    cart = results["tasks"]["CartPole-v1"]
    assert cart["grid"] == grid
    # official seed 0: last episodes by 200..1000 end at 150, 350, 550, 750, 950
    assert cart["official"]["curves"][0] == [10.0, 30.0, 50.0, 70.0, 90.0]
    assert cart["official"]["finals"] == [80.0, 81.0]  # steps 800 and 1000
    assert cart["ajax"]["finals"] == [70.0, 80.0]
    assert cart["summary"]["official_mean"] == 80.5
    png = (out / "dreamerv3_vs_official.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    table = (out / "dreamerv3_vs_official.md").read_text()
    assert "| CartPole-v1 | official | 80.0 | 81.0 | 80.5 |" in table
    assert "| CartPole-v1 | Ajax | 70.0 | 80.0 | 75.0 |" in table
    assert "| Pendulum-v1 | official | 80.0 | - |" in table
    assert "Pendulum-v1 official: - (seed 1: AssertionError: boom" in table
    assert "CartPole-v1: Ajax mean 75.0" in table
    assert table in capsys.readouterr().out


def test_profile_classes_ops_by_hlo_name_and_origin():
    prof = _load("dreamerv3_profile")
    assert prof.classify("ynn_fusion.8", "jvp()/while/body/RSSM.core/dot_general").startswith(
        "matmul"
    )
    assert prof.classify("copy.3", "jvp()/transpose") == "layout copies / transposes"
    assert prof.classify("fusion.1", "jvp()/while/body/jit(_gumbel)/threefry2x32") == "random draws"
    assert "inside scan" in prof.classify("add.2", "jvp()/while/body/RSSM.core/add")
    assert "outside scans" in prof.classify("add.5", "jvp(MLPHead)/NormedMLP_0/add")
