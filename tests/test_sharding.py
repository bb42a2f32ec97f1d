"""Data-parallel EM on 8 host devices gives the single-device iterates (run in a subprocess,
because the device count is fixed when JAX starts)."""

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
    import json, os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    from inference.em import tempered_em
    from inference.schedules import FixedBeta, TemperedEM
    from zoo.data import CoOccurrence
    from zoo.dyadic.aspect import Aspect

    assert len(jax.devices()) == 8
    rng = np.random.default_rng(0)
    data = CoOccurrence.from_dense(rng.poisson(0.5, size=(60, 80)))
    train, valid = data.split_tokens([0.85, 0.15], rng=1)
    report = {}
    for backend in ("xla", "numba"):
        for update in ("simultaneous", "alternating"):
            model = Aspect(4, backend=backend, update=update)
            for name, schedule, validation in (("fixed", FixedBeta(1.0), None), ("tempered", TemperedEM(), valid)):
                fits = [tempered_em(model, train, key=jax.random.key(3), valid=validation, schedule=schedule,
                                    n_restarts=2, max_iter=40, tol=0.0, devices=devices)
                        for devices in (None, 8)]
                report[f"{backend}-{update}-{name}"] = {
                    "n_iter": [fit.n_iter for fit in fits],
                    "log_lik": max(abs(a - b) / abs(a) for a, b in zip(*(f.history["log_lik"] for f in fits))),
                    "params": max(float(np.abs(np.asarray(a) - np.asarray(b)).max())
                                  for a, b in zip(fits[0].params, fits[1].params)),
                }
    print(json.dumps(report))
    """
)


def test_sharded_fit_equals_single_device_fit():
    environment = dict(os.environ, JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(report) == 8
    for name, numbers in report.items():
        assert numbers["n_iter"][0] == numbers["n_iter"][1], name
        assert numbers["log_lik"] < 1e-10, name
        assert numbers["params"] < 1e-10, name


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
