"""Starts from the data: k-means of objects' profiles, for the models whose random starts miss plain groups.

:func:`kmeans_labels` clusters points by k-means++ seeding (Arthur & Vassilvitskii 2007) followed
by Lloyd iterations, in JAX (jittable and ``vmap``-pable over restarts); :func:`sketched_profiles`
gives every row (or column) of a sparse matrix of counts a short profile, its normalised counts
times a random Gaussian matrix, so that rows of alike distributions over the columns get nearby
profiles without a dense matrix. The latent-class relational model
(:mod:`zoo.relational._latent_class_fit`) and the two-sided clustering model
(:class:`zoo.dyadic.two_sided.TwoSided`) seed their EM from them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["kmeans_labels", "best_kmeans_labels", "sketched_profiles", "smoothed_start", "SKETCH_COLUMNS",
           "LLOYD_ITERATIONS", "SMOOTHING"]

#: Columns of the random sketch of an object's cells (:func:`sketched_profiles`; the LRM's own sketch).
SKETCH_COLUMNS = 32
#: Lloyd iterations after the k-means++ seeding of a seeded start.
LLOYD_ITERATIONS = 10
#: Probability spread evenly over the classes of a seeded start (the rest on its k-means cluster).
SMOOTHING = 0.1


def kmeans_labels(key: Any, points: Any, n_clusters: int, n_iterations: int) -> Any:
    """The k-means cluster (0 .. ``n_clusters`` - 1) of every row of ``points``, shape (n_points,).

    Seeds by k-means++ (the first centre uniformly, each next one with probability proportional
    to the squared distance to the nearest centre so far; uniformly when every point sits on a
    centre), then ``n_iterations`` Lloyd iterations; a cluster left without points keeps its
    centre. A cluster can end empty only when points coincide.
    """
    key_first, key_rest = jax.random.split(key)
    size = points.shape[0]
    centres = points[jax.random.randint(key_first, (), 0, size)][None, :]
    distance = jnp.sum((points - centres[0]) ** 2, axis=1)
    for key_centre in jax.random.split(key_rest, n_clusters - 1):
        weights = jnp.where(distance.sum() > 0, distance, 1.0)  # all alike: uniformly
        chosen = jax.random.categorical(key_centre, jnp.log(weights / weights.sum()))
        centres = jnp.concatenate([centres, points[chosen][None, :]])
        distance = jnp.minimum(distance, jnp.sum((points - points[chosen]) ** 2, axis=1))

    def lloyd(_, centres):
        labels = jnp.argmin(jnp.sum((points[:, None, :] - centres[None]) ** 2, axis=2), axis=1)
        onehot = jax.nn.one_hot(labels, n_clusters, dtype=points.dtype)
        sizes = onehot.sum(axis=0)
        means = onehot.T @ points / jnp.maximum(sizes, 1.0)[:, None]
        return jnp.where(sizes[:, None] > 0, means, centres)  # an emptied cluster keeps its centre

    centres = jax.lax.fori_loop(0, n_iterations, lloyd, centres)
    return jnp.argmin(jnp.sum((points[:, None, :] - centres[None]) ** 2, axis=2), axis=1)


def best_kmeans_labels(key: Any, points: Any, n_clusters: int, n_iterations: int, n_init: int) -> Any:
    """:func:`kmeans_labels` from ``n_init`` seedings (``vmap``-ped), the one of least within-cluster
    sum of squares kept, as scikit-learn's ``KMeans(n_init=...)`` does."""
    labels = jax.vmap(lambda one: kmeans_labels(one, points, n_clusters, n_iterations))(jax.random.split(key, n_init))

    def inertia(assigned: Any) -> Any:
        onehot = jax.nn.one_hot(assigned, n_clusters, dtype=points.dtype)
        means = onehot.T @ points / jnp.maximum(onehot.sum(axis=0), 1.0)[:, None]
        return jnp.sum((points - means[assigned]) ** 2)

    return labels[jnp.argmin(jax.vmap(inertia)(labels))]


def smoothed_start(labels: Any, n_classes: int, dtype: Any) -> Any:
    """(n_objects, n_classes) class probabilities of a seeded start: 1 - :data:`SMOOTHING` on each
    object's k-means cluster, the rest spread evenly, so that no class starts empty."""
    onehot = jax.nn.one_hot(labels, n_classes, dtype=dtype)
    return (1.0 - SMOOTHING) * onehot + SMOOTHING / n_classes


def sketched_profiles(key: Any, objects: Any, partners: Any, counts: Any, n_objects: int, n_partners: int,
                      n_columns: int) -> Any:
    """(n_objects, n_columns): each object's distribution over its partners, times a random Gaussian matrix.

    ``objects``, ``partners`` and ``counts`` list the cells of a sparse matrix (e.g. rows, columns
    and counts of co-occurrences; padding cells of count 0 change nothing). The profile of object
    i is Σ_k (n_ik / n_i) G_k with G (n_partners × n_columns) of independent N(0, 1/n_columns)
    entries, a Johnson–Lindenstrauss sketch of the row of P(partner | i); objects without counts
    get 0.
    """
    dtype = counts.dtype
    sketch = jax.random.normal(key, (n_partners, n_columns), dtype) / np.sqrt(n_columns)
    totals = jax.ops.segment_sum(counts, objects, num_segments=n_objects)
    weights = counts / jnp.maximum(totals[objects], jnp.finfo(dtype).tiny)
    return jax.ops.segment_sum(weights[:, None] * sketch[partners], objects, num_segments=n_objects)
