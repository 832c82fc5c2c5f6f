"""Layer, initializer, activation and optimizer helpers shared by every network.

Strings such as ``"orthogonal(1.0)"``, ``"normal(0.02)"`` or ``"trunc_normal_fan_in"`` name an
initializer; ``"relu"``, ``"silu"`` or ``"mish"`` an activation; an architecture is a sequence of
tokens (widths, ``"layernorm"``, ``"batchrenorm"``, activations). Parsing is strict: a malformed
string raises ``ValueError`` quoting it, never silently becomes a bare name.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

Initializer = Callable[..., jax.Array]
ActivationFunction = Callable[[jax.Array], jax.Array]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
_CALL = re.compile(r"^([A-Za-z_][A-Za-z_0-9]*)\((.*)\)$", re.DOTALL)


def _literal(expr: str, s: str, context: dict[str, Any] | None) -> Any:
    """Evaluate a numeric expression without builtins; names only from ``context``."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as err:
        raise ValueError(f"cannot parse {s!r}: {expr!r} is not an expression") from err
    allowed = (
        ast.Expression,
        ast.Constant,
        ast.UnaryOp,
        ast.BinOp,
        ast.Tuple,
        ast.List,
        ast.USub,
        ast.UAdd,
        ast.Add,
        ast.Sub,
        ast.Mult,
        ast.Div,
        ast.Pow,
        ast.Name,
        ast.Load,
    )
    names = dict(context or {})
    names.setdefault("pi", math.pi)
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise ValueError(f"cannot parse {s!r}: only numbers and arithmetic are allowed")
        if isinstance(node, ast.Name) and node.id not in names:
            raise ValueError(f"cannot parse {s!r}: unknown name {node.id!r}")
    return eval(compile(tree, "<ajax-spec>", "eval"), {"__builtins__": {}}, names)  # noqa: S307


def parse_function_string(s: str, context: dict[str, Any] | None = None) -> tuple[str | None, Any]:
    """Split ``"name"`` or ``"name(expr)"`` into ``(name, value of expr)``.

    A string that does not begin with an identifier (``"0.5"``, ``"-1.0"``) is evaluated whole and
    returned as ``(None, value)``. Anything else that is neither form, e.g. ``"orthogonal(2.0"`` or
    ``"np.sqrt(2)"``, raises ``ValueError`` with the string in the message.
    """
    if not isinstance(s, str):
        raise TypeError(f"expected a string, got {type(s).__name__}: {s!r}")
    text = s.strip()
    if not text:
        raise ValueError("cannot parse an empty string as a function spec")
    if not (text[0].isalpha() or text[0] == "_"):
        return None, _literal(text, s, context)
    if _NAME.match(text):
        return text, None
    match = _CALL.match(text)
    if match is None:
        raise ValueError(f"cannot parse {s!r}: expected 'name' or 'name(value)'")
    name, arg = match.group(1), match.group(2).strip()
    return name, (_literal(arg, s, context) if arg else None)


def trunc_normal_fan_in(scale: float = 1.0) -> Initializer:
    """Fan-in truncated normal, DreamerV3's weight initializer (nets.py:842-884 at 2411f7d).

    ``variance_scaling(scale**2, "fan_in", "truncated_normal")``: Std[W] = scale / sqrt(fan_in)
    with fan_in = shape[-2] * prod(shape[:-2]), so a BlockLinear kernel (g, I/g, U/g) sees the full
    width I. flax divides by the exact truncated-normal std 0.87962566 where DreamerV3 multiplies by
    the rounded 1.1368: same key, kernels differ by 1.13684723 / 1.1368 (deviation D23).
    ``scale = 0`` gives an exactly zero kernel (DreamerV3's reward and value heads).
    """
    if scale < 0:
        raise ValueError(f"trunc_normal_fan_in scale must be >= 0, got {scale}")
    if scale == 0:
        return nn.initializers.zeros
    return nn.initializers.variance_scaling(scale**2, "fan_in", "truncated_normal", in_axis=-2)


def _scaled(init: Initializer, outscale: float) -> Initializer:
    """``init`` multiplied by ``outscale`` (0 gives exact zeros, whatever ``init`` draws)."""
    if outscale == 1.0:
        return init

    def scaled(key, shape, dtype=jnp.float32):
        if outscale == 0.0:
            return jnp.zeros(shape, dtype)
        return outscale * init(key, shape, dtype)

    return scaled


_REGISTRY: dict[str, Callable[..., Initializer]] = {
    "trunc_normal_fan_in": trunc_normal_fan_in,
    # N(0, std^2): TD-MPC2's torch trunc_normal_(std=0.02) truncates at +-2 absolute, 100 sigma.
    "normal": lambda stddev=0.01: nn.initializers.normal(stddev),
    "orthogonal": lambda scale=1.0: nn.initializers.orthogonal(scale),
    "zeros": lambda: nn.initializers.zeros,
    "ones": lambda: nn.initializers.ones,
    "constant": lambda value=0.0: nn.initializers.constant(value),
    "uniform": lambda scale=0.01: nn.initializers.uniform(scale),
}


def get_initializer(name: str) -> Callable[..., Initializer]:
    """The initializer factory called ``name``: Ajax's registry first, then flax's initializers."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    factory = getattr(nn.initializers, name, None)
    if factory is None or not callable(factory):
        known = sorted(set(_REGISTRY) | {n for n in dir(nn.initializers) if not n.startswith("_")})
        raise ValueError(f"unknown initializer {name!r}; known: {', '.join(known)}")
    return factory


def parse_initialization(
    initialization: str | Initializer | None, default: Initializer | None = None
) -> Initializer | None:
    """Parse ``"name"`` / ``"name(expr)"`` into an initializer; callables pass through.

    ``None`` gives ``default``. A string that is a bare number gives a constant initializer.
    ``"name"`` calls the factory with no argument, ``"name(expr)"`` with the value of ``expr``
    (a tuple is spread over the arguments).
    """
    if initialization is None:
        return default
    if callable(initialization):
        return initialization
    name, value = parse_function_string(initialization)
    if name is None:
        return nn.initializers.constant(value)
    factory = get_initializer(name)
    if value is None:
        return factory()
    return factory(*value) if isinstance(value, tuple) else factory(value)


def mish(x: jax.Array) -> jax.Array:
    """x * tanh(softplus(x)): TD-MPC2's activation (torch nn.Mish)."""
    return jax.nn.mish(x)


_ACTIVATIONS: dict[str, ActivationFunction] = {
    "relu": nn.relu,
    "tanh": jnp.tanh,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "sigmoid": nn.sigmoid,
    "silu": nn.silu,
    "swish": nn.silu,
    "mish": mish,
    "leaky_relu": nn.leaky_relu,
    "softplus": nn.softplus,
    "identity": lambda x: x,
    "linear": lambda x: x,
}


def parse_activation(activation: str | ActivationFunction) -> ActivationFunction:
    """An activation from its name ("relu", "silu", "mish", ...), or a callable passed through.

    "silu" is x * sigmoid(x) (DreamerV3, Table 4 of arXiv:2301.04104v2); "mish" is
    x * tanh(softplus(x)) (TD-MPC2, Sec. 3.1 of arXiv:2310.16828v2).
    """
    if callable(activation):
        return activation
    if activation not in _ACTIVATIONS:
        raise ValueError(
            f"unknown activation {activation!r}; known: {', '.join(sorted(_ACTIVATIONS))}"
        )
    return _ACTIVATIONS[activation]
