"""The configs of the blocks and environments use the shared validator (issue 38 item 6): each
bad value is one ConfigError line naming the field, the value and the Python argument to fix;
the defaults build. No jit, no training."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ajax.agents.dreamerv3.networks import RSSMConfig
from ajax.environments.registry import EnvConfig
from ajax.environments.types import Box, Discrete
from ajax.networks.config import EnvSpaces, NetworkConfig, OptimizerConfig
from ajax.networks.memory import MemoryConfig, parse_memory_config
from ajax.networks.pid_actor import PIDPolicy
from ajax.validation import ConfigError

SPACES = dict(obs_shape=(3,), action_dim=2, continuous=True)
RSSM = dict(deter=16, hidden=8, classes=4, action_dim=2, blocks=4)

VALID = [
    lambda: EnvSpaces(**SPACES),
    lambda: EnvSpaces(obs_shape=[4, 4, 3], action_dim=5, continuous=False, image_shape=(4, 4, 3)),
    lambda: EnvSpaces(**SPACES, action_low=(-1.0, -1.0), action_high=(1.0, 1.0)),
    OptimizerConfig,
    NetworkConfig,
    lambda: NetworkConfig(memory={"kind": "gru", "hidden_size": 8}, log_std_bounds=None),
    MemoryConfig,
    lambda: MemoryConfig(kind="gru", window=0, num_heads=3),  # other kinds' sizes are ignored
    lambda: RSSMConfig(**RSSM),
    lambda: RSSMConfig.size12m(action_dim=6),
    PIDPolicy,
    EnvConfig,
    lambda: EnvConfig(n_envs=4, pixels=True, proprio=True, atari_settings="atari100k"),
    lambda: Box((-1.0,), (1.0,)),
    lambda: Discrete(2),
]


@pytest.mark.parametrize("build", VALID)
def test_valid_configs_build(build):
    config = build()
    hash(config)  # frozen and hashable: a jit-static argument and a flax field


# (build, field, text in the message)
BAD = [
    (lambda: EnvSpaces(**{**SPACES, "action_dim": 0}), "action_dim", "action_dim = 0"),
    (lambda: EnvSpaces(**SPACES, n_envs=-1), "n_envs", "must be > 0"),
    (lambda: EnvSpaces(**{**SPACES, "action_dim": 2.0}), "action_dim", "must be an integer"),
    (lambda: EnvSpaces(**{**SPACES, "continuous": 1}), "continuous", "must be a boolean"),
    (lambda: EnvSpaces(**SPACES, action_low=(-1.0, -1.0)), "action_high", "with action_low"),
    (lambda: EnvSpaces(**SPACES, action_high=(1.0, 1.0)), "action_low", "with action_high"),
    (lambda: EnvSpaces(**SPACES, image_shape=(2, 2, 2)), "image_shape", "H*W*C <= obs_dim 3"),
    (lambda: EnvSpaces(obs_shape=(8,), action_dim=1, continuous=True, image_shape=(2, 4)),
     "image_shape", "a tuple of 3 integers: got 2"),
    (lambda: OptimizerConfig(learning_rate=0.0), "learning_rate", "learning_rate = 0.0"),
    (lambda: OptimizerConfig(learning_rate=float("nan")), "learning_rate", "a finite number"),
    (lambda: OptimizerConfig(max_grad_norm=0.0), "max_grad_norm", "must be > 0"),
    (lambda: OptimizerConfig(per_member="yes"), "per_member", "a boolean"),
    (lambda: NetworkConfig(n_quantiles=0), "n_quantiles", "must be >= 1"),
    (lambda: NetworkConfig(critic_dropout=1.0), "critic_dropout", "in [0, 1)"),
    (lambda: NetworkConfig(log_std_bounds=(2.0, -20.0)), "log_std_bounds", "low < high"),
    (lambda: NetworkConfig(cnn=(32, 64)), "cnn", "a CNNSpec"),
    (lambda: NetworkConfig(kernel_init=3), "kernel_init", "a string"),
    (lambda: NetworkConfig(memory={"kind": "rnn"}), "kind", "one of 'gru', 'lstm'"),
    (lambda: MemoryConfig(kind="rnn"), "kind", "one of 'gru', 'lstm', 'transformer', 'mamba'"),
    (lambda: MemoryConfig(hidden_size=0), "hidden_size", "hidden_size = 0"),
    (lambda: MemoryConfig(num_layers=1.0), "num_layers", "must be an integer"),
    (lambda: MemoryConfig(kind="transformer", window=0), "window", "> 0 for kind 'transformer'"),
    (lambda: MemoryConfig(kind="mamba", d_conv=0), "d_conv", "> 0 for kind 'mamba'"),
    (lambda: MemoryConfig(kind="transformer", hidden_size=6, num_heads=4), "num_heads",
     "a divisor of the transformer's hidden_size 6"),
    (lambda: MemoryConfig(init="not_an_init(1.0)"), "init", "unknown initializer"),
    (lambda: MemoryConfig(kind="mamba", init="gate_block_orthogonal"), "init", "gate count"),
    (lambda: RSSMConfig(**{**RSSM, "hidden": 0}), "hidden", "hidden = 0 is invalid: it must be > 0"),
    (lambda: RSSMConfig(**{**RSSM, "deter": 10}), "blocks", "a divisor of deter (10)"),
    (lambda: RSSMConfig(**{**RSSM, "classes": 1}), "classes", "must be >= 2"),
    (lambda: RSSMConfig(**RSSM, unimix=1.0), "unimix", "in [0, 1)"),
    (lambda: RSSMConfig(**RSSM, dyn_layers=-1), "dyn_layers", "must be >= 0"),
    (lambda: PIDPolicy(n_errors=0), "n_errors", "must be >= 1"),
    (lambda: PIDPolicy(n_errors=1.5), "n_errors", "must be an integer"),
    (lambda: PIDPolicy(gains="scheduled"), "gains", "one of 'fixed', 'observation'"),
    (lambda: PIDPolicy(architecture="64"), "architecture", "not a string"),
    (lambda: PIDPolicy(architecture=("8",)), "architecture", "empty with gains='fixed'"),
    (lambda: EnvConfig(n_envs=0), "n_envs", "n_envs = 0"),
    (lambda: EnvConfig(n_envs=2.5), "n_envs", "must be an integer"),
    (lambda: EnvConfig(max_episode_steps=0), "max_episode_steps", "must be >= 1"),
    (lambda: EnvConfig(atari_settings="atari200k"), "atari_settings", "one of 'atari'"),
    (lambda: EnvConfig(proprio=True), "proprio", "proprio= adds the state features"),
    (lambda: EnvConfig(pid_dt=0.05), "pid_dt", "pid_dt= needs pid_error_fn="),
    (lambda: EnvConfig(grayscale="yes"), "grayscale", "a boolean"),
    (lambda: EnvConfig(backend="spring").check("gymnax"), "backend", "brax option"),
    (lambda: EnvConfig(config_overrides={}).check("brax"), "config_overrides",
     "playground option"),
    (lambda: EnvConfig(pid_error_fn=abs).check("gymnasium"), "pid_error_fn", "needs a JAX env"),
    (lambda: EnvConfig(resize=(64, 64)).check("dmc"), "resize", "host envs render 64 x 64 RGB"),
    (lambda: EnvConfig(action_repeat=2).check("atari"), "action_repeat", "4 frames per step"),
    (lambda: EnvConfig(pixels=True).check("gymnax"), "pixels", "renders dm_control cameras"),
    (lambda: EnvConfig(atari_settings="atari").check("dmc"), "atari_settings",
     "on atari:<Game> ids only"),
    (lambda: Box((-1.0,), (1.0, 1.0)), "high", "as long as low"),
    (lambda: Box((), ()), "high", "not empty"),
    (lambda: Box((1.0,), (-1.0,)), "high", ">= low entry by entry"),
    (lambda: Discrete(0), "n", "must be >= 1"),
]  # fmt: skip


@pytest.mark.parametrize("build, field, text", BAD)
def test_bad_value_is_one_config_error_line_naming_the_field(build, field, text):
    with pytest.raises(ConfigError) as err:
        build()
    message = str(err.value)
    assert isinstance(err.value, ValueError)  # callers catching ValueError keep working
    assert err.value.field == field and "\n" not in message
    owner = message.split(".", 1)[0]
    assert message.startswith(f"{owner}.{field} = ") and " is invalid: it must be " in message
    assert text in message, message
    assert "--" not in message.split("; ", 1)[1], message  # no command-line flag to name


def test_default_fix_names_the_python_argument():
    with pytest.raises(ConfigError, match=r"; pass MemoryConfig\(hidden_size=\.\.\.\) a value"):
        MemoryConfig(hidden_size=-2)
    with pytest.raises(ConfigError, match=r"; pass make_env\(\.\.\., n_envs=\.\.\.\) a value"):
        EnvConfig(n_envs=0)


def test_numpy_scalars_are_taken_as_python_numbers():
    memory = MemoryConfig(hidden_size=np.int64(8), num_layers=np.int32(2))
    assert memory == MemoryConfig(hidden_size=8, num_layers=2)
    assert type(memory.hidden_size) is int and hash(memory) == hash(MemoryConfig("gru", 8, 2))
    spaces = EnvSpaces(obs_shape=(3,), action_dim=np.int64(2), continuous=True)
    assert type(spaces.action_dim) is int and spaces == EnvSpaces(**SPACES)
    opt = OptimizerConfig(learning_rate=np.float32(0.5))
    assert type(opt.learning_rate) is float and opt.learning_rate == 0.5
    rssm = RSSMConfig(**{**RSSM, "action_dim": np.int64(2)})
    assert rssm == RSSMConfig(**RSSM)
    env = EnvConfig(n_envs=np.int64(2), max_episode_steps=np.int32(50))  # a dataset's limit
    assert type(env.n_envs) is int and env == EnvConfig(n_envs=2, max_episode_steps=50)


def test_parse_memory_config_still_refuses_unknown_keys_and_types():
    with pytest.raises(ValueError, match="unknown MemoryConfig keys"):
        parse_memory_config({"hiden_size": 3})
    with pytest.raises(TypeError):
        parse_memory_config("gru")


def test_env_config_alias_warns_and_is_env_spaces():
    import ajax.networks.config as config

    with pytest.warns(DeprecationWarning, match="EnvConfig is renamed EnvSpaces; .* in 0.3.0"):
        from ajax.networks.config import EnvConfig as Old
    assert Old is EnvSpaces
    with pytest.warns(DeprecationWarning):
        assert config.EnvConfig is EnvSpaces
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from ajax.networks.config import EnvSpaces as New  # the new name is quiet
    assert New is EnvSpaces
    with pytest.raises(AttributeError):
        config.NoSuchConfig  # noqa: B018
