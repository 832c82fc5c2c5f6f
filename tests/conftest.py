"""Shared test configuration: float32, CPU, highest matmul precision for parity tests."""

import jax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_default_matmul_precision", "highest")
