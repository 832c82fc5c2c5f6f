"""Equal-budget learning: the official DreamerV3 beside Ajax's on the same tasks (issue 36
item 4).

Usage (from the repository root)::

    python benchmarks/dreamerv3_vs_official.py --official-python PATH --official-repo DIR \\
        [--tasks CartPole-v1 Pendulum-v1] [--seeds 3] [--first-seed 0] [--steps N] [--size 1m] \\
        [--batch-size B] [--batch-length T] [--train-ratio R] [--envs 1] [--out DIR]

The official side is the checkout DIR run in its own interpreter PATH (jax 0.4.33 on CPU; see
../shared/reference/README.md) through its own ``embodied.run.train`` driver on the gymnasium
task, behind the adapter ``dreamerv3_official.GymnasiumEnv`` (``dreamerv3_official.py run``:
one process per seed, seeds S..S+N-1 for ``--first-seed S`` (default 0), float32 unless
``--official-dtype``). Ajax runs ``ajax.DreamerV3`` on the same task (the JAX port of the
gymnasium env by default, the same dynamics, limits and rewards; ``--ajax-env gymnasium``
steps the gymnasium env itself in the host loop), the same seeds vmapped in one program. Runs
of disjoint seeds merge into one report with ``python benchmarks/equal_budget_report.py
combine A.json B.json --out DIR``. Both use the same preset, batch, train ratio, env steps and
number of envs; every other setting is each side's default (configs.yaml's and
DreamerV3Config's, which follow it).

Curves: every ``--curve-every`` env steps, the mean over envs of each env's last finished
training episode's return (the policy samples, as the official one always does): Ajax's
``train_return`` record, and the same statistic computed from the official run's episodes
(the adapter's record, checked against the official logger's ``episode/score`` in its
scores.jsonl). A seed's final return is the mean of its curve over the last ``--final-frac``
of the run. The bar (issue 36): Ajax's mean final return is not below the official's mean
minus one pooled standard deviation, and no Ajax seed is below the official's worst.

Output in ``--out`` (default runs/dreamerv3_vs_official): ``dreamerv3_vs_official.png`` (one
panel per task, per-seed curves thin, means thick), ``.md`` (final returns per seed, the bar)
and ``.json`` (every number), plus each run's own JSON under ``official/`` and ``ajax/``;
``--reuse`` takes a run whose JSON is there with the same settings instead of running it again.

Budget
------
The defaults are the recommended one-hour comparison of one task on 2 cores::

    python benchmarks/dreamerv3_vs_official.py \\
        --official-python ~/.cache/ajax-official/dreamerv3/bin/python \\
        --official-repo ../shared/reference/dreamerv3 --tasks CartPole-v1 \\
        --seeds 3 --size 1m --batch-size 8 --batch-length 32 --train-ratio 64 \\
        --steps 6400 --curve-every 400

(and the same with ``--tasks Pendulum-v1``). That is 1 + floor((6,400 - 288) x 64 / 256) =
1,529 updates per seed after the official start at step 8 x 32 + 32 = 288 (a quarter of an
update per env step, past the 1,000-update learning-rate warm-up). Measured 2026-12-07 on this
machine's 2 cores while other work shared them (1024^3 matmul 99-120 GFLOP/s, against 265 idle),
size1m float32 train step, ms per update:

| batch | official | Ajax, 1 seed | Ajax, 3 seeds vmapped |
|---|---|---|---|
| 16 x 64 | 1,203 (2,298 under heavier load) | 1,048 | 3,403 |
| 16 x 32 | 656-927 | 494-537 | 1,612-2,664 |
| 8 x 32 | 330-339 | 294-407 | 894-963 |

A trial of these settings at 1,600 steps and one seed (CartPole-v1) took the official run
158 s (43 s build, then 329 updates and its policy steps in 112 s: 0.34 s per update) and
Ajax 131 s (compile included). Extrapolated: official 3 x (43 + 1,529 x 0.34) = 1,700 s,
Ajax about 60 + 1,529 x 0.93 = 1,480 s (its 3 seeds in one vmapped program), so about 53
minutes per task, about 25 on an idle machine. At the official batch 16 x 64 the same hour
holds about 450 updates per seed, under half the warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from dreamerv3_official import DTYPES, SIZES, last_error_line, parse_lines  # noqa: E402
from equal_budget_report import (  # noqa: E402
    final_return,
    markdown,
    official_curve,
    permutation_p,  # noqa: F401  (the harness tests reach the report through this script)
    summarize,
    write_outputs,
)

TASKS = ("CartPole-v1", "Pendulum-v1")
DRIVER = Path(__file__).with_name("dreamerv3_official.py")
NAME = "dreamerv3_vs_official"


# ----------------------------------------------------------------------------- the runs


def settings_of(args) -> dict:
    return {
        "size": args.size, "batch_size": args.batch_size, "batch_length": args.batch_length,
        "train_ratio": args.train_ratio, "steps": args.steps, "envs": args.envs,
        "seeds": args.seeds, "first_seed": args.first_seed, "curve_every": args.curve_every,
        "final_frac": args.final_frac,
        "official_dtype": args.official_dtype, "ajax_env": args.ajax_env,
    }  # fmt: skip


def seed_range(args) -> list[int]:
    """The seeds of this run: ``--first-seed`` onwards, ``--seeds`` of them."""
    return list(range(args.first_seed, args.first_seed + args.seeds))


def _same_run(path: Path, want: dict) -> dict | None:
    """The run JSON at ``path`` when it was made with the settings ``want``."""
    if not path.is_file():
        return None
    try:
        row = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    return row if all(row.get(k) == v for k, v in want.items()) else None


def run_official(args, task: str, seed: int) -> tuple[dict | None, str | None]:
    """One official run (``dreamerv3_official.py run``): (its JSON row, None) or (None, why)."""
    path = args.out / "official" / f"{task}_seed{seed}.json"
    want = {"task": task, "seed": seed, "size": args.size, "dtype": args.official_dtype,
            "envs": args.envs, "train_ratio": args.train_ratio,
            "batch_size": args.batch_size, "batch_length": args.batch_length}  # fmt: skip
    if args.reuse and (row := _same_run(path, {**want, "requested_steps": args.steps})):
        return row, None
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [args.official_python, str(DRIVER), "run", "--repo", args.official_repo,
           "--task", task, "--seed", str(seed), "--size", args.size,
           "--dtype", args.official_dtype, "--steps", str(args.steps), "--envs", str(args.envs),
           "--train-ratio", str(args.train_ratio), "--batch-size", str(args.batch_size),
           "--batch-length", str(args.batch_length), "--out", str(path)]  # fmt: skip
    log = path.with_suffix(".log")
    with open(log, "w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
    rows = parse_lines(proc.stdout)
    if proc.returncode != 0 or not rows:
        return None, f"{last_error_line(log.read_text())} (log: {log})"
    return rows[0], None


def run_ajax(args, task: str) -> dict:
    """Ajax's N seeds of ``task`` (vmapped), its records as curves on its chunk grid."""
    path = args.out / "ajax" / f"{task}.json"
    drop = ("final_frac", "official_dtype")
    want = {k: v for k, v in settings_of(args).items() if k not in drop}
    want["task"] = task
    if args.reuse and (row := _same_run(path, want)):
        return row
    import jax

    from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config

    fields = DreamerV3Config.__dataclass_fields__
    extra = {"eval_policy": "sample"} if "eval_policy" in fields else {}
    cfg = DreamerV3Config.preset(
        args.size, batch_size=args.batch_size, batch_length=args.batch_length,
        train_ratio=args.train_ratio, n_envs=args.envs, eval_freq=args.curve_every,
        eval_episodes=1, **extra,
    )  # fmt: skip
    env = task if args.ajax_env == "jax" else f"gymnasium:{task}"
    start = time.perf_counter()
    result = DreamerV3(env, cfg).train(seed=args.first_seed, total_steps=args.steps,
                                       n_seeds=args.seeds)  # fmt: skip
    jax.block_until_ready(result)  # train returns once the run is dispatched, not done
    wall = time.perf_counter() - start
    rec = {k: np.asarray(v) for k, v in result.metrics.items()}
    shape = (args.seeds, -1)
    row = dict(
        want, env=env, wall_s=wall,
        grid=[int(x) for x in rec["step"].reshape(shape)[0]],
        curves=rec["train_return"].reshape(shape).astype(float).tolist(),
        eval_curves=rec["eval_return"].reshape(shape).astype(float).tolist(),
        eval_policy=extra.get("eval_policy", "mode"),
        seeds=seed_range(args),
    )  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row))
    return row


def compare(args) -> dict:
    results = {"settings": settings_of(args), "tasks": {}}
    for task in args.tasks:
        r = results["tasks"][task] = {}
        ajax = run_ajax(args, task) if "ajax" in args.sides else None
        grid = ajax["grid"] if ajax else list(range(args.curve_every, args.steps + 1,
                                                     args.curve_every))  # fmt: skip
        r["grid"] = grid
        if "official" in args.sides:
            runs, failures = [], []
            for seed in seed_range(args):
                row, why = run_official(args, task, seed)
                print(f"official {task} seed {seed}: "
                      + (f"{row['wall_s']:.0f} s, {row['updates']} updates" if row else why),
                      file=sys.stderr)  # fmt: skip
                (runs.append(row) if row else failures.append(f"seed {seed}: {why}"))
            curves = [official_curve(row["episodes"], grid) for row in runs]
            r["official"] = {
                "curves": curves,
                "finals": [final_return(grid, c, args.steps, args.final_frac) for c in curves],
                "seeds": [row["seed"] for row in runs],
                "wall_s": sum(row["wall_s"] for row in runs),
                "updates": [row["updates"] for row in runs],
                "train_start_step": [row["train_start_step"] for row in runs],
                "logger_matches_adapter": [row["logger_matches_adapter"] for row in runs],
                "all_episodes_mean_final": [
                    final_return([e[0] for e in row["episodes"]] or [0],
                                 [e[1] for e in row["episodes"]] or [float("nan")],
                                 args.steps, args.final_frac) for row in runs
                ],
                "failures": failures,
            }  # fmt: skip
        if ajax:
            r["ajax"] = {
                "curves": ajax["curves"],
                "finals": [final_return(grid, c, args.steps, args.final_frac)
                           for c in ajax["curves"]],
                "eval_curves": ajax["eval_curves"],
                "eval_policy": ajax["eval_policy"],
                "seeds": ajax.get("seeds", seed_range(args)),
                "env": ajax["env"],
                "wall_s": ajax["wall_s"],
                "failures": [],
            }  # fmt: skip
        if r.get("official") and r.get("ajax"):
            r["summary"] = summarize(r["official"]["finals"], r["ajax"]["finals"])
    return results


# ----------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dreamerv3_vs_official.py",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--official-python", help="interpreter with the official code's deps")
    parser.add_argument("--official-repo", help="checkout of danijar/dreamerv3")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds FIRST..FIRST+N-1 on both sides (equal_budget_report.py"
                             " combine merges runs of disjoint seeds)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=6_400, help="env steps per seed")
    parser.add_argument("--size", choices=SIZES, default="1m")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--batch-length", type=int, default=32)
    parser.add_argument("--train-ratio", type=float, default=64.0)
    parser.add_argument("--envs", type=int, default=1)
    parser.add_argument("--curve-every", type=int, default=400, help="env steps per curve point")
    parser.add_argument("--final-frac", type=float, default=0.2,
                        help="the final return averages the curve over this last part")  # fmt: skip
    parser.add_argument("--official-dtype", choices=DTYPES, default="float32")
    parser.add_argument("--ajax-env", choices=("jax", "gymnasium"), default="jax")
    parser.add_argument("--sides", nargs="+", choices=("official", "ajax"),
                        default=["official", "ajax"])  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("runs") / NAME)
    parser.add_argument("--reuse", action="store_true",
                        help="take runs already in --out made with the same settings")  # fmt: skip
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """The flags, with one line and exit 2 for any that cannot work."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.first_seed < 0:
        parser.error("--first-seed must be >= 0")
    for name in ("seeds", "steps", "batch_size", "envs", "curve_every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.batch_length < 2:
        parser.error("--batch-length must be >= 2 (the replay-value loss bootstraps along it)")
    if args.train_ratio <= 0:
        parser.error("--train-ratio must be > 0")
    if not 0 < args.final_frac <= 1:
        parser.error("--final-frac must be in (0, 1]")
    if args.curve_every % args.envs or args.curve_every > args.steps:
        parser.error(f"--curve-every {args.curve_every} must be a multiple of --envs "
                     f"{args.envs} and at most --steps {args.steps}")  # fmt: skip
    if "official" in args.sides:
        if args.official_python is None or args.official_repo is None:
            parser.error("the official side needs --official-python and --official-repo"
                         " (or run --sides ajax)")  # fmt: skip
        if shutil.which(args.official_python) is None:
            parser.error(f"--official-python {args.official_python} is not an executable; give"
                         " the python of the venv ../shared/reference/make-official-envs.sh"
                         " builds")  # fmt: skip
        if not (Path(args.official_repo) / "dreamerv3" / "agent.py").is_file():
            parser.error(f"--official-repo {args.official_repo} holds no dreamerv3/agent.py;"
                         " give a checkout of github.com/danijar/dreamerv3")  # fmt: skip
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    results = compare(args)
    paths = write_outputs(results, args.out, NAME)
    print(markdown(results))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    failed = any((r.get(s) or {}).get("failures") for r in results["tasks"].values()
                 for s in ("official", "ajax"))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
