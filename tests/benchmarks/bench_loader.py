"""Loads a script of benchmarks/ as a module, for the harness tests (pytest puts this folder on
sys.path, so ``from bench_loader import load_benchmark``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).parents[2] / "benchmarks"


def load_benchmark(name: str):
    """``benchmarks/<name>.py`` as a module; its imports of sibling scripts resolve by name."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module
