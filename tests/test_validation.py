"""The shared config validator: rules, a property test over every agent's config, and a table of
bad command lines that must each end in one error line, exit 2, and nothing written."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import typing

import jax
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ajax import agents
from ajax.agents.avg import AVGConfig
from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config
from ajax.agents.ppo import PPO, PPOConfig
from ajax.agents.sac import SAC, SACConfig
from ajax.agents.shared.guidance import MCPretrain
from ajax.agents.td3 import TD3, TD3Config
from ajax.agents.tdmpc2 import TDMPC2, PlannerConfig, TDMPC2Config
from ajax.cli import main
from ajax.validation import ConfigError, Rule, between, increasing, one_of, positive


def test_rules_describe_and_admit():
    assert positive().describe() == "> 0" and not positive().admits(0)
    assert between(0.0, 1.0, lo_open=True).describe() == "in (0, 1]"
    assert between(0, 2**31 - 1).describe() == "in [0, 2147483647]"
    assert one_of("a", "b").admits("a") and not one_of("a", "b").admits("c")
    assert Rule(lo=1, optional=True).admits(None) and not Rule(lo=1).admits(None)
    assert increasing().admits((-1.0, 2.0)) and not increasing().admits((2.0, 2.0))


@pytest.mark.parametrize(
    "build, field, text",
    [
        (lambda: SACConfig(hidden=0), "hidden", "SACConfig.hidden = 0 is invalid: it must be > 0"),
        (lambda: SACConfig(hidden=1.5), "hidden", "must be an integer"),
        (lambda: SACConfig(gamma=float("nan")), "gamma", "must be a finite number"),
        (lambda: SACConfig(learning_rate=True), "learning_rate", "must be a number"),
        (lambda: TD3Config(gamma=2.0), "gamma", "in [0, 1]"),
        (lambda: PPOConfig(clip_eps=-1.0), "clip_eps", "> 0"),
        (lambda: PPOConfig(num_minibatches=3), "num_minibatches", "divisor of n_envs"),
        (lambda: PPOConfig(activation="foo"), "activation", "one of 'elu'"),
        (lambda: SACConfig(batch_size=512, learning_starts=600, buffer_size=256), "buffer_size",
         "raise --buffer-size"),
        (lambda: DreamerV3Config(model_size="3m"), "model_size", "one of '1m'"),
        (lambda: DreamerV3Config(replay_context=2), "replay_context", "one of 0, 1"),
        (lambda: DreamerV3Config(bins=254), "bins", "odd and >= 3"),
        (lambda: SACConfig(log_std_bounds=(1.0,)), "log_std_bounds", "a tuple of 2 numbers: got 1"),
        (lambda: SACConfig(log_std_bounds=(1.0, -1.0)), "log_std_bounds", "increasing"),
        (lambda: SACConfig(log_std_bounds=None), "log_std_bounds", "a tuple of 2"),
        (lambda: AVGConfig(log_std_bounds=(2.0, 2.0)), "log_std_bounds", "increasing"),
        (lambda: AVGConfig(log_std_bounds=(0.0, math.nan)), "log_std_bounds", "item 1 is not a number"),
        (lambda: SACConfig(buffer_size=2**31), "buffer_size", "lower --buffer-size to <= 2147483647"),
        (lambda: TDMPC2Config(vmin=10.0, vmax=-10.0), "vmax", "pass --vmax"),
        (lambda: TDMPC2Config(vmin=-10.0, vmax=-10.0), "vmax", "> 0"),
        # nested configs set from Python: the field and the class it takes, not an AttributeError
        (lambda: SAC("Pendulum-v1", SACConfig(pretrain=1)), "pretrain",
         "SACConfig.pretrain = 1 is invalid: it must be None or an MCPretrain; pass "
         "SACConfig(pretrain=...)"),
        (lambda: SACConfig(imitation={}), "imitation", "must be None or an ExpertImitation"),
        (lambda: TD3Config(actor_architecture="pid"), "actor_architecture", "None or a PIDPolicy"),
        (lambda: TDMPC2Config(planner=3), "planner", "must be a PlannerConfig;"),
        (lambda: TDMPC2Config(planner=None), "planner", "must be a PlannerConfig;"),
        (lambda: MCPretrain(expert=abs, rollout_steps=-1), "rollout_steps",
         "pass MCPretrain(rollout_steps=...)"),  # no --rollout-steps flag exists
    ],
)  # fmt: skip
def test_config_error_names_field_value_and_fix(build, field, text):
    with pytest.raises(ConfigError) as err:
        build()
    assert err.value.field == field and text in str(err.value)
    assert "\n" not in str(err.value)


def test_every_config_error_names_its_flag():
    """A relation's own fix may word it otherwise; the message still names the flag."""
    with pytest.raises(ConfigError) as err:
        TDMPC2Config(vmin=5.0)
    assert err.value.flag == "--vmin" and "--vmin" in str(err.value)
    with pytest.raises(ConfigError) as err:
        PlannerConfig(horizon=0)
    assert err.value.flag == "--planner.horizon"
    with pytest.raises(ConfigError) as err:  # a field set from Python only has no flag to name
        SACConfig(pretrain=MCPretrain(expert=abs, rollout_steps=2**21))
    assert err.value.flag is None and "--pretrain" not in str(err.value)


# --------------------------------------------------------------------- property test

TINY = {
    SAC: dict(hidden=8, batch_size=8, learning_starts=8, buffer_size=64, eval_freq=16),
    TD3: dict(hidden=8, batch_size=8, learning_starts=8, buffer_size=64, eval_freq=16),
    PPO: dict(hidden=8, n_envs=2, n_steps=8, num_minibatches=2, eval_freq=16),
    DreamerV3: dict(model_size="1m", batch_size=2, batch_length=4, eval_freq=16,
                    imag_length=2, bins=15),
    TDMPC2: dict(model_size=1, enc_dim=16, mlp_dim=16, latent_dim=16, batch_size=8,
                 seed_steps=24, eval_freq=16, eval_episodes=1,
                 planner=PlannerConfig(num_samples=16, num_pi_trajs=2, num_elites=4,
                                       iterations=2)),
}  # fmt: skip
TINY_SAC_CONFIG = SACConfig(hidden=8, batch_size=8, learning_starts=8, buffer_size=64, eval_freq=16)
ENVS = {SAC: "Pendulum-v1", TD3: "Pendulum-v1", PPO: "CartPole-v1", DreamerV3: "CartPole-v1",
        TDMPC2: "Pendulum-v1"}  # fmt: skip

# Values across and beyond every numeric field's range.
NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.0, -1.0, 0.5, 1.0, 2.0, 1e-3, 1e12, math.inf, math.nan]),
)


# Tuples of every arity from 0 to 3, in and out of order, equal, non-finite; and valid pairs
# (half the draws), so that the accepted side of each property is exercised too.
TUPLES = st.one_of(
    st.sampled_from([(-20.0, 2.0), (-5.0, 0.0), (-1.0, 2.0)]),
    st.lists(st.sampled_from([-20.0, -1.0, 0.0, 2.0, math.nan]), max_size=3).map(tuple),
)


def _tuple_fields(cls) -> list[str]:
    hints = typing.get_type_hints(cls)
    return [f.name for f in dataclasses.fields(cls) if typing.get_origin(hints[f.name]) is tuple]


def _draw_overrides(cls, data):
    fields = [
        f.name
        for f in dataclasses.fields(cls)
        if f.type in ("int", "float", int, float) and f.name not in ("eval_freq", "eval_episodes")
    ] + _tuple_fields(cls)
    chosen = data.draw(st.lists(st.sampled_from(fields), min_size=1, max_size=2, unique=True))
    tuples = _tuple_fields(cls)
    return {name: data.draw(TUPLES if name in tuples else NUMBERS) for name in chosen}


def _refused_or_traces(algo_cls, data):
    overrides = _draw_overrides(algo_cls.config_cls, data)
    try:
        config = algo_cls.config_cls(**{**TINY[algo_cls], **overrides})
    except ConfigError:
        return
    algo = algo_cls(ENVS[algo_cls], config)
    chunks = algo.make_chunks(2 * config.eval_freq)
    jax.eval_shape(lambda k: chunks.run_chunk(chunks.init(k)), jax.random.PRNGKey(0))


@pytest.mark.parametrize("algo_cls", [SAC, TD3, PPO], ids=lambda c: c.name)
@settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_config_is_refused_or_traces(algo_cls, data):
    """Building the config raises ConfigError, or init plus one chunk traces without any
    other exception (tracing, not running: the whole chunk's shapes and Python checks); SAC's
    draws include its tuple field (log_std_bounds) of every arity and order."""
    _refused_or_traces(algo_cls, data)


# Every agent whose config has a tuple field, with a tiny config; TUPLE_AGENTS is checked to be
# all of them, so a new tuple field of any agent joins this test.
TUPLE_TINY = dict(hidden=8, batch_size=8, learning_starts=8, buffer_size=64, eval_freq=16)
TUPLE_AGENTS = {
    "sac": TUPLE_TINY, "redq": dict(TUPLE_TINY, num_critics=2), "asac": TUPLE_TINY,
    "crossq": dict(TUPLE_TINY, critic_hidden=16), "avg": dict(hidden=8, eval_freq=16),
}  # fmt: skip


def test_tuple_agents_are_every_agent_with_a_tuple_field():
    owners = {name for name, cls in agents.available().items() if _tuple_fields(cls.config_cls)}
    assert owners == set(TUPLE_AGENTS)


_TRACED: set[str] = set()  # agents whose init was traced with an accepted tuple already


@pytest.mark.parametrize("agent", sorted(TUPLE_AGENTS))
@settings(
    max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_tuple_fields_refused_by_arity_and_order_or_init_traces(agent, data):
    """Each tuple field drawn of any arity, order and finiteness: the config is refused (with
    a ConfigError on that field, naming its flag) exactly when the value has the wrong arity, a
    NaN item or (bounds) is not increasing; an accepted one is kept, and the agent's
    init traces with it (once per agent: tracing takes seconds)."""
    cls = agents.get(agent)
    field = data.draw(st.sampled_from(_tuple_fields(cls.config_cls)))
    value = data.draw(TUPLES)
    bad = len(value) != 2 or any(map(math.isnan, value)) or not value[0] < value[1]
    build = lambda: cls.config_cls(**TUPLE_AGENTS[agent], **{field: value})  # noqa: E731
    if bad:
        with pytest.raises(ConfigError) as err:
            build()
        assert err.value.field == field and err.value.flag == "--" + field.replace("_", "-")
        return
    config = build()
    assert getattr(config, field) == value
    if agent not in _TRACED:
        _TRACED.add(agent)
        jax.eval_shape(cls("Pendulum-v1", config).make_chunks(32).init, jax.random.PRNGKey(0))


# DreamerV3 traces in ~4 s per example, so fewer here; every single field x value of NUMBERS
# was also scanned once offline (the scan found beta1/beta2 and batch_length 1).
@settings(
    max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_dreamerv3_config_is_refused_or_traces(data):
    _refused_or_traces(DreamerV3, data)


# TD-MPC2 (planner included) traces in ~4.5 s per example, so 6 here (the default run's
# budget); its nested PlannerConfig has its own rules (tests/agents/tdmpc2/test_t2_networks.py).
@settings(
    max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(data=st.data())
def test_tdmpc2_config_is_refused_or_traces(data):
    _refused_or_traces(TDMPC2, data)


# --------------------------------------------------------------------- command-line table

TRAIN = ["train", "sac", "--env", "Pendulum-v1", "--steps", "100"]
PPO_TRAIN = ["train", "ppo", "--env", "CartPole-v1", "--steps", "100"]
D3_TRAIN = ["train", "dreamerv3", "--env", "CartPole-v1", "--steps", "100"]
T2_TRAIN = ["train", "tdmpc2", "--env", "Pendulum-v1", "--steps", "100"]
BAD = [
    TRAIN + ["--devices", "64"], TRAIN + ["--n-seeds", "3", "--devices", "2"], TRAIN + ["--devices", "0"],
    TRAIN + ["--n-seeds", "0"], TRAIN + ["--n-seeds", "-2"], TRAIN + ["--checkpoint-every", "0"],
    TRAIN + ["--seed", "4294967296"], TRAIN + ["--seed", "-1"], TRAIN + ["--steps", "abc"],
    TRAIN + ["--hidden", "0"], TRAIN + ["--hidden", "-4"], TRAIN + ["--hidden", "1.5"],
    TRAIN + ["--learning-rate", "-1"], TRAIN + ["--learning-rate", "0"],
    TRAIN + ["--learning-rate", "nan"], TRAIN + ["--learning-rate", "inf"],
    TRAIN + ["--log-std-bounds", "2", "-20"], TRAIN + ["--gamma", "2"], TRAIN + ["--gamma", "-0.1"],
    TRAIN + ["--tau", "0"], TRAIN + ["--tau", "1.5"], TRAIN + ["--num-critics", "0"],
    TRAIN + ["--init-alpha", "0"], TRAIN + ["--batch-size", "0"], TRAIN + ["--buffer-size", "0"],
    TRAIN + ["--batch-size", "512", "--buffer-size", "256", "--learning-starts", "600"],
    TRAIN + ["--learning-starts", "10"], TRAIN + ["--train-freq", "0"],
    TRAIN + ["--gradient-steps", "0"], TRAIN + ["--n-envs", "0"], TRAIN + ["--eval-freq", "0"],
    TRAIN + ["--eval-episodes", "0"], TRAIN + ["--n-envs", "8", "--eval-freq", "4"],
    TRAIN + ["--no-such-flag", "1"], TRAIN + ["--hidden"],
    ["train", "td3", "--env", "Pendulum-v1", "--gamma", "2"],
    ["train", "td3", "--env", "Pendulum-v1", "--policy-delay", "0"],
    ["train", "td3", "--env", "Pendulum-v1", "--target-noise", "-1"],
    ["train", "td3", "--env", "CartPole-v1"],
    PPO_TRAIN + ["--eval-freq", "10"], PPO_TRAIN + ["--num-minibatches", "0"], PPO_TRAIN + ["--num-minibatches", "3"],
    PPO_TRAIN + ["--clip-eps", "-1"], PPO_TRAIN + ["--activation", "foo"],
    PPO_TRAIN + ["--gae-lambda", "2"], PPO_TRAIN + ["--n-steps", "0"],
    PPO_TRAIN + ["--num-epochs", "0"], PPO_TRAIN + ["--max-grad-norm", "0"],
    PPO_TRAIN + ["--vf-coef", "-1"],
    D3_TRAIN + ["--model-size", "3m"], D3_TRAIN + ["--train-ratio", "0"],
    D3_TRAIN + ["--batch-length", "0"], D3_TRAIN + ["--buffer-size", "32"],
    D3_TRAIN + ["--replay-context", "2"], D3_TRAIN + ["--bins", "254"],
    D3_TRAIN + ["--lam", "1.5"], D3_TRAIN + ["--imag-length", "0"],
    D3_TRAIN + ["--minstd", "2"], D3_TRAIN + ["--unimix", "1"],
    D3_TRAIN + ["--protocol", "nope"], D3_TRAIN + ["--protocol", "dmc_vision"],
    D3_TRAIN + ["--protocol", "atari100k"], D3_TRAIN + ["--eval-policy", "greedy"],
    TRAIN + ["--eval-policy", "sample"], TRAIN + ["--protocol", "dmc_proprio"],
    T2_TRAIN + ["--model-size", "3"], T2_TRAIN + ["--learning-rate", "-1"],
    T2_TRAIN + ["--batch-size", "0"], T2_TRAIN + ["--planner.horizon", "0"],
    ["train", "tdmpc2", "--env", "CartPole-v1"],
    ["train", "sac", "--env", "NoSuchEnv-v0"], ["train", "sac", "--env", "dmc:nope-nope"],
    ["train", "nope", "--env", "Pendulum-v1"], ["eval", "RUN", "--episodes", "abc"],
    ["eval", "RUN", "--episodes", "0"],
]  # fmt: skip


# Issue 39: an output directory that belongs to a run (FINISHED: a finished run's directory),
# counts past what a jitted program holds, refusals that name the flag, AVG's bounds, tuple
# arity and order, a missing optional package, and the listings' unknown options; each with
# what its one line must say.
AVG_TRAIN = ["train", "avg", "--env", "Pendulum-v1", "--steps", "100"]
BAD_39 = [
    (["train", "td3", "--env", "Pendulum-v1", "--out", "FINISHED/checkpoints/2"], "is inside the run directory"),
    (["train", "td3", "--env", "Pendulum-v1", "--out", "FINISHED/checkpoints/2", "--overwrite"], "pick an --out outside it"),
    (["train", "sac", "--env", "Pendulum-v1", "--out", "FINISHED/runs/new"], "(it holds run.json)"),
    (["train", "sac", "--env", "Pendulum-v1", "--out", "CKPTONLY/sub"], "(it holds checkpoints/MANIFEST.json)"),
    (["collect", "FINISHED", "--out", "FINISHED"], "is a run directory (it holds run.json)"),
    (["collect", "FINISHED", "--out", "FINISHED/data"], "is inside the run directory"),
    (TRAIN[:5] + ["9223372036854775808"], "--steps 9223372036854775808 is past the int32 limit"),
    (TRAIN[:5] + ["2147483648"], "of 2147483647 env steps"), (TRAIN + ["--n-seeds", "99999999999"], "lower --n-seeds"),
    (TRAIN + ["--checkpoint-every", "99999999999"], "lower --checkpoint-every"),
    (TRAIN + ["--hidden", "99999999999999999999"], "lower --hidden to <= 2147483647"),
    (TRAIN + ["--eval-episodes", "2147483648"], "lower --eval-episodes"),
    (T2_TRAIN + ["--planner.num-samples", "2147483648"], "lower --planner.num-samples"),
    (["eval", "RUN", "--episodes", "99999999999999999999"], "lower --episodes"),
    (["collect", "RUN", "--out", "OUT", "--episodes", "2147483648"], "lower --episodes"),
    (["collect", "RUN", "--out", "OUT", "--seed", "2147483648"], "--seed must be in"),
    (T2_TRAIN + ["--vmin", "10", "--vmax", "-10"], "'--vmax -10': TDMPC2Config.vmax = -10.0"),
    (T2_TRAIN + ["--vmin", "5"], "pass --vmin"), (T2_TRAIN + ["--num-bins", "100"], "pass --num-bins"),
    (TRAIN + ["--hidden", "16", "--tau", "2.0", "--batch-size", "32"], "invalid value in '--tau 2.0': SACConfig.tau"),
    (AVG_TRAIN + ["--log-std-bounds", "2", "2"], "AVGConfig.log_std_bounds = (2.0, 2.0)"),
    (AVG_TRAIN + ["--log-std-bounds", "3", "1"], "increasing (low < high)"),
    (AVG_TRAIN + ["--log-std-bounds", "3"], "--log-std-bounds takes 2 values, got 1"),
    (AVG_TRAIN + ["--log-std-bounds", "1", "2", "3"], "--log-std-bounds takes 2 values, got 3"),
    (["train", "crossq", "--env", "Pendulum-v1", "--log-std-bounds", "0", "0"], "increasing"),
    (["train", "asac", "--env", "Pendulum-v1", "--log-std-bounds", "2", "-2"], "increasing"),
    (["train", "redq", "--env", "Pendulum-v1", "--log-std-bounds", "nan", "2"], "item 0 is not"),
    (TRAIN + ["--wandb-project", "x"], "'pip install wandb'"), (TRAIN + ["--wandb-project=x"], "needs wandb"),
    (["train", "dreamerv3", "--env", "Breakout-MinAtar", "--frame-stack", "0"], "--frame-stack must be a positive"),
    (TRAIN + ["--coordinator-timeout", "99999999999"], "lower --coordinator-timeout"),
    (["envs", "--family", "foo"], "unknown option '--family' of ajax envs"),
    (["agents", "extra"], "unknown argument 'extra' of ajax agents"),
]  # fmt: skip
# Issue 39, second pass: empty --out/--task, an --out that is or is inside an episode dataset
# (DATASET: ajax collect's output), a field both swept and set, a bare `ajax sweep`, a value given
# to a switch, a tuple item that is not a number, compare's --reps/--seed/--out, and presets
# for an env id that does not exist.
SWEEP = ["sweep", "sac", "--env", "Pendulum-v1", "--steps", "100", "--set", "learning_rate=1e-3"]
BAD_39_2 = [
    (TRAIN + ["--out", ""], "--out is empty; name the output directory"),
    (TRAIN + ["--out", "DATASET"], "is a dataset directory (it holds dataset.json"),
    (TRAIN + ["--out", "DATASET/run"], "is inside the dataset directory"),
    (SWEEP + ["--out", "DATASET"], "a sweep written there would mix with the dataset's files"),
    (SWEEP + ["--out", ""], "--out is empty"), (["sweep"], "usage: ajax sweep AGENT"),
    (SWEEP + ["--learning-rate", "3e-4", "--out", "OUT"], "learning_rate is both swept"),
    (["collect", "RUN", "--out", ""], "--out is empty; name the dataset directory"),
    (["collect", "RUN", "--out", "DATASET/sub"], "collect into"),
    (["collect", "RUN", "--out", "OUT", "--task", ""], "--task is empty"),
    (TRAIN + ["--overwrite", "1"], "--overwrite is a switch and takes no value, got '1'"),
    (TRAIN + ["--no-progress", "yes"], "--no-progress is a switch and takes no value"),
    (TRAIN + ["--log-std-bounds", "a", "b"], "invalid value 'a b' for --log-std-bounds: item 'a'"),
    (["compare", "RUN", "--reps", "1000000000"], "--reps must be in [1, 100000]"),
    (["compare", "RUN", "--seed", "-1"], "--seed must be in [0, 4294967295]"),
    (["compare", "RUN", "--out", "FINISHED/run.json/fig.png"], "which is not a directory"),
    (["presets", "sac", "--env", "NoSuch-v0"], "unknown env id 'NoSuch-v0'"),
    (["presets", "sac", "--env", ""], "env id must be a non-empty string"),
]  # fmt: skip
BAD += [argv for argv, _ in BAD_39 + BAD_39_2]
EXPECTED = {tuple(argv): text for argv, text in BAD_39 + BAD_39_2}


def test_table_has_sixty_bad_invocations():
    assert len(BAD) >= 60 + len(BAD_39)


def _files(root):
    """Every file under ``root`` with its bytes (what a refusal must leave as it was)."""
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def finished(tmp_path):
    """A finished run's directory as the refusals see it: run.json and a checkpoint with its
    MANIFEST.json (no training: the check reads only what marks a run)."""
    run = tmp_path / "finished"
    (run / "checkpoints" / "2").mkdir(parents=True)
    spec = {"agent": "sac", "env": "Pendulum-v1", "steps": 200}
    (run / "run.json").write_text(json.dumps(spec))
    (run / "checkpoints" / "MANIFEST.json").write_text("{}")
    (run / "checkpoints" / "2" / "data").write_bytes(b"checkpoint")
    only = tmp_path / "ckptonly"  # a run whose run.json was lost: its checkpoints still mark it
    (only / "checkpoints").mkdir(parents=True)
    (only / "checkpoints" / "MANIFEST.json").write_text("{}")
    return run, only


@pytest.mark.parametrize("argv", BAD, ids=lambda a: " ".join(a[1:2] + a[6:] or a))
def test_bad_invocation_is_one_line_exit_2_and_writes_nothing(
    argv, tmp_path, capsys, finished, monkeypatch
):
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed, wherever the test runs
    out, (run, only) = tmp_path / "out", finished
    places = {"RUN": tmp_path / "empty", "OUT": out, "FINISHED": run, "CKPTONLY": only,
              "DATASET": tmp_path / "dataset"}  # fmt: skip
    places["RUN"].mkdir()
    places["DATASET"].mkdir()  # an episode dataset as ajax collect leaves it (its index)
    index = {"format": "ajax-episodes", "version": 1, "tasks": {}}
    (places["DATASET"] / "dataset.json").write_text(json.dumps(index))
    expected = EXPECTED.get(tuple(argv), "")
    argv = [a.replace(a.split("/")[0], str(places[a.split("/")[0]]), 1)
            if a.split("/")[0] in places else a for a in argv]  # fmt: skip
    if argv[0] == "train" and "--out" not in argv:
        argv = argv + ["--out", str(out)]
    before, paths = _files(tmp_path), set(tmp_path.rglob("*"))
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ajax: error: "), captured.err
    assert expected in err[0], err[0]
    assert "Traceback" not in captured.err + captured.out
    assert not out.exists()
    assert _files(tmp_path) == before  # the finished run and every other file as they were
    assert set(tmp_path.rglob("*")) == paths  # and nothing new, not even a directory


@pytest.mark.parametrize(
    "argv, expected",
    [
        (TRAIN + ["--hidden"], "--hidden needs a value: an int that is > 0 (default 256)"),
        (TRAIN + ["--hidden", "abc"], "invalid value 'abc' for --hidden: it takes an int"),
        (PPO_TRAIN + ["--activation"], "--activation needs a value: a str that is one of 'elu'"),
        (TRAIN + ["--log-std-bounds", "2"], "--log-std-bounds takes 2 values, got 1"),
        (T2_TRAIN + ["--planner.foo", "1"],
         "unknown option --planner.foo; valid here: --planner.horizon, --planner.iterations"),
        (T2_TRAIN + ["--planner", "3"], "--planner is a group of fields; set them one by one"),
        (T2_TRAIN + ["--planner.num-samples"], "--planner.num-samples needs a value: an int"),
    ],
    ids=["missing", "type", "choices", "tuple", "nested-unknown", "nested-group", "nested-missing"],
)  # fmt: skip
def test_flag_errors_name_the_flag_and_what_it_takes(argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "see --help" not in err, err


@pytest.mark.parametrize("where", ["/proc/x", "/dev/null/x", "FILE"])
def test_unusable_out_is_one_line(where, tmp_path, capsys):
    """--out under /proc, under a file, or at a regular file: one line naming the path."""
    if where == "FILE":
        where = str(tmp_path / "file")
        (tmp_path / "file").write_text("not a run")
    assert main(TRAIN + ["--out", where]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and where in err[0] and "pick a writable --out" in err[0], err
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("total", [0, -1, 2**31, 1.5])
def test_make_train_refuses_a_total_that_is_not_a_positive_int32(total):
    with pytest.raises(ValueError, match="total_steps must be"):
        SAC("Pendulum-v1", TINY_SAC_CONFIG).make_train(total)


def test_python_api_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="n_seeds must be a positive integer, got 0"):
        SAC("Pendulum-v1", TINY_SAC_CONFIG).train(n_seeds=0, total_steps=16)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*31 - n_seeds\]"):
        SAC("Pendulum-v1", TINY_SAC_CONFIG).train(seed=2**32, total_steps=16)
    with pytest.raises(TypeError, match="env must be an env id such as 'Pendulum-v1'"):
        SAC(env=123)
    with pytest.raises(TypeError, match="sac needs a SACConfig, got TD3Config"):
        SAC("Pendulum-v1", TD3Config())
