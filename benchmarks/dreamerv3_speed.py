"""DreamerV3 speed on this machine: train step, policy step, whole runs, FLOP/s vs roofline,
beside the official code when asked (issue 36 item 5).

Run from the repository root: ``python benchmarks/dreamerv3_speed.py [--sizes 1m 12m]
[--official-python PATH --official-repo DIR [--official-dtypes float32 bfloat16]]``.

Shapes follow the official defaults: batch 16 x 64 (+ 1 context row), vector observations of
a small task (5 features, 1 continuous action: the shapes at which the official size1m has
637,446 parameters). Times are medians of compiled calls (compilation timed separately).
FLOPs are matmul FLOPs counted from the jaxpr (scans times their length); "roofline" is the
train step's matmul GFLOP/s over a plain 1024^3 matmul's. "x max" is the official time over
the step's FLOPs at the plain matmul's rate: the ratio an Ajax that ran every matmul as fast
as that matmul and spent no time on anything else would reach (x / roofline). Where it is
below a goal, no rewrite of the step reaches that goal on this machine.

Whole runs (size ``--sizes[0]``, CartPole-v1, ``--run-ratio``, ``--run-envs``, the same batch)
are timed in env steps/s once training has started, over ``--run-steps`` env steps: Ajax's
fully jitted run on the JAX CartPole-v1 and its host loop on ``gymnasium:CartPole-v1`` from the
arrival times of their chunk records (a chunk of 100 x envs steps ends in one evaluation
episode, the first chunk after training started), the official run from its first train call
to its end.

With ``--official-python PATH --official-repo DIR`` the official danijar/dreamerv3 checkout
DIR is timed first, in the interpreter PATH (jax 0.4.33 on CPU; ../shared/reference/README.md
says how to build it), by ``dreamerv3_official.py``: its train step (``agent.train`` on a
random batch of the same shapes) at every size in float32 and bfloat16 (configs.yaml's
default), its policy step at batch 1, its build + compile, and its whole run through its own
``embodied.run.train`` driver on gymnasium CartPole-v1 (float32). The tables then print the
official time over Ajax's ("x": how many times faster Ajax is), against the faster official
setting for the train step. The policy step compares Ajax's jitted act on device arrays with
the official ``agent.policy``, which also moves the observation in and the action out (the
call its driver makes every env step); the whole runs include every such cost. A measurement
the official code fails prints "-", and its one-line reason under the tables; if every
official measurement fails, the script ends with exit 2 and that line (a broken setup, as
argparse's own errors).

One run (2026-12-08, ``--replay-env none``, at 9cb58e9; 1024^3 matmul 141.9 GFLOP/s; Ajax with
``keep_host_buffers``, the official code with its system allocator): train step size1m Ajax
628.0 ms, official 1,109.5 (f32) / 1,736.7 (bf16), x 1.77, x max 5.02; size12m 5,619.7
against 6,236.9 / 8,730.7, x 1.11, x max 2.08; policy step 0.76 / 2.44 ms (x 3.2) and 3.55 /
4.34 ms (x 1.2); compile 18.8 / 38.5 s and 18.2 / 38.1 s; whole run at ratio 512: Ajax jitted
2.87, host loop 2.98, official 1.94 env steps/s (x 1.48 and 1.54). The run before
(2026-12-07, at abbfb9b) gave x 1.89 and 1.22 on the train step. ``--official-malloc kept`` runs
the official code with the same allocator settings (``ajax.host_memory.GLIBC_ENV``).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))
from dreamerv3_official import DTYPES, last_error_line, parse_lines  # noqa: E402
from tdmpc2_speed import (  # noqa: E402
    _median_ms,
    compile_and_time,
    matmul_flops,
    matmul_gflops,
)

from ajax.agents.dreamerv3 import DreamerV3, DreamerV3Config  # noqa: E402
from ajax.agents.dreamerv3.losses import Batch  # noqa: E402
from ajax.agents.dreamerv3.model import Nets, param_count  # noqa: E402
from ajax.agents.dreamerv3.rssm import initial_state  # noqa: E402
from ajax.agents.dreamerv3.update import act, init_carry, init_state, train_step  # noqa: E402
from ajax.host_memory import GLIBC_ENV, keep_host_buffers

OBS_DIM, ACTION_DIM = 5, 1
DRIVER = Path(__file__).with_name("dreamerv3_official.py")
RUN_ENV = "CartPole-v1"
SHORT = {"float32": "f32", "bfloat16": "bf16"}


def _batch(cfg: DreamerV3Config, key):
    b, t = cfg.batch_size, cfg.batch_length
    k1, k2, k3 = jax.random.split(key, 3)
    return Batch(
        obs=jax.random.normal(k1, (b, t, OBS_DIM)),
        prev_action=jax.random.uniform(k2, (b, t, ACTION_DIM), minval=-1, maxval=1),
        reward=jax.random.normal(k3, (b, t)),
        is_first=jnp.zeros((b, t), bool).at[:, 0].set(True),
        is_last=jnp.zeros((b, t), bool),
        is_terminal=jnp.zeros((b, t), bool),
    )


def train_problem(size: str, **overrides):
    """(config, nets, train step, its args: fresh state, random batch, start latents, key) of
    the preset ``size`` (``overrides``: e.g. batch_size, batch_length): the train step the
    DreamerV3 benchmarks time."""
    cfg = DreamerV3Config.preset(size, **overrides)
    nets = Nets.create(cfg, OBS_DIM, ACTION_DIM, False)
    state = init_state(cfg, nets, jax.random.PRNGKey(0), OBS_DIM)
    batch = _batch(cfg, jax.random.PRNGKey(1))
    start = initial_state(cfg.rssm(ACTION_DIM, False), cfg.batch_size)
    step = lambda s, b, st, k: train_step(cfg, nets, s, b, st, k)[0]
    return cfg, nets, step, (state, batch, start, jax.random.PRNGKey(2))


def bench_size(size: str, repeats: int, **overrides) -> dict:
    cfg, nets, step, args = train_problem(size, **overrides)
    state, key = args[0], args[-1]
    compile_s, train_ms = compile_and_time(step, args, repeats)
    flops = matmul_flops(jax.make_jaxpr(step)(*args).jaxpr)
    carry = init_carry(cfg, 1, ACTION_DIM, False)
    obs, first = jnp.zeros((1, OBS_DIM)), jnp.ones((1,), bool)
    pol = lambda p, c, o, f, k: act(nets, p, c, o, f, k, False)
    policy_ms = _median_ms(pol, (state.params, carry, obs, first, key), repeats * 5)
    return dict(
        params=param_count(state.params),
        compile_s=compile_s,
        train_ms=train_ms,
        gflop=flops / 1e9,
        policy_ms=policy_ms,
    )


def train_start(cfg: DreamerV3Config) -> int:
    """The env step of the first update: ``cfg.first_train_step`` (the official rule: the
    replay holds batch_size x batch_length windows) where the config has it, else the step at
    which every env holds one window."""
    return int(getattr(cfg, "first_train_step", cfg.n_envs * cfg.window))


def run_plan(cfg: DreamerV3Config, steps: int) -> tuple[int, int, int]:
    """(chunk, first timed record's step, total steps) of a timed run: records every 100
    steps per env, timing from the first record at or after the first update, over at least
    ``steps`` env steps after it."""
    chunk = cfg.n_envs * 100
    first = chunk * max(1, math.ceil(train_start(cfg) / chunk))
    return chunk, first, first + chunk * math.ceil(steps / chunk)


def bench_run(size: str, steps: int, ratio: float, env: str = RUN_ENV, replay_on: str = "device",
              n_envs: int = 1, **overrides) -> float:  # fmt: skip
    """Env steps/s of one seed's whole run once training has started (:func:`run_plan`): from
    the arrival of the first timed chunk record to the last (JAX env: the jitted run, whose
    records reach the host by callback as it goes; host env: the host loop). Compilation
    precedes the first record; each chunk ends with one evaluation episode."""
    cfg = DreamerV3Config.preset(
        size, train_ratio=ratio, eval_episodes=1, n_envs=n_envs, replay_on=replay_on,
        eval_freq=100 * n_envs, **overrides,
    )  # fmt: skip
    _, first, total = run_plan(cfg, steps)
    marks = {}

    def on_record(record):
        marks[int(jnp.max(jnp.asarray(record["step"])))] = time.perf_counter()

    result = DreamerV3(env, cfg).train(seed=1, total_steps=total, on_record=on_record)
    jax.block_until_ready(result.state)
    last = max(marks)
    return (last - first) / (marks[last] - marks[first])


# ----------------------------------------------------------------------------- official side


def official_call(python: str, repo: str, argv: list[str], timeout: float, env=None):
    """``(rows, None)`` from ``dreamerv3_official.py argv[0] --repo repo argv[1:]`` in the
    official interpreter (``env``: variables added to this one's), or ``([], one-line
    reason)`` when it fails or prints no result."""
    cmd = [python, str(DRIVER), argv[0], "--repo", repo, *argv[1:]]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})  # fmt: skip
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout:g} s"
    except OSError as err:
        return [], f"{type(err).__name__}: {err}"
    if proc.returncode != 0:
        return [], last_error_line(proc.stderr)
    rows = parse_lines(proc.stdout)
    return (rows, None) if rows else ([], "printed no result line")


def official_times(args) -> dict:
    """{("train"|"policy", size, dtype): row, ("run",): row} or the same keys to a one-line
    reason string where the official code failed. Exit 2 when every measurement failed."""
    out = {}
    shape = ["--batch-size", str(args.batch_size), "--batch-length", str(args.batch_length)]
    env = GLIBC_ENV if args.official_malloc == "kept" else None
    for size in args.sizes:
        for dtype in args.official_dtypes:
            argv = ["speed", "--size", size, "--dtype", dtype, "--repeats", str(args.repeats),
                    "--obs-dim", str(OBS_DIM), "--action-dim", str(ACTION_DIM), *shape]  # fmt: skip
            rows, why = official_call(args.official_python, args.official_repo, argv,
                                      args.official_timeout, env)  # fmt: skip
            for kind in ("train", "policy"):
                found = [r for r in rows if r.get("kind") == kind]
                out[(kind, size, dtype)] = found[0] if found else (why or f"no {kind} line")
    # the official driver trains once the replay holds B x T windows of T + 1 rows: step
    # B x T + envs x T (embodied/run/train.py:71); it times from there
    steps = (args.batch_size + args.run_envs) * args.batch_length + args.run_steps
    argv = ["run", "--task", RUN_ENV, "--size", args.sizes[0], "--dtype", "float32",
            "--steps", str(steps), "--envs", str(args.run_envs),
            "--train-ratio", str(args.run_ratio), "--seed", "1", *shape]  # fmt: skip
    rows, why = official_call(args.official_python, args.official_repo, argv,
                              args.official_timeout, env)  # fmt: skip
    out[("run",)] = rows[0] if rows else why
    if out and all(isinstance(v, str) for v in out.values()):
        first = next(iter(out.values()))
        print(f"dreamerv3_speed.py: error: the official DreamerV3 failed in "
              f"{args.official_python}: {first}; set up that interpreter as "
              "../shared/reference/README.md says", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)  # bad setup, as argparse's own errors
    return out


def check_official_args(parser, args) -> None:
    """One line and exit 2 for flags that cannot work."""
    if (args.official_python is None) != (args.official_repo is None):
        parser.error("--official-python and --official-repo go together; give both or neither")
    for name in ("repeats", "run_steps", "run_envs", "batch_size", "batch_length"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.batch_length < 2:
        parser.error("--batch-length must be >= 2 (the replay-value loss bootstraps along it)")
    if args.run_ratio <= 0:
        parser.error("--run-ratio must be > 0")
    if args.official_python is None:
        return
    if shutil.which(args.official_python) is None:
        parser.error(f"--official-python {args.official_python} is not an executable; give"
                     " the python of the venv ../shared/reference/make-official-envs.sh"
                     " builds")  # fmt: skip
    if not (Path(args.official_repo) / "dreamerv3" / "agent.py").is_file():
        parser.error(f"--official-repo {args.official_repo} holds no dreamerv3/agent.py; give a"
                     " checkout of github.com/danijar/dreamerv3")  # fmt: skip


# ----------------------------------------------------------------------------- the tables


def _cell(value, fmt: str, width: int) -> str:
    return f"{value:>{width}{fmt}}" if isinstance(value, (int, float)) else f"{'-':>{width}}"


def _official(official: dict, key, field):
    row = official.get(key)
    return row.get(field) if isinstance(row, dict) else None


def ratio(official_values, ajax_value, faster=min):
    """The faster official value over Ajax's (None when no official value)."""
    ran = [v for v in official_values if isinstance(v, (int, float))]
    return faster(ran) / ajax_value if ran and ajax_value else None


def _official_cells(official, kind, size, field, dtypes, fmt, ajax_value):
    """The official values of ``field`` per dtype and the ratio cell, as text."""
    off = [_official(official, (kind, size, d), field) for d in dtypes]
    cells = " ".join(_cell(v, fmt, 9) for v in off)
    return f"{cells} {_cell(ratio(off, ajax_value), '.2f', 6)}"


def format_tables(args, ajax: dict, runs: dict, official: dict, mm: float) -> list[str]:
    """The printed tables: train step, policy step, compile, whole runs (rows of ``ajax``
    per size, ``runs`` {"jitted"|"host": env steps/s}, ``official`` as official_times)."""
    dtypes = list(args.official_dtypes) if official else list(DTYPES)
    heads = " ".join(f"{'off ' + SHORT[d]:>9}" for d in dtypes) + f" {'x':>6}"
    train_heads = f"{heads} {'x max':>6}"
    lines = [
        f"train step, batch {args.batch_size} x {args.batch_length}, vector {OBS_DIM} -> "
        f"{ACTION_DIM} continuous (ms; x = the faster official setting's / Ajax's)",
        f"{'size':>5} {'params':>10} {'Ajax ms':>9} {'GFLOP':>7} {'GFLOP/s':>8} "
        f"{'roofline':>8} {train_heads}",
    ]
    for size, r in ajax.items():
        gfs = r["gflop"] / r["train_ms"] * 1e3
        off = [_official(official, ("train", size, d), "train_ms") for d in dtypes]
        lines.append(
            f"{size:>5} {r['params']:>10,} {r['train_ms']:>9.1f} {r['gflop']:>7.2f} "
            f"{gfs:>8.1f} {gfs / mm:>8.2f} "
            + _official_cells(official, "train", size, "train_ms", dtypes, ".1f", r["train_ms"])
            + f" {_cell(ratio(off, r['gflop'] / mm * 1e3), '.2f', 6)}"
        )
    lines += ["policy step, batch 1 (ms)", f"{'size':>5} {'Ajax ms':>9} {heads}"]
    for size, r in ajax.items():
        lines.append(
            f"{size:>5} {r['policy_ms']:>9.2f} "
            + _official_cells(official, "policy", size, "policy_ms", dtypes, ".2f", r["policy_ms"])
        )
    lines += [
        "compile (s; Ajax: the train step's lower + compile; official: Agent build = init +"
        " compile of train and report, plus the policy's first call)",
        f"{'size':>5} {'Ajax s':>9} {heads}",
    ]
    for size, r in ajax.items():
        lines.append(
            f"{size:>5} {r['compile_s']:>9.1f} "
            + _official_cells(official, "policy", size, "compile_s", dtypes, ".1f", r["compile_s"])
        )
    off_sps = _official(official, ("run",), "steps_per_s")
    lines.append(
        f"whole run, size {args.sizes[0]}, {RUN_ENV}, ratio {args.run_ratio:g}, "
        f"{args.run_envs} env(s), batch {args.batch_size} x {args.batch_length}: env steps/s "
        f"once training has started, over {args.run_steps} steps (x = Ajax / official)"
    )
    for name, label in (("jitted", "Ajax jitted (JAX env)"), ("host", "Ajax host loop (gym)")):
        sps = runs.get(name)
        x = sps / off_sps if isinstance(sps, float) and off_sps else None
        lines.append(f"  {label:<28} {_cell(sps, '.2f', 8)}   x {_cell(x, '.2f', 5)}")
    lines.append(f"  {'official (gymnasium, f32)':<28} {_cell(off_sps, '.2f', 8)}")
    for key, why in official.items():
        if isinstance(why, str):
            lines.append(f"official {' '.join(key)}: - ({why})")
    for key, row in official.items():
        if key[0] == "train" and isinstance(row, dict):
            lines.append(
                f"official {row['size']} {row['dtype']}: {row['params']:,} params, "
                f"build {row['build_s']:.1f} s, jax {row['jax']}"
            )
    run = official.get(("run",))
    if isinstance(run, dict):
        lines.append(
            f"official run: {run['steps']} steps, training from step "
            f"{run['train_start_step']}, {run['updates']} updates, build "
            f"{run['build_s']:.1f} s, wall {run['wall_s']:.1f} s"
        )
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dreamerv3_speed.py",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--sizes", nargs="+", default=["1m", "12m"],
                        choices=["1m", "12m", "25m", "50m", "100m", "200m", "400m"])  # fmt: skip
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batch-length", type=int, default=64)
    parser.add_argument("--run-steps", type=int, default=300,
                        help="env steps timed once training has started")  # fmt: skip
    parser.add_argument("--run-ratio", type=float, default=512.0)
    parser.add_argument("--run-envs", type=int, default=1)
    parser.add_argument("--no-host-run", action="store_true", help="skip Ajax's host-loop run")
    parser.add_argument("--replay-env", default="Breakout-MinAtar",
                        help="env of the replay-placement line ('none' skips it)")  # fmt: skip
    parser.add_argument("--official-python", help="interpreter with the official code's deps")
    parser.add_argument("--official-repo", help="checkout of danijar/dreamerv3")
    parser.add_argument("--official-dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--official-malloc", choices=["system", "kept"], default="system",
                        help="the official process's glibc allocator: as shipped, or with the "
                        "settings Ajax applies to itself (ajax.host_memory.GLIBC_ENV)")  # fmt: skip
    parser.add_argument("--official-timeout", type=float, default=1800.0,
                        help="seconds per official call before it counts as failed")  # fmt: skip
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    check_official_args(parser, args)
    official = {}
    if args.official_python:  # first, so that neither program shares the CPU with the other
        official = official_times(args)
    shape = dict(batch_size=args.batch_size, batch_length=args.batch_length)
    print(f"device: {jax.devices()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"allocator: Ajax {'kept' if KEPT else 'system'} (ajax.host_memory), official "
          f"{args.official_malloc if args.official_python else '-'}")  # fmt: skip
    mm = matmul_gflops(1024, 1024, 1024, 10)
    print(f"plain matmul 1024^3: {mm:.1f} GFLOP/s")
    if not official:
        print("official DreamerV3 not run (give --official-python and --official-repo): no ratios")
    ajax = {size: bench_size(size, args.repeats, **shape) for size in args.sizes}
    runs = {"jitted": bench_run(args.sizes[0], args.run_steps, args.run_ratio,
                                n_envs=args.run_envs, **shape)}  # fmt: skip
    if not args.no_host_run:
        runs["host"] = bench_run(args.sizes[0], args.run_steps, args.run_ratio,
                                 f"gymnasium:{RUN_ENV}", n_envs=args.run_envs, **shape)  # fmt: skip
    for line in format_tables(args, ajax, runs, official, mm):
        print(line)
    if args.replay_env != "none":
        rates = {where: bench_run(args.sizes[0], args.run_steps, args.run_ratio, args.replay_env,
                                  where, **shape) for where in ("device", "host")}  # fmt: skip
        print(
            f"replay placement, size {args.sizes[0]}, {args.replay_env}, ratio "
            f"{args.run_ratio:g}: device {rates['device']:.1f}, host {rates['host']:.1f} env "
            f"steps/s, host/device {rates['host'] / rates['device']:.2f}x"
        )


KEPT = False  # whether keep_host_buffers applied (set when run as a script)

if __name__ == "__main__":
    KEPT = keep_host_buffers()  # as `ajax train dreamerv3` does (ajax.host_memory)
    main()
