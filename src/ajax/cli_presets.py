"""The command line's side of presets (:mod:`ajax.presets`): which preset ``ajax train`` uses,
what it adds to the run's flags and env options, ``ajax presets``, and ``--preset`` refused by
``ajax resume``."""

from __future__ import annotations

from ajax import presets
from ajax.cli_args import TrainArgs, flag_value
from ajax.cli_flags import UsageError
from ajax.presets import Preset, apply  # noqa: F401  (apply: the CLI's preset over a base)


def train_preset(agent: str, args: TrainArgs, config_args: list[str]) -> Preset | None:
    """The preset of ``ajax train``: ``--preset`` (a name, or ``none``), else the default for
    (agent, env) unless ``--protocol`` chose the run's settings; PresetError naming the fix."""
    if args.preset is None and flag_value(config_args, "--protocol") is not None:
        return None
    env = f"dataset:{args.dataset}" if args.multitask else args.env
    return presets.choose(agent, env, args.preset, args.image_options())


def with_protocol(preset: Preset | None, config_args: list[str]) -> list[str]:
    """``config_args`` with the preset's protocol as ``--protocol`` in front, unless one is
    given (a flag overrides the preset)."""
    if preset is None or preset.protocol is None or flag_value(config_args, "--protocol"):
        return config_args
    return ["--protocol", preset.protocol, *config_args]


def env_options_with(preset: Preset | None, args: TrainArgs) -> dict:
    """The run's env options: the ones given over the preset's."""
    return {**(preset.env_options if preset else {}), **args.env_options()}


def recorded_env_options(given: dict, algo, protocol) -> dict:
    """run.json's env options: ``given``, over the protocol's for the env's family (the
    algorithm applied the same), tuples as the lists JSON reads back."""
    if protocol is None:
        return given
    options = protocol.env_options.get(algo.env.spec.family, {})
    return {**{k: list(v) if isinstance(v, tuple) else v for k, v in options.items()}, **given}


def refuse_on_resume(flags: list[str]) -> None:
    """UsageError naming the fix for ``--preset`` given to ``ajax resume``."""
    if any(tok == "--preset" or tok.startswith("--preset=") for tok in flags):
        raise UsageError("--preset is for 'ajax train': a resumed run keeps the config (and "
                         "preset) its run.json records; drop --preset")  # fmt: skip


def cmd_presets(argv: list[str]) -> int:
    """``ajax presets [AGENT] [--env E]``: the presets with their sources and fields."""
    from ajax import agents

    usage = "usage: ajax presets [AGENT] [--env ID]"
    if "-h" in argv or "--help" in argv:
        print(usage)
        return 0
    env = flag_value(argv, "--env")
    rest = [a for a in argv if not a.startswith("--env")]
    rest = [a for a in rest if a != env] if env is not None else rest
    if len(rest) > 1 or any(a.startswith("-") for a in rest) or ("--env" in argv and env is None):
        raise UsageError(usage)
    agent = rest[0] if rest else None
    if agent is not None and agent not in agents.names():
        raise UsageError(f"unknown agent {agent!r}; known agents: {', '.join(agents.names())}")
    if env is not None:
        from ajax.environments.registry import resolve_env_id

        try:  # a misspelt id is not "no preset": name the id and the closest known ones
            resolve_env_id(env)
        except ValueError as err:
            raise UsageError(f"--env: {err}") from err
    lines = presets.listing(agent, env)
    if not lines:
        what = " ".join(x for x in (agent, env and f"on {env}") if x)
        lines = [f"no preset for {what}: ajax train runs the config's defaults"]
    print("\n".join(lines))
    return 0
