"""Starts from the data (inference.seeding): k-means++ and Lloyd, sketched profiles of sparse counts."""
import jax
import jax.numpy as jnp
import numpy as np
from sklearn.metrics import adjusted_rand_score

from inference.seeding import best_kmeans_labels, kmeans_labels, sketched_profiles


def test_kmeans_finds_separated_groups_and_the_best_of_several_runs_has_least_inertia():
    rng = np.random.default_rng(0)
    truth = np.repeat(np.arange(5), 30)
    centres = 20.0 * np.eye(5)[:, :4]  # far apart: 20 between any two, noise of sd 1
    points = jnp.asarray(centres[truth] + rng.normal(size=(150, 4)))
    labels = best_kmeans_labels(jax.random.key(0), points, 5, 10, 8)
    assert adjusted_rand_score(truth, np.asarray(labels)) == 1.0

    def inertia(assigned):
        assigned = np.asarray(assigned)
        return sum(((np.asarray(points)[assigned == c] - np.asarray(points)[assigned == c].mean(0)) ** 2).sum()
                   for c in np.unique(assigned))

    singles = [inertia(kmeans_labels(key, points, 5, 10)) for key in jax.random.split(jax.random.key(0), 8)]
    np.testing.assert_allclose(inertia(labels), min(singles), rtol=1e-5)
    same = kmeans_labels(jax.random.key(1), jnp.zeros((6, 2)), 3, 5)  # points that coincide: no NaN
    assert set(np.asarray(same).tolist()) <= {0, 1, 2}


def test_sketched_profiles_are_normalised_rows_times_the_sketch():
    counts = np.array([[2.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.0, 5.0, 0.0]])
    rows, cols = np.nonzero(counts)
    profiles = sketched_profiles(jax.random.key(0), jnp.asarray(rows), jnp.asarray(cols),
                                 jnp.asarray(counts[rows, cols]), 3, 3, 16)
    sketch = jax.random.normal(jax.random.key(0), (3, 16)) / 4.0
    expected = (counts / np.maximum(counts.sum(1, keepdims=True), 1.0)) @ np.asarray(sketch)
    np.testing.assert_allclose(np.asarray(profiles), expected, rtol=1e-5, atol=1e-7)
    assert not np.asarray(profiles)[1].any()  # a row without counts: the zero profile
