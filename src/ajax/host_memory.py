"""Keep the host memory XLA:CPU frees, instead of handing it back and faulting it in again.

XLA's CPU runtime allocates each call's temporaries as one block: 449 MB for DreamerV3
size1m's train step, 193 MB for TD-MPC2 size 5's update. glibc serves a block that large with
``mmap`` (from a worker thread's arena it always does) and unmaps it when the call ends, so
every call faults every page in again. Measured on the 2-core development CPU (2026-12-07,
``/tmp`` scripts timing the compiled steps with ``resource.getrusage``): DreamerV3 size1m
110k minor faults and 0.38 s of kernel time per train step, wall 800-860 ms, against 250-770
faults, 0.015 s and 600-700 ms with :func:`keep_host_buffers`; TD-MPC2 size 1's update 21.6k
faults and 0.07 s kernel time per update against under 1.2k and 0.005 s.

:func:`keep_host_buffers` sets glibc's ``mallopt`` so that the process keeps what it frees:
one arena (``M_ARENA_MAX`` 1, so the worker threads allocate from the main heap), no ``mmap``
(``M_MMAP_MAX`` 0) and no trimming (``M_TRIM_THRESHOLD`` -1). The resident memory then stays
at its peak, which a training process reaches on its first step anyway. Every ``ajax``
command that builds an agent (train, resume, eval, collect, sweep) calls it first for agents
whose class sets ``keeps_host_buffers`` (DreamerV3).
It is off for the others: with one arena TD-MPC2's planning step (many small ops, both
threads allocating) ran slower, min of 15 calls 148-239 ms against 122-146 ms with the system
allocator over three alternations at size 1, while its update ran faster (111-159 against
144-171 ms). A script using the library can call it first thing.
It does nothing, and returns False, where the C library is not glibc, and when the
environment sets ``AJAX_SYSTEM_MALLOC=1``. Call it before JAX first runs anything: an arena
a thread already holds stays. :data:`GLIBC_ENV` is the same as environment variables, which
glibc reads when a process starts: the benchmarks give them to the official code's process
when asked (``--official-malloc kept``), so that both sides can be timed with either allocator.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8
SETTINGS = ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, -1))
GLIBC_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**62)}


def keep_host_buffers() -> bool:
    """Make this process reuse the host memory it frees (glibc only); True when applied."""
    if os.environ.get("AJAX_SYSTEM_MALLOC") == "1" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # musl and the other C libraries
        return False
    return all(libc.mallopt(param, value) == 1 for param, value in SETTINGS)
