"""A fitted cluster-abstraction tree as text and as a figure: each node's most probable columns
and each cluster's mass (:class:`zoo.dyadic.cluster_abstraction.ClusterAbstraction`, which
re-exports these names)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from inference._validation import check_int
from zoo.dyadic.cluster_abstraction import CAMParams, ClusterAbstraction

__all__ = ["tree_text", "plot_tree"]


# ----------------------------------------------------------------------------- rendering
def _top_words(model: ClusterAbstraction, params: CAMParams, col_names: Sequence[Any] | None, n_words: int):
    aspects = np.asarray(params.col_given_node, np.float64)
    if col_names is not None and len(col_names) != aspects.shape[0]:
        raise ValueError(f"col_names: expected {aspects.shape[0]} names, got {len(col_names)}")
    names = list(col_names) if col_names is not None else [str(k) for k in range(aspects.shape[0])]
    n_words = check_int("n_words", n_words, minimum=1)
    order = np.argsort(-aspects, axis=0, kind="stable")[:n_words]
    return [[str(names[k]) for k in order[:, node]] for node in range(aspects.shape[1])]


def _cluster_mass(model: ClusterAbstraction, params: CAMParams) -> np.ndarray:
    """P(c) summed over the leaves below every node, shape (n_nodes,)."""
    tree = model.tree
    mass = np.zeros(tree.n_nodes)
    prior = np.asarray(params.cluster_prior, np.float64)
    for index, leaf in enumerate(tree.leaves):
        for node in tree.path(leaf):
            mass[node] += prior[index]
    return mass


def tree_text(model: ClusterAbstraction, params: CAMParams, *, col_names: Sequence[Any] | None = None,
              n_words: int = 5) -> str:
    """An indented rendering of the tree: per node its cluster mass, token share and top words.

    Parameters
    ----------
    model : ClusterAbstraction
    params : CAMParams
    col_names : sequence, optional
        Names of the columns (e.g. ``data.col_names``); indices otherwise.
    n_words : int
        Most probable columns shown per aspect P(y|a_ν).
    """
    if not isinstance(model, ClusterAbstraction):
        raise TypeError(f"model: expected a ClusterAbstraction, got {type(model).__name__}")
    model.check_params(params)
    words = _top_words(model, params, col_names, n_words)
    mass = _cluster_mass(model, params)
    usage = np.asarray(model.node_usage(params), np.float64)
    tree = model.tree
    children = tree.children
    lines = []
    stack = [(0, 0)]
    while stack:
        node, level = stack.pop()
        kind = "leaf" if not children[node] else "node"
        lines.append(f"{'  ' * level}{kind} {node} [P(c)={mass[node]:.3f}, tokens={usage[node]:.3f}]: "
                     + ", ".join(words[node]))
        stack.extend((child, level + 1) for child in reversed(children[node]))
    return "\n".join(lines)


def plot_tree(model: ClusterAbstraction, params: CAMParams, *, col_names: Sequence[Any] | None = None,
              n_words: int = 5, ax: Any = None):
    """Draw the tree with the top words of every node's aspect (H99 Fig. 4); returns the Figure.

    Leaves are placed left to right in depth-first order, inner nodes above the mean position of
    their children; each label lists the node's most probable columns and its cluster mass.
    """
    import matplotlib.pyplot as plt

    if not isinstance(model, ClusterAbstraction):
        raise TypeError(f"model: expected a ClusterAbstraction, got {type(model).__name__}")
    model.check_params(params)
    words = _top_words(model, params, col_names, n_words)
    mass = _cluster_mass(model, params)
    tree = model.tree
    children = tree.children
    levels = tree.levels
    x = np.zeros(tree.n_nodes)
    for position, leaf in enumerate(tree.leaf_order()):
        x[leaf] = position
    for node in reversed(range(tree.n_nodes)):  # children have larger ids than their parent
        if children[node]:
            x[node] = np.mean([x[child] for child in children[node]])
    if ax is None:
        width = max(6.0, 2.2 * tree.n_leaves)
        figure, ax = plt.subplots(figsize=(width, 1.0 + 1.9 * tree.n_levels))
    else:
        figure = ax.figure
    for node, parent in enumerate(tree.parents):
        if parent >= 0:
            ax.plot([x[parent], x[node]], [-levels[parent], -levels[node]], color="0.6", lw=1, zorder=1)
    for node in range(tree.n_nodes):
        label = f"{node}  P={mass[node]:.2f}\n" + "\n".join(words[node])
        ax.text(x[node], -levels[node], label, ha="center", va="center", fontsize=8, zorder=2,
                bbox={"boxstyle": "round", "facecolor": "white" if children[node] else "#e8f0fe", "edgecolor": "0.5"})
    ax.set_xlim(-0.7, max(tree.n_leaves - 0.3, 0.7))
    ax.set_ylim(-tree.depth - 0.7, 0.7)
    ax.axis("off")
    return figure
