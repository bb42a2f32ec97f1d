"""Data-parallel EM and chains over devices on 8 host devices give the single-device results.

The 8-device checks run in one subprocess, because the device count is fixed when JAX starts.
Every EM model (aspect, ACM, SCM, CAM, generic EM on a NumPyro program with padded blocks, LRM
batch passes, and the numba aspect and CAM kernels on ~10^5 cells) is fitted with ``devices=None`` and
``devices=8`` from the same key and the
histories and parameters are compared; 8 Gibbs chains are run on one device and on 4 and
compared draw for draw. The default test covers each model once, the slow one every backend ×
schedule combination of the dyadic models.
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from inference.em import tempered_em
from zoo.data import CoOccurrence
from zoo.dyadic.aspect import Aspect

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    import jax, jax.numpy as jnp, numpy as np, numpyro, numpyro.distributions as dist
    jax.config.update("jax_enable_x64", True)
    from inference import neal
    from inference.chains import sample_chains, stack_states
    from inference.diagnostics import to_inference_data
    from inference.em import tempered_em
    from inference.enumerated import EnumeratedEM, ProgramData
    from inference.native import numba_available
    from inference.schedules import FixedBeta, TemperedEM
    from zoo.data import CoOccurrence
    from zoo.dirichlet.families import normal_gamma
    from zoo.dyadic.aspect import Aspect
    from zoo.dyadic.cluster_abstraction import ClusterAbstraction
    from zoo.dyadic.one_sided import OneSided
    from zoo.dyadic.two_sided import TwoSided
    from zoo.relational.data import RelationalData
    from zoo.relational.latent_class import LatentClassRelational

    assert len(jax.devices()) == 8
    full = sys.argv[1] == "full"
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.5, size=(60, 80))
    counts[7] = 0  # a row without counts
    data = CoOccurrence.from_dense(counts)
    train, valid = data.split_tokens([0.85, 0.15], rng=1)

    def compare(fits):
        return {
            "n_iter": [fit.n_iter for fit in fits],
            "log_lik": max(abs(a - b) / abs(a) for a, b in zip(*(f.history["log_lik"] for f in fits))),
            "kept": abs(fits[0].log_lik - fits[1].log_lik) / abs(fits[0].log_lik),  # of the kept parameters
            "valid": max(abs(a - b) if a == a else float(b == b) for a, b in
                         zip(*(f.history["valid_perplexity"] for f in fits))),  # NaN (no validation) on both
            "params": max(float(np.abs(np.asarray(a) - np.asarray(b)).max())
                          for a, b in zip(jax.tree_util.tree_leaves(fits[0].params),
                                          jax.tree_util.tree_leaves(fits[1].params))),
        }

    def fit_both(model, train, **options):
        return compare([tempered_em(model, train, key=jax.random.key(3), devices=devices, **options)
                        for devices in (None, 8)])

    # numba switched off (LATENTZOO_DISABLE_NUMBA, what a GPU runs): its cases run on XLA.
    here = lambda backend: backend if backend != "numba" or numba_available() else "xla"
    schedules = {"fixed": dict(schedule=FixedBeta(1.0)), "tempered": dict(schedule=TemperedEM(), valid=valid),
                 "beta": dict(schedule=FixedBeta(0.9), valid=valid)}
    dyadic = {
        "aspect": lambda backend: Aspect(4, backend=backend),
        "aspect-alternating": lambda backend: Aspect(4, backend=backend, update="alternating"),
        "acm-rows": lambda backend: OneSided(3, backend=backend),
        "acm-cols": lambda backend: OneSided(3, side="cols", backend=backend),
        "scm": lambda backend: TwoSided(3, 4, backend=backend),
        "cam": lambda backend: ClusterAbstraction(depth=2, backend=backend),
    }
    if full:
        cases = [(name, backend, schedule) for name in dyadic for backend in ("xla", "numba")
                 for schedule in ("fixed", "tempered")]
    else:
        cases = [("aspect", "xla", "beta"), ("acm-cols", "xla", "beta"), ("scm", "numba", "beta"),
                 ("cam", "numba", "beta")]
    report = {}
    for name, backend, schedule in cases:
        report[f"{name}-{backend}-{schedule}"] = fit_both(dyadic[name](here(backend)), train, n_restarts=2, max_iter=12,
                                                          tol=1e-10, **schedules[schedule])

    # Generic EM: 43 points with 3 repeats each in a nested plate (dim -2), 8 blocks of 6 (5 padded).
    def repeated_mixture(points, n_classes):
        weights = numpyro.param("weights", jnp.ones(n_classes) / n_classes, constraint=dist.constraints.simplex)
        locs = numpyro.param("locs", jnp.linspace(-1.0, 1.0, n_classes))
        with numpyro.plate("points", points.shape[0], dim=-2):
            c = numpyro.sample("c", dist.Categorical(weights), infer={"enumerate": "parallel"})
            with numpyro.plate("repeats", points.shape[1], dim=-1):
                numpyro.sample("x", dist.Normal(locs[c], 1.0), obs=points)

    # The numba E-step on 8 host devices at once, blocks of ~1.2e4 cells: as XLA custom calls the
    # kernels run concurrently (as jax.pure_callbacks they used to hang at this size).
    large = CoOccurrence.from_dense(rng.poisson(0.35, size=(400, 1000)))
    report["aspect-numba-large"] = fit_both(Aspect(4, backend=here("numba")), large, schedule=FixedBeta(1.0), max_iter=3,
                                            tol=0.0)
    report["cam-numba-large"] = fit_both(ClusterAbstraction(depth=2, backend=here("numba")), large,
                                         schedule=FixedBeta(1.0), max_iter=3, tol=0.0)

    centres = np.where(rng.random(43) < 0.5, -1.5, 1.5)
    points = ProgramData((centres[:, None] + rng.normal(size=(43, 3)),), 129.0)
    generic = EnumeratedEM(repeated_mixture, static_kwargs=(("n_classes", 2),), max_plate_nesting=2,
                           m_step_iters=10, data_plate="points")
    report["generic"] = fit_both(generic, points, schedule=FixedBeta(0.8), max_iter=4, tol=1e-10)

    # LRM batch passes: 30 people x 20 items, about 20% of the cells missing, cells in 8 blocks.
    matrix = (rng.random((30, 20)) < 0.3).astype(float)
    matrix[rng.random((30, 20)) < 0.2] = np.nan
    relational = RelationalData.from_adjacency(matrix, domains=("people", "items"))
    lrm = LatentClassRelational(2).bind(relational, update="batch")
    report["lrm"] = fit_both(lrm, relational, schedule=FixedBeta(0.9), valid=relational, n_restarts=2, max_iter=6,
                             tol=1e-10)

    # Chains over devices: 8 chains on 1 and on 4 devices; in the full run capacity 3 forces a growth.
    capacity = 3 if full else 6
    family = normal_gamma(1, kappa=0.2)
    observations = np.array([[-6.0], [-6.3], [0.1], [-0.2], [6.2], [5.9]])
    step = neal.build_kernel(family, "collapsed")
    states = stack_states([neal.init(jax.random.key(chain), observations, family, algorithm="collapsed",
                                     max_clusters=capacity, alpha=1.0) for chain in range(8)])
    runs = [sample_chains(jax.random.key(5), step, states, observations, n_warmup=4, n_draws=8, draws_per_call=4,
                          progress=False, devices=devices) for devices in (None, jax.devices()[4:])]
    report["chains"] = {
        "equal": [all(np.array_equal(runs[0].samples[key], run.samples[key]) for key in runs[0].samples)
                  for run in runs[1:]],
        "posterior_sizes": dict(to_inference_data(runs[1]).posterior.sizes),
        "grew": int(runs[1].final_state.max_clusters) > capacity,
    }
    print(json.dumps(report))
    """
)


def _run_script(mode: str) -> dict:
    environment = dict(os.environ, JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=environment,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check(report: dict, n_fits: int, *, grew: bool) -> None:
    chains = report.pop("chains")
    assert chains["equal"] == [True]
    assert chains["posterior_sizes"] == {"chain": 8, "draw": 8, "points": 6}
    assert chains["grew"] == grew  # in the full run the capacity grew on the sharded run too
    assert len(report) == n_fits
    for name, numbers in report.items():
        assert numbers["n_iter"][0] == numbers["n_iter"][1], name
        assert numbers["n_iter"][0] > 1, name
        assert numbers["log_lik"] < 1e-10, name
        assert numbers["kept"] < 1e-9, name  # one E-step more, of parameters equal within 1e-9
        assert numbers["valid"] < 1e-9, name
        assert numbers["params"] < 1e-9, name


def test_sharded_fits_and_chains_equal_single_device_ones():
    _check(_run_script("fast"), n_fits=8, grew=False)


@pytest.mark.slow
def test_sharded_fits_equal_single_device_fits_for_every_backend_and_schedule():
    _check(_run_script("full"), n_fits=28, grew=True)


def test_sharded_arrays_add_up_to_the_whole():
    rng = np.random.default_rng(2)
    data = CoOccurrence.from_dense(rng.poisson(0.8, size=(13, 9)))
    blocks = data.to_sharded_arrays(3)
    assert blocks.rows.shape[0] == 3 and blocks.indptr.shape == (3, 14)
    dense = np.zeros(data.shape)
    for rows, cols, counts in zip(*(np.asarray(leaf) for leaf in (blocks.rows, blocks.cols, blocks.counts))):
        np.add.at(dense, (rows, cols), counts)
    np.testing.assert_allclose(dense, data.to_dense())


def test_devices_argument_is_checked():
    data = CoOccurrence.from_dense([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="^devices"):
        tempered_em(Aspect(2), data, key=jax.random.key(0), devices=len(jax.devices()) + 1)
    with pytest.raises(ValueError, match="^n_shards"):
        data.to_sharded_arrays(0)


def _bipartite(seed: int = 0):
    from zoo.relational.data import RelationalData

    rng = np.random.default_rng(seed)
    matrix = (rng.random((12, 9)) < 0.4).astype(float)
    matrix[rng.random((12, 9)) < 0.2] = np.nan
    return RelationalData.from_adjacency(matrix, domains=("people", "items"))


def test_batch_pass_never_decreases_the_bound_between_two_domains(x64):
    from functools import partial

    import jax.numpy as jnp

    from zoo.relational.latent_class import (_blanket_message, _domain_scores, _init_params, _message_score,
                                             _safe_log, batch_pass, free_energy)

    data = _bipartite()
    arrays = data.to_arrays()
    schema = data.schema
    params = _init_params(jax.random.key(4), arrays, schema=schema, n_classes=(2, 3), prior_count=0.0)

    @partial(jax.jit, static_argnums=0)
    def scores_both_ways(domain, params):
        def blanket_score(individual):
            return sum(_message_score(_safe_log(params.relation_probs[relation]),
                                      _blanket_message(relation, position, individual, params.responsibilities,
                                                       arrays, schema), position, 2)
                       for relation, position in schema.incidences(domain))

        batch = _domain_scores(domain, params.responsibilities, params.relation_probs, arrays, schema)
        return batch, jax.vmap(blanket_score)(jnp.arange(schema.domain_sizes[domain]))

    # The batch scores equal the incremental pass's blanket messages (CP eq. 4), individual by individual.
    for domain in range(len(schema.domain_sizes)):
        batch, incremental = scores_both_ways(domain, params)
        np.testing.assert_allclose(batch, incremental, rtol=1e-12)
    one_pass = jax.jit(partial(batch_pass, schema=schema, prior_count=0.0))
    bound = jax.jit(lambda params: free_energy(params, arrays, schema).bound)
    bounds = [float(bound(params))]
    for _ in range(10):
        params, info = one_pass(params, arrays, 1.0)
        bounds.append(float(info.bound))
        np.testing.assert_allclose(info.bound, bound(params), rtol=1e-12)
    assert np.all(np.diff(bounds) >= -1e-9 * np.abs(bounds[1:]))
    assert bounds[-1] > bounds[0]


def test_what_cannot_be_split_over_devices_is_refused():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from inference import neal
    from inference.chains import sample_chains, stack_states
    from inference.enumerated import EnumeratedEM, ProgramData
    from zoo.dirichlet.families import normal_gamma
    from zoo.relational.latent_class import LatentClassRelational

    data = _bipartite()
    with pytest.raises(ValueError, match="^devices"):
        LatentClassRelational(2).bind(data).prepare_sharded(data, 2)
    with pytest.raises(ValueError, match="^update"):
        LatentClassRelational(2).bind(data, update="parallel")

    def mixture(x, n_classes=2):
        weights = numpyro.param("weights", jnp.ones(n_classes) / n_classes, constraint=dist.constraints.simplex)
        locs = numpyro.param("locs", jnp.linspace(-1.0, 1.0, n_classes))
        with numpyro.plate("points", x.shape[0]):
            c = numpyro.sample("c", dist.Categorical(weights), infer={"enumerate": "parallel"})
            numpyro.sample("x", dist.Normal(locs[c], 1.0), obs=x)

    def shared_latent(x):
        weights = numpyro.param("weights", jnp.ones(2) / 2, constraint=dist.constraints.simplex)
        c = numpyro.sample("c", dist.Categorical(weights), infer={"enumerate": "parallel"})
        with numpyro.plate("points", x.shape[0]):
            numpyro.sample("x", dist.Normal(2.0 * c - 1.0, 1.0), obs=x)

    def per_point_param(x):
        shift = numpyro.param("shift", jnp.zeros(x.shape[0]))
        with numpyro.plate("points", x.shape[0]):
            numpyro.sample("x", dist.Normal(shift, 1.0), obs=x)

    points = ProgramData((np.linspace(-2.0, 2.0, 10), np.zeros(3)), 10.0)
    with pytest.raises(ValueError, match="^data_plate: name"):
        EnumeratedEM(mixture).prepare_sharded(points, 2)
    with pytest.raises(ValueError, match="^data_plate: sample site 'c' lies outside"):
        EnumeratedEM(shared_latent, data_plate="points").prepare_sharded(ProgramData(points.args[:1], 10.0), 2)
    with pytest.raises(ValueError, match="^data_plate: param site 'shift'"):
        EnumeratedEM(per_point_param, data_plate="points").prepare_sharded(ProgramData(points.args[:1], 10.0), 2)
    with pytest.raises(ValueError, match="^data_args: argument 1"):
        EnumeratedEM(lambda x, unused: mixture(x), data_plate="points").prepare_sharded(points, 2)
    with pytest.raises(ValueError, match="^data_args"):
        EnumeratedEM(mixture, data_plate="points", data_args=(5,)).prepare_sharded(ProgramData(points.args[:1], 10.0), 2)

    family = normal_gamma(1, kappa=0.2)
    observations = np.array([[-1.0], [1.0]], np.float32)
    states = stack_states([neal.init(jax.random.key(chain), observations, family, algorithm="collapsed",
                                     max_clusters=2, alpha=1.0) for chain in range(2)])
    step = neal.build_kernel(family, "collapsed")
    with pytest.raises(ValueError, match="^devices"):
        sample_chains(jax.random.key(0), step, states, observations, devices=len(jax.devices()) + 1, progress=False)
    with pytest.raises(TypeError, match="^devices"):
        sample_chains(jax.random.key(0), step, states, observations, devices="cpu", progress=False)
