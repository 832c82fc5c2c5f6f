"""The API reference of spec 002, walked name by name: every documented name exists.

The list below is spec 002's, written out by hand (parsing the spec's text would break on its
layout). Each entry is (module, name or Class.member, kind, documented signature or None). A
name must import and be of its kind; a documented signature must be honoured: its parameters
come first and in order, with the documented kinds (positional or keyword-only) and defaults,
and any parameter the reference does not document is optional.
"""

import ast
import dataclasses
import importlib
import inspect
from typing import NamedTuple

import flax.linen as nn
import pytest

NET = "ajax.networks.networks"
DIST = "ajax.networks.distributions"
UTILS = "ajax.networks.utils"
MEM = "ajax.networks.memory"
PID = "ajax.modules.pid_actor"
HEAD = "ajax.modules.pid_head"
BLOCKS = "ajax.networks.blocks"
TWOHOT = "ajax.distributional"
NORM = "ajax.normalizers"

ADAM = (
    "(learning_rate=0.001, max_grad_norm=None, eps=1e-05, beta_1=0.9, beta_2=0.999, "
    "weight_decay=0.0, per_member=False, optimizer='adam')"
)
ACTOR_CRITIC = (
    "(key, env_config, actor_optimizer_config, critic_optimizer_config, network_config, "
    "continuous=False, action_value=False, squash=False, num_critics=4, max_timesteps=None, "
    "extra_obs_dim=0, action_dim_override=None, actor=None)"
)
MEMORY_CONFIG = (
    "(kind='gru', hidden_size=64, num_layers=1, gradient_checkpoint=False, window=32, "
    "num_heads=4, d_state=16, d_conv=4, expand=2, final_norm=True, init=None)"
)

# kinds: "namedtuple", "module" (flax), "class", "dataclass", "function", "method",
# "classmethod", "property".
REFERENCE = [
    (NET, "CNNSpec", "namedtuple", None),
    (NET, "CNNEncoder", "module", None),
    (NET, "Actor", "module", None),
    (NET, "Squashed", "module", None),
    (NET, "Critic", "module", None),
    (NET, "Critic.__call__", "method", "(x, hidden_state=None, done=None)"),
    (NET, "Critic.quantiles", "method", "(x, hidden_state=None, done=None)"),
    (NET, "Critic.apply_encoder", "method", "(x)"),
    (NET, "MultiCritic", "module", None),
    (NET, "MultiCritic.quantiles", "method", "(x, hidden_state=None, done=None)"),
    (NET, "MultiCritic.apply_encoder_ensemble", "method", "(x)"),
    (NET, "reference_cnn", "function", "(image_shape)"),
    (NET, "check_log_std_head", "function",
     "(state_independent, log_std_init, log_std_kernel_init)"),
    (NET, "action_value_input", "function", "(obs, action, previous_action=None)"),
    (NET, "get_initialized_actor_critic", "function", ACTOR_CRITIC),
    (NET, "get_initialized_critic", "function",
     "(key, env_config, critic_optimizer_config, network_config, num_critics=2, "
     "max_timesteps=None, extra_obs_dim=0)"),
    (NET, "init_network_carry", "function", "(network, memory, key, batch_size)"),
    (NET, "init_network_state", "function", "(init_x, network, key, tx, n_envs=1, memory=None)"),
    (NET, "in_critic_units", "function", "(critic_state, actions)"),
    (NET, "predict_value_sequence", "function",
     "(critic_state, critic_params, x, resets, initial_hidden, *, quantiles=False)"),
    (NET, "phi_star_critic_state", "function", "(critic_state)"),
    (NET, "predict_value", "function", "(critic_state, critic_params, x, *, quantiles=False)"),
    (NET, "predict_value_train", "function", "(critic_state, critic_params, x)"),
    (NET, "state_value", "function", "(agent_state, obs, action)"),
    (NET, "action_value", "function", "(agent_state, obs, action)"),
    (DIST, "Deterministic", "class", None),
    (DIST, "Deterministic.log_prob", "method", "(x)"),
    (DIST, "GuardedTanh", "class", "(eps)"),
    (DIST, "Squash", "class", "(distribution, log_det_eps=0.0)"),
    (DIST, "Squash.log_prob_from_raw", "method", "(raw)"),
    (DIST, "Squash.sample_with_raw", "method", "(seed)"),
    (DIST, "Squash.entropy", "method", "(seed=None)"),
    (DIST, "squash", "function", "(pi, log_det_eps=0.0)"),
    (DIST, "latent", "function", "(pi)"),
    (DIST, "sample_with_raw", "function", "(pi, seed)"),
    (DIST, "log_prob_from_raw", "function", "(pi, raw)"),
    (DIST, "entropy", "function", "(pi, seed=None)"),
    (UTILS, "BatchRenorm", "module", None),
    (UTILS, "TorchLinear", "module", None),
    (UTILS, "clip_by_member_norm", "function", "(max_norm)"),
    (UTILS, "get_adam_tx", "function", ADAM),
    (UTILS, "parse_activation", "function", "(activation)"),
    (UTILS, "parse_function_string", "function", "(s, context=None)"),
    (UTILS, "trunc_normal_fan_in", "function", "(scale=1.0)"),
    (UTILS, "get_initializer", "function", "(name)"),
    (UTILS, "parse_initialization", "function", "(initialization, default=None)"),
    (UTILS, "parse_layer", "function", "(layer, kernel_init=None, bias_init=None)"),
    (UTILS, "dense", "function",
     "(features, kernel_init, bias_init, default_kernel_init, name=None)"),
    (UTILS, "parse_architecture", "function", "(architecture, kernel_init=None, bias_init=None)"),
    (MEM, "MemoryConfig", "dataclass", MEMORY_CONFIG),
    (MEM, "MemoryConfig.ends_normalised", "property", None),
    (MEM, "MemoryCell", "module", None),
    (MEM, "parse_memory_config", "function", "(memory)"),
    (MEM, "with_default_init", "function", "(memory, inits)"),
    (MEM, "init_carry", "function", "(config, rng, batch_size)"),
    (MEM, "zeros_carry_like", "function", "(carry, batch_size, batch_axis=0)"),
    (MEM, "flatten_carry", "function", "(carry)"),
    (MEM, "unflatten_carry", "function", "(flat, template)"),
    (MEM, "flat_carry_dim", "function", "(config)"),
    (MEM, "tree_where_reset", "function", "(resets, fresh, tree)"),
    (MEM, "gate_block_orthogonal", "function", "(n_gates)"),
    (PID, "PIDPolicy", "dataclass", "(n_errors=1, gains='fixed', architecture=())"),
    (PID, "PIDLaw", "module", None),
    (PID, "PIDLaw.gains", "method", "(obs)"),
    (PID, "PIDActor", "module", None),
    (PID, "check_pid_actor", "function", "(continuous, memory)"),
    (PID, "pid_gains", "function", "(actor_params)"),
    (HEAD, "PIDOutputHead", "module", None),
    (HEAD, "PIDOutputHead.__call__", "method", "(carry, z, resets)"),
    (HEAD, "init_pid_carry", "function", "(batch_size, n_outputs)"),
    (BLOCKS, "NormedMLP", "module", None),
    (BLOCKS, "NormedMLP.dreamerv3", "classmethod", "(layers, units, **module_kwargs)"),
    (BLOCKS, "NormedMLP.tdmpc2", "classmethod", "(layers, units, dropout=0.0, **module_kwargs)"),
    (BLOCKS, "NormedMLP.__call__", "method", "(x, deterministic=None)"),
    (BLOCKS, "linear", "function",
     "(features, kernel_init, bias_init='zeros', outscale=1.0, name=None)"),
    (TWOHOT, "TwoHot", "dataclass", "(num_bins, limit, transform)"),
    (TWOHOT, "TwoHot.dreamerv3", "classmethod", "(num_bins=255)"),
    (TWOHOT, "TwoHot.tdmpc2", "classmethod", "(num_bins=101, limit=10.0)"),
    (TWOHOT, "TwoHot.bins", "method", "()"),
    (TWOHOT, "TwoHot.encode", "method", "(y)"),
    (TWOHOT, "TwoHot.decode", "method", "(logits)"),
    (TWOHOT, "TwoHot.loss", "method", "(logits, y)"),
    (TWOHOT, "symlog", "function", "(x)"),
    (TWOHOT, "symexp", "function", "(x)"),
    (NORM, "ReturnNormalizer", "class", None),
    (NORM, "ReturnNormalizer.create", "classmethod", "(rate=0.01, limit=1.0)"),
    (NORM, "ReturnNormalizer.update", "method", "(x)"),
    (NORM, "ReturnNormalizer.scale", "method", "()"),
    (NORM, "RunningScale", "class", None),
    (NORM, "RunningScale.create", "classmethod", "(rate=0.01)"),
    (NORM, "RunningScale.update", "method", "(x)"),
    (NORM, "RunningScale.scale", "method", "()"),
]  # fmt: skip


class Param(NamedTuple):
    name: str
    kind: inspect._ParameterKind
    default: object  # inspect.Parameter.empty when required


def documented_params(signature: str) -> list[Param]:
    """The parameters of a documented signature such as ``"(x, *, quantiles=False)"``."""
    args = ast.parse(f"def f{signature}: pass").body[0].args
    positional = args.posonlyargs + args.args
    defaults = [inspect.Parameter.empty] * (len(positional) - len(args.defaults))
    defaults += [ast.literal_eval(d) for d in args.defaults]
    params = [
        Param(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, d)
        for a, d in zip(positional, defaults, strict=True)
    ]
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        default = inspect.Parameter.empty if d is None else ast.literal_eval(d)
        params.append(Param(a.arg, inspect.Parameter.KEYWORD_ONLY, default))
    if args.kwarg is not None:
        params.append(Param(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty))
    return params


def resolve(module: str, name: str):
    """``(owner class or None, raw attribute, attribute)`` for ``name`` in ``module``."""
    obj = importlib.import_module(module)
    owner, raw = None, None
    for part in name.split("."):
        owner = obj if inspect.isclass(obj) else None
        raw = inspect.getattr_static(obj, part) if owner is not None else None
        obj = getattr(obj, part)
    return owner, raw, obj


def check_kind(kind: str, owner, raw, obj) -> None:
    if kind == "namedtuple":
        assert inspect.isclass(obj) and issubclass(obj, tuple) and hasattr(obj, "_fields")
    elif kind == "module":
        assert inspect.isclass(obj) and issubclass(obj, nn.Module)
    elif kind == "class":
        assert inspect.isclass(obj)
    elif kind == "dataclass":
        assert inspect.isclass(obj) and dataclasses.is_dataclass(obj)
    elif kind == "function":
        assert inspect.isfunction(obj), f"{obj!r} is not a function"
    elif kind == "method":
        assert owner is not None and callable(obj) and not isinstance(raw, classmethod | property)
    elif kind == "classmethod":
        assert isinstance(raw, classmethod) and obj.__self__ is owner
    elif kind == "property":
        assert isinstance(raw, property)
    else:
        raise AssertionError(f"unknown kind {kind!r} in the reference table")


def actual_params(kind: str, obj) -> list[inspect.Parameter]:
    params = list(inspect.signature(obj).parameters.values())
    if kind == "method":  # read off the class: drop self
        params = params[1:]
    return params


def check_signature(documented: list[Param], actual: list[inspect.Parameter]) -> None:
    by_name = {p.name: p for p in actual}
    for doc in documented:
        assert doc.name in by_name, f"missing parameter {doc.name!r}"
        got = by_name[doc.name]
        assert got.kind == doc.kind, (
            f"{doc.name!r} is {got.kind.description}, documented {doc.kind.description}"
        )
        assert got.default == doc.default, (
            f"{doc.name!r} defaults to {got.default!r}, documented {doc.default!r}"
        )
    positional = [p.name for p in documented if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
    leading = [p.name for p in actual[: len(positional)]]
    assert leading == positional, f"positional order {leading}, documented {positional}"
    documented_names = {p.name for p in documented}
    for extra in actual:
        if extra.name in documented_names or extra.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            continue
        assert extra.default is not inspect.Parameter.empty, (
            f"undocumented parameter {extra.name!r} must be optional"
        )


@pytest.mark.parametrize(
    ("module", "name", "kind", "signature"),
    REFERENCE,
    ids=[f"{module}:{name}" for module, name, _, _ in REFERENCE],
)
def test_api_reference_name(module, name, kind, signature):
    """Spec 002 documents ``module.name``: it imports, is a ``kind``, and keeps its signature."""
    owner, raw, obj = resolve(module, name)
    check_kind(kind, owner, raw, obj)
    if signature is not None:
        check_signature(documented_params(signature), actual_params(kind, obj))


def test_api_reference_table_is_complete():
    """Every section of spec 002 is walked; the table holds no duplicate."""
    modules = {module for module, *_ in REFERENCE}
    assert modules == {NET, DIST, UTILS, MEM, PID, HEAD, BLOCKS, TWOHOT, NORM}
    keys = [(module, name) for module, name, *_ in REFERENCE]
    assert len(keys) == len(set(keys)) == 92


def test_signature_check_can_fail():
    """The signature check refuses a renamed, reordered, retyped or newly required parameter."""

    def f(a, b=1, *, c=False, d=None):
        pass

    actual = list(inspect.signature(f).parameters.values())
    check_signature(documented_params("(a, b=1, *, c=False)"), actual)
    for wrong in ("(a, x=1)", "(b=1, a=None)", "(a, b=2)", "(a, b=1, c=False)", "(a, *, b=1)"):
        with pytest.raises(AssertionError):
            check_signature(documented_params(wrong), actual)

    def g(a, e):
        pass

    with pytest.raises(AssertionError, match="must be optional"):
        check_signature(documented_params("(a)"), list(inspect.signature(g).parameters.values()))
