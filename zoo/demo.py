"""The zoo's first demo: the aspect model on Reuters by tempered EM, held-out perplexity per β.

Run with ``python -m zoo demo`` (or just ``python -m zoo``). Reproduces the shape of H99 §5:
standard EM (β = 1) overfits, tempered EM chooses β on validation tokens and generalises better.
"""

from __future__ import annotations

import time

import jax
import numpy as np

__all__ = ["perplexity_per_beta", "run_demo"]


def perplexity_per_beta(history: dict[str, np.ndarray]) -> list[tuple[float, int, float]]:
    """Summarise a tempered-EM history as (β, iterations at β, best validation perplexity at β)."""
    rows = []
    betas = history["beta"]
    for beta in sorted(set(betas.tolist()), reverse=True):
        at_beta = betas == beta
        rows.append((beta, int(at_beta.sum()), float(np.nanmin(history["valid_perplexity"][at_beta]))))
    return rows


def run_demo(n_classes: int = 32, seed: int = 0, n_restarts: int = 2) -> dict[str, float]:
    """Fit the aspect model on Reuters with β = 1 and with tempered EM; print perplexities.

    Returns
    -------
    dict with the test perplexities of both fits and the chosen β.
    """
    from inference.em import tempered_em
    from inference.schedules import FixedBeta, TemperedEM
    from zoo.datasets import load_reuters
    from zoo.dyadic.aspect import Aspect

    start = time.perf_counter()
    data = load_reuters()
    train, valid, test = data.split_tokens([0.8, 0.1, 0.1], rng=seed)
    print(f"Reuters {data.shape[0]} stories x {data.shape[1]} words, {data.total:.0f} tokens; "
          f"train/valid/test = 80/10/10% of tokens")
    model = Aspect(n_classes)
    key_plain, key_tempered = jax.random.split(jax.random.key(seed))
    plain = tempered_em(model, train, key=key_plain, valid=valid, schedule=FixedBeta(1.0),
                        n_restarts=n_restarts, max_iter=300, tol=1e-6)
    tempered = tempered_em(model, train, key=key_tempered, valid=valid, schedule=TemperedEM(eta=0.9),
                           n_restarts=n_restarts, max_iter=400)
    print(f"\nAspect model, K = {n_classes}: held-out (validation) perplexity per β")
    print(f"{'beta':>8} {'iterations':>10} {'best valid perplexity':>22}")
    for beta, n_iter, best in perplexity_per_beta(tempered.history):
        print(f"{beta:8.3f} {n_iter:10d} {best:22.1f}")
    plain_final = plain.history["valid_perplexity"][-1]
    print(f"\nβ = 1 EM: valid perplexity {plain.history['valid_perplexity'].min():.1f} at its best "
          f"iteration, {plain_final:.1f} after {plain.n_iter} iterations (overfitting)")
    results = {
        "test_perplexity_beta_1_early_stopped": plain.perplexity(test),
        "test_perplexity_tempered": tempered.perplexity(test),
        "chosen_beta": tempered.beta,
    }
    print(f"β = 1 EM stopped early on validation: test perplexity "
          f"{results['test_perplexity_beta_1_early_stopped']:.1f}")
    print(f"Tempered EM chose β = {tempered.beta:.3f}: test perplexity {results['test_perplexity_tempered']:.1f}")
    print(f"(done in {time.perf_counter() - start:.1f} s)")
    return results
