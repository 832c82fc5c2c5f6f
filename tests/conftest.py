"""Shared test configuration: float32, CPU, highest matmul precision for parity tests, LLVM -O1
for XLA's CPU code, and a persistent XLA compilation cache.

LLVM -O1 (``--xla_backend_optimization_level=1`` in ``XLA_FLAGS``): on two CPU cores compiling
is most of the suite's time, and XLA's CPU backend spends most of a compile in LLVM's -O2
pipeline. -O1 compiles the same optimised HLO (checked: TD-MPC2's size-1 update, identical
text) into machine code with fewer LLVM passes (measured 2026-12-06, one core: a tiny TD-MPC2
run's program 87.6 s -> 35.7 s; the size-1 update and plan run as fast, 182 / 142 ms against
188 / 154; benchmarks/compile_speed.py). Float results can move by rounding, and training
carries that along (tiny runs of 100-300 steps, 2 seeds, every state leaf: SAC bitwise equal;
PPO 32 of 62 leaves by up to 6e-8; TD-MPC2 2 of 205 by up to 1e-6; DreamerV3 235 of 315 by
up to 7e-4 on values near 1.6), so no test compares an -O1 number with a stored -O2 one
bitwise; every bitwise test compares two runs made with this process's flags.
With it, XLA's CPU fusion emitters are off (``--xla_cpu_use_fusion_emitters=false``: the
classic loop emitter, which compiles faster; measured 2026-12-07 on an idle 2-core machine,
one process each, cold cache: `pytest tests/agents/test_model_free_learning.py -k
"ppo_solves_cartpole or solves_pendulum"` 75.8 s with them, 60.8 s without, all three
passing). Programs a test runs once (parity steps) compile at -O0 as well (tests/one_shot.py).
``AJAX_TEST_XLA_OPT`` sets another level (empty string: XLA's default); the whole suite also
passes at the default (the 2026-12-06 baseline run). The flag reaches the tests'
subprocesses through the environment; helpers that set ``XLA_FLAGS`` keep it.
``make test-slow`` runs at XLA's default level (``AJAX_TEST_XLA_OPT=``): its learning tests
check thresholds that users' runs, at the default level, must clear, and two sat close enough
to flip at -O1 (2026-12-06: PPO on Pendulum -250.13 against a -250 bar, AVG -303.4 against
-250; both pass at the default level).

The cache: many tests compile the same programs (a run, then its resume; the CLI's train then
eval; every integrity test's tiny SAC), and on two CPU cores compiling is most of their time
(measured: a tiny SAC run 19.9 s cold, 12.3 s from the cache). Entries are keyed by the
program, jax version and flags, so a hit is the executable a fresh compile would build.
``AJAX_TEST_JAX_CACHE`` moves it (empty string: off); the environment variables reach the
tests' subprocesses too.
"""

import os
from pathlib import Path

_OPT = os.environ.get("AJAX_TEST_XLA_OPT", "1")
if _OPT and "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    # before JAX starts its CPU backend, which reads XLA_FLAGS once
    flags = os.environ.get("XLA_FLAGS", "") + f" --xla_backend_optimization_level={_OPT}"
    if "--xla_cpu_use_fusion_emitters" not in flags:
        flags += " --xla_cpu_use_fusion_emitters=false"
    os.environ["XLA_FLAGS"] = flags.strip()

import jax  # noqa: E402

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
