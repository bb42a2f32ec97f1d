"""What holds on every backend: the numba kernels refused off the CPU before anything is traced,
the same key giving the same bits, and one fit giving the same numbers on each available backend
(CPU and, where present, GPU or TPU) within float32 rounding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from inference.em import tempered_em
from inference.schedules import FixedBeta
from zoo.data import CoOccurrence
from zoo.dirichlet import SupervisedDP
from zoo.dyadic.aspect import Aspect
from zoo.dyadic.cluster_abstraction import ClusterAbstraction
from zoo.dyadic.one_sided import OneSided
from zoo.dyadic.two_sided import TwoSided
from zoo.relational.data import RelationalData
from zoo.relational.infinite import InfiniteRelational
from zoo.relational.latent_class import LatentClassRelational


def _counts(seed=0, shape=(30, 24)):
    rng = np.random.default_rng(seed)
    counts = rng.poisson(0.8, size=shape) * (rng.random(shape) < 0.5)
    counts[:, 0] += 1
    return CoOccurrence.from_dense(counts)


def _relational():
    matrix = np.array([[1, 1, 0], [1, np.nan, 0], [0, 0, 1], [1, 0, 1]], dtype=float)
    return RelationalData.from_adjacency(matrix, domains=("rows", "cols"))


def _points(seed=0):
    return np.random.default_rng(seed).normal(size=(12, 2))


FITS = {
    "aspect": lambda backend: tempered_em(Aspect(3, backend=backend), _counts(), key=jax.random.key(0),
                                          schedule=FixedBeta(1.0), max_iter=3),
    "one-sided": lambda backend: tempered_em(OneSided(3, backend=backend), _counts(), key=jax.random.key(0),
                                             schedule=FixedBeta(1.0), max_iter=3),
    "two-sided": lambda backend: tempered_em(TwoSided(2, 2, backend=backend), _counts(), key=jax.random.key(0),
                                             schedule=FixedBeta(1.0), max_iter=3),
    "cam": lambda backend: tempered_em(ClusterAbstraction(depth=1, backend=backend), _counts(),
                                       key=jax.random.key(0), schedule=FixedBeta(1.0), max_iter=3),
    "lrm": lambda backend: LatentClassRelational(2, backend=backend).fit(_relational(), key=jax.random.key(0),
                                                                        n_restarts=1, max_passes=2),
    "irm": lambda backend: InfiniteRelational(max_clusters=3, backend=backend).sample(
        _relational(), key=jax.random.key(0), n_chains=1, n_sweeps=2, n_warmup=0),
    "supervised": lambda backend: SupervisedDP(1, backend=backend).fit(
        _points(0)[:6], [0, 0, 0, 1, 1, 1], _points(1)[:6], key=jax.random.key(0), n_chains=1, n_sweeps=2,
        progress=False),
}


@pytest.mark.parametrize("name", sorted(FITS))
def test_every_model_refuses_numba_off_the_cpu_before_tracing(monkeypatch, name):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    with pytest.raises(ValueError, match="^backend: the numba kernels are CPU custom calls, but JAX runs on 'gpu'"):
        FITS[name]("numba")


def _aspect_fit(key=0):
    return tempered_em(Aspect(4, backend="xla"), _counts(seed=2, shape=(80, 60)), key=jax.random.key(key),
                       schedule=FixedBeta(1.0), max_iter=20, tol=0.0)


def test_same_key_same_bits_for_the_xla_e_step_on_this_backend():
    first, second = _aspect_fit(), _aspect_fit()
    for a, b in zip(jax.tree_util.tree_leaves(first.params), jax.tree_util.tree_leaves(second.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _backends():
    found = []
    for platform in ("cpu", "gpu", "tpu"):
        try:
            found.append(jax.devices(platform)[0])
        except RuntimeError:
            pass
    return found


@pytest.mark.skipif(len(_backends()) < 2, reason="one JAX backend on this machine: nothing to compare with")
def test_a_fit_gives_the_same_numbers_on_each_backend():
    fits = []
    for device in _backends():
        with jax.default_device(device):
            fits.append(_aspect_fit())
    reference = fits[0]
    for other in fits[1:]:
        for a, b in zip(jax.tree_util.tree_leaves(reference.params), jax.tree_util.tree_leaves(other.params)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-6)
        np.testing.assert_allclose(np.asarray(reference.history["log_lik"]), np.asarray(other.history["log_lik"]),
                                   rtol=1e-5)
