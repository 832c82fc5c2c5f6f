"""One validator for every config: declared per-field rules plus cross-field relations.

A config dataclass derives from :class:`Validated` and declares ``RULES = {field: Rule}``;
rules of base classes are inherited and a subclass may replace one by naming the field again.
``__post_init__`` checks, in order, each field's type (ints are ints, floats are real and
finite, bools are bools) and rule, then :meth:`Validated.relations` for rules between
fields. Every failure is a :class:`ConfigError` naming the field, the value and the fix, the
same error from the Python API and the command line (which prints it as one line).
Configs set from Python only (no command-line flags) name the argument in the fix instead of a
flag: they set ``ARGUMENT``, e.g. :data:`PYTHON_ARGUMENT`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar


class ConfigError(ValueError):
    """A config value that cannot work; the message names the field, the value and the fix."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        super().__init__(message)


# ``ARGUMENT`` of a config built from Python only: the fix names ``Owner(field=...)``.
PYTHON_ARGUMENT = "{owner}({field}=...)"


def field_error(
    owner: str,
    field: str,
    value: Any,
    requirement: str,
    fix: str = "",
    prefix: str = "",
    argument: str = "",
) -> ConfigError:
    """The ConfigError of ``owner.field = value``: what it must be and how to fix it.
    ``prefix`` is a nested config's flag prefix (``planner.`` for ``--planner.num-samples``);
    ``argument``, when given, names the Python argument to fix instead of a flag: a format string
    of ``owner`` and ``field`` such as :data:`PYTHON_ARGUMENT`."""
    if argument:
        where = argument.format(owner=owner, field=field)
        fix = fix or f"pass {where} a value that is {requirement.split(': ')[0]}"
    flag = "--" + prefix + field.replace("_", "-")
    fix = fix or f"pass {flag} with a value that is {requirement.split(': ')[0]}"
    return ConfigError(
        f"{owner}.{field} = {value!r} is invalid: it must be {requirement}; {fix}", field
    )


@dataclasses.dataclass(frozen=True)
class Rule:
    """Allowed values of one field: a numeric range (open or closed ends) or a set of choices."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple | None = None
    optional: bool = False  # None is allowed

    def describe(self) -> str:
        g = lambda x: str(x) if isinstance(x, int) else f"{x:g}"
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.lo is not None and self.hi is not None:
            left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
            return f"in {left}{g(self.lo)}, {g(self.hi)}{right}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {g(self.lo)}"
        if self.hi is not None:
            return f"{'<' if self.hi_open else '<='} {g(self.hi)}"
        return "any value"

    def admits(self, value: Any) -> bool:
        if value is None:
            return self.optional
        if self.choices is not None:
            return value in self.choices
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return not (self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi))


def positive(optional: bool = False) -> Rule:
    return Rule(lo=0, lo_open=True, optional=optional)


def at_least(lo: float, optional: bool = False) -> Rule:
    return Rule(lo=lo, optional=optional)


def nonnegative() -> Rule:
    return Rule(lo=0)


def between(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> Rule:
    return Rule(lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open)


def one_of(*choices) -> Rule:
    return Rule(choices=tuple(choices))


def _type_error(value: Any, kind: type) -> str | None:
    """Why ``value`` is not of the annotated scalar ``kind`` (None when it is)."""
    if kind is bool:
        return None if isinstance(value, bool) else "a boolean (true or false)"
    if kind is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "a number"
        return None if math.isfinite(value) else "a finite number"
    if kind is str:
        return None if isinstance(value, str) else "a string"
    return None


def _scalar_kind(hint: Any) -> type | None:
    """int, float, bool or str for ``int`` / ``float | None`` style hints, else None."""
    if hint in (int, float, bool, str):
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 and args[0] in (int, float, bool, str) else None
    return None


def validate(config: Any, rules: Mapping[str, Rule]) -> None:
    """Check the type of every scalar field of the dataclass ``config`` and each rule."""
    owner = type(config).__name__
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        rule = rules.get(field.name)
        kind = _scalar_kind(hints.get(field.name))
        if value is None and (rule is None or rule.optional):
            continue
        if kind is not None:
            problem = _type_error(value, kind)
            if problem:
                raise field_error(owner, field.name, value, problem, **_where(config))
        if rule is not None and not rule.admits(value):
            raise field_error(owner, field.name, value, rule.describe(), **_where(config))


def require(config: Any, condition: bool, field: str, requirement: str, fix: str = "") -> None:
    """A relation between fields: raise a ConfigError on ``field`` unless ``condition``."""
    if not condition:
        raise field_error(
            type(config).__name__, field, getattr(config, field), requirement, fix, **_where(config)
        )


def _where(config: Any) -> dict[str, str]:
    """Where the fix is made: the flag prefix, or the Python ``ARGUMENT`` of the config."""
    cls = type(config)
    return {"prefix": getattr(cls, "FLAG_PREFIX", ""), "argument": getattr(cls, "ARGUMENT", "")}


def python_scalars(config: Any) -> None:
    """Store numpy integers and floats of the ``int``/``float`` fields of the frozen dataclass
    ``config`` as Python numbers (equal values, equal hashes), so configs that take
    ``np.int64(4)`` pass the type checks (every :class:`Validated` config does, first)."""
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        value, kind = getattr(config, field.name), _scalar_kind(hints.get(field.name))
        if isinstance(value, bool | int | float) or not isinstance(value, numbers.Real):
            continue
        if kind in (int, float) and isinstance(value, numbers.Integral):
            object.__setattr__(config, field.name, int(value))
        elif kind is float:
            object.__setattr__(config, field.name, float(value))


# The release that drops the old names of the configs' RENAMED fields.
RENAMED_UNTIL = "0.3.0"


def renamed_fields(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` (the fields of the config class ``cls`` by name, as a saved run's JSON holds
    them) with each old name of ``cls.RENAMED`` replaced by the new one, in nested configs'
    dicts too. A field given under both names is a :class:`ConfigError` naming them."""
    renamed = getattr(cls, "RENAMED", {})
    out = dict(values)
    for old, new in renamed.items():
        if old not in out:
            continue
        if new in out:
            raise ConfigError(
                f"{cls.__name__} has both {old!r} and {new!r}, one field under its old and new "
                f"names ({old!r} was renamed {new!r}): keep only {new!r}",
                new,
            )
        out = {(new if k == old else k): v for k, v in out.items()}
    if dataclasses.is_dataclass(cls) and any(isinstance(v, Mapping) for v in out.values()):
        hints = typing.get_type_hints(cls)
        for name, value in out.items():
            hint = hints.get(name)
            if isinstance(value, Mapping) and dataclasses.is_dataclass(hint):
                out[name] = renamed_fields(hint, value)
    return out


def rules_of(cls: type) -> dict[str, Rule]:
    """The field rules of the config class ``cls``: every ``RULES`` along its MRO merged, a
    subclass's (or an earlier base's) rule for a field replacing a later one's."""
    rules: dict[str, Rule] = {}
    for klass in reversed(cls.__mro__):
        rules.update(klass.__dict__.get("RULES", {}))
    return rules


class Validated:
    """Mixin of the frozen config dataclasses: numpy scalars stored as Python numbers
    (:func:`python_scalars`), then rules from ``RULES`` (merged along the MRO), then
    :meth:`relations`, checked when the config is built.

    ``RENAMED`` maps a field's old name to its new one for one release: the command line takes
    the old flag with a warning (:func:`ajax.cli_flags.renamed_flags`) and a saved run's config
    the old key (:func:`renamed_fields`), until :data:`RENAMED_UNTIL`."""

    RULES: ClassVar[dict[str, Rule]] = {}
    RENAMED: ClassVar[dict[str, str]] = {}

    def __post_init__(self):
        python_scalars(self)  # np.int64(4) is taken as 4 (a dataset's or an array's number)
        validate(self, rules_of(type(self)))
        self.relations()

    def relations(self) -> None:
        """Cross-field rules; subclasses call ``super().relations()`` and :func:`require`."""
