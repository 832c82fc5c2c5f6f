"""Tuned settings per (agent, env), as RL Zoo's: the registry (``ajax/preset_data/*.toml``, data
that ships with the package), how a run picks a preset, and how a preset makes a config.

``ajax train AGENT --env E`` applies the default preset for (AGENT, E) when there is one and
says so in one line; ``--preset NAME`` picks another, ``--preset none`` none; flags override a
preset's fields (flags > preset > the config's defaults). From Python:
``DQNConfig.for_env("CartPole-v1")``, ``DQNConfig.from_preset("dqn-cartpole-rlzoo")`` and
``ajax.DQN(env="CartPole-v1", config="auto")`` (which also applies the preset's env options,
e.g. ``normalize_obs``). A preset of a world model may name an official protocol
(``protocol``), which the config class applies (``from_protocol``) with its own env settings.

Nothing here names an agent: the registry's entries do.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import functools
import tomllib
from importlib import resources
from typing import Any

from ajax.cli_flags import UsageError

NONE = "none"  # --preset none: the config's plain defaults
KEYS = {"name", "agent", "envs", "source", "config", "none", "env_options", "steps", "protocol",
        "default", "when", "not_mapped", "extends"}  # fmt: skip


class PresetError(UsageError, ValueError):
    """A preset that does not exist or does not fit the run; the message names the fix (the
    command line prints it as one line, exit 2; from Python it is a ValueError)."""


@dataclasses.dataclass(frozen=True)
class Preset:
    """One entry of the registry.

    Attributes:
        name: what ``--preset`` takes.
        agent: the ``ajax train`` name of the agent it is for.
        envs: env ids, or ``fnmatch`` globs (``"dmc:*"``), it is made for.
        source: where its values come from (file and block, or "from memory").
        config: config fields it sets (Ajax's names; a nested config's as a dict).
        none: config fields it sets to None.
        env_options: make_env options it sets (e.g. ``normalize_obs``).
        steps: the run's env steps unless ``--steps`` is given (None: the config's own, or the
            protocol's).
        protocol: an official protocol the config class applies first (``from_protocol``).
        default: whether ``ajax train`` applies it when no ``--preset`` is given.
        when: image options the env must be given with (``{"pixels": True}``); absent ones
            count as False.
        not_mapped: settings of the source that Ajax has no field for.
    """

    name: str
    agent: str
    envs: tuple[str, ...]
    source: str
    config: dict = dataclasses.field(default_factory=dict, hash=False)
    none: tuple[str, ...] = ()
    env_options: dict = dataclasses.field(default_factory=dict, hash=False)
    steps: int | None = None
    protocol: str | None = None
    default: bool = False
    when: dict = dataclasses.field(default_factory=dict, hash=False)
    not_mapped: str = ""

    def matches_id(self, env: str) -> bool:
        """Whether ``env`` is one of its ids or globs."""
        return any(fnmatch.fnmatchcase(env, pattern) for pattern in self.envs)

    def takes(self, env: str, image_options: dict | None = None) -> bool:
        """Whether it is made for ``env`` given with ``image_options`` (its ``when``)."""
        given = image_options or {}
        return self.matches_id(env) and all(given.get(k, False) == v for k, v in self.when.items())

    def fields(self) -> dict[str, Any]:
        """The config fields it sets, its ``none`` ones as None."""
        return {**self.config, **dict.fromkeys(self.none)}

    def describe(self) -> str:
        """What it sets, in one line: the protocol, the fields, the env options and steps."""
        parts = [f"--protocol {self.protocol}"] if self.protocol else []
        parts += [f"{k}={_text(v)}" for k, v in self.fields().items()]
        parts += [f"env {k}={_text(v)}" for k, v in self.env_options.items()]
        if self.steps is not None:
            parts.append(f"{self.steps} steps")
        return ", ".join(parts) or "nothing (the defaults)"

    def envs_text(self) -> str:
        """Its envs, with its ``when`` (``dmc:* with pixels``)."""
        when = " and ".join(k if v is True else f"no {k}" if v is False else f"{k}={v}"
                            for k, v in self.when.items())  # fmt: skip
        return ", ".join(self.envs) + (f" with {when}" if when else "")

    def notice(self) -> str:
        """The one line ``ajax train`` prints when it applies this preset."""
        return (f"preset {self.name} ({self.describe()}; source: {self.source}); flags "
                f"override it, --preset none runs the defaults")  # fmt: skip


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def parse(*texts: str) -> dict[str, Preset]:
    """The presets of registry files' texts (one registry), by name; ValueError naming a bad
    entry (an unknown key, a repeated name, an ``extends`` of another agent or of a missing
    preset)."""
    entries = [e for text in texts for e in tomllib.loads(text).get("preset", [])]
    raw: dict[str, dict] = {}
    for entry in entries:
        name = entry.get("name")
        unknown = sorted(set(entry) - KEYS)
        if not name or name in raw or name == NONE or unknown:
            raise ValueError(f"preset entry {name!r}: a missing, reserved or repeated name, or "
                             f"unknown keys {unknown} (keys: {', '.join(sorted(KEYS))})")  # fmt: skip
        raw[name] = entry
    return {name: _build(raw, name) for name in raw}


def _build(raw: dict[str, dict], name: str, seen: tuple[str, ...] = ()) -> Preset:
    """One preset, its ``extends`` chain merged in (its own values last)."""
    entry = raw[name]
    parent_name = entry.get("extends")
    parent = None
    if parent_name is not None:
        if parent_name not in raw or parent_name in seen:
            raise ValueError(f"preset {name!r} extends {parent_name!r}, which is missing or loops")
        parent = _build(raw, parent_name, (*seen, name))
        if parent.agent != entry["agent"]:
            raise ValueError(f"preset {name!r} extends {parent_name!r}, a preset of another agent")
    inherited = dataclasses.asdict(parent) if parent else {}
    return Preset(
        name=name,
        agent=entry["agent"],
        envs=tuple(entry["envs"]),
        source=entry["source"],
        config={**inherited.get("config", {}), **entry.get("config", {})},
        none=tuple(dict.fromkeys((*inherited.get("none", ()), *entry.get("none", ())))),
        env_options={**inherited.get("env_options", {}), **entry.get("env_options", {})},
        steps=entry.get("steps", inherited.get("steps")),
        protocol=entry.get("protocol", inherited.get("protocol")),
        default=entry.get("default", False),
        when=dict(entry.get("when", {})),
        not_mapped=entry.get("not_mapped", ""),
    )


@functools.cache
def registry() -> dict[str, Preset]:
    """Every preset the package ships (``ajax/preset_data/*.toml``), by name."""
    files = sorted(resources.files("ajax").joinpath("preset_data").iterdir(), key=lambda f: f.name)
    return parse(*(f.read_text() for f in files if f.name.endswith(".toml")))


def of_agent(agent: str) -> list[Preset]:
    """The presets of ``agent``, defaults first, then by name."""
    mine = (p for p in registry().values() if p.agent == agent)
    return sorted(mine, key=lambda p: (not p.default, p.name))


def default_for(agent: str, env: str, image_options: dict | None = None) -> Preset | None:
    """The preset ``ajax train AGENT --env ENV`` applies, or None."""
    found = [p for p in of_agent(agent) if p.default and p.takes(env, image_options)]
    return found[0] if found else None


def choose(agent: str, env: str, name: str | None = None, image_options: dict | None = None):
    """The preset a run uses: ``name`` None gives the default for (agent, env) or None,
    ``"none"`` None, another name that preset; PresetError naming the fix for an unknown name
    or a preset made for another agent or env."""
    if name is None:
        return default_for(agent, env, image_options)
    if name == NONE:
        return None
    mine = [p.name for p in of_agent(agent)]
    preset = registry().get(name)
    if preset is None:
        close = difflib.get_close_matches(name, mine, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        known = ", ".join(mine) or f"none for {agent}"
        raise PresetError(f"unknown preset {name!r}; {guess}{agent}'s presets: {known} ('ajax "
                          f"presets {agent}' lists them; --preset none runs the defaults)")  # fmt: skip
    if preset.agent != agent:
        raise PresetError(f"preset {name!r} is for {preset.agent}, not {agent}: pick one of "
                          f"{agent}'s ({', '.join(mine) or 'it has none'}), or train "
                          f"{preset.agent}")  # fmt: skip
    if not preset.takes(env, image_options):
        fits = [p.name for p in of_agent(agent) if p.takes(env, image_options)]
        instead = f"--preset {fits[0]}" if fits else "--preset none"
        if preset.matches_id(env):  # the image flags differ from its ``when``
            fix = " and ".join(f"--{k}" if v else f"no --{k}" for k, v in preset.when.items())
            fix = f"give {fix}"
        elif any(c in preset.envs[0] for c in "*?["):
            fix = f"pass an --env matching {preset.envs[0]}"
        else:
            fix = f"pass --env {preset.envs[0]}"
        raise PresetError(f"preset {name!r} is made for {preset.envs_text()}, not {env!r} as "
                          f"given: {fix}, or {instead} for it")  # fmt: skip
    return preset


def apply(preset: Preset | None, config):
    """``config`` with the preset's fields (a nested config's fields replaced one by one)."""
    if preset is None:
        return config
    return _replace(config, preset.fields())


def _replace(config, values: dict):
    """``dataclasses.replace`` with TOML's lists as tuples and nested configs' dicts merged."""
    changes = {}
    for key, value in values.items():
        current = getattr(config, key, None)
        if isinstance(value, dict) and dataclasses.is_dataclass(current):
            value = _replace(current, value)
        changes[key] = tuple(value) if isinstance(value, list) else value
    try:
        return dataclasses.replace(config, **changes)
    except TypeError as err:  # a field the config does not have
        raise PresetError(f"a preset sets a field {type(config).__name__} lacks: {err}") from err


def make_config(preset: Preset | None, config_cls, **overrides):
    """The config of ``config_cls`` a preset gives: its protocol's (``from_protocol``) or the
    plain defaults, then its fields, then ``overrides``."""
    if preset is not None and preset.protocol is not None:
        if not hasattr(config_cls, "from_protocol"):
            raise PresetError(f"preset {preset.name!r} names protocol {preset.protocol!r}, "
                              f"which {config_cls.__name__} has no from_protocol for")  # fmt: skip
        base = config_cls.from_protocol(preset.protocol)
    else:
        base = config_cls()
    config = apply(preset, base)
    return dataclasses.replace(config, **overrides) if overrides else config


def agent_of(config_cls) -> str:
    """The registry's agent whose config class is ``config_cls``; PresetError if none."""
    from ajax import agents

    names = sorted({p.agent for p in registry().values()})
    # the agent whose class names its config (DQN, DQNConfig) first: fewer agents imported
    names.sort(key=lambda n: not config_cls.__name__.startswith(agents.class_name(n) + "Config"))
    for name in names:
        try:
            if agents.get(name).config_cls is config_cls:
                return name
        except (ImportError, ValueError):
            continue
    raise PresetError(f"no preset is for {config_cls.__name__}; build it with its fields")


def for_env(config_cls, env: str, env_options: dict | None = None, **overrides):
    """``config_cls``'s config for ``env``: its default preset's (or the plain defaults where
    there is none), then ``overrides``."""
    preset = default_for(agent_of(config_cls), env, env_options)
    return make_config(preset, config_cls, **overrides)


def from_preset(config_cls, name: str, **overrides):
    """``config_cls``'s config from the preset ``name``; PresetError naming the fix."""
    agent = agent_of(config_cls)
    preset = registry().get(name)
    if preset is None or preset.agent != agent:
        mine = ", ".join(p.name for p in of_agent(agent))
        raise PresetError(f"{name!r} is not a preset of {agent}; its presets: {mine}")
    return make_config(preset, config_cls, **overrides)


def auto(algo_cls, env, env_options: dict) -> tuple[Any, dict]:
    """``Agent(env, config="auto")``: the default preset's config for the env id and its env
    options under the ones given (the plain defaults where there is none)."""
    if not isinstance(env, str):
        raise ValueError('config="auto" picks the preset by env id: pass the id (e.g. '
                         '"CartPole-v1") or a config')  # fmt: skip
    preset = default_for(algo_cls.name, env, env_options)
    config = make_config(preset, algo_cls.config_cls)
    return config, {**(preset.env_options if preset else {}), **env_options}


def listing(agent: str | None = None, env: str | None = None) -> list[str]:
    """``ajax presets [AGENT] [--env E]``: each preset's header, source, fields and what it
    leaves unmapped."""
    chosen = [p for p in registry().values()
              if (agent is None or p.agent == agent) and (env is None or p.matches_id(env))]  # fmt: skip
    lines = []
    for p in sorted(chosen, key=lambda p: (p.agent, not p.default, p.name)):
        lines.append(f"{p.name}  [{p.agent}; {p.envs_text()}{'; default' if p.default else ''}]")
        lines.append(f"    sets: {p.describe()}")
        lines.append(f"    source: {p.source}")
        if p.not_mapped:
            lines.append(f"    not mapped: {p.not_mapped}")
    return lines
