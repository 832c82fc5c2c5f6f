"""``jit_once``: compile a program a test runs once (a parity step, a fixture's update) with
XLA:CPU's cheapest settings, since its compile is nearly all of the test's time.

A parity test runs one train step or one plan and compares it with recorded numbers, so the
speed of the machine code does not matter and its compile does: XLA:CPU spends most of a big
program's compile in LLVM and in its fusion emitters. This process's ``XLA_FLAGS`` (LLVM -O1,
tests/conftest.py) stay as they are for every other program; these options reach only the
programs compiled here: LLVM -O0 and the classic loop emitter instead of the fusion emitters.
Measured 2026-12-07 side by side (one process, cold cache, 2 cores loaded by another job):
the four parity files (DreamerV3, TD-MPC2, its pixel and multi-task parity) took 249 s with
the process's flags, 170 s with these options, and 125 s with shapes-only templates as well;
every parity test keeps its own tolerance and passes. ``AJAX_TEST_XLA_OPT=`` (the default level, ``make test-slow``) compiles these
programs with the process's flags too.
"""

from __future__ import annotations

import os

import jax

ONE_SHOT_OPTIONS = (
    {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
    if os.environ.get("AJAX_TEST_XLA_OPT", "1")
    else {}
)


def jit_once(fn):
    """``fn`` jitted, compiled at each call for that call's arguments with
    :data:`ONE_SHOT_OPTIONS` (a program run once per test: no executable is kept)."""
    jitted = jax.jit(fn)

    def call(*args):
        if not ONE_SHOT_OPTIONS:
            return jitted(*args)
        return jitted.lower(*args).compile(compiler_options=ONE_SHOT_OPTIONS)(*args)

    return call
