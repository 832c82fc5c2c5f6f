"""Seeds across devices: the vmapped seed axis of a run, sharded over a 1-D device mesh.

Every leaf of a run's state carries the seed axis first (records: second, after the chunk
axis), and no computation mixes seeds. :func:`over_seeds` wraps a seed-vmapped function in
``jax.shard_map`` over a mesh axis "seeds", so each device runs the one-device program on its own
block of ``n_seeds / devices`` seeds, with no communication. A device's seeds are therefore
bitwise what the same block gives run alone on one device; against one device holding all
``n_seeds`` they agree to float rounding only, because XLA's CPU backend compiles a different
seed batch into different kernels (see ``tests/training/test_reproducibility.py``). On CPU,
several devices come from ``XLA_FLAGS=--xla_force_host_platform_device_count=N``.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

SEEDS = PartitionSpec("seeds")
CHUNKS_THEN_SEEDS = PartitionSpec(None, "seeds")


def seed_mesh(devices: int | None, n_seeds: int, is_jax: bool = True) -> Mesh | None:
    """A mesh of the first ``devices`` devices along axis "seeds", or None for one device.
    Raises ValueError naming the fix for more devices than exist, seeds that do not divide, or
    a host env (``is_jax`` False: its simulators step on the host, not on the devices)."""
    if devices is None or devices == 1:
        return None
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices must be a positive integer, got {devices!r}")
    if not is_jax:
        raise ValueError("--devices applies to JAX envs; a host env steps on the host")
    if n_seeds % devices:
        raise ValueError(
            f"--n-seeds {n_seeds} does not divide over --devices {devices}; pick a multiple "
            f"of {devices} seeds or a divisor of {n_seeds} devices"
        )
    available = jax.devices()
    if devices > len(available):
        raise ValueError(
            f"--devices {devices} asks for more devices than the {len(available)} "
            f"{available[0].platform} device(s) here; lower --devices (on CPU, "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={devices} makes more)"
        )
    return Mesh(available[:devices], ("seeds",))


def shard_seeds(tree: Any, mesh: Mesh | None) -> Any:
    """Place ``tree`` (leading seed axis on every leaf) over ``mesh``; unchanged without one."""
    if mesh is None:
        return tree
    sharding = NamedSharding(mesh, SEEDS)
    return jax.tree.map(lambda x: jax.device_put(x, sharding), tree)


def over_seeds(fn, mesh: Mesh | None, out_specs: Any = SEEDS):
    """``fn`` (seed axis first on its inputs) run by every device on its block of seeds;
    ``fn`` itself without a mesh. ``out_specs`` places the outputs' seed axes."""
    if mesh is None:
        return fn
    return jax.shard_map(fn, mesh=mesh, in_specs=SEEDS, out_specs=out_specs, check_vma=False)
