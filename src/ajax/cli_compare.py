"""``ajax compare RUN_OR_SWEEP... [--metric eval_return] [--out FIG.png] [--format md|csv|json]
[--reference tdmpc2|dreamerv3|sac] [--ci 0.95] [--reps N] [--seed S]``.

Each run's final scores over seeds as IQM, mean and median with stratified-bootstrap intervals
(Agarwal et al. 2021), the probability of improvement for each pair of runs on one env, printed
as a table; ``--out`` saves the curves with their bands (and the published curve with
``--reference``) as a PNG. A sweep directory counts as one run per grid point.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ajax.cli_flags import UsageError
from ajax.failures import NO_SPACE

USAGE = ("usage: ajax compare RUN_OR_SWEEP... [--metric eval_return] [--out FIG.png] "
         "[--format md|csv|json] [--reference tdmpc2|dreamerv3|sac] [--ci 0.95] [--reps N] "
         "[--seed S]")  # fmt: skip
OPTIONS = {"--metric": str, "--out": str, "--format": str, "--reference": str, "--ci": float,
           "--reps": int, "--seed": int}  # fmt: skip
# The most bootstrap resamples: each is drawn at once (reps x seeds per run), and past ~1e5 the
# interval's Monte Carlo error is far below the seeds' own.
MAX_REPS = 100_000
DEFAULTS = {"metric": "eval_return", "out": None, "format": "md", "reference": None,
            "ci": 0.95, "reps": 2000, "seed": 0}  # fmt: skip


def parse_compare(argv: list[str]) -> tuple[list[str], dict]:
    """``(paths, options)`` of ``ajax compare``'s arguments (UsageError: one line)."""
    paths, opts, i = [], dict(DEFAULTS), 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("--"):
            paths.append(tok)
            i += 1
            continue
        name, _, value = tok.partition("=")
        if name not in OPTIONS:
            raise UsageError(f"unknown option {name} of ajax compare; {USAGE}")
        if not value:
            if i + 1 >= len(argv):
                raise UsageError(f"{name} needs a value; {USAGE}")
            value, i = argv[i + 1], i + 1
        try:
            opts[name[2:]] = OPTIONS[name](value)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(OPTIONS[name], "a value")
            raise UsageError(f"{name} takes {kind}, got {value!r}") from None
        i += 1
    _check(paths, opts)
    return paths, opts


def _check(paths: list[str], opts: dict) -> None:
    from ajax.experiments.reference import SOURCES
    from ajax.experiments.report import FORMATS

    if not paths:
        raise UsageError(f"name at least one run or sweep directory; {USAGE}")
    if opts["format"] not in FORMATS:
        raise UsageError(f"unknown --format {opts['format']!r}; formats: {', '.join(FORMATS)}")
    if opts["reference"] is not None and opts["reference"] not in SOURCES:
        raise UsageError(f"unknown --reference {opts['reference']!r}; sources: "
                         f"{', '.join(SOURCES)}")  # fmt: skip
    if not 0 < opts["ci"] < 1:
        raise UsageError(f"--ci must be in (0, 1), e.g. 0.95; got {opts['ci']}")
    if not 1 <= opts["reps"] <= MAX_REPS:
        raise UsageError(f"--reps must be in [1, {MAX_REPS}] (bootstrap resamples, held in "
                         f"memory at once), e.g. 2000; got {opts['reps']}")  # fmt: skip
    if not 0 <= opts["seed"] <= 2**32 - 1:
        raise UsageError(f"--seed must be in [0, {2**32 - 1}]; got {opts['seed']}")
    if opts["out"] is not None and not opts["out"].lower().endswith(".png"):
        raise UsageError(f"--out names a PNG file (FIG.png); got {opts['out']!r}")
    if opts["out"] is not None:
        _check_out(Path(opts["out"]))


def _check_out(out: Path) -> None:
    """UsageError, before anything is computed or written, for an ``--out`` that is a directory
    or lies under a file."""
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory; name the PNG file, e.g. {out / 'fig.png'}")
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"--out {out} lies under {parent}, which is not a directory; pick a "
                         "writable --out path")  # fmt: skip


def _references(runs, source: str | None) -> dict:
    """The published ``source`` curve of each env, and one stderr line for each env without."""
    from ajax.experiments.reference import reference_curve

    found = {}
    for run in runs:
        if source is None or run.env in found:
            continue
        curve = reference_curve(source, run.env, run.pixels)
        if curve is None:
            print(f"no published {source} curve for {run.env}", file=sys.stderr)
        found[run.env] = curve
    return {env: c for env, c in found.items() if c is not None}


def cmd_compare(argv: list[str]) -> int:
    """``ajax compare``: print the table, save the figure with ``--out``; 0 on success."""
    if any(a in ("-h", "--help") for a in argv):
        print(f"{USAGE}\n\n{__doc__.split(chr(10) + chr(10), 1)[1].strip()}")
        return 0
    paths, o = parse_compare(argv)
    from ajax.experiments.compare import (
        CompareError,
        improvements,
        load_targets,
        reference_summary,
        summarise_runs,
    )
    from ajax.experiments.report import format_table, plot_groups

    try:
        runs = load_targets(paths, o["metric"])
        refs = _references(runs, o["reference"])
        summaries = summarise_runs(runs, o["reps"], o["ci"], o["seed"])
        if o["reference"]:
            done = set()
            for run in runs:
                if run.env in refs and run.env not in done:
                    done.add(run.env)
                    row = reference_summary(run, o["reference"], o["reps"], o["ci"], o["seed"])
                    summaries += [row] if row else []
        pairs = improvements(runs, o["reps"], o["ci"], o["seed"])
    except CompareError as err:
        raise UsageError(str(err)) from None
    table = format_table(summaries, pairs, o["format"], o["ci"])
    if o["out"]:  # the figure first: an --out that cannot be written leaves only the error
        try:
            plot_groups(o["out"], runs, references=refs, reps=min(o["reps"], 1000),
                        level=o["ci"], seed=o["seed"])  # fmt: skip
        except OSError as err:
            if err.errno in NO_SPACE:  # the machine failed, not the flag: exit 4
                raise
            raise UsageError(f"cannot write --out {o['out']}: {err.strerror or err}; pick a "
                             "writable --out path") from err  # fmt: skip
    sys.stdout.write(table)
    if o["out"]:
        print(f"wrote {o['out']}", file=sys.stderr)
    return 0
