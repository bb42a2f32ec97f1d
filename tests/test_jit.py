"""inference.jit: the drivers' jit, with LLVM optimisation level 1 for CPU programs."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference.jit import CPU_COMPILER_OPTIONS, jit


def _program(x, n):
    """A scan and a reduction, the shape of the drivers' programs."""
    def step(carry, row):
        return carry * 0.5 + jnp.sin(row).sum(), carry
    total, history = jax.lax.scan(step, jnp.zeros((), x.dtype), x)
    return total + n, history


def test_jit_runs_the_program_jax_jit_compiles_and_uses_the_cpu_options_only_on_the_cpu(monkeypatch):
    # The suite sets an optimisation level in XLA_FLAGS (conftest.py), which the options would
    # override; read at each call, so taking it out here is enough.
    monkeypatch.setenv("XLA_FLAGS", "")
    x = jax.random.normal(jax.random.key(0), (50, 7))
    fast = partial(jit, static_argnames=("n",))(_program)
    total, history = fast(x, n=3)
    on_cpu = jax.default_backend() == "cpu"
    assert fast.on_cpu._cache_size() == int(on_cpu)  # (read before jax.jit below shares the plain one's cache)
    assert fast.elsewhere._cache_size() == int(not on_cpu)
    plain = jax.jit(_program, static_argnames=("n",))
    np.testing.assert_array_equal(np.asarray(total), np.asarray(plain(x, n=3)[0]))
    np.testing.assert_array_equal(np.asarray(history), np.asarray(plain(x, n=3)[1]))
    assert CPU_COMPILER_OPTIONS == {"xla_backend_optimization_level": 1}


def test_jit_called_inside_another_trace_leaves_the_options_to_the_caller():
    # JAX refuses compiler options on a nested jit: the call must not pass them there.
    double = jit(lambda x: 2.0 * x)
    x = jnp.arange(4.0)
    assert jax.jit(lambda y: double(y) + 1.0)(x).tolist() == [1.0, 3.0, 5.0, 7.0]
    assert jax.eval_shape(double, x).shape == (4,)
    assert jax.vmap(double)(x.reshape(2, 2)).tolist() == [[0.0, 2.0], [4.0, 6.0]]
    assert jax.grad(lambda y: double(y).sum())(x).tolist() == [2.0] * 4


def test_jit_refuses_compiler_options_of_its_own():
    with pytest.raises(TypeError, match="compiler_options"):
        jit(lambda x: x, compiler_options={"xla_backend_optimization_level": 3})


def test_a_level_in_xla_flags_wins(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    halve = jit(lambda x: x / 2.0)
    assert halve(jnp.arange(2.0)).tolist() == [0.0, 0.5]
    assert halve.on_cpu._cache_size() == 0 and halve.elsewhere._cache_size() == 1
