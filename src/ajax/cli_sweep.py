"""``ajax sweep AGENT --env ID --set FIELD=V1,V2 [--set ...] [ajax train options]``: a grid of
config values times seeds in one program (:mod:`ajax.training.sweep`), written as one ordinary
run directory per grid point (:mod:`ajax.training.sweep_dirs`) with the sweep's table and plot
beside them."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from ajax.cli_flags import UsageError, parse_flags
from ajax.failures import NO_SPACE

USAGE = ("usage: ajax sweep AGENT --env ID --set FIELD=V1,V2[,...] [--set FIELD=...] "
         "[--n-seeds K] [--out DIR] [ajax train options and config flags]")  # fmt: skip


def split_sets(argv: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """``([(field, "v1,v2"), ...], the other arguments)``: the ``--set FIELD=VALUES`` pairs."""
    sets, rest, i = [], [], 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--set" or tok.startswith("--set="):
            if tok == "--set":
                if i + 1 >= len(argv):
                    raise UsageError("--set needs FIELD=V1,V2 (e.g. --set learning_rate=1e-4,3e-4)")
                tok, i = argv[i + 1], i + 1
            else:
                tok = tok[len("--set=") :]
            field, eq, values = tok.partition("=")
            if not eq or not field or not values:
                raise UsageError(f"--set {tok!r} is not FIELD=V1,V2 (e.g. --set "
                                 "learning_rate=1e-4,3e-4)")  # fmt: skip
            sets.append((field.strip().replace("-", "_"), values))
        else:
            rest.append(tok)
        i += 1
    return sets, rest


def check_set_and_flag(sets: list[tuple[str, str]], rest: list[str]) -> None:
    """UsageError for a field both swept (``--set FIELD=...``) and given as its flag
    (``--field V``): the grid would silently replace the flag's value."""
    given = {tok[2:].split("=", 1)[0].replace("-", "_") for tok in rest if tok.startswith("--")}
    for field, values in sets:
        if field in given:
            flag = "--" + field.replace("_", "-")
            raise UsageError(f"{field} is both swept (--set {field}={values}) and set by {flag}; "
                             f"drop {flag}, or put its value in the --set list")  # fmt: skip


def typed_grid(config_cls, config, sets: list[tuple[str, str]]) -> dict[str, tuple]:
    """The grid ``field -> values``, each value parsed and checked as its flag would be
    (``--field value``: its type, its rule)."""
    from ajax.training.sweep import SweepError, field_kinds

    traced, static, refused = field_kinds(config_cls)
    grid: dict[str, tuple] = {}
    for field, text in sets:
        if field in grid:
            raise UsageError(f"--set {field} is given twice; give all its values in one --set")
        if field in refused:
            raise UsageError(f"{config_cls.__name__}.{field} cannot be swept: it {refused[field]}")
        if field not in traced and field not in static:
            raise UsageError(f"{config_cls.__name__} has no field {field!r} to sweep; "
                             f"'ajax sweep AGENT --help' lists them")  # fmt: skip
        flag = "--" + field.replace("_", "-")
        values = []
        for raw in text.split(","):
            try:
                values.append(getattr(parse_flags(config_cls, [flag, raw.strip()], config), field))
            except (ValueError, SweepError, UsageError) as err:
                raise UsageError(f"--set {field}: {err}") from err
        grid[field] = tuple(values)
    if not grid:
        raise UsageError(f"{USAGE}: give at least one --set")
    return grid


def sweep_help(agent: str, config_cls) -> str:
    """``ajax sweep AGENT --help``: which fields run in one program and which one per value."""
    from ajax.training.sweep import field_kinds

    traced, static, refused = field_kinds(config_cls)
    wrap = lambda names: "\n    ".join(_lines(names)) if names else "none"  # noqa: E731
    return (
        f"{USAGE.replace('AGENT', agent)}\n\nrun every combination of the --set values for "
        "--n-seeds seeds each, one run directory per grid point under --out (ajax resume, eval "
        "and check work on each) with points.csv, summary.csv (IQM, mean and median with bootstrap "
        "intervals) and curves.png\n\n"
        f"fields swept in one program (traced: all their values batched with the seeds):\n    "
        f"{wrap(traced)}\n\nfields that change shapes or control flow (one program per value, "
        f"in sequence):\n    {wrap(static)}\n\nnot sweepable (Python API only): "
        f"{', '.join(refused) or 'none'}\n\n'ajax train {agent} --help' documents every field"
    )


def _lines(names, width: int = 88) -> list[str]:
    lines, line = [], ""
    for name in names:
        if line and len(line) + len(name) + 2 > width:
            lines.append(line.rstrip(", ") + ",")
            line = ""
        line += name + ", "
    return [*lines, line.rstrip(", ")]


def cmd_sweep(argv: list[str]) -> int:
    from ajax.cli import _agents, _make_algo, _slug, is_primary, train_setup
    from ajax.training.run_dir import RunSpec
    from ajax.training.sweep import SweepError, plan_sweep
    from ajax.training.sweep_dirs import run_sweep

    agents = _agents()
    if not argv:
        raise UsageError(f"{USAGE}; agents: {', '.join(agents)}")
    if argv[0] in ("-h", "--help"):
        print(f"{USAGE}\nagents: {', '.join(agents)}; 'ajax sweep AGENT --help' says which "
              "fields sweep in one program")  # fmt: skip
        return 0
    agent, rest = argv[0], argv[1:]
    if agent not in agents:
        raise UsageError(f"unknown agent {agent!r}; known agents: {', '.join(sorted(agents))}")
    config_cls = agents[agent].config_cls
    if "-h" in rest or "--help" in rest:
        print(sweep_help(agent, config_cls))
        return 0
    sets, rest = split_sets(rest)
    check_set_and_flag(sets, rest)
    setup = train_setup(agent, rest)
    args, config, algo = setup.args, setup.config, setup.algo
    if args.wandb_project is not None:
        raise UsageError("ajax sweep does not log to W&B (each point has its TensorBoard logs): "
                         "drop --wandb-project")  # fmt: skip
    grid = typed_grid(config_cls, config, sets)

    def make_algo(point_config):
        return _make_algo(agent, args.env, point_config, setup.env_options)

    try:
        sw = plan_sweep(algo, grid, args.steps, args.seed, args.n_seeds, setup.devices,
                        args.parallel, args.seed_batching, make_algo)  # fmt: skip
        base = RunSpec(agent=agent, env=args.env, steps=args.steps, seed=args.seed,
                       n_seeds=args.n_seeds, checkpoint_every=args.checkpoint_every,
                       config=dataclasses.asdict(config), env_options=setup.env_options,
                       preset=setup.preset and setup.preset.name)  # fmt: skip
    except (SweepError, ValueError) as err:
        raise UsageError(str(err)) from err
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"runs/sweep-{agent}-{_slug(args.env)}-{stamp}")
    if setup.preset is not None and is_primary():
        print(setup.preset.notice())
    n_programs = len(sw.programs)
    print(f"sweep: {len(sw.points)} grid point(s) x {args.n_seeds} seed(s) in {n_programs} "
          f"program(s); traced: {', '.join(sw.traced) or 'none'}; into {out}")  # fmt: skip
    try:
        summaries = run_sweep(algo, base, sw, out, args.overwrite, args.progress)
    except FileExistsError as err:
        raise UsageError(str(err)) from err
    except OSError as err:
        if err.errno in NO_SPACE:
            raise
        raise UsageError(f"cannot write the sweep into {out}: {err.strerror or err}; pick a "
                         "writable --out path") from err  # fmt: skip
    plot_sweep(out)
    for point, s in zip(sw.points, summaries, strict=True):
        score = s.get("final_eval_return")
        shown = f"{score:.2f}" if isinstance(score, float) else s.get("status")
        print(f"  {', '.join(f'{k}={v}' for k, v in point.items())}: {shown}")
    print(f"table: {out / 'summary.csv'}; curves: {out / 'curves.png'}; compare with another "
          f"sweep or run: ajax compare {out} OTHER")  # fmt: skip
    return 0


def plot_sweep(out: Path) -> None:
    """The sweep's statistics table (``summary.csv``, ``summary.json``: IQM, mean and median
    with bootstrap intervals, probability of improvement) and ``curves.png``, one band per
    grid point (:func:`ajax.experiments.report.write_report`)."""
    from ajax.experiments.compare import load_targets
    from ajax.experiments.report import write_report

    write_report(out, load_targets([out]))
