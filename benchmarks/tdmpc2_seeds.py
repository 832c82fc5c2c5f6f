"""TD-MPC2 throughput over seeds: one program training N vmapped seeds against N processes.

Usage: ``python benchmarks/tdmpc2_seeds.py [--seeds 1 2 4 8] [--steps 200] [--size 1]
[--devices D]``. Prints, for each N, env steps/s per seed and in all of (a) one jitted run
vmapping N seeds and (b) N separate processes training one seed each at the same time, and the
ratio (a) / (b). With ``--devices D`` the one program splits its seeds over D devices, as
``train(devices=D)`` does; on a CPU machine those are forced host devices
(``--xla_force_host_platform_device_count``) sharing the machine's cores.

Both sides exclude compilation and time a second call of the compiled run (the first costs
more): each process compiles and runs once, waits at a barrier until all have, then times the
run; (b)'s wall time is from the barrier to the last process's end. The
config is the size preset with a smaller update batch and planner (``--batch-size``,
``--num-samples``, ``--iterations``) so that N = 8 finishes in minutes on 2 CPU cores; say so
beside any figure quoted from it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 4, 8])
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--size", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--num-samples", type=int, default=128)
parser.add_argument("--iterations", type=int, default=3)
parser.add_argument("--env", default="Pendulum-v1")
parser.add_argument(
    "--devices", type=int, default=1,
    help="split the vmapped program's seeds over this many devices (forced on a CPU machine)",
)  # fmt: skip


def _run(args, n_seeds: int, seed0: int = 0, devices: int = 1):
    """(compiled run, keys) of ``n_seeds`` vmapped seeds from ``seed0``, split over
    ``devices`` devices as ``train(devices=...)`` splits them."""
    import jax
    import jax.numpy as jnp

    from ajax.agents.tdmpc2 import TDMPC2, PlannerConfig, TDMPC2Config
    from ajax.training.driver import segment_fn
    from ajax.training.sharding import (
        CHUNKS_THEN_SEEDS,
        SEEDS,
        mesh_context,
        over_seeds,
        shard_seeds,
    )

    cfg = TDMPC2Config.preset(
        args.size,
        batch_size=args.batch_size,
        seed_steps=min(100, args.steps // 2),
        eval_freq=args.steps,
        eval_episodes=1,
        planner=PlannerConfig(num_samples=args.num_samples, iterations=args.iterations),
    )
    algo = TDMPC2(args.env, cfg)
    chunks = algo.make_chunks(args.steps)
    segment = segment_fn(chunks.run_chunk, chunks.n_chunks)
    mesh = algo.mesh(devices, n_seeds, "seeds")
    run = over_seeds(lambda k: segment(jax.vmap(chunks.init)(k)), mesh, (SEEDS, CHUNKS_THEN_SEEDS))
    keys = shard_seeds(jax.vmap(jax.random.PRNGKey)(jnp.arange(seed0, seed0 + n_seeds)), mesh)
    with mesh_context(mesh):
        run = algo.jit(run).lower(keys).compile()
    return run, keys, chunks.n_chunks * chunks.steps_per_chunk


def _one_process(args, seed: int, barrier, out) -> None:
    import jax

    run, keys, steps = _run(args, 1, seed)
    jax.block_until_ready(run(keys))  # warm, as vmapped() does: a first call costs more
    barrier.wait()
    start = time.perf_counter()
    jax.block_until_ready(run(keys))
    out.put((seed, time.perf_counter() - start, steps))


def vmapped(args, n: int) -> float:
    """Env steps/s over all seeds of one program vmapping ``n`` seeds."""
    import jax

    run, keys, steps = _run(args, n, devices=min(args.devices, n))
    jax.block_until_ready(run(keys))  # warm
    start = time.perf_counter()
    jax.block_until_ready(run(keys))
    return n * steps / (time.perf_counter() - start)


def processes(args, n: int) -> float:
    """Env steps/s over all seeds of ``n`` processes of one seed each, run together."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=_one_process, args=(args, s, barrier, out)) for s in range(n)]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    results = [out.get() for _ in procs]
    wall = time.perf_counter() - start
    for p in procs:
        p.join()
    return sum(steps for _, _, steps in results) / wall


def main() -> None:
    args = parser.parse_args()
    plain_flags = os.environ.get("XLA_FLAGS", "")
    vmap_flags = plain_flags  # set before JAX starts; the one-seed processes get the plain ones
    if args.devices > 1:
        vmap_flags += f" --xla_force_host_platform_device_count={args.devices}"
    os.environ["XLA_FLAGS"] = vmap_flags
    print(f"TD-MPC2 size {args.size} on {args.env}: {args.steps} env steps per seed, batch "
          f"{args.batch_size}, planner {args.iterations} x {args.num_samples}; "
          f"{os.cpu_count()} cores; vmapped seeds over {args.devices} device(s);"
          " compile excluded")  # fmt: skip
    print("seeds  vmapped steps/s  per seed  processes steps/s  per seed  vmapped / processes")
    for n in args.seeds:
        a = vmapped(args, n)
        os.environ["XLA_FLAGS"] = plain_flags  # spawned processes read it as they start
        b = processes(args, n)
        os.environ["XLA_FLAGS"] = vmap_flags
        print(f"{n:5d}  {a:15.1f}  {a / n:8.1f}  {b:17.1f}  {b / n:8.1f}  {a / b:19.2f}")


if __name__ == "__main__":
    main()
