"""The zoo's registry: every model by name, with a card that says what it is and what fits it.

::

    >>> from zoo.registry import describe, get_model, list_models
    >>> list_models().loc["one-sided", "equations"]
    'H99 eqs. 5-7; HP98 eq. 2'
    >>> get_model("one-sided", n_classes=4)
    OneSided(n_classes=4, side='rows', backend='auto', prior_count=0.0)
    >>> describe("acm").name
    'one-sided'

A :class:`ModelCard` names the model's class, the paper and equations it implements, its latent
structure, the engines of :mod:`inference` that fit it and its NumPyro program (the
specification, DESIGN.md "Two layers, one truth"). :func:`get_model` builds the model from the
card's default settings updated by the caller's; settings that the name fixes (the update rule of
``aspect-alternating``, the variant of ``scdp-2``) cannot be overridden.

Papers: H99 — Hofmann, Puzicha & Jordan, "Learning from dyadic data" (NIPS 11, 1999); HP98 —
Hofmann & Puzicha, "Mixture models for co-occurrence and histogram data" (1998); DM05 — Daumé III
& Marcu, "A Bayesian model for supervised clustering with the Dirichlet process prior" (JMLR 6,
2005); CP — Chiang & Poole, "Incremental EM for latent-class relational models"; Kemp, Tenenbaum,
Griffiths, Yamada & Ueda, "Learning systems of concepts with an infinite relational model" (AAAI
2006); Neal, "Markov chain sampling methods for Dirichlet process mixture models" (JCGS, 2000).

The registry imports no model module until a class or a model is asked for, so importing it (and
``python -m zoo list``) is cheap and cannot create an import cycle.
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable

from inference.display import Card

__all__ = ["ModelCard", "MODEL_NAMES", "list_models", "get_model", "describe", "canonical_name"]

_PAPERS = {
    "H99": 'Hofmann, Puzicha & Jordan (1999), "Learning from dyadic data", NIPS 11',
    "HP98": 'Hofmann & Puzicha (1998), "Mixture models for co-occurrence and histogram data"',
    "DM05": ('Daumé III & Marcu (2005), "A Bayesian model for supervised clustering with the Dirichlet '
             'process prior", JMLR 6'),
    "CP": 'Chiang & Poole, "Incremental EM for latent-class relational models"',
    "KTGYU06": ('Kemp, Tenenbaum, Griffiths, Yamada & Ueda (2006), "Learning systems of concepts with an '
                'infinite relational model", AAAI'),
    "N00": 'Neal (2000), "Markov chain sampling methods for Dirichlet process mixture models", JCGS 9',
}


def _import(path: str) -> Any:
    module, _, attribute = path.rpartition(".")
    return getattr(import_module(module), attribute)


@dataclass(frozen=True)
class ModelCard:
    """What one registered model is: class, paper, equations, latent structure, engines.

    Attributes
    ----------
    name : str
        Registry name (also the ``python -m zoo fit`` name when :attr:`cli_fit` is true).
    class_path : str
        Dotted path of the model's class; :attr:`model_class` imports it.
    summary : str
        One line.
    paper : str
        Citation of the paper(s) the model comes from.
    equations : str
        Where in the paper(s), e.g. ``"H99 eqs. 2-4; HP98 eq. 1"``.
    latent_structure : str
        Which latent variables there are and what they attach to.
    engines : tuple of str
        The algorithms of :mod:`inference` (or the model's own ``fit``/``sample``) that fit it.
    data : {"counts", "features", "relational"}
        The data it takes: a :class:`zoo.data.CoOccurrence`, an (N, D) array of feature vectors,
        or a :class:`zoo.relational.RelationalData`.
    program_path : str or None
        Dotted path of the model's NumPyro program.
    settings : tuple of (name, value)
        Default constructor settings used by :func:`get_model`.
    fixed : tuple of (name, value)
        Constructor settings fixed by the name (cannot be passed to :func:`get_model`).
    aliases : tuple of str
        Other names :func:`get_model` and :func:`describe` accept (e.g. ``"acm"``).
    cli_fit : bool
        Whether ``python -m zoo fit NAME`` fits it (:data:`zoo.sklearn.ESTIMATORS`, and the
        Dirichlet-process mixtures of :data:`zoo.cli.CHAIN_MODELS`).
    alternatives : tuple of tuple of str
        Groups of settings that say the same thing in different ways, of which the constructor
        takes one (the cluster-abstraction model's ``depth``, ``n_leaves`` or ``tree``): a setting
        given to :func:`get_model` drops the card's defaults of the others in its group.
    """

    name: str
    class_path: str
    summary: str
    paper: str
    equations: str
    latent_structure: str
    engines: tuple[str, ...]
    data: str
    program_path: str | None = None
    settings: tuple[tuple[str, Any], ...] = ()
    fixed: tuple[tuple[str, Any], ...] = ()
    aliases: tuple[str, ...] = ()
    cli_fit: bool = False
    alternatives: tuple[tuple[str, ...], ...] = ()

    @property
    def model_class(self) -> type:
        """The model's class (imported on first use)."""
        return _import(self.class_path)

    @property
    def program(self) -> Callable | None:
        """The model's NumPyro program, or None."""
        return None if self.program_path is None else _import(self.program_path)

    @property
    def class_name(self) -> str:
        """The class's name without its module."""
        return self.class_path.rpartition(".")[2]

    def _rows(self) -> list[tuple[str, str]]:
        settings = dict(self.fixed) | dict(self.settings)
        rows = [
            ("class", self.class_path),
            ("summary", self.summary),
            ("paper", self.paper),
            ("equations", self.equations),
            ("latent structure", self.latent_structure),
            ("engines", "; ".join(self.engines)),
            ("data", self.data),
            ("program", self.program_path or "-"),
            ("default settings", ", ".join(f"{key}={value!r}" for key, value in settings.items()) or "-"),
        ]
        if self.aliases:
            rows.append(("aliases", ", ".join(self.aliases)))
        rows.append(("python -m zoo fit", "yes" if self.cli_fit else "no"))
        return rows

    def _card(self) -> Card:
        return Card(self.name, self._rows())

    def __str__(self) -> str:
        return self._card().text()

    def _repr_html_(self) -> str:
        return self._card().html()


_DYADIC_ENGINES = ("tempered_em (closed-form E- and M-steps; schedules, restarts)",)
_ENUMERATED = "EnumeratedEM (generic EM on the program)"

_CARDS = (
    ModelCard(
        name="aspect",
        class_path="zoo.dyadic.aspect.Aspect",
        summary="Aspect model (PLSA): every co-occurrence has its own latent class",
        paper=f"{_PAPERS['H99']}; {_PAPERS['HP98']}",
        equations="H99 eqs. 1-4 (tempered EM §4); HP98 eq. 1",
        latent_structure="one class c per co-occurrence (x_i, y_k); x and y independent given c",
        engines=_DYADIC_ENGINES + ("tempered_em with devices= (data-parallel E-step)", _ENUMERATED),
        data="counts",
        program_path="zoo.dyadic.aspect.aspect_program",
        settings=(("n_classes", 8),),
        fixed=(("update", "simultaneous"),),
        aliases=("plsa", "aspect-simultaneous"),
        cli_fit=True,
    ),
    ModelCard(
        name="aspect-alternating",
        class_path="zoo.dyadic.aspect.Aspect",
        summary="Aspect model fitted by alternating (ECM) updates; KL-NMF multiplicative updates at β = 1",
        paper=f"{_PAPERS['H99']}; Lee & Seung (2001), NMF (KL divergence)",
        equations="H99 eqs. 1-4, M-step split in two conditional maximisations",
        latent_structure="one class c per co-occurrence (x_i, y_k); x and y independent given c",
        engines=_DYADIC_ENGINES,
        data="counts",
        program_path="zoo.dyadic.aspect.aspect_program",
        settings=(("n_classes", 8),),
        fixed=(("update", "alternating"),),
    ),
    ModelCard(
        name="one-sided",
        class_path="zoo.dyadic.one_sided.OneSided",
        summary="Asymmetric clustering model (ACM): one cluster per row (or column) object",
        paper=f"{_PAPERS['H99']}; {_PAPERS['HP98']}",
        equations="H99 eqs. 5-7; HP98 eq. 2",
        latent_structure="one cluster c(x_i) per object of the clustered side; all its co-occurrences "
                         "drawn from P(y|c)",
        engines=_DYADIC_ENGINES + (_ENUMERATED,),
        data="counts",
        program_path="zoo.dyadic.one_sided.one_sided_program",
        settings=(("n_classes", 8), ("side", "rows")),
        aliases=("acm",),
        cli_fit=True,
    ),
    ModelCard(
        name="two-sided",
        class_path="zoo.dyadic.two_sided.TwoSided",
        summary="Symmetric clustering model (SCM): rows and columns clustered, clusters coupled",
        paper=f"{_PAPERS['H99']}; {_PAPERS['HP98']}",
        equations="H99 eqs. 8-10; HP98 eq. 3",
        latent_structure="one cluster per row object and one per column object, coupled by the "
                         "association c_νμ",
        engines=("tempered_em (mean-field E-step, H99 eq. 10)",),
        data="counts",
        program_path="zoo.dyadic.two_sided.two_sided_program",
        settings=(("n_row_classes", 8), ("n_col_classes", None)),
        aliases=("scm",),
        cli_fit=True,
    ),
    ModelCard(
        name="cam",
        class_path="zoo.dyadic.cluster_abstraction.ClusterAbstraction",
        summary="Cluster-abstraction model: row clusters at the leaves of a tree of aspects",
        paper=_PAPERS["H99"],
        equations="H99 §3 eqs. 11-12 (tree growth: §3 footnote 2)",
        latent_structure="one cluster (tree leaf) per row object; one aspect (node on the path from the "
                         "root to that leaf) per co-occurrence",
        engines=_DYADIC_ENGINES + ("anneal_tree (tree grown by deterministic annealing)",),
        data="counts",
        program_path="zoo.dyadic.cluster_abstraction.cluster_abstraction_program",
        settings=(("depth", 2), ("branching", 2)),
        aliases=("cluster-abstraction",),
        cli_fit=True,
        alternatives=(("depth", "n_leaves", "tree"),),
    ),
    ModelCard(
        name="gaussian-mixture",
        class_path="zoo.finite_mixture.GaussianMixture",
        summary="Finite mixture of diagonal Gaussians (baseline for feature vectors)",
        paper="(no paper: textbook mixture; tempered E-step as H99 §4)",
        equations="P_β(c|x) ∝ w_c N(x; μ_c, σ_c²)^β",
        latent_structure="one class per point",
        engines=("tempered_em (closed-form M-step)", _ENUMERATED),
        data="features",
        program_path="zoo.finite_mixture.gaussian_mixture_program",
        settings=(("n_classes", 8),),
        aliases=("gmm",),
        cli_fit=True,
    ),
    ModelCard(
        name="dp-mixture",
        class_path="zoo.dirichlet.mixture.DPMixture",
        summary="Dirichlet-process mixture of any component family (Normal-Gamma Gaussians by default)",
        paper=f"{_PAPERS['DM05']}; {_PAPERS['N00']}",
        equations="DM05 §3.2 (one reference type), App. A and B; Neal 2000 Algorithms 2, 3, 8",
        latent_structure="one cluster per point under DP(α, G0) (Chinese restaurant process); "
                         "parameters φ_k ~ G0 per cluster; α fixed or Gamma-distributed",
        engines=("neal Algorithm 3 (collapsed; the default)", "neal Algorithm 8 (any family with a G0 sampler)",
                 "neal Algorithm 2 (conjugate)", "split-merge moves (Dahl 2003; Jain & Neal 2004; informed merges)",
                 "sub-cluster split/merge sampler, all points in parallel (Chang & Fisher 2013, exact form)",
                 "sample_chains (many chains, ArviZ)", "Escobar-West update of α"),
        data="features",
        program_path="zoo.dirichlet.mixture.dp_mixture_program",
        settings=(("n_features", 2), ("alpha", 1.0), ("algorithm", "collapsed")),
        cli_fit=True,
    ),
    ModelCard(
        name="cdp",
        class_path="zoo.dirichlet.mixture.DPMixture",
        summary="DM05's CDP: a DP mixture of unit-precision Gaussians with Normal(0, I) means",
        paper=f"{_PAPERS['DM05']}; {_PAPERS['N00']}",
        equations="DM05 §7.1 'CDP' (a single reference type, the identity matrix), §3.2, App. A; "
                  "Neal 2000 Algorithm 3",
        latent_structure="one cluster per point under DP(α, G0), α fixed at 1 unless alpha_prior= is given; "
                         "each cluster a Gaussian of identity precision whose mean has a Normal(0, I) prior "
                         "(integrated out)",
        engines=("neal Algorithm 3 (collapsed) with split-merge moves (the default)",
                 "neal Algorithms 2 and 8", "sub-cluster split/merge sampler (Chang & Fisher 2013)",
                 "sample_chains (many chains, ArviZ)",
                 "Escobar-West update of α with alpha_prior= (off by default; notebooks/dp_mixture_digits.ipynb "
                 "and zoo.baselines.cdp_partition resample α under Gamma(1, 1))"),
        data="features",
        program_path="zoo.dirichlet.mixture.dp_mixture_program",
        settings=(("n_features", 2), ("alpha", 1.0), ("algorithm", "collapsed")),
        cli_fit=True,
    ),
    ModelCard(
        name="scdp-1",
        class_path="zoo.dirichlet.supervised.SupervisedDP",
        summary="Supervised clustering with the Dirichlet process, conjugate updates (SCDP-1)",
        paper=_PAPERS["DM05"],
        equations="DM05 §3.2 eq. 1, Fig. 1; §4.1 Fig. 2; §5",
        latent_structure="a publication (cluster, CRP α^p) and a reference type (CRP α^t) per reference; "
                         "Gaussian mean per publication, diagonal precision per type",
        engines=("Gibbs: neal Algorithm 2 on both indicator sets", "split-merge moves of the test partition",
                 "pair moves (a test reference and its nearest, their publications and common type jointly)",
                 "Escobar-West update of α^p, α^t (DM05 App. B)", "sample_chains (many chains, ArviZ)"),
        data="features",
        program_path="zoo.dirichlet.supervised.supervised_program",
        fixed=(("model", 1),),
        aliases=("scdp1",),
        cli_fit=True,
    ),
    ModelCard(
        name="scdp-2",
        class_path="zoo.dirichlet.supervised.SupervisedDP",
        summary="SCDP-1 with the precisions' prior re-set from the spread of the publication means",
        paper=_PAPERS["DM05"],
        equations="DM05 §5.1",
        latent_structure="as SCDP-1",
        engines=("Gibbs: neal Algorithm 2 on both indicator sets", "split-merge moves of the test partition",
                 "pair moves (a test reference and its nearest, their publications and common type jointly)",
                 "Escobar-West update of α^p, α^t (DM05 App. B)", "sample_chains (many chains, ArviZ)"),
        data="features",
        program_path="zoo.dirichlet.supervised.supervised_program",
        fixed=(("model", 2),),
        aliases=("scdp2",),
        cli_fit=True,
    ),
    ModelCard(
        name="scdp-3",
        class_path="zoo.dirichlet.supervised.SupervisedDP",
        summary="SCDP with precisions conditioned on the means (non-conjugate)",
        paper=_PAPERS["DM05"],
        equations="DM05 §5.2 eq. 3; §4.2",
        latent_structure="as SCDP-1, with each type's precisions conditioned on the publication means",
        engines=("Gibbs: neal Algorithm 8 (M = 8 auxiliary draws)", "split-merge moves of the test partition",
                 "exact Gibbs for the means, Metropolis on log precisions", "Escobar-West update of α^p, α^t",
                 "sample_chains (many chains, ArviZ)"),
        data="features",
        program_path="zoo.dirichlet.supervised.supervised_program",
        fixed=(("model", 3),),
        aliases=("scdp3",),
        cli_fit=True,
    ),
    ModelCard(
        name="latent-class-relational",
        class_path="zoo.relational.latent_class.LatentClassRelational",
        summary="Latent-class relational model with g_D classes per domain, fitted by incremental EM",
        paper=_PAPERS["CP"],
        equations="CP §1, Fig. 1 (model); §2 eqs. 2-6 (incremental EM)",
        latent_structure="one class h_D(a) per individual of every domain; each observed cell's value "
                         "depends on its arguments' classes (an undirected network: each pair of nodes once, one "
                         "θ per unordered pair of classes)",
        engines=("incremental EM (Neal-Hinton, factorised q; restarts)",),
        data="relational",
        program_path="zoo.relational.latent_class.latent_class_program",
        settings=(("n_classes", 2),),
        aliases=("lrm", "iem"),
        cli_fit=True,
    ),
    ModelCard(
        name="irm",
        class_path="zoo.relational.infinite.InfiniteRelational",
        summary="Infinite relational model: a CRP partition of every domain, Beta/Dirichlet per block",
        paper=f"{_PAPERS['KTGYU06']} (CP §3's baseline)",
        equations="Kemp et al. 2006 (collapsed Beta-Bernoulli likelihood, generalised to Dirichlet)",
        latent_structure="a CRP partition of every domain; a value distribution η per block, integrated out "
                         "(an undirected network's blocks: unordered pairs of clusters, each pair of nodes once)",
        engines=("collapsed Gibbs (Neal Algorithm 3 style)",
                 "split-merge moves of every domain (Jain & Neal 2004; ten per sweep by default)",
                 "Escobar-West update of α_D", "griddy Gibbs on the hyperparameters γ"),
        data="relational",
        program_path="zoo.relational.infinite.infinite_relational_program",
        aliases=("infinite-relational",),
        cli_fit=True,
    ),
)

_BY_NAME: dict[str, ModelCard] = {card.name: card for card in _CARDS}
_ALIASES: dict[str, str] = {alias: card.name for card in _CARDS for alias in card.aliases}

#: Registered model names, in the order of :func:`list_models`.
MODEL_NAMES: tuple[str, ...] = tuple(_BY_NAME)


def _card(name: Any) -> ModelCard:
    if not isinstance(name, str):
        raise TypeError(f"name: expected a model name (str), got {type(name).__name__}")
    key = name.strip().lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key in _BY_NAME:
        return _BY_NAME[key]
    close = difflib.get_close_matches(key, list(_BY_NAME) + list(_ALIASES), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ValueError(f"name: no model {name!r} in the zoo{hint} (models: {', '.join(MODEL_NAMES)})")


def canonical_name(name: str) -> str:
    """The registered name of ``name``, a name or an alias in any case, ``_`` for ``-``
    (``"PLSA"`` -> ``"aspect"``); a ``ValueError`` naming ``name``, with close matches, otherwise."""
    return _card(name).name


def describe(name: str) -> ModelCard:
    """The :class:`ModelCard` of a registered model (by name or alias).

    Raises
    ------
    ValueError
        ``name: no model ...`` with the closest registered names.
    """
    return _card(name)


def list_models() -> Any:
    """Every registered model as a ``pandas.DataFrame`` indexed by name.

    Columns: ``class``, ``data``, ``summary``, ``equations``, ``latent_structure``, ``engines``
    (joined with ``"; "``), ``cli_fit``.
    """
    import pandas as pd

    records = [
        {
            "name": card.name,
            "class": card.class_name,
            "data": card.data,
            "summary": card.summary,
            "equations": card.equations,
            "latent_structure": card.latent_structure,
            "engines": "; ".join(card.engines),
            "cli_fit": card.cli_fit,
        }
        for card in _CARDS
    ]
    return pd.DataFrame.from_records(records).set_index("name")


# The DP mixtures take ``n_features`` in place of ``family``: the dotted path of the family they build.
_DEFAULT_FAMILIES = {
    "dp-mixture": "zoo.dirichlet.families.normal_gamma",
    "cdp": "zoo.dirichlet.known_precision.normal_known_precision",  # DM05 §7.1's identity precision
}


def _build_dp_mixture(name: str, model_class: type, defaults: dict[str, Any], settings: dict[str, Any]) -> Any:
    """DPMixture with the card's default family of ``n_features`` unless a ``family`` is given."""
    default_family = _import(_DEFAULT_FAMILIES[name])
    if "family" in settings and "n_features" in settings:
        raise ValueError(f"n_features: give either a family or n_features (for a {default_family.__name__} "
                         "family), not both")
    merged = defaults | settings
    n_features = merged.pop("n_features")
    if "family" not in merged:
        merged["family"] = default_family(n_features)
    return model_class(**merged)


def get_model(name: str, **settings: Any) -> Any:
    """A new model object of the registered ``name``, built with the card's defaults and ``settings``.

    Parameters
    ----------
    name : str
        A name of :data:`MODEL_NAMES` or an alias (``"acm"``, ``"scm"``, ``"plsa"``, ...).
    **settings
        Constructor arguments of the model's class; they replace the card's defaults.
        ``dp-mixture`` and ``cdp`` also take ``n_features`` in place of ``family``: a Normal-Gamma
        family of that dimension for ``dp-mixture``, DM05's identity-precision Gaussians
        (:func:`zoo.dirichlet.known_precision.normal_known_precision`) for ``cdp``.

    Returns
    -------
    The model (e.g. :class:`zoo.dyadic.one_sided.OneSided`), validated by its constructor.

    Raises
    ------
    ValueError
        Unknown name (``name: ...``), a setting fixed by the name, or a value the model's
        constructor refuses.
    TypeError
        A setting that is not a constructor argument of the model's class.
    """
    card = _card(name)
    model_class = card.model_class
    parameters = inspect.signature(model_class).parameters
    allowed = [key for key in parameters if key not in dict(card.fixed)]
    allowed += ["n_features"] if card.name in _DEFAULT_FAMILIES else []
    for key, value in settings.items():
        if key in dict(card.fixed):
            raise ValueError(f"{key}: fixed to {dict(card.fixed)[key]!r} by the model name {card.name!r}, got {value!r}")
        if key not in allowed:
            raise TypeError(f"{key}: not a setting of {card.name!r} ({card.class_name}); "
                            f"settings: {', '.join(allowed)}")
    defaults = dict(card.settings) | dict(card.fixed)
    for group in card.alternatives:  # e.g. n_leaves given: the card's default depth no longer applies
        if any(name in settings for name in group):
            defaults = {name: value for name, value in defaults.items() if name not in group}
    if card.name in _DEFAULT_FAMILIES:
        return _build_dp_mixture(card.name, model_class, defaults, settings)
    return model_class(**(defaults | settings))
