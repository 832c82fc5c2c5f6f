"""One validator for every config: declared per-field rules plus cross-field relations.

A config dataclass derives from :class:`Validated` and declares ``RULES = {field: Rule}``;
rules of base classes are inherited and a subclass may replace one by naming the field again.
``__post_init__`` checks, in order, each field's type (ints are ints, floats are real and
finite, bools are bools; a ``tuple[...]`` field has its arity and item types) and rule, that
every int fits in int32 (:data:`INT32_MAX`: the counts a jitted program holds), then
:meth:`Validated.relations` for rules between fields. Every failure is a :class:`ConfigError`
naming the field, the value, the fix and the field's flag, the same error from the Python API
and the command line (which prints it as one line).
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
    """A config value that cannot work; the message names the field, the value and the fix.
    ``flag`` is the command-line flag that sets the field (None: set from Python only)."""

    def __init__(self, message: str, field: str | None = None, flag: str | None = None):
        self.field = field
        self.flag = flag
        super().__init__(message)


# The largest count a jitted program holds: step counters, indices and shapes are int32.
INT32_MAX = 2**31 - 1


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
    of ``owner`` and ``field`` such as :data:`PYTHON_ARGUMENT`. Otherwise the message names the
    field's flag (appended when ``fix`` does not), so every refusal says what to change."""
    if argument:
        where = argument.format(owner=owner, field=field)
        fix = fix or f"pass {where} a value that is {requirement.split(': ')[0]}"
    flag = None if argument else "--" + prefix + field.replace("_", "-")
    fix = fix or f"pass {flag} with a value that is {requirement.split(': ')[0]}"
    message = f"{owner}.{field} = {value!r} is invalid: it must be {requirement}; {fix}"
    if flag is not None and flag not in message:
        message += f" (set by {flag})"
    return ConfigError(message, field, flag)


@dataclasses.dataclass(frozen=True)
class Rule:
    """Allowed values of one field: a numeric range (open or closed ends) or a set of choices."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple | None = None
    optional: bool = False  # None is allowed
    increasing: bool = False  # a tuple whose values rise strictly (low < high)

    def describe(self) -> str:
        g = lambda x: str(x) if isinstance(x, int) else f"{x:g}"
        if self.increasing:
            return "increasing (low < high)"
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
        if self.increasing:
            return all(a < b for a, b in zip(value, value[1:], strict=False))
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


def increasing(optional: bool = False) -> Rule:
    """A tuple of values in strictly increasing order, e.g. bounds ``(low, high)``."""
    return Rule(increasing=True, optional=optional)


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


def _tuple_kinds(hint: Any) -> tuple | None:
    """The element hints of a ``tuple[...]`` hint (``Optional`` or not; ``tuple[int, ...]``
    gives ``(int, Ellipsis)``), else None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if len(args) == 1 else None
    return typing.get_args(hint) if typing.get_origin(hint) is tuple else None


_NOUNS = {int: "integers", float: "numbers", bool: "booleans", str: "strings"}


def _item_error(item: Any, kind: Any) -> str | None:
    """Why ``item`` of a tuple is not of ``kind`` (None when it is): as :func:`_type_error`,
    but a float item may be infinite (an unbounded action space's bound), never NaN."""
    if kind is float:
        number = isinstance(item, int | float) and not isinstance(item, bool)
        return None if number and not math.isnan(item) else "a number"
    return _type_error(item, kind)


def _tuple_error(value: Any, kinds: tuple) -> str | None:
    """Why ``value`` is not a tuple of the element hints ``kinds`` (None when it is): its
    arity, then each element's type."""
    variadic = len(kinds) == 2 and kinds[1] is Ellipsis
    kinds = kinds[:1] if variadic else kinds
    noun = _NOUNS.get(kinds[0], "values") if len(set(kinds)) == 1 else "values"
    wanted = f"a tuple of {noun}" if variadic else f"a tuple of {len(kinds)} {noun}"
    if not isinstance(value, tuple):
        return wanted
    if not variadic and len(value) != len(kinds):
        return f"{wanted}: got {len(value)}"
    for i, item in enumerate(value):
        problem = _item_error(item, kinds[0] if variadic else kinds[i])
        if problem:
            return f"{wanted}: item {i} is not {problem}"
    return None


def _int32_error(value: Any, kind: type | None) -> tuple[str, str] | None:
    """``(requirement, fix verb)`` for an int beyond int32, the counts a jitted program holds."""
    if kind is not int or not isinstance(value, int) or -INT32_MAX - 1 <= value <= INT32_MAX:
        return None
    bound = f"<= {INT32_MAX}" if value > 0 else f">= {-INT32_MAX - 1}"
    return f"{bound}: a run's counts are int32", "lower" if value > 0 else "raise"


def validate(config: Any, rules: Mapping[str, Rule]) -> None:
    """Check the type of every scalar and tuple field of the dataclass ``config`` (tuples: arity
    and item types; ints: within int32), the class of every nested config field (``planner``,
    ``pretrain``: an instance, or None where the hint allows it), and each rule."""
    owner = type(config).__name__
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        value, hint = getattr(config, field.name), hints.get(field.name)
        rule, where = rules.get(field.name), _where(config, field.name)
        kind, items = _scalar_kind(hint), _tuple_kinds(hint)
        of_class = _class_error(value, hint) if kind is None and items is None else None
        if of_class:  # a nested config (PlannerConfig, MCPretrain, ...): set from Python
            raise field_error(owner, field.name, value, of_class,
                              **dict(where, argument=PYTHON_ARGUMENT))  # fmt: skip
        if value is None and (rule is None or rule.optional):
            if items is None or _optional(hint):
                continue
        problem = _type_error(value, kind) if kind else None
        problem = problem or (_tuple_error(value, items) if items else None)
        if problem:
            raise field_error(owner, field.name, value, problem, **where)
        if rule is not None and not rule.admits(value):
            raise field_error(owner, field.name, value, rule.describe(), **where)
        too_big = _int32_error(value, kind)
        if too_big:
            flag = "--" + where["prefix"] + field.name.replace("_", "-")
            fix = "" if where["argument"] else f"{too_big[1]} {flag} to {too_big[0].split(':')[0]}"
            raise field_error(owner, field.name, value, too_big[0], fix, **where)


def _class_error(value: Any, hint: Any) -> str | None:
    """Why ``value`` is not an instance of the class hint ``C`` or ``C | None`` of a nested
    config (``planner: PlannerConfig``, ``pretrain: MCPretrain | None``), None when it is (or
    the hint is no such class: builtins and generics are left to the other checks)."""
    options = [hint]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(options) != 1 or not isinstance(options[0], type):
        return None
    cls = options[0]
    if cls.__module__ in ("builtins", "typing") or isinstance(value, cls):
        return None
    if value is None and _optional(hint):
        return None
    name = cls.__name__  # "an MCPretrain" (an initialism read letter by letter), "a CNNSpec"
    vowel = name[0] in "AEIOU" or (name[:2].isupper() and name[0] in "FHLMNRSX")
    return ("None or " if _optional(hint) else "") + ("an " if vowel else "a ") + name


def _optional(hint: Any) -> bool:
    """Whether the hint admits None (``X | None``)."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return union and type(None) in typing.get_args(hint)


def require(config: Any, condition: bool, field: str, requirement: str, fix: str = "") -> None:
    """A relation between fields: raise a ConfigError on ``field`` unless ``condition``."""
    if not condition:
        raise field_error(type(config).__name__, field, getattr(config, field), requirement, fix,
                          **_where(config, field))  # fmt: skip


def _where(config: Any, field: str = "") -> dict[str, str]:
    """Where the fix is made: the flag prefix, or the Python ``ARGUMENT`` of the config (also
    for a field the command line cannot set, one of the config's ``PYTHON_ONLY``)."""
    cls = type(config)
    argument = getattr(cls, "ARGUMENT", "")
    if not argument and field in getattr(cls, "PYTHON_ONLY", {}):
        argument = PYTHON_ARGUMENT
    return {"prefix": getattr(cls, "FLAG_PREFIX", ""), "argument": argument}


def python_scalars(config: Any) -> None:
    """Store numpy integers and floats of the ``int``/``float`` fields of the frozen dataclass
    ``config`` as Python numbers (equal values, equal hashes), so configs that take
    ``np.int64(4)`` pass the type checks (every :class:`Validated` config does, first); a list
    given to a tuple field (as JSON reads one back) is stored as a tuple of them."""
    hints = typing.get_type_hints(type(config))
    for field in dataclasses.fields(config):
        value, kind = getattr(config, field.name), _scalar_kind(hints.get(field.name))
        items = _tuple_kinds(hints.get(field.name))
        if items and isinstance(value, list | tuple):
            as_python = tuple(_python_number(v) for v in value)
            object.__setattr__(config, field.name, as_python)
            continue
        if isinstance(value, bool | int | float) or not isinstance(value, numbers.Real):
            continue
        if kind in (int, float) and isinstance(value, numbers.Integral):
            object.__setattr__(config, field.name, int(value))
        elif kind is float:
            object.__setattr__(config, field.name, float(value))


def _python_number(value: Any) -> Any:
    """A numpy integer or float as the Python number; anything else as it is."""
    if isinstance(value, bool | int | float) or not isinstance(value, numbers.Real):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


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


def _traced(config: Any) -> bool:
    """Whether a field of ``config`` holds a JAX tracer: a config an agent builds inside a
    sweep's program from a traced field (:mod:`ajax.training.sweep`), whose grid values were
    validated as concrete configs before the program was traced."""
    import sys

    core = sys.modules.get("jax.core")  # no JAX imported: no tracer can exist
    if core is None:
        return False
    return any(isinstance(getattr(config, f.name), core.Tracer) for f in dataclasses.fields(config))


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
        if _traced(self):  # inside a sweep's program: its concrete values were checked
            return
        python_scalars(self)  # np.int64(4) is taken as 4 (a dataset's or an array's number)
        validate(self, rules_of(type(self)))
        self.relations()

    def relations(self) -> None:
        """Cross-field rules; subclasses call ``super().relations()`` and :func:`require`."""
