"""TD-MPC2 speed beside the official code: median ms per update (batch 256, H 3) and per
planning decision (6 iterations x 512 samples) at model sizes 1 and 5, the roofline ratio, and
agent steps/s of whole training runs after seeding (issue 37 item 1).

Usage: ``python benchmarks/tdmpc2_speed.py [--repeats 20] [--run-steps 300]
[--run-seed-steps 1000] [--run-task cartpole-swingup] [--run-size 1]
[--official-python PATH --official-repo DIR [--official-modes eager compiled]]``. With the two
official flags, ``tdmpc2_official.py`` first times the official nicklashansen/tdmpc2 checkout
DIR in the interpreter PATH (torch on the CPU, as many threads as this machine has CPUs),
eager and under ``torch.compile``, on the same shapes; the table then prints official ms over
Ajax ms ("x") against the faster official variant, all from this one run. How to set up that
interpreter is in the README's "Benchmarks". Without them, no ratio is printed. Under
``torch.compile`` the inductor's pattern matcher is off (``tdmpc2_official.py`` says why).

The whole-run row: the official online trainer (``tdmpc2_official.py --whole-run``) on the DMC
task, Ajax's host loop on ``dmc:TASK`` and Ajax's fully jitted run on the task's JAX version
(MuJoCo Playground), all at size ``--run-size``, action repeat 2, ``--run-seed-steps`` random
steps, then the pretraining burst (as many updates), then ``--run-steps`` steps each planned and
updated once: agent steps/s over those last steps, evaluation outside the window.

FLOPs are the matmul FLOPs of the traced program, counted from its jaxpr with every ``scan``
multiplied by its length (``jax.stages`` cost analysis counts a loop body once, so it reports
2.3 of the planner's 13.2 GFLOP at size 1). Element-wise work is left out: the figures are a
lower bound on the work done, and "achieved GFLOP/s" over "matmul GFLOP/s" is the roofline
ratio, measured against plain matmuls of the networks' own shapes and of a large square one.
"x max" is the faster official time over the matmul FLOPs at that plain matmul rate: the ratio
an Ajax that ran every matmul at that rate and spent no time on anything else would reach
(x / roofline); where it is below a goal, no rewrite reaches that goal on this machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from ajax.agents.tdmpc2 import TDMPC2, TDMPC2Config, WorldModel
from ajax.agents.tdmpc2.act import ActState, act
from ajax.agents.tdmpc2.update import init_state, update
from ajax.buffers.windows import TDMPC2Slice
from ajax.host_memory import GLIBC_ENV, keep_host_buffers

OBS_DIM, ACTION_DIM = 24, 6  # a walker-sized task


def sub_jaxprs(eqn) -> list[jcore.Jaxpr]:
    """The jaxprs an equation calls (scan/while bodies, cond branches, pjit, custom rules)."""
    return [
        x.jaxpr if isinstance(x, jcore.ClosedJaxpr) else x
        for v in eqn.params.values()
        for x in (v if isinstance(v, (tuple, list)) else (v,))
        if isinstance(x, (jcore.ClosedJaxpr, jcore.Jaxpr))
    ]


def matmul_flops(jaxpr: jcore.Jaxpr) -> int:
    """2 M N K summed over every ``dot_general``; scans count ``length`` times, conds their
    costliest branch; a ``while`` (unknown trip count) counts once."""
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            k = math.prod(lhs[i] for i in contract)
            total += 2 * math.prod(eqn.outvars[0].aval.shape) * k
            continue
        counts = [matmul_flops(s) for s in sub_jaxprs(eqn)]
        if eqn.primitive.name == "cond":
            total += max(counts, default=0)
        else:
            total += eqn.params.get("length", 1) * sum(counts)
    return total


def compile_and_time(fn, args, repeats) -> tuple[float, float]:
    """(seconds to lower and compile ``jax.jit(fn)`` for ``args``, median ms of ``repeats``
    compiled calls after one that warms the caches)."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(*args))  # warm the caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(1e3 * (time.perf_counter() - start))
    return compile_s, float(np.median(times))


def _median_ms(fn, args, repeats):
    return compile_and_time(fn, args, repeats)[1]


def matmul_gflops(m: int, k: int, n: int, repeats: int = 20) -> float:
    a, b = jnp.ones((m, k)), jnp.ones((k, n))
    return 2 * m * k * n / _median_ms(lambda x, y: x @ y, (a, b), repeats) / 1e6


def update_problem(size: int):
    """(config, model, fresh state, random time-major batch) of the preset ``size`` on the
    walker-sized task: the update every TD-MPC2 benchmark times."""
    cfg = TDMPC2Config.preset(size)
    model = WorldModel(cfg, ACTION_DIM)
    state = init_state(cfg, model, jax.random.PRNGKey(0), OBS_DIM)
    H, B = cfg.planner.horizon, cfg.batch_size
    k = jax.random.split(jax.random.PRNGKey(1), 3)
    batch = TDMPC2Slice(
        obs=jax.random.normal(k[0], (H + 1, B, OBS_DIM)),
        action=jax.random.uniform(k[1], (H, B, ACTION_DIM), minval=-1, maxval=1),
        reward=jax.random.normal(k[2], (H, B)),
        terminated=jnp.zeros((H, B), bool),
    )
    return cfg, model, state, batch


def update_and_plan(size: int):
    """(config, (update, its args), (one planning step, its args)) of :func:`update_problem`:
    the two calls the TD-MPC2 benchmarks time."""
    cfg, model, state, batch = update_problem(size)
    planner = ActState.create(1, cfg.planner.horizon, ACTION_DIM)

    def step(s, b, key):
        return update(cfg, model, 0.99, s, b, key)[0]

    def plan(p, a, o, key):
        return act(cfg, model, 0.99, p, a, o, key, False)

    update_args = (state, batch, jax.random.PRNGKey(2))
    plan_args = (state.params, planner, jnp.zeros((1, OBS_DIM)), jax.random.PRNGKey(3))
    return cfg, (step, update_args), (plan, plan_args)


def bench_size(size: int, repeats: int) -> dict:
    cfg, (step, update_args), (plan, plan_args) = update_and_plan(size)
    H, B = cfg.planner.horizon, cfg.batch_size
    width = cfg.arch.mlp_dim
    return {
        "update_ms": _median_ms(step, update_args, repeats),
        "plan_ms": _median_ms(plan, plan_args, repeats),
        "update_gflop": matmul_flops(jax.make_jaxpr(step)(*update_args).jaxpr) / 1e9,
        "plan_gflop": matmul_flops(jax.make_jaxpr(plan)(*plan_args).jaxpr) / 1e9,
        # the dominant matmuls: a hidden layer over the batch (update) and the samples (plan)
        "matmul_gflops": matmul_gflops(B * (H + 1), width, width),
        "plan_matmul_gflops": matmul_gflops(cfg.planner.num_samples, width, width),
    }


def run_config(size: int, seed_steps: int, total: int) -> TDMPC2Config:
    """The whole runs' config: the official online trainer's settings (action repeat 2, every
    step planned and updated once past ``seed_steps``, after as many pretraining updates), one
    evaluation episode at the very end (outside the timed window)."""
    return TDMPC2Config.preset(size, seed_steps=seed_steps, action_repeat=2, eval_freq=total,
                               eval_episodes=1)  # fmt: skip


def bench_host_run(task: str, size: int, seed_steps: int, steps: int) -> float:
    """Agent steps/s of Ajax's host loop on ``dmc:TASK`` after seeding, as the official row: from
    the first step after the pretraining burst to the last, from the arrival time of every
    training step (each tick's host TimeStep)."""
    from ajax.training import host_loop

    stamps, split = [], host_loop.HostReplayRun._split_ts

    def timed(self, ts):
        stamps.append(time.perf_counter())
        return split(self, ts)

    host_loop.HostReplayRun._split_ts = timed
    try:
        total = seed_steps + steps
        TDMPC2(f"dmc:{task}", run_config(size, seed_steps, total)).train(seed=0, total_steps=total)
    finally:
        host_loop.HostReplayRun._split_ts = split
    first = seed_steps + 2  # stamps[0] is the reset; stamps[k] the k-th step's arrival
    return (len(stamps) - 1 - first) / (stamps[-1] - stamps[first])


def bench_jitted_run(env: str, size: int, seed_steps: int, steps: int) -> float:
    """Agent steps/s of Ajax's fully jitted run on the JAX ``env`` after seeding, as the other
    rows: from the first step after the pretraining burst to the last, from the arrival time of
    every training step (a host callback on each env step's reward; the one evaluation episode
    comes after the last)."""
    total = seed_steps + steps
    algo = TDMPC2(env, run_config(size, seed_steps, total))
    stamps, step = [], algo.env.step

    def timed(key, state, action):
        ts = step(key, state, action)
        jax.debug.callback(lambda r: stamps.append(time.perf_counter()), ts.reward)
        return ts

    object.__setattr__(algo.env, "step", timed)
    train = algo.make_train(total)
    key = jax.random.PRNGKey(0)
    jax.block_until_ready(jax.jit(train).lower(key).compile()(key))
    first, last = seed_steps + 1, total - 1  # stamps[k]: step k's arrival (no reset stamp)
    return (last - first) / (stamps[last] - stamps[first])


def official_run(python: str, repo: str, task: str, size: int, seed_steps: int, steps: int,
                 env=None):  # fmt: skip
    """The official online trainer's row (``tdmpc2_official.py --whole-run``; ``env``: variables
    added to this process's), or exit 2."""
    driver = Path(__file__).with_name("tdmpc2_official.py")
    cmd = [python, str(driver), "--repo", repo, "--threads", str(os.cpu_count()), "--sizes",
           str(size), "--whole-run", task, "--run-seed-steps", str(seed_steps), "--run-steps",
           str(steps)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not rows:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"tdmpc2_speed.py: error: the official TD-MPC2 online trainer failed in {python}:"
              f" {last}", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    return rows[0]


def official_times(python: str, repo: str, sizes, repeats: int, modes, env=None) -> dict:
    """{(size, mode): {"update_ms", "plan_ms", ...}} from ``tdmpc2_official.py`` run by the
    official code's interpreter ``python``, once per mode ("eager", "compiled"), with as many
    torch threads as this process has CPUs (XLA's CPU client uses them all); ``env``:
    variables added to this process's."""
    driver = Path(__file__).with_name("tdmpc2_official.py")
    out = {}
    for mode in modes:
        cmd = [python, str(driver), "--repo", repo, "--threads", str(os.cpu_count()),
               "--repeats", str(repeats), "--sizes", *map(str, sizes),
               "--obs-dim", str(OBS_DIM), "--action-dim", str(ACTION_DIM)]  # fmt: skip
        if mode == "compiled":
            cmd.append("--compile")
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env={**os.environ, **(env or {})})  # fmt: skip
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            print(f"tdmpc2_speed.py: error: the official TD-MPC2 ({mode}) failed in {python}:"
                  f" {last}; set up that interpreter as the README's Benchmarks section says",
                  file=sys.stderr)  # fmt: skip
            raise SystemExit(2)  # bad setup, as argparse's own errors
        for line in proc.stdout.splitlines():
            if line.startswith("{"):  # the official constructor prints too
                row = json.loads(line)
                out[(row["size"], mode)] = row
    return out


def check_official_args(parser, args) -> None:
    """One line and exit 2 for official-code flags that cannot work."""
    if (args.official_python is None) != (args.official_repo is None):
        parser.error("--official-python and --official-repo go together; give both or neither")
    if args.official_python is None:
        return
    if shutil.which(args.official_python) is None:
        parser.error(f"--official-python {args.official_python} is not an executable; give the"
                     " python of the venv the README's Benchmarks section sets up")  # fmt: skip
    if not (Path(args.official_repo) / "tdmpc2" / "tdmpc2.py").is_file():
        parser.error(f"--official-repo {args.official_repo} holds no tdmpc2/tdmpc2.py; give a"
                     " checkout of github.com/nicklashansen/tdmpc2")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--run-steps", type=int, default=300,
                        help="timed steps of each whole run, after seeding")  # fmt: skip
    parser.add_argument("--run-seed-steps", type=int, default=1000)
    parser.add_argument(
        "--run-task",
        default="cartpole-swingup",
        help="DMC task of the whole runs: dmc:TASK on the host, its JAX version",
    )
    parser.add_argument("--run-size", type=int, default=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--official-python", help="interpreter with the official code's deps")
    parser.add_argument("--official-repo", help="checkout of nicklashansen/tdmpc2")
    parser.add_argument(
        "--official-modes", nargs="+", default=["eager", "compiled"], choices=["eager", "compiled"]
    )
    parser.add_argument("--official-malloc", choices=["system", "kept"], default="system",
                        help="the official process's glibc allocator: as shipped, or with the "
                        "settings Ajax applies to itself (ajax.host_memory.GLIBC_ENV)")  # fmt: skip
    args = parser.parse_args()
    check_official_args(parser, args)
    if args.run_steps < 1 or args.run_seed_steps <= 500:
        parser.error(
            "--run-steps must be >= 1 and --run-seed-steps > 500 (one finished"
            " 500-step episode before the official trainer samples its buffer)"
        )
    official, official_row = {}, None
    if args.official_python:  # first, so that neither program shares the CPU with the other
        env = GLIBC_ENV if args.official_malloc == "kept" else None
        official = official_times(
            args.official_python, args.official_repo, args.sizes, args.repeats,
            args.official_modes, env,
        )  # fmt: skip
        official_row = official_run(args.official_python, args.official_repo, args.run_task,
                                    args.run_size, args.run_seed_steps, args.run_steps,
                                    env)  # fmt: skip
    jax.config.update("jax_default_matmul_precision", "highest")
    print(f"device: {jax.devices()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"allocator: Ajax {'kept' if KEPT else 'system'} (ajax.host_memory), official "
          f"{args.official_malloc if args.official_python else '-'}")  # fmt: skip
    big = matmul_gflops(2048, 2048, 2048, 5)
    print(f"plain matmul 2048^3: {big:.1f} GFLOP/s")
    if not official:
        print("official TD-MPC2 not run (give --official-python and --official-repo): no ratios")
    head = (
        f"{'size':>4} {'upd ms':>7} {'eager':>6} {'compil':>6} {'x':>5}"
        f" {'plan ms':>7} {'eager':>6} {'compil':>6} {'x':>5}"
        f" {'upd GF/s':>8} {'plan GF/s':>9} {'mm GF/s':>7} {'roofline':>8}"
    )
    print(head)
    for size in args.sizes:
        r = bench_size(size, args.repeats)
        mm = max(r["matmul_gflops"], r["plan_matmul_gflops"])
        cells, xmax = [], []
        for what in ("update", "plan"):
            ms = [official.get((size, m), {}).get(f"{what}_ms") for m in ("eager", "compiled")]
            ran = [v for v in ms if v is not None]
            # x: the faster official variant's ms over Ajax's ("-" when neither ran)
            x = f"{min(ran) / r[what + '_ms']:>5.2f}" if ran else f"{'-':>5}"
            floor_ms = r[f"{what}_gflop"] / mm * 1e3
            xmax.append(f"{min(ran) / floor_ms:.2f}" if ran else "-")
            shown = [f"{v:>6.0f}" if v is not None else f"{'-':>6}" for v in ms]
            cells.append(f"{r[what + '_ms']:>7.1f} {shown[0]} {shown[1]} {x}")
        upd_gfs = r["update_gflop"] / r["update_ms"] * 1e3
        pln_gfs = r["plan_gflop"] / r["plan_ms"] * 1e3
        print(
            f"{size:>4} {cells[0]} {cells[1]}"
            f" {upd_gfs:>8.1f} {pln_gfs:>9.1f} {mm:>7.1f}"
            f" {upd_gfs / mm:>4.2f}/{pln_gfs / mm:.2f}"
        )
        print(
            f"     matmul GFLOP per update {r['update_gflop']:.2f}, per plan {r['plan_gflop']:.2f};"
            f" layer-shaped matmul {r['matmul_gflops']:.1f} (update) /"
            f" {r['plan_matmul_gflops']:.1f} (plan) GFLOP/s; x max {xmax[0]} / {xmax[1]}"
        )
    for (size, mode), row in sorted(official.items()):
        print(f"official size {size} {mode}: first call {row['first_call_s']:.1f} s,"
              f" torch {row['torch']}, {row['threads']} threads")  # fmt: skip
    run = (args.run_task, args.run_size, args.run_seed_steps, args.run_steps)
    host = bench_host_run(*run)
    jax_id = "".join(w.title() for w in args.run_task.split("-"))  # playground's DMC id
    jitted = bench_jitted_run(jax_id, *run[1:])
    off = official_row["steps_per_s"] if official_row else None
    print(
        f"whole run, size {args.run_size}, {args.run_task}, action repeat 2, {args.run_steps}"
        f" steps after {args.run_seed_steps} seed steps and the pretraining burst (agent"
        f" steps/s): official {f'{off:.2f}' if off else '-'}, Ajax host loop on"
        f" dmc:{args.run_task} {host:.2f} (x {f'{host / off:.2f}' if off else '-'}), Ajax"
        f" jitted on {jax_id} {jitted:.2f} (x {f'{jitted / off:.2f}' if off else '-'})"
    )


KEPT = False  # whether keep_host_buffers applied (set when run as a script)

if __name__ == "__main__":
    # as `ajax train` does for agents with keeps_host_buffers; TD-MPC2 has not (README)
    KEPT = TDMPC2.keeps_host_buffers and keep_host_buffers()
    main()
