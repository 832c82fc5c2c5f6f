"""Replay memory: the bytes a run's replay will hold, checked before the run starts.

A replay lives on the device with the rest of the run (one buffer per seed, allocated whole at
init), so a run whose replay cannot fit would fail only after compiling, or swap the host to a
standstill. :func:`check_replay_fits` refuses it up front with the numbers and the flags that
change them. A replay whose rows live in host memory (``--replay-on host``,
:mod:`ajax.buffers.host_store`) is checked in two parts: its flags on the device and its rows
against the host's memory.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax.buffers.host_store import host_stores
from ajax.environments.types import EnvSpec
from ajax.training.loop import ReplayAgent, Tick

GiB = 2**30


def replay_bytes(agent: ReplayAgent, spec: EnvSpec, n_envs: int) -> tuple[int, int]:
    """Bytes of one seed's replay on the device and in host memory, read off the shapes
    ``agent.init`` allocates (no compute)."""
    n = (n_envs,)
    tick = Tick(
        obs=jax.ShapeDtypeStruct(n + tuple(spec.observation_shape), jnp.float32),
        reward=jax.ShapeDtypeStruct(n, jnp.float32),
        is_first=jax.ShapeDtypeStruct(n, jnp.bool_),
        is_last=jax.ShapeDtypeStruct(n, jnp.bool_),
        is_terminal=jax.ShapeDtypeStruct(n, jnp.bool_),
    )
    _, replay = jax.eval_shape(agent.init, jax.random.PRNGKey(0), tick)
    device = int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(replay)))
    return device, sum(store.nbytes_per_seed() for store in host_stores(replay))


def host_bytes() -> int:
    """The host's available memory (the kernel's ``MemAvailable``), or a huge number when it
    cannot be read (nothing to refuse on)."""
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: line.split()[1] for line in f}
        return int(info["MemAvailable"]) * 1024
    except (OSError, KeyError, ValueError, IndexError):
        return 2**62


def device_bytes(device=None) -> tuple[int, str]:
    """Memory a run can use on ``device`` (default: this process's first), and its name.

    Accelerators report their allocator's limit; the CPU shares the host's memory, of which
    the kernel's ``MemAvailable`` is what a new allocation can get without swapping.
    """
    device = device or jax.local_devices()[0]  # this process's: another's reports nothing
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]), str(device)
    return host_bytes(), f"{device} (host memory available)"


def check_replay_fits(
    per_seed: int, n_seeds: int, available: int, where: str, also: str = ""
) -> None:
    """Raise ``ValueError`` naming the sizes and the fix when ``n_seeds`` replays of
    ``per_seed`` bytes exceed ``available`` bytes; ``also`` is one more fix to name."""
    need = per_seed * n_seeds
    if need <= available:
        return
    raise ValueError(
        f"the replay needs {need / GiB:.1f} GiB ({n_seeds} seed(s) x {per_seed / GiB:.2f} GiB) "
        f"but {where} has {available / GiB:.1f} GiB: lower --buffer-size (about "
        f"{max(1, int(100 * available / need))}% of it fits) or --n-seeds{also}"
    )
