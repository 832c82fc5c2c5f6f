"""The shared config validator: rules, a property test over every agent's config, and a table of
bad command lines that must each end in one error line, exit 2, and nothing written."""

from __future__ import annotations

import dataclasses
import math

import jax
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config
from ajax.agents.ppo import PPO, PPOConfig
from ajax.agents.sac import SAC, SACConfig
from ajax.agents.td3 import TD3, TD3Config
from ajax.agents.tdmpc2 import TDMPC2, PlannerConfig
from ajax.cli import main
from ajax.validation import ConfigError, Rule, between, one_of, positive


def test_rules_describe_and_admit():
    assert positive().describe() == "> 0" and not positive().admits(0)
    assert between(0.0, 1.0, lo_open=True).describe() == "in (0, 1]"
    assert between(0, 2**31 - 1).describe() == "in [0, 2147483647]"
    assert one_of("a", "b").admits("a") and not one_of("a", "b").admits("c")
    assert Rule(lo=1, optional=True).admits(None) and not Rule(lo=1).admits(None)


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
    ],
)  # fmt: skip
def test_config_error_names_field_value_and_fix(build, field, text):
    with pytest.raises(ConfigError) as err:
        build()
    assert err.value.field == field and text in str(err.value)
    assert "\n" not in str(err.value)


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


def _draw_overrides(cls, data):
    fields = [
        f.name
        for f in dataclasses.fields(cls)
        if f.type in ("int", "float", int, float) and f.name not in ("eval_freq", "eval_episodes")
    ]
    chosen = data.draw(st.lists(st.sampled_from(fields), min_size=1, max_size=2, unique=True))
    return {name: data.draw(NUMBERS) for name in chosen}


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
    other exception (tracing, not running: the whole chunk's shapes and Python checks)."""
    _refused_or_traces(algo_cls, data)


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


def test_table_has_sixty_bad_invocations():
    assert len(BAD) >= 60


@pytest.mark.parametrize("argv", BAD, ids=lambda a: " ".join(a[1:2] + a[6:] or a))
def test_bad_invocation_is_one_line_exit_2_and_writes_nothing(argv, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [str(tmp_path) if a == "RUN" else a for a in argv]
    if argv[0] == "train":
        argv = argv + ["--out", str(out)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ajax: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    assert not out.exists()


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


def test_python_api_bad_arguments_name_the_problem():
    with pytest.raises(ValueError, match="n_seeds must be a positive integer, got 0"):
        SAC("Pendulum-v1", TINY_SAC_CONFIG).train(n_seeds=0, total_steps=16)
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*31 - n_seeds\]"):
        SAC("Pendulum-v1", TINY_SAC_CONFIG).train(seed=2**32, total_steps=16)
    with pytest.raises(TypeError, match="env must be an env id such as 'Pendulum-v1'"):
        SAC(env=123)
    with pytest.raises(TypeError, match="sac needs a SACConfig, got TD3Config"):
        SAC("Pendulum-v1", TD3Config())
