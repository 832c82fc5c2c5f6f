"""Where DreamerV3's train step spends its time: per-HLO-op times from a ``jax.profiler`` trace.

Usage: ``python benchmarks/dreamerv3_profile.py [--size 1m] [--repeats 5] [--top 15]``.
Compiles the train step that ``dreamerv3_speed.py`` times (``train_problem``: batch 16 x 64,
5 vector features, 1 continuous action), times it, then runs it ``repeats`` times under the
profiler and reads the Perfetto trace (``tdmpc2_profile.profile``: every thunk XLA's CPU
runtime executes is one event). Each op is put in one class by its HLO name and the
``op_name`` metadata JAX attaches:

- matmul: ``dot`` thunks and YNNPACK fusions;
- layout copies: ``copy``/``transpose`` fusions and ops traced from a transpose or reshape;
- random draws: threefry bits (the latent and action samples);
- the rest, split by whether it runs inside a scan body (``while``: the 64 observe steps, the
  15 imagination steps and their backward passes) or outside (losses, heads, optimiser).

It also prints how many thunks one step executes and their mean duration: at size1m most ops
are small, so per-op overhead, not arithmetic, can set the step's time. Op times are summed;
two threads overlap independent ops, so the sum can exceed the wall time.
"""

from __future__ import annotations

import argparse

import jax
from dreamerv3_speed import train_problem
from tdmpc2_profile import report

from ajax.host_memory import keep_host_buffers


def classify(name: str, op: str) -> str:
    """One of the module docstring's classes for thunk ``name`` traced from ``op``."""
    leaf = op.split("/")[-1]
    if name.startswith(("ynn", "dot")):
        return "matmul (dot, YNN fusions)"
    if any(s in op for s in ("threefry", "random_bits", "_gumbel", "_normal", "_uniform")):
        return "random draws"
    if name.startswith(("copy", "transpose")) or leaf in ("transpose", "reshape", "add_any"):
        return "layout copies / transposes"
    if "while" in op or name.startswith(("while", "wrapped_while")):
        return "other, inside scan bodies (observe, imagine, their backward)"
    return "other, outside scans (losses, heads, optimiser)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1m")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    if args.repeats < 1 or args.top < 0:
        parser.error("--repeats must be >= 1 and --top >= 0")
    _, _, step, call = train_problem(args.size)
    compiled = jax.jit(step).lower(*call).compile()
    report(f"DreamerV3 size{args.size} train step", compiled, call, args.repeats, args.top,
           classify)  # fmt: skip


if __name__ == "__main__":
    keep_host_buffers()  # as `ajax train dreamerv3` does (ajax.host_memory)
    main()
