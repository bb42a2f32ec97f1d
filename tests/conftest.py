"""Shared fixtures: float64 on demand, and small CPU-friendly settings."""

import jax
import pytest


@pytest.fixture
def x64():
    """Run one test with float64 enabled, restoring the previous setting afterwards."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)
