"""Shared test configuration: float32, CPU, highest matmul precision for parity tests, and a
persistent XLA compilation cache.

The cache: many tests compile the same programs (a run, then its resume; the CLI's train then
eval; every integrity test's tiny SAC), and on two CPU cores compiling is most of their time
(measured: a tiny SAC run 19.9 s cold, 12.3 s from the cache). Entries are keyed by the
program, jax version and flags, so a hit is the executable a fresh compile would build.
``AJAX_TEST_JAX_CACHE`` moves it (empty string: off); the environment variables reach the
tests' subprocesses too.
"""

import os
from pathlib import Path

import jax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_default_matmul_precision", "highest")

_CACHE = os.environ.get(
    "AJAX_TEST_JAX_CACHE", str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax")
)
if _CACHE:
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _CACHE)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    jax.config.update(
        "jax_persistent_cache_min_compile_time_secs",
        float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]),
    )
