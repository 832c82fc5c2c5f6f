"""Command-line flags of ``ajax train``: split run options from config fields, parse them with
``tyro``, and turn a failure into one line naming the flag and what it takes."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import sys
import types
import typing

import tyro

from ajax.validation import rules_of


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


def split_flags(
    tokens: list[str], own: set[str], config_fields: set[str], refused: dict[str, str] | None = None
):
    """Split ``tokens`` into (own args, config args); unknown flags raise UsageError.

    ``refused`` maps fields the agent deliberately lacks (PQN's replay) to why and what to do.
    """
    groups: dict[str, list[str]] = {"own": [], "config": []}
    target = None
    for tok in tokens:
        if tok.startswith("--"):
            name = tok[2:].split("=", 1)[0].replace("-", "_")
            base = name[3:] if name.startswith("no_") else name
            base = base.split(".", 1)[0]  # a nested config's field: --planner.num-samples 256
            if base in own:
                target = "own"
            elif base in config_fields:
                target = "config"
            elif refused and base in refused:
                raise UsageError(f"{tok.split('=')[0]} {refused[base]}")
            else:
                valid = ", ".join("--" + f.replace("_", "-") for f in sorted(config_fields))
                raise UsageError(
                    f"unknown option {tok.split('=')[0]}; valid config fields: {valid}"
                )
        elif target is None:
            raise UsageError(f"unexpected argument {tok!r}")
        groups[target].append(tok)
    return groups["own"], groups["config"]


def _flag_field(tok: str) -> tuple[str, str]:
    """``(dotted field, switch prefix)`` a flag token sets: ``--planner.no-foo=1`` gives
    ``("planner.foo", "no_")``, ``--learning-rate`` ``("learning_rate", "")``."""
    *path, last = tok[2:].split("=", 1)[0].replace("-", "_").split(".")
    prefix = "no_" if last.startswith("no_") else ""
    return ".".join([*path, last[len(prefix) :]]), prefix


def _new_name(cls, dotted: str) -> str | None:
    """The new dotted name of a field that ``cls`` (or a nested config) renamed, else None."""
    owner, *path = [cls, *dotted.split(".")]
    for part in path[:-1]:
        hint = typing.get_type_hints(owner).get(part) if dataclasses.is_dataclass(owner) else None
        if not dataclasses.is_dataclass(hint):
            return None
        owner = hint
    new = getattr(owner, "RENAMED", {}).get(path[-1])
    return None if new is None else ".".join([*path[:-1], new])


def renamed_flags(cls, tokens: list[str]) -> list[str]:
    """``tokens`` with each flag of a field that the config class ``cls`` renamed (its
    ``RENAMED``, or a nested config's) replaced by the new flag, and one warning line on stderr
    for each. UsageError when a field is given under both its old and new flags."""
    from ajax.validation import RENAMED_UNTIL

    given = {_flag_field(tok)[0] for tok in tokens if tok.startswith("--")}
    out, warnings = [], []
    for tok in tokens:
        dotted, prefix = _flag_field(tok) if tok.startswith("--") else ("", "")
        new = _new_name(cls, dotted) if dotted else None
        if new is None:
            out.append(tok)
            continue
        old_flag, new_flag = _flag(dotted), _flag(new)
        if new in given:
            raise UsageError(
                f"{old_flag} and {new_flag} set the same field ({old_flag} is its deprecated "
                f"name): give only {new_flag}"
            )
        *path, last = new.split(".")
        flag = _flag(".".join([*path, prefix + last]))
        out.append(flag + tok[len(tok.split("=", 1)[0]) :])  # a "=value" stays on the flag
        warnings.append(
            f"warning: {old_flag} is deprecated (renamed {new_flag}); it will be removed in "
            f"{RENAMED_UNTIL}"
        )
    for line in dict.fromkeys(warnings):  # once per flag
        print(line, file=sys.stderr)
    return out


def parse_flags(cls, args: list[str], default=None):
    """tyro-parse ``args`` into ``cls``; a failure becomes one UsageError line naming the flag,
    what it takes and, for an unknown nested field, the valid ones."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(captured):
            return tyro.cli(cls, args=args, default=default, console_outputs=False)
    except SystemExit as err:
        # A value the config refused (its ConfigError) is in tyro's report; else find the flag.
        lines = [ln.strip(" │╭╮╰╯") for ln in captured.getvalue().splitlines()]
        start = next((i for i, ln in enumerate(lines) if ln.startswith("Error parsing")), None)
        detail = ""
        if start is not None:  # the report wraps inside a box: join up to its rule line
            body = itertools.takewhile(lambda ln: ln and set(ln) != {"-"}, lines[start:])
            detail = " ".join(body).split(": ", 1)[-1]
        message = _diagnose(cls, args)
        if message.startswith("cannot parse") and detail:
            refused = _config_error(err)
            quoted = _flag_tokens(args, refused.flag) if refused is not None else args
            detail = str(refused) if refused is not None else detail
            message = f"invalid value in '{' '.join(quoted)}': {detail}" if quoted else detail
        raise UsageError(message) from err


def _config_error(err: BaseException):
    """The :class:`~ajax.validation.ConfigError` that made tyro exit (its exception chain), or
    None when tyro refused the flags themselves."""
    from ajax.validation import ConfigError

    while err is not None and not isinstance(err, ConfigError):
        err = err.__context__
    return err


def _flag_tokens(args: list[str], flag: str | None) -> list[str]:
    """The tokens of ``args`` that give ``flag`` (``--flag V ...`` or ``--flag=V``), or []: a
    config error quotes only the flag it is about, not the whole command line."""
    for i, tok in enumerate(args):
        if flag is not None and tok.split("=", 1)[0] == flag:
            values = itertools.takewhile(lambda t: not t.startswith("--"), args[i + 1 :])
            return [tok] if "=" in tok else [tok, *values]
    return []


def _flag(dotted: str) -> str:
    return "--" + dotted.replace("_", "-")


def _resolve(cls, dotted: str):
    """The (owner class, field, type) a dotted flag name sets; UsageError if there is none."""
    owner, parts = cls, dotted.split(".")
    for i, part in enumerate(parts):
        hints = typing.get_type_hints(owner)
        names = [f.name for f in dataclasses.fields(owner)]
        if part not in names:
            prefix = ".".join(parts[:i])
            valid = ", ".join(_flag(f"{prefix}.{n}" if prefix else n) for n in sorted(names))
            raise UsageError(f"unknown option {_flag(dotted)}; valid here: {valid}")
        if i == len(parts) - 1:
            return owner, part, hints[part]
        owner = hints[part]
        if not dataclasses.is_dataclass(owner):
            raise UsageError(f"{_flag('.'.join(parts[: i + 1]))} has no fields")


def _takes(owner, name: str, hint) -> str:
    """What a flag takes, e.g. "an int > 0 (default 256)"."""
    kind = getattr(hint, "__name__", str(hint)).replace("NoneType", "none")
    rule = rules_of(owner).get(name)
    default = next((f.default for f in dataclasses.fields(owner) if f.name == name), None)
    article = "an" if kind[:1] in "aeiou" else "a"
    text = f"{article} {kind}" + (f" that is {rule.describe()}" if rule is not None else "")
    return text + ("" if default is dataclasses.MISSING else f" (default {default!r})")


def _switch_value(tok: str, inline: str, following: list[str]) -> str:
    """The error of a value given to the switch ``tok`` (``--overwrite 1``, ``--no-progress
    yes``, ``--overwrite=1``), or "" when it has none."""
    flag = tok.split("=", 1)[0]
    given = inline if "=" in tok else (following[0] if following else "--")
    if given.startswith("--"):
        return ""
    return f"{flag} is a switch and takes no value, got {given!r}: give {flag} alone"


def _diagnose(cls, args: list[str]) -> str:
    """The first flag of ``args`` that cannot parse, and why."""
    for i, tok in enumerate(args):
        if not tok.startswith("--"):
            continue
        dotted, _, inline = tok[2:].partition("=")
        dotted = dotted.replace("-", "_")
        switch = _switch_value(tok, inline, args[i + 1 : i + 2])
        if dotted.split(".")[-1].startswith("no_"):
            if switch:
                return switch
            continue  # a boolean switch
        owner, name, hint = _resolve(cls, dotted)
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(options) == 1:
            hint = options[0]  # an optional flag (e.g. --devices): the value's own type
        if hint is bool:
            if switch:
                return switch
            continue
        if dataclasses.is_dataclass(hint):
            fields = ", ".join(_flag(f"{dotted}.{f.name}") for f in dataclasses.fields(hint))
            return f"{_flag(dotted)} is a group of fields; set them one by one: {fields}"
        values = (
            [inline]
            if inline
            else list(itertools.takewhile(lambda t: not t.startswith("--"), args[i + 1 :]))
        )
        if not values:
            return f"{_flag(dotted)} needs a value: {_takes(owner, name, hint)}"
        if typing.get_origin(hint) is typing.Literal and values[0] not in typing.get_args(hint):
            choices = ", ".join(map(str, typing.get_args(hint)))
            return f"invalid value {values[0]!r} for {_flag(dotted)}: it takes one of {choices}"
        arity = len(typing.get_args(hint)) if typing.get_origin(hint) is tuple else 1
        if arity > 1 and len(values) != arity:
            return (f"{_flag(dotted)} takes {arity} values, got {len(values)}: "
                    f"{_takes(owner, name, hint)}")  # fmt: skip
        kinds = typing.get_args(hint) if typing.get_origin(hint) is tuple else ()
        for item, kind in zip(values, kinds, strict=False):
            if kind in (int, float):
                try:
                    kind(item)
                except ValueError:
                    return (f"invalid value {' '.join(values)!r} for {_flag(dotted)}: item "
                            f"{item!r} is not a {kind.__name__}; it takes "
                            f"{_takes(owner, name, hint)}")  # fmt: skip
        with contextlib.suppress(ValueError, TypeError):
            if hint in (int, float):
                hint(values[0])
                continue
        if hint in (int, float):
            return f"invalid value {' '.join(values)!r} for {_flag(dotted)}: it takes {_takes(owner, name, hint)}"
    return f"cannot parse '{' '.join(args)}'; 'ajax train AGENT --help' lists every option"
