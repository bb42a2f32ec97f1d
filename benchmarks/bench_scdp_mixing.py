"""What SCDP-1's chains give per second on a small real dataset, with and without pair moves.

scikit-learn's wine, 13 features standardised: classes 0 and 1 are the training publications,
the 48 wines of class 2 the test references. For each key, ``SupervisedDP(1)`` with its defaults
and with ``pair_moves=False`` (4 chains from dispersed starts, half of the sweeps warm-up), both
in this process: bulk ESS and R-hat (Vehtari et al. 2021) of the number of test publications K
and of the log joint, ESS per second of K, and the seconds of the fit (compilation excluded: a
short fit of the same settings runs first).

Without pair moves a pair of test wines (one another's nearest neighbours) that is either a
publication of its own with the common, tight type or part of a large publication with a type
of large variances changes between the two only through a state where one of them has left:
that pair sets K's ESS (see ``zoo.dirichlet.supervised.kernel.build_kernel``).

Usage::

    python benchmarks/bench_scdp_mixing.py [--sweeps 2000] [--keys 0 1]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import arviz as az
import jax
import numpy as np
from sklearn.datasets import load_wine

from zoo.dirichlet.supervised import SupervisedDP


def wine_protocol():
    """Standardised wine: (training features, their classes, test features)."""
    features, classes = load_wine(return_X_y=True)
    features = (features - features.mean(axis=0)) / features.std(axis=0)
    return features[classes < 2], classes[classes < 2], features[classes == 2]


def fit_once(model: SupervisedDP, data, key: int, n_sweeps: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the MixingWarning of the chains without pair moves: measured below
        start = time.perf_counter()
        fit = model.fit(*data, key=jax.random.key(key), n_sweeps=n_sweeps, progress=False)
        return fit, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=2000, help="sweeps per chain, half of them warm-up")
    parser.add_argument("--keys", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args(argv)
    data = wine_protocol()
    print(f"wine: {len(data[1])} training and {len(data[2])} test references, {data[0].shape[1]} features; "
          f"SCDP-1, 4 chains x {args.sweeps} sweeps; {jax.devices()[0].platform}")
    ess_per_second: dict[bool, list[float]] = {True: [], False: []}
    for pair_moves in (False, True):
        model = SupervisedDP(1, pair_moves=pair_moves)
        fit_once(model, data, 0, 20)  # compile
        for key in args.keys:
            fit, seconds = fit_once(model, data, key, args.sweeps)
            samples = fit.result.samples
            k, log_joint = np.asarray(samples["n_clusters"]), np.asarray(samples["log_joint"])
            ess_k = float(az.ess(k, method="bulk"))
            ess_per_second[pair_moves].append(ess_k / seconds)
            print(f"pair moves {'on ' if pair_moves else 'off'} key {key}: {seconds:5.1f} s, K: bulk ESS {ess_k:6.0f} "
                  f"({ess_k / seconds:5.1f}/s), R-hat {float(az.rhat(k)):.3f}, mean {k.mean():.2f}; log joint: "
                  f"bulk ESS {float(az.ess(log_joint, method='bulk')):6.0f}, R-hat {float(az.rhat(log_joint)):.3f}",
                  flush=True)
    ratio = float(np.mean(ess_per_second[True]) / np.mean(ess_per_second[False]))
    print("SUMMARY " + json.dumps({"figure": "SCDP-1 on wine: ESS(K) per second, pair moves on / off",
                                   "value": round(ratio, 2), "target": "> 1"}), flush=True)


if __name__ == "__main__":
    main()
