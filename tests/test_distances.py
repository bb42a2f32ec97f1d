"""embed_distances keeps only the eigen-directions the distances span (DM05 §7.2, footnote 5)."""

import warnings

import jax
import numpy as np
import pytest

from zoo.dirichlet.supervised import SupervisedDP, embed_distances


def _absolute_differences(values: np.ndarray) -> np.ndarray:
    return np.abs(values[:, None] - values[None, :])


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def _all_leading_eigenvectors(distances: np.ndarray, max_dims: int) -> np.ndarray:
    """The embedding before negligible eigenvalues were dropped: the leading ones, negative ones as 0."""
    n_points = distances.shape[-1]
    centring = np.eye(n_points) - 1.0 / n_points
    blocks = []
    for matrix in distances:
        eigenvalues, eigenvectors = np.linalg.eigh(-0.5 * centring @ (matrix * matrix) @ centring)
        order = np.argsort(eigenvalues)[::-1][:max_dims]
        blocks.append(eigenvectors[:, order] * np.sqrt(np.clip(eigenvalues[order], 0.0, None)))
    return np.concatenate(blocks, axis=1)


@pytest.mark.parametrize("n_points", [10, 121, 600])
def test_a_scalar_feature_gives_one_column_however_many_are_allowed(n_points):
    # The second eigenvalue of |x_i - x_j| is rounding noise (~1e-16 relative): not a column.
    rng = np.random.default_rng(n_points)
    values = rng.integers(1940, 2005, n_points).astype(float)
    values = (values - values.mean()) / values.std()
    embedded = embed_distances(np.stack([_absolute_differences(values), _absolute_differences(2 * values)]),
                               max_dims_per_feature=3)
    assert embedded.shape == (n_points, 2)
    np.testing.assert_allclose(np.abs(embedded), np.abs(np.c_[values, 2 * values]), atol=1e-8)


def test_a_planar_feature_gives_two_columns_of_three_allowed():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(30, 2))
    points -= points.mean(axis=0)
    distances = np.linalg.norm(points[:, None] - points[None, :], axis=-1)
    embedded = embed_distances(distances, max_dims_per_feature=3)
    assert embedded.shape == (30, 2)
    np.testing.assert_allclose(embedded @ embedded.T, points @ points.T, atol=1e-10)  # up to a rotation


def test_non_euclidean_directions_and_all_zero_features_give_no_column():
    # Four points at distance 1 from each other except one pair at 2: not Euclidean (a negative eigenvalue).
    distances = np.ones((4, 4)) - np.eye(4)
    distances[0, 1] = distances[1, 0] = 2.0
    embedded = embed_distances(np.stack([distances, np.zeros((4, 4))]), max_dims_per_feature=4)
    assert embedded.shape[1] == 2 and np.all(embedded.std(axis=0) > 0.1)
    with pytest.raises(ValueError, match=r"^distances: every distance is zero \(up to rounding\) in all 2 matrices"):
        embed_distances(np.zeros((2, 4, 4)))


def test_edit_distances_of_strings_embed_as_before():
    # The record-linkage notebook's use: edit distances of names, two dimensions per field, all spanned.
    rng = np.random.default_rng(0)
    names = ["".join(rng.choice(list("abcdefgh"), size=rng.integers(3, 8))) for _ in range(40)]
    distances = np.array([[_edit_distance(a, b) for b in names] for a in names], dtype=float)[None]
    distances /= np.sqrt((distances**2).sum() / (2 * 40**2))
    np.testing.assert_array_equal(embed_distances(distances, max_dims_per_feature=2),
                                  _all_leading_eigenvectors(distances, 2))


def test_fit_distances_of_scalar_fields_warns_of_no_column_the_user_did_not_give():
    rng = np.random.default_rng(1)
    years = np.repeat(rng.normal(size=8), 3) + 0.05 * rng.normal(size=24)
    years = (years - years.mean()) / years.std()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SupervisedDP(1).fit_distances(_absolute_differences(years), np.repeat(np.arange(5), 3), key=jax.random.key(0),
                                      max_dims_per_feature=2, n_chains=1, n_sweeps=4, n_warmup=2, progress=False)
    assert not [warning for warning in caught if "far from the scale" in str(warning.message)]
