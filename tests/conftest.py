"""Shared fixtures: float64 on demand, and small CPU-friendly settings.

``LATENTZOO_X64=1 python -m pytest`` runs the whole suite with float64 as JAX's default.
"""

import os

import jax
import pytest

if os.environ.get("LATENTZOO_X64", "") not in ("", "0"):
    jax.config.update("jax_enable_x64", True)


@pytest.fixture
def x64():
    """Run one test with float64 enabled, restoring the previous setting afterwards."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)
