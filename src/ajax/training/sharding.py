"""Runs across devices: the vmapped seed axis, or one run's env and update batches, over a mesh.

Two layouts, one 1-D mesh each (``--parallel``):

- **seeds** (axis "seeds"): every leaf of a run's state carries the seed axis first (records:
  second, after the chunk axis), and no computation mixes seeds. :func:`over_seeds` wraps a
  seed-vmapped function in ``jax.shard_map``, so each device runs the one-device program on its
  own block of ``n_seeds / devices`` seeds, with no communication. A device's seeds are bitwise
  what the same block gives run alone on one device (a block of one seed: that seed alone, see
  :func:`per_seed`); against one device holding all ``n_seeds`` they agree to float rounding
  only, because XLA's CPU backend compiles a different seed batch into different kernels (see
  ``tests/training/test_reproducibility.py``). With ``--seed-batching map`` every seed runs
  unbatched, so each is bitwise the seed alone on every layout.
- **data** (axis "data"): one run's state is replicated on every device, and the shared loop
  and replay mark the env batch (:func:`constrain_data` in ``training.loop``) and the sampled
  update batch (``off_policy``, ``buffers.sequence``) as split over the devices. jit's sharding
  propagation (GSPMD) then partitions the program: each device steps its envs and runs the
  forward and backward passes of its part of the batch, and the gradient's batch sum becomes an
  all-reduce, so parameters stay replicated. The maths is the one-device program's; only sums
  over the batch are reassociated (the official DreamerV3's multi-GPU mode, done by the
  compiler instead of by hand).

On CPU, several devices come from ``XLA_FLAGS=--xla_force_host_platform_device_count=N``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ajax.partition import constrain_data  # noqa: F401  (the data layout's one marker)

SEEDS = PartitionSpec("seeds")
CHUNKS_THEN_SEEDS = PartitionSpec(None, "seeds")

# XLA options (``jax.jit(..., compiler_options=...)``) under which a program rounds the same on
# one device and inside a ``shard_map`` over several. XLA compiles a program for more than one
# device through its SPMD pipeline, whose cleanup runs common-subexpression elimination (CSE)
# before the main simplification passes; a one-device compile skips that pipeline, and the
# algebraic simplifier then rewrites a differently shaped program (measured on DreamerV3's size1m
# train step at batch 2 x 8: 72 of 260 state leaves differ after one update, by up to 2.2e-8).
# With CSE off in both compiles the two are bitwise equal (the simplifier off also gave that).
# Agents that need it set ``Algorithm.compiler_options`` to this (every program of their runs
# then compiles with it: the JAX run, the host loop, ``ajax eval``); it costs DreamerV3 nothing
# measurable (size1m train step 532 ms either way) and PPO's whole run about 6%, so it is not
# the default (benchmarks/compile_speed.py's problems, 2026-12-06).
SAME_ON_ANY_LAYOUT: dict[str, str] = {"xla_disable_hlo_passes": "cse"}

PARALLEL = ("seeds", "data")


def device_mesh(
    devices: int | None, n_seeds: int, is_jax: bool = True, parallel: str = "seeds"
) -> Mesh | None:
    """A mesh of the first ``devices`` devices along axis ``parallel`` ("seeds" or "data"), or
    None for one device. Raises ValueError naming the fix for more devices than exist, seeds
    that do not divide (seeds layout), or a host env (``is_jax`` False: its simulators step on
    the host, not on the devices)."""
    if parallel not in PARALLEL:
        raise ValueError(f"--parallel must be one of {PARALLEL}, got {parallel!r}")
    if devices is None or devices == 1:
        return None
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be a positive integer, got {devices!r}")
    if not is_jax:
        raise ValueError("--devices applies to JAX envs; a host env steps on the host")
    if parallel == "seeds" and n_seeds % devices:
        raise ValueError(
            f"--n-seeds {n_seeds} does not divide over --devices {devices}; pick a multiple "
            f"of {devices} seeds or a divisor of {n_seeds} devices (or --parallel data)"
        )
    available = jax.devices()
    if jax.process_count() > 1 and devices != len(available):
        raise ValueError(
            f"--devices {devices}: a run over {jax.process_count()} processes spreads over all "
            f"their {len(available)} devices; pass --devices {len(available)} or leave it out"
        )
    if devices > len(available):
        raise ValueError(
            f"--devices {devices} asks for more devices than the {len(available)} "
            f"{available[0].platform} device(s) here; lower --devices (on CPU, "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={devices} makes more)"
        )
    return Mesh(available[:devices], (parallel,))


def is_data_mesh(mesh: Mesh | None) -> bool:
    return mesh is not None and "data" in mesh.axis_names


def shard_seeds(tree: Any, mesh: Mesh | None) -> Any:
    """Place ``tree`` (leading seed axis on every leaf) over ``mesh``: split by seed on a seeds
    mesh, replicated on a data mesh; unchanged without one."""
    if mesh is None:
        return tree
    sharding = NamedSharding(mesh, PartitionSpec() if is_data_mesh(mesh) else SEEDS)
    return jax.tree.map(lambda x: jax.device_put(x, sharding), tree)


def over_seeds(fn, mesh: Mesh | None, out_specs: Any = SEEDS):
    """``fn`` (seed axis first on its inputs) run by every device on its block of seeds; ``fn``
    itself without a mesh or on a data mesh. ``out_specs`` places the outputs' seed axes."""
    if mesh is None or is_data_mesh(mesh):
        return fn
    return jax.shard_map(fn, mesh=mesh, in_specs=SEEDS, out_specs=out_specs, check_vma=False)


SEED_BATCHING = ("vmap", "map")


def check_batching(batching: str, is_jax: bool = True) -> None:
    """ValueError naming the fix for an unknown ``batching``, or ``"map"`` on a host env."""
    if batching not in SEED_BATCHING:
        raise ValueError(f"--seed-batching must be one of {SEED_BATCHING}, got {batching!r}")
    if batching == "map" and not is_jax:
        raise ValueError(
            "--seed-batching map is for JAX envs (one jitted run); host runs vmap their seeds: "
            "drop it"
        )


def per_seed(fn, batching: str = "vmap"):
    """``fn`` mapped over the leading seed axis of its arguments and results: ``jax.vmap``, but
    one seed runs unbatched (its axis dropped, then restored); with ``batching="map"`` every
    seed runs unbatched, one after another (``jax.lax.map``).

    XLA's CPU backend compiles a batched program into other kernels than the unbatched one, so
    seed k of a vmapped run agrees with seed k run alone to float rounding only; a batch-1 vmap
    is also much slower than the plain program (PQN on CartPole-v1, 32 envs, 262,144 steps:
    2.31 s vmapped over one seed, 1.31 s unbatched; ``benchmarks/model_free_speed.py``).
    ``"map"`` gives up the batching for exactness: each seed is bitwise the seed run alone, on
    one device or sharded by :func:`over_seeds` over any number (tests/training/
    test_sharding.py: SAC, PPO, TD-MPC2 and DreamerV3, the last with
    :data:`SAME_ON_ANY_LAYOUT`). Under :func:`over_seeds` a device's block of one seed runs
    unbatched either way.
    """
    check_batching(batching)

    def mapped(*args):
        sizes = {x.shape[0] for x in jax.tree.leaves(args)}
        if sizes == {1}:
            out = fn(*jax.tree.map(lambda x: x[0], args))
            return jax.tree.map(lambda x: x[None], out)
        if batching == "map":
            return jax.lax.map(lambda a: fn(*a), args)
        return jax.vmap(fn)(*args)

    return mapped


def mesh_context(mesh: Mesh | None):
    """The context to trace and call a run's jitted functions in: ``jax.set_mesh(mesh)`` makes
    the mesh visible to :func:`constrain_data` while tracing."""
    return contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh)
