"""Where TD-MPC2's update spends its time: per-HLO-op times from a ``jax.profiler`` trace.

Usage: ``python benchmarks/tdmpc2_profile.py [--size 5] [--repeats 5] [--top 15]``. Compiles
one update (tdmpc2_speed.update_problem: batch 256, horizon 3, walker-sized obs 24 and actions 6),
times it, then runs it ``repeats`` times under the profiler and reads the Perfetto trace: every
thunk XLA's CPU runtime executes is one event. Each op is put in one class by its HLO name and
the ``op_name`` metadata JAX attaches (the module path it came from):

- matmul: ``dot`` thunks and YNNPACK fusions (matmuls with what XLA fused into them);
- layout copies: ``copy``/``transpose`` fusions and ops traced from a transpose or reshape,
  mostly a cotangent written out transposed for a weight gradient, with the element-wise
  backward fused into the copy;
- random draws: dropout masks and other threefry bits;
- outside the networks: the optimisers, the losses and targets;
- element-wise in the networks: LayerNorm, Mish, SimNorm and the rest.

Op times are summed; two threads overlap independent ops, so the sum exceeds the wall time.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import tempfile
import time

import jax
from tdmpc2_speed import update_problem

from ajax.agents.tdmpc2.update import update

RUNTIME = ("Thunk", "$", "Pjit", "Slinky", "Common", "block", "Threadpool", "end:")


def op_names(hlo_text: str) -> dict[str, str]:
    """HLO instruction name -> the ``op_name`` JAX recorded for it."""
    pattern = re.compile(r'\s*(?:ROOT )?%([\w.\-]+) = \S+ .*?op_name="([^"]*)"')
    return {m.group(1): m.group(2) for m in map(pattern.match, hlo_text.splitlines()) if m}


def classify(name: str, op: str) -> str:
    """One of the module docstring's classes for thunk ``name`` traced from ``op``."""
    leaf = op.split("/")[-1]
    if name.startswith(("ynn", "dot")):
        return "matmul (dot, YNN fusions)"
    if any(s in op for s in ("bernoulli", "_uniform", "threefry", "_normal", "random_bits")):
        return "random draws"
    if name.startswith(("copy", "transpose")) or leaf in ("transpose", "reshape", "add_any"):
        return "layout copies / transposes"
    if not any(s in op for s in ("WorldModel", "Ensemble", "member")):
        return "outside the networks (optimiser, losses, targets)"
    return "element-wise in the networks (norms, activations)"


def profile(compiled, args, repeats: int) -> collections.Counter:
    """Microseconds per thunk name over ``repeats`` calls, from a Perfetto trace."""
    with tempfile.TemporaryDirectory() as out:
        with jax.profiler.trace(out, create_perfetto_trace=True):
            for _ in range(repeats):
                jax.block_until_ready(compiled(*args))
        (path,) = glob.glob(f"{out}/plugins/profile/*/perfetto_trace.json.gz")
        events = json.load(gzip.open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    total = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and not e["name"].startswith(RUNTIME) and "Execute" not in e["name"]:
            total[e["name"]] += e.get("dur", 0.0)
    return total


def report(title: str, compiled, call, repeats: int, top: int, classify) -> None:
    """Time ``compiled(*call)``, profile ``repeats`` calls and print the per-class and largest
    op times (ms per call), each op classed by ``classify(name, op_name)``."""
    for _ in range(3):
        jax.block_until_ready(compiled(*call))
    start = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(compiled(*call))
    wall = 1e3 * (time.perf_counter() - start) / repeats
    ops = {name: us / 1e3 / repeats for name, us in profile(compiled, call, repeats).items()}
    names = op_names(compiled.as_text())
    classes = collections.Counter()
    for name, ms in ops.items():
        classes[classify(name, names.get(name, ""))] += ms
    summed = sum(classes.values())
    print(f"{title}: {wall:.1f} ms wall ({os.cpu_count()} CPUs, jax {jax.__version__}); op "
          f"times summed {summed:.1f} ms over {len(ops)} distinct thunks")  # fmt: skip
    for cls, ms in classes.most_common():
        print(f"{ms:8.1f} ms {ms / summed:6.1%}  {cls}")
    print(f"largest {top} ops:")
    for name, ms in sorted(ops.items(), key=lambda x: -x[1])[:top]:
        op = names.get(name, "").replace("jit(<lambda>)/", "")
        print(f"{ms:8.2f} ms  {name:32s} {op[-90:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    jax.config.update("jax_default_matmul_precision", "highest")
    cfg, model, state, batch = update_problem(args.size)
    step = jax.jit(lambda s, b, key: update(cfg, model, 0.99, s, b, key)[0])
    call = (state, batch, jax.random.PRNGKey(2))
    compiled = step.lower(*call).compile()
    report(f"TD-MPC2 size {args.size} update", compiled, call, args.repeats, args.top, classify)


if __name__ == "__main__":
    main()
