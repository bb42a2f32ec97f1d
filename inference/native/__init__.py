"""Native (numba) kernels on the CPU, and the one function that chooses a backend.

Every hot loop of the library has an XLA version, which runs on every JAX backend and is the
reference. Where a loop is much faster as compiled code on the CPU it also has a numba twin, and
all of those twins live in this package, one module per family of kernels; this is the only
package that imports numba (an import-linter contract in ``pyproject.toml`` checks it).

* :mod:`.backend` — :func:`resolve_backend`: ``"auto"`` is numba on the CPU when numba is
  available, else XLA; ``"numba"`` off the CPU is a ``ValueError`` before anything is traced.
  Every model and kernel that takes ``backend=`` passes it through this function.
* :mod:`.ffi` — the machinery that runs a numba kernel as an XLA custom call on XLA's own buffers
  (``jax.ffi``): call frames, buffers, batched (``vmap``) calls, registration.
* :mod:`.precompile` — compiles every kernel into numba's disk cache ahead of time
  (``python -m inference.native.precompile``), so that the first fits of a fresh install, or
  the processes of a parallel test run, do not each compile them.
* one module per kernel family, each naming in its docstring the XLA function it must equal and
  the test that checks them equal:

  * :mod:`.sparse_cells` — the sparse E-steps of the dyadic models; twins: the ``_xla_*`` paths of
    :mod:`inference.sparse`; tests: tests/test_sparse.py, tests/test_one_sided.py,
    tests/test_cluster_abstraction.py;
  * :mod:`.neal_sweeps` — Neal's Algorithms 2 and 8; twins: ``inference.neal._sweeps``'s
    ``_fresh_candidate_sweep`` and ``_reuse_sweep``; test: tests/test_neal.py;
  * :mod:`.collapsed_sweep` — Neal's Algorithm 3 for the families that declare a
    ``native_predictive`` (the Gaussian ones); twin: ``inference.neal._sweeps._collapsed_sweep``;
    test: tests/test_neal.py;
  * :mod:`.dp_moves` — the DP mixture's split–merge moves for the same families; twin:
    ``inference.split_merge.split_merge_moves``; test: tests/test_split_merge.py;
  * :mod:`.supervised_sweep` — the supervised DP's assignment sweep; twin:
    ``zoo.dirichlet.supervised.sweep_xla._xla_sweep``; test: tests/test_supervised.py;
  * :mod:`.supervised_moves` — the supervised DP's split–merge moves of the test partition; twin:
    ``zoo.dirichlet.supervised.split_merge._split_merge_moves``; test: tests/test_supervised.py;
  * :mod:`.relational_em` — the latent-class relational model's incremental-EM pass; twin:
    ``zoo.relational._latent_class_passes._domain_pass``; test: tests/test_latent_class.py;
  * :mod:`.relational_gibbs` — the infinite relational model's Gibbs visits; twin:
    ``zoo.relational._infinite_kernel._gibbs_domain``; test: tests/test_infinite.py;
  * :mod:`.relational_moves` — its split–merge moves; twin:
    ``zoo.relational._infinite_moves.split_merge_moves``; test: tests/test_infinite.py.

A kernel module is pure array code: it never imports ``zoo`` (the model packs its state into
arrays, next to its XLA twin, and calls the module's ``numba_*`` function). The kernels
run as XLA custom calls (:mod:`.ffi`): XLA calls them on its own buffers, no Python runs during a
fit, several devices can call them at once, and a program that calls them can be kept in JAX's
persistent compilation cache (one with a ``jax.pure_callback`` cannot). Every module imports numba
when it is imported, which its model does only once a backend has resolved to numba. Kernels are
module-level functions: numba's disk cache does not keep closures made by a factory.

To add a native twin: write the XLA version first; put the numba kernel, its custom-call
handlers (listed by target name in the module's ``HANDLERS``, where :mod:`.precompile` finds
them) and a ``numba_*`` function taking the XLA version's arrays in a module
here; choose between them with ``resolve_backend``; add a test that runs both from the same key
and asserts the same result; name both in the module's docstring (tests/test_native.py checks
that they exist).
"""

from inference.native.backend import BACKENDS, available_backends, numba_available, numba_threads, resolve_backend

__all__ = ["BACKENDS", "resolve_backend", "available_backends", "numba_available", "numba_threads", "KERNEL_MODULES"]

#: The kernel families, one module each (imported on demand: each imports numba).
KERNEL_MODULES = (
    "inference.native.sparse_cells",
    "inference.native.neal_sweeps",
    "inference.native.collapsed_sweep",
    "inference.native.dp_moves",
    "inference.native.supervised_sweep",
    "inference.native.supervised_moves",
    "inference.native.relational_em",
    "inference.native.relational_gibbs",
    "inference.native.relational_moves",
)
