"""Distances instead of coordinates (DM05 §7.2, footnote 5).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inference._validation import as_float_array, check_int

__all__ = ["embed_distances"]


def _check_distances(name: str, value: Any) -> np.ndarray:
    array = as_float_array(name, value, ndim=(2, 3))
    if array.ndim == 2:
        array = array[None]
    if array.shape[1] != array.shape[2]:
        raise ValueError(f"{name}: each distance matrix must be square, got shape {array.shape[1:]}")
    if (array < 0).any():
        raise ValueError(f"{name}: distances must be >= 0, got minimum {array.min()}")
    if not np.allclose(array, np.swapaxes(array, 1, 2), rtol=1e-10, atol=1e-10):
        raise ValueError(f"{name}: distance matrices must be symmetric")
    if np.abs(np.diagonal(array, axis1=1, axis2=2)).max() > 1e-10:
        raise ValueError(f"{name}: distance matrices must have a zero diagonal")
    return array


def embed_distances(distances: Any, *, max_dims_per_feature: int = 1) -> np.ndarray:
    """Coordinates computed from pairwise distances only, one block per distance feature.

    For each feature f with distances D_f (N × N), the inner products of the centred points
    follow from the distances alone, G = -½ J D_f² J with J = I - 11ᵀ/N (the identity behind
    DM05 footnote 5: ||mean(A) - mean(B)||² is a combination of pairwise distances). The leading
    ``max_dims_per_feature`` eigenvectors of G with positive eigenvalues, scaled by √λ, are the
    coordinates. When D_f holds the distances |x_if - x_jf| of a centred feature this returns x_f
    up to sign, which leaves the SCDP posterior unchanged (G0^p and the precisions are symmetric
    under x_f → -x_f), so coordinates and distances give the same partition posterior.

    Only the dimensions with a non-negligible eigenvalue are kept: an eigenvalue at or below
    N · eps · λ_max (eps the machine epsilon of the distances' float type, λ_max the largest
    eigenvalue of that feature's G; the tolerance ``numpy.linalg.matrix_rank`` uses) is rounding
    noise, not a direction the distances span. So a scalar feature compared by absolute difference gives one
    column even with ``max_dims_per_feature=2`` (its second eigenvalue is ~1e-16, a column of
    standard deviation ~1e-8 that would otherwise reach the prior as a feature), a non-Euclidean
    distance gives only its positive directions, and a feature whose distances are all zero
    gives none.

    Parameters
    ----------
    distances : array_like (F, N, N) or (N, N)
        Non-negative, symmetric distance matrices with zero diagonals (e.g. string edit distances
        between records, one matrix per field).
    max_dims_per_feature : int
        Coordinates kept per distance feature (1 for a scalar feature).

    Returns
    -------
    np.ndarray (N, D) with D <= F * max_dims_per_feature
        Coordinates, feature by feature, each feature's columns in decreasing order of eigenvalue:
        at most ``max_dims_per_feature`` per feature, fewer where the eigenvalues beyond are
        negligible or negative (a non-Euclidean distance keeps only its positive part).

    Raises
    ------
    ValueError
        If a matrix is not square, has a negative entry, is not symmetric or has a non-zero
        diagonal, or if every distance is zero up to rounding, which leaves no coordinate (the
        message names ``distances``).
    """
    array = _check_distances("distances", distances)
    max_dims = check_int("max_dims_per_feature", max_dims_per_feature, minimum=1)
    n_points = array.shape[1]
    centring = np.eye(n_points) - 1.0 / n_points
    blocks = []
    for matrix in array:
        gram = -0.5 * centring @ (matrix * matrix) @ centring
        eigenvalues, eigenvectors = np.linalg.eigh(gram)
        order = np.argsort(eigenvalues)[::-1][:max_dims]
        tolerance = n_points * np.finfo(gram.dtype).eps * max(eigenvalues[order[0]], 0.0)
        kept = order[eigenvalues[order] > tolerance]
        blocks.append(eigenvectors[:, kept] * np.sqrt(eigenvalues[kept]))
    coordinates = np.concatenate(blocks, axis=1)
    if coordinates.shape[1] == 0:
        raise ValueError(
            f"distances: every distance is zero (up to rounding) in all {array.shape[0]} matrices, "
            "which leaves no coordinate to cluster on"
        )
    return coordinates
