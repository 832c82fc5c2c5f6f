"""The ``ajax`` command line: ``train``, ``resume``, ``eval``, ``collect``, ``check``, ``envs``,
``agents``, ``presets``, ``compare``.

``ajax train AGENT --env ID [--steps N] [--seed S] [--n-seeds K] [--out DIR] [--overwrite]
[--preset NAME|none] [--<config-field> VALUE ...]``; every field of the agent's config dataclass
is a flag (``tyro`` parses and types them), over the agent's tuned preset for the env (``ajax
presets [AGENT] [--env ID]`` lists them). ``ajax resume DIR [--ignore-version]`` continues a
run from its newest good checkpoint; ``ajax eval DIR [--episodes N]`` scores it; ``ajax check
DIR`` reports every checkpoint's state (exit 1 when the run needs attention); ``ajax collect
RUN --out DIR`` writes episodes of a trained run into an offline dataset, on which ``ajax train
tdmpc2 --multitask --dataset DIR`` trains. Bad input gets one ``ajax: error: ...`` line and
exit status 2; a run that diverges exits with status 3; a reader that closes the output early
(``ajax agents | head``) ends it quietly, status 0; a failure of the machine (a full
disk, a write refused) is one ``ajax: error:`` line, exit 4. ``ajax COMMAND --help`` shows each
command's usage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import tyro

from ajax import cli_presets as presets
from ajax.cli_args import (
    USAGE,
    CollectArgs,
    ResumeArgs,
    TrainArgs,
    check_agent_only,
    check_dataset_out,
    check_multitask,
    check_no_args,
    check_optional,
    check_out_given,
    help_text,
    parse_eval,
    protocol_of,
    protocol_steps,
    split_positional,
)
from ajax.cli_flags import UsageError, parse_flags, renamed_flags, split_flags
from ajax.failures import NO_SPACE


def is_primary() -> bool:
    from ajax.training.distributed import is_primary

    return is_primary()


def _agents() -> dict[str, type]:
    """The registered agents that import here (:mod:`ajax.agents`, the one registry)."""
    from ajax import agents

    return agents.available()


def _make_algo(agent: str, env: str, config, env_options: dict | None = None):
    """The agent every command runs (train, resume, eval, collect, sweep), built from its
    registry name; a UsageError naming the fix when it refuses its env or options."""
    from ajax.host_memory import keep_host_buffers

    agents = _agents()
    if agent not in agents:
        raise UsageError(f"unknown agent {agent!r}; known agents: {', '.join(sorted(agents))}")
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in (env_options or {}).items()}
    cls = agents[agent]
    if cls.keeps_host_buffers:  # before the agent's first program runs (ajax.host_memory)
        keep_host_buffers()
    try:
        if "dataset" in options:  # the agent's offline multi-task variant (cls.multitask)
            module, name = cls.multitask.split(":")
            variant = getattr(importlib.import_module(module), name)
            return variant(options["dataset"], config, options.get("task_set"))
        return cls(env=env, config=config, **options)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from err


def _slug(env: str) -> str:
    """An env id (or ``dataset:DIR``) as one path component."""
    return env.replace(":", "_").replace("/", "_")


def cmd_train(argv: list[str]) -> int:
    from ajax.training import driver
    from ajax.training.run import execute
    from ajax.training.run_dir import RunSpec, prepare_run_dir

    if argv and argv[0] in ("-h", "--help"):
        print(f"usage: ajax train AGENT --env ID [options]; agents: {', '.join(_agents())}")
        print("'ajax train AGENT --help' lists the run options and every config field")
        return 0
    if not argv or argv[0].startswith("-"):
        raise UsageError(f"usage: ajax train AGENT --env ID ...; agents: {', '.join(_agents())}")
    agent, rest = argv[0], argv[1:]
    agents = _agents()
    if agent not in agents:
        raise UsageError(f"unknown agent {agent!r}; known agents: {', '.join(sorted(agents))}")
    if "-h" in rest or "--help" in rest:
        return _train_help(agent, agents[agent].config_cls)
    args, config, preset, algo, env_options, devices = train_setup(agent, rest)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"runs/{agent}-{_slug(args.env)}-{stamp}")
    try:
        spec = RunSpec(
            agent=agent,
            env=args.env,
            steps=args.steps,
            seed=args.seed,
            n_seeds=args.n_seeds,
            checkpoint_every=args.checkpoint_every,
            config=dataclasses.asdict(config),
            env_options=env_options,
            preset=preset and preset.name,
        )
    except ValueError as err:
        raise UsageError(str(err)) from err
    try:  # the run's one validation (steps, seeds, batching, memory, devices)
        plan = driver.plan(algo, spec.steps, spec.seed, spec.n_seeds, devices, args.parallel,
                           args.seed_batching)  # fmt: skip
    except ValueError as err:
        raise UsageError(str(err)) from err
    try:
        if is_primary():
            prepare_run_dir(out, spec, args.overwrite)
    except FileExistsError as err:
        raise UsageError(str(err)) from err
    except OSError as err:
        if err.errno in NO_SPACE:  # the machine failed, not the flag: main() says so, exit 4
            raise
        reason = err.strerror or str(err)
        raise UsageError(
            f"cannot create the run directory {out}: {reason}; pick a writable --out path"
        ) from err
    if preset is not None and is_primary():
        print(preset.notice())
    summary, _ = execute(
        algo, spec, out, progress=args.progress, wandb_project=args.wandb_project, plan=plan
    )
    if not is_primary():
        return 0
    _report(summary, out)
    if summary["eval_every"] != getattr(config, "eval_freq", summary["eval_every"]):
        print(f"note: --eval-freq {config.eval_freq} evaluated every {summary['eval_every']} env "
              "steps: evaluations fall between whole chunks (vector steps or rollouts)")  # fmt: skip
    return 0


class TrainSetup(NamedTuple):
    """What ``ajax train`` (and ``sweep``) read off the command line, validated: the run
    options, the config (preset, protocol and flags applied), the preset, the agent on its env,
    the env options to record, and the devices."""

    args: TrainArgs
    config: Any
    preset: Any
    algo: Any
    env_options: dict
    devices: int | None


def train_setup(agent: str, rest: list[str]) -> TrainSetup:
    """Parse ``ajax train AGENT``'s flags ``rest`` into a :class:`TrainSetup` (UsageError or
    ConfigError, one line, for bad input; nothing written)."""
    config_cls = _agents()[agent].config_cls
    rest = renamed_flags(config_cls, rest)  # --lr -> --learning-rate, with a warning
    own = {f.name for f in dataclasses.fields(TrainArgs)}
    python_only = getattr(config_cls, "PYTHON_ONLY", {})
    fields = {f.name for f in dataclasses.fields(config_cls)} - set(python_only)
    refused = {**getattr(config_cls, "REFUSED_FLAGS", {}), **python_only}
    check_agent_only(agent, rest)
    own_args, config_args = split_flags(rest, own, fields, refused)
    args = parse_flags(TrainArgs, own_args, TrainArgs())
    preset = presets.train_preset(agent, args, config_args)
    config_args = presets.with_protocol(preset, config_args)
    protocol_name, protocol = protocol_of(agent, config_args)
    args = protocol_steps(protocol_steps(args, own_args, protocol), own_args, preset)
    check_multitask(args, agent, any(a == "--env" or a.startswith("--env=") for a in own_args))
    if args.multitask:
        args = dataclasses.replace(args, env=f"dataset:{args.dataset}")
    args.check_counts()
    check_out_given(args.out, "name the output directory (e.g. --out runs/my-run), or drop "
                    "--out for a new one under runs/")  # fmt: skip
    check_optional(own_args)  # --wandb-project: its package, before anything is written
    devices = args.connect()
    try:
        base = config_cls.from_protocol(protocol_name) if protocol else config_cls()
        base = presets.apply(preset, base)
        config = parse_flags(config_cls, config_args, base) if config_args else base
    except ValueError as err:
        raise UsageError(str(err)) from err
    given = presets.env_options_with(preset, args)
    algo = _make_algo(agent, args.env, config, given)
    env_options = presets.recorded_env_options(given, algo, protocol)
    return TrainSetup(args, config, preset, algo, env_options, devices)


def _train_help(agent: str, config_cls) -> int:
    """``ajax train AGENT --help``: the run options, then the agent's config fields (tyro)."""
    print(f"usage: ajax train {agent} [run options] [{config_cls.__name__} fields]\n")
    for cls in (TrainArgs, config_cls):
        with contextlib.suppress(SystemExit):
            tyro.cli(cls, args=["--help"], prog=f"ajax train {agent}")
    return 0


def _config_from(agent: str, values: dict):
    """The agent's config from ``run.json``'s ``config``, a renamed field's old key read as the
    new one (the config class's ``RENAMED``: runs saved before the rename); unknown fields and
    bad values are a :class:`~ajax.training.run_dir.RunDirError` (the file was edited or comes from
    another version)."""
    from ajax.training.run_dir import RunDirError
    from ajax.validation import ConfigError, renamed_fields

    cls = _agents()[agent].config_cls
    try:
        values = renamed_fields(cls, values)
    except ConfigError as err:
        raise RunDirError(f"run.json's config: {err}") from err
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise RunDirError(
            f"run.json's config has field(s) {unknown} that {cls.__name__} does not know; "
            f"remove them (valid: {', '.join(sorted(fields))})"
        )
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise RunDirError(f"run.json's config: {err}") from err


def cmd_resume(argv: list[str]) -> int:
    from ajax.training import driver
    from ajax.training.run import execute
    from ajax.training.run_dir import load_spec

    positional, flags = split_positional(argv, ResumeArgs)
    presets.refuse_on_resume(flags)
    if len(positional) != 1:
        raise UsageError(USAGE["resume"])
    out, args = Path(positional[0]), parse_flags(ResumeArgs, flags, ResumeArgs())
    devices = args.connect()
    try:
        spec = load_spec(out)
    except FileNotFoundError as err:
        raise UsageError(str(err)) from err
    algo = _make_algo(spec.agent, spec.env, _config_from(spec.agent, spec.config), spec.env_options)
    try:
        plan = driver.plan(algo, spec.steps, spec.seed, spec.n_seeds, devices, args.parallel,
                           args.seed_batching)  # fmt: skip
    except ValueError as err:
        raise UsageError(str(err)) from err
    summary, _ = execute(
        algo, spec, out, resume=True, ignore_version=args.ignore_version, plan=plan
    )
    if is_primary():
        _report(summary, out)
    return 0


def cmd_check(argv: list[str]) -> int:
    """``ajax check DIR``: report the run's checkpoints and metrics; exit 1 if it needs care."""
    from ajax.training.check import check_run

    if len(argv) != 1 or argv[0].startswith("-"):
        raise UsageError(USAGE["check"])
    try:
        lines, healthy = check_run(Path(argv[0]))
    except FileNotFoundError as err:
        raise UsageError(str(err)) from err
    print("\n".join(lines))
    return 0 if healthy else 1


def cmd_eval(argv: list[str]) -> int:
    from ajax.training.evaluation import evaluate_run, record_video

    run_dir, episodes, video = parse_eval(argv)
    out = Path(run_dir)
    if video:
        check_optional(["--video"])
        _check_video(out)
    try:
        returns = evaluate_run(out, episodes, _make_algo, _config_from)
        gif = record_video(out, _make_algo, _config_from) if video else None
    except (FileNotFoundError, ValueError) as err:
        raise UsageError(str(err)) from err
    per_seed = ", ".join(f"{r:.2f}" for r in returns)
    print(
        f"eval return over {episodes} episodes: mean {sum(returns) / len(returns):.2f} "
        f"(per seed: {per_seed})"
    )
    if gif is not None:
        print(f"video of one episode (first seed): {gif}")
    return 0


def cmd_collect(argv: list[str]) -> int:
    """``ajax collect RUN --out DIR``: episodes of a trained run's policy into a dataset."""
    from ajax.buffers.dataset import DatasetError
    from ajax.training.collect import collect_run
    from ajax.training.evaluation import restore_run

    positional, flags = split_positional(argv, CollectArgs)
    if len(positional) != 1:
        raise UsageError(USAGE["collect"])
    args, run_dir = parse_flags(CollectArgs, flags, CollectArgs()), Path(positional[0])
    args.check(flags)
    check_out_given(args.out, "name the dataset directory, e.g. --out data/pendulum")
    check_dataset_out(Path(args.out))
    try:
        run = restore_run(run_dir, _make_algo, _config_from)
        task = args.task or _slug(run.spec.env)
        meta = collect_run(run, run_dir, Path(args.out), task, args.episodes, args.noise,
                           args.seed, args.replay)  # fmt: skip
    except (FileNotFoundError, DatasetError) as err:
        raise UsageError(str(err)) from err
    source = meta.source
    what = "its replay" if args.replay else f"without noise {source['return_noiseless']:.2f}"
    print(f"task {meta.name}: {meta.episodes} episodes of up to {meta.episode_length} steps into "
          f"{args.out} (return mean {source['return_mean']:.2f}; {what})")  # fmt: skip
    return 0


def _check_video(out: Path) -> None:
    """Refuse ``--video`` for a run on a vector env before evaluating anything."""
    from ajax.training.run_dir import load_spec

    try:
        spec = load_spec(out)
    except FileNotFoundError as err:
        raise UsageError(str(err)) from err
    algo = _make_algo(spec.agent, spec.env, _config_from(spec.agent, spec.config),
                      spec.env_options)  # fmt: skip
    if algo.env.spec.image_shape is None:
        raise UsageError(
            f"--video needs an image env ({spec.env!r} gives vectors): e.g. Breakout-MinAtar, "
            "or a dmc: id with --pixels"
        )


def cmd_envs(argv: list[str]) -> int:
    from ajax.environments import format_env_listing, list_envs

    check_no_args("envs", argv)
    # the environments package owns the listing's format (blocked ids, availability reasons)
    print(format_env_listing(list_envs()))
    return 0


def cmd_agents(argv: list[str]) -> int:
    check_no_args("agents", argv)
    for name, cls in sorted(_agents().items()):
        kinds = [k for k, ok in (("continuous", cls.continuous), ("discrete", cls.discrete),
                                 ("images", cls.images)) if ok]  # fmt: skip
        print(f"{name:8s} {cls.__doc__.strip().splitlines()[0]} [{', '.join(kinds)}]")
    return 0


def _report(summary: dict, out: Path) -> None:
    print(
        f"final eval return {summary['final_eval_return']:.2f} over {len(summary['seeds'])} "
        f"seed(s) after {summary['steps']} steps in {summary['wall_time_s']:.0f} s; "
        f"curve: {out / 'curve.png'}"
    )


COMMANDS = {
    "train": cmd_train,
    "resume": cmd_resume,
    "eval": cmd_eval,
    "collect": cmd_collect,
    "check": cmd_check,
    "envs": cmd_envs,
    "agents": cmd_agents,
    "presets": presets.cmd_presets,
    "sweep": lambda argv: importlib.import_module("ajax.cli_sweep").cmd_sweep(argv),
    "compare": lambda argv: importlib.import_module("ajax.cli_compare").cmd_compare(argv),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    cmd = argv[0]
    if cmd not in COMMANDS:
        print(
            f"ajax: error: unknown command {cmd!r}; commands: {', '.join(COMMANDS)}",
            file=sys.stderr,
        )
        return 2
    from ajax.failures import environment_failed
    from ajax.training.run import Diverged
    from ajax.training.run_dir import RunDirError
    from ajax.validation import ConfigError

    try:
        shown = help_text(cmd, argv[1:])
        if shown is not None:
            print(shown)
            return 0
        status = COMMANDS[cmd](argv[1:])
        sys.stdout.flush()
        return status
    except (UsageError, RunDirError, ConfigError) as err:
        print(f"ajax: error: {err}", file=sys.stderr)
        return 2
    except Diverged as err:
        print(f"ajax: diverged: {err}", file=sys.stderr)
        return 3
    except BrokenPipeError:  # the reader stopped (ajax agents | head): nothing left to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # quiet exit flush
        return 0
    except OSError as err:  # the machine failed (a full disk): one line, exit 4
        return environment_failed(err)


if __name__ == "__main__":
    sys.exit(main())
