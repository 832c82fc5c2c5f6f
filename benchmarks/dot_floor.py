"""The dot floor: how long a jitted program's matmuls alone take on XLA:CPU at their own shapes
(issue 37 item 2, issue 36 item 5: "where XLA:CPU cannot do better, show it").

Usage: ``python benchmarks/dot_floor.py [--programs tdmpc2-update-1 tdmpc2-plan-1
tdmpc2-update-5 tdmpc2-plan-5 dreamerv3-1m] [--rounds 5] [--target-ms 40] [--top 10]``
(``dreamerv3-12m`` is also known; it takes minutes per round on 2 cores).

For each program it lists every ``dot_general`` of the traced jaxpr with its exact operand
shapes, dtypes, dimension numbers and precision, and how many times one call runs it (a scan
counts its length, a ``cond`` its costliest branch, a ``while`` once: the rules of
``tdmpc2_speed.matmul_flops``, whose FLOP count this agrees with). Identical dots are grouped;
each distinct dot is timed alone inside one jitted ``fori_loop`` (a chain of up to 4
distinct operand pairs, each dot ordered after the last by an ``optimization_barrier`` and
every output returned, so that XLA neither hoists, drops, merges nor overlaps them), under the
matmul precision the speed benchmarks use (``highest`` for TD-MPC2, as ``tdmpc2_speed.py``
sets; the default for DreamerV3, as ``dreamerv3_speed.py`` leaves it). T_dots = sum over groups
of count x time: the time the program's matmuls take one after another with nothing else to
do. The whole program and the reference matmuls are timed in the same rounds, interleaved with
the dots; every figure is the minimum over the rounds.

Printed per program: whole ms, T_dots ms, T_dots / whole, matmul GFLOP, the roofline ratio as
the speed benchmark defines it (GFLOP/s of the program over a reference matmul's: TD-MPC2 the
faster of the two layer-shaped matmuls, [B (H+1), mlp_dim] x [mlp_dim, mlp_dim] and
[num_samples, mlp_dim] x [mlp_dim, mlp_dim]; DreamerV3 the 1024^3 matmul), the best ratio any
implementation with these matmul shapes can reach on this backend (FLOPs / T_dots over the same
reference), and the top dot groups by time. ``--fusions`` also times a few fused shapes of
TD-MPC2 size 5 against the sum of their parts.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend import core as jcore

sys.path.insert(0, os.path.dirname(__file__))
from tdmpc2_speed import matmul_flops, sub_jaxprs  # noqa: E402


class Dot(NamedTuple):
    """One distinct ``dot_general``: operand avals and the primitive's parameters."""

    lhs: tuple
    lhs_dtype: str
    rhs: tuple
    rhs_dtype: str
    dimension_numbers: tuple
    precision: object
    preferred: object

    @property
    def flops(self) -> int:
        (lc, rc), (lb, rb) = self.dimension_numbers
        k = math.prod(self.lhs[i] for i in lc)
        free_l = math.prod(d for i, d in enumerate(self.lhs) if i not in lc and i not in lb)
        free_r = math.prod(d for i, d in enumerate(self.rhs) if i not in rc and i not in rb)
        return 2 * math.prod(self.lhs[i] for i in lb) * free_l * free_r * k

    def __str__(self) -> str:
        (lc, rc), (lb, rb) = self.dimension_numbers
        dt = (
            self.lhs_dtype
            if self.lhs_dtype == self.rhs_dtype
            else f"{self.lhs_dtype}/{self.rhs_dtype}"
        )
        batch = f" b{tuple(lb)}{tuple(rb)}" if lb else ""
        return f"{list(self.lhs)} x {list(self.rhs)} c{tuple(lc)}{tuple(rc)}{batch} {dt}"


def enumerate_dots(jaxpr: jcore.Jaxpr) -> Counter:
    """{Dot: how many times one call runs it}, by the rules of ``matmul_flops``: scans count
    ``length`` times, conds their costliest branch, a ``while`` once."""
    out: Counter = Counter()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            lhs, rhs = (v.aval for v in eqn.invars)
            dn = eqn.params["dimension_numbers"]
            dn = tuple(tuple(tuple(int(i) for i in d) for d in pair) for pair in dn)
            prec, pref = eqn.params.get("precision"), eqn.params.get("preferred_element_type")
            shapes = (tuple(lhs.shape), str(lhs.dtype), tuple(rhs.shape), str(rhs.dtype))
            out[Dot(*shapes, dn, prec, pref)] += 1
            continue
        subs = [enumerate_dots(s) for s in sub_jaxprs(eqn)]
        if eqn.primitive.name == "cond":
            subs = [max(subs, key=total_flops)] if subs else []
        n = eqn.params.get("length", 1)
        for sub in subs:
            for dot, count in sub.items():
                out[dot] += n * count
    return out


def total_flops(dots: Counter) -> int:
    return sum(d.flops * c for d, c in dots.items())


def dot_loop(dot: Dot, copies: int):
    """(jitted f(n, operands) running ``n`` times a chain of ``copies`` dots, its operands)."""
    keys = jax.random.split(jax.random.PRNGKey(0), 2 * copies)
    ops = tuple(
        (jax.random.normal(keys[2 * i], dot.lhs).astype(dot.lhs_dtype),
         jax.random.normal(keys[2 * i + 1], dot.rhs).astype(dot.rhs_dtype))
        for i in range(copies)
    )  # fmt: skip

    def one(lhs, rhs):
        return lax.dot_general(lhs, rhs, dot.dimension_numbers, precision=dot.precision,
                               preferred_element_type=dot.preferred)  # fmt: skip

    out0 = jax.eval_shape(one, *ops[0])

    def body(_, carry):
        pairs, outs = carry
        prev, new_pairs, new_outs = outs[-1], [], []
        for k, (lhs, rhs) in enumerate(pairs):  # each dot waits for the previous one's output
            lhs, rhs, prev = lax.optimization_barrier((lhs, rhs, prev))
            if k:
                new_outs.append(prev)
            prev = one(lhs, rhs)
            new_pairs.append((lhs, rhs))
        return tuple(new_pairs), (*new_outs, prev)

    def run(n, pairs):  # every output is returned: XLA may drop no dot of the chain
        zeros = jnp.zeros(out0.shape, out0.dtype)
        return lax.fori_loop(0, n, body, (pairs, (zeros,) * len(pairs)))[1]

    return jax.jit(run), ops


class Timer:
    """A compiled ``fn(n, args)`` that runs n repeats of ``per_call`` units of work; ``n`` is
    picked once so that a call takes about ``target_ms``. ``sample()`` times one call and returns
    ms per unit."""

    def __init__(self, fn, args, per_call: int, target_ms: float):
        self.fn, self.args, self.per_call = fn, args, per_call
        self.compiled = fn.lower(jnp.int32(1), args).compile()
        self.n = 1
        ms = self.sample()  # warm
        ms = min(ms, self.sample())
        self.n = max(1, min(100_000, int(target_ms / max(ms * per_call, 1e-4))))
        self.best = math.inf

    def sample(self) -> float:
        n = jnp.int32(self.n)
        start = time.perf_counter()
        jax.block_until_ready(self.compiled(n, self.args))
        ms = 1e3 * (time.perf_counter() - start) / (self.n * self.per_call)
        self.best = min(getattr(self, "best", math.inf), ms)
        return ms


def dot_timer(dot: Dot, target_ms: float, max_copies: int = 4) -> Timer:
    # enough distinct copies to spill the cache a little, within 256 MB of operands
    size = (math.prod(dot.lhs) + math.prod(dot.rhs)) * 4
    copies = max(1, min(max_copies, (256 << 20) // max(size, 1)))
    fn, ops = dot_loop(dot, copies)
    return Timer(fn, ops, copies, target_ms)


class ProgramTimer:
    """A whole jitted program: ``sample()`` times one call (ms)."""

    def __init__(self, fn, args):
        self.compiled = jax.jit(fn).lower(*args).compile()
        self.args = args
        jax.block_until_ready(self.compiled(*args))
        self.best = math.inf

    def sample(self) -> float:
        start = time.perf_counter()
        jax.block_until_ready(self.compiled(*self.args))
        ms = 1e3 * (time.perf_counter() - start)
        self.best = min(self.best, ms)
        return ms


def layer_dot(m: int, k: int, n: int, dtype="float32") -> Dot:
    return Dot((m, k), dtype, (k, n), dtype, (((1,), (0,)), ((), ())), None, None)


# ----------------------------------------------------------------------------- the programs


def tdmpc2_program(what: str, size: int):
    """(fn, args, reference dots) of TD-MPC2's update or plan at ``size`` (tdmpc2_speed)."""
    from tdmpc2_speed import update_and_plan

    cfg, upd, plan = update_and_plan(size)
    w, rows = cfg.arch.mlp_dim, cfg.batch_size * (cfg.planner.horizon + 1)
    refs = [layer_dot(rows, w, w), layer_dot(cfg.planner.num_samples, w, w)]
    return (*(upd if what == "update" else plan), refs)


def dreamerv3_program(size: str):
    """(fn, args, reference dots) of DreamerV3's train step at ``size`` (dreamerv3_speed)."""
    from dreamerv3_speed import train_problem

    _, _, step, args = train_problem(size)
    return step, args, [layer_dot(1024, 1024, 1024)]


PROGRAMS = {
    "tdmpc2-update-1": lambda: tdmpc2_program("update", 1),
    "tdmpc2-plan-1": lambda: tdmpc2_program("plan", 1),
    "tdmpc2-update-5": lambda: tdmpc2_program("update", 5),
    "tdmpc2-plan-5": lambda: tdmpc2_program("plan", 5),
    "dreamerv3-1m": lambda: dreamerv3_program("1m"),
    "dreamerv3-12m": lambda: dreamerv3_program("12m"),
}


def precision_for(name: str):
    return "highest" if name.startswith("tdmpc2") else None


def measure(name: str, rounds: int, target_ms: float, top: int, calls: int = 3) -> dict:
    with jax.default_matmul_precision(precision_for(name)):
        fn, args, refs = PROGRAMS[name]()
        jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
        dots = enumerate_dots(jaxpr)
        flops = total_flops(dots)
        assert flops == matmul_flops(jaxpr)
        whole = ProgramTimer(fn, args)
        timers = {d: dot_timer(d, target_ms) for d in dots}
        ref_timers = [dot_timer(d, target_ms) for d in refs]
    for _ in range(rounds):  # interleaved: the program `calls` times, then every dot once
        for _ in range(calls):
            whole.sample()
        for t in [*timers.values(), *ref_timers]:
            t.sample()
    t_dots = sum(dots[d] * t.best for d, t in timers.items())
    ref_rate = max(d.flops / t.best / 1e6 for d, t in zip(refs, ref_timers, strict=True))  # GFLOP/s
    prog_rate = flops / whole.best / 1e6
    print(f"\n{name}: {len(dots)} distinct dots, {sum(dots.values())} dot calls, "
          f"{flops / 1e9:.2f} matmul GFLOP, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for d, t in zip(refs, ref_timers, strict=True):
        print(f"  reference {d}: {d.flops / t.best / 1e6:.1f} GFLOP/s")
    print(f"  whole {whole.best:.1f} ms, T_dots {t_dots:.1f} ms, T_dots/whole "
          f"{t_dots / whole.best:.2f}; roofline {prog_rate / ref_rate:.2f} (as the speed "
          f"benchmark), best possible with these dots "
          f"{flops / t_dots / 1e6 / ref_rate:.2f}")  # fmt: skip
    ranked = sorted(timers, key=lambda d: -dots[d] * timers[d].best)
    print(f"  {'count':>5} {'ms each':>8} {'ms total':>8} {'share':>5} {'GFLOP/s':>7}  dot")
    for d in ranked[:top]:
        t = timers[d].best
        print(f"  {dots[d]:>5} {t:>8.3f} {dots[d] * t:>8.2f} {dots[d] * t / t_dots:>5.2f} "
              f"{d.flops / t / 1e6:>7.1f}  {d}")  # fmt: skip
    return dict(whole=whole.best, t_dots=t_dots, flops=flops, ref=ref_rate, dots=dots,
                times={d: t.best for d, t in timers.items()})  # fmt: skip


def fusions(rounds: int, target_ms: float) -> None:
    """TD-MPC2 size 5's Q ensemble (its members read one input, z ++ a, on the H B = 768 rows of
    the Q loss): each member's dot of the first layer (forward, weight gradient, input
    gradient) and of a hidden layer, q times, against one wide dot over the q members'
    stacked weights and one batched dot; and a hidden layer's weight gradient against the same
    product with its lhs stored transposed; timed interleaved."""
    from tdmpc2_speed import ACTION_DIM, update_problem

    cfg = update_problem(5)[0]
    w, rows, q = cfg.arch.mlp_dim, cfg.batch_size * cfg.planner.horizon, cfg.arch.num_q
    lat = cfg.arch.latent_dim + ACTION_DIM

    def d(lhs, rhs, contract, batch=((), ())):
        return Dot(lhs, "float32", rhs, "float32", (contract, batch), None, None)

    fwd, wgrad, dgrad = ((1,), (0,)), ((0,), (0,)), ((1,), (1,))
    bat = ((0,), (0,))
    cases = {
        f"first layer forward [{rows},{lat}]x[{lat},{w}]": (
            d((rows, lat), (lat, w), fwd), q,
            {"wide": d((rows, lat), (lat, q * w), fwd),
             "batched": d((q, rows, lat), (q, lat, w), ((2,), (1,)), bat)},
        ),
        f"first layer weight gradient [{rows},{w}]x[{rows},{lat}]": (
            d((rows, w), (rows, lat), wgrad), q,
            {"wide": d((rows, q * w), (rows, lat), wgrad),
             "batched": d((q, rows, w), (q, rows, lat), ((1,), (1,)), bat)},
        ),
        f"first layer input gradient [{rows},{w}]x[{lat},{w}]": (
            d((rows, w), (lat, w), dgrad), q,
            {"wide (sums the members)": d((rows, q * w), (lat, q * w), dgrad),
             "batched": d((q, rows, w), (q, lat, w), ((2,), (2,)), bat)},
        ),
        f"hidden layer forward [{rows},{w}]x[{w},{w}]": (
            d((rows, w), (w, w), fwd), q,
            {"batched": d((q, rows, w), (q, w, w), ((2,), (1,)), bat)},
        ),
        f"hidden weight gradient (contracts dim 0 of both) [{rows},{w}]x[{rows},{w}]": (
            d((rows, w), (rows, w), wgrad), 1,
            {"with its lhs stored transposed": d((w, rows), (rows, w), fwd)},
        ),
    }  # fmt: skip
    with jax.default_matmul_precision("highest"):
        timers = {}
        for part, _, fused in cases.values():
            for dot in [part, *fused.values()]:
                if dot not in timers:
                    timers[dot] = dot_timer(dot, target_ms)
    for _ in range(rounds):
        for t in timers.values():
            t.sample()
    print(f"\nfusions of TD-MPC2 size 5's {q} Q members (precision highest; ms, minima of "
          f"interleaved rounds; load {os.getloadavg()[0]:.1f})")  # fmt: skip
    for title, (part, n, fused) in cases.items():
        t_parts = n * timers[part].best
        print(f"  {title}: {n} x {timers[part].best:.3f} = {t_parts:.3f} ms")
        for label, dot in fused.items():
            t = timers[dot].best
            print(f"    one {label} {dot}: {t:.3f} ms ({t / t_parts:.2f} of the parts)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", choices=list(PROGRAMS),
                        default=["tdmpc2-update-1", "tdmpc2-plan-1", "tdmpc2-update-5",
                                 "tdmpc2-plan-5", "dreamerv3-1m"])  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target-ms", type=float, default=40.0,
                        help="about how long one timed call of a dot's loop takes")  # fmt: skip
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--calls", type=int, default=3, help="program calls per round")
    parser.add_argument("--fusions", action="store_true")
    args = parser.parse_args()
    print(f"device: {jax.devices()[0]}, {os.cpu_count()} CPUs, jax {jax.__version__}, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    big = dot_timer(layer_dot(2048, 2048, 2048), 200.0, max_copies=1)
    rates = []
    for name in args.programs:
        rates.append(2 * 2048**3 / min(big.sample() for _ in range(3)) / 1e6)
        measure(name, args.rounds, args.target_ms, args.top, args.calls)
    if args.fusions:
        fusions(args.rounds, args.target_ms)
    rates.append(2 * 2048**3 / min(big.sample() for _ in range(3)) / 1e6)
    print(f"\nplain matmul 2048^3: {np.max(rates):.1f} GFLOP/s (best; {np.min(rates):.1f} worst "
          f"between programs), load {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
