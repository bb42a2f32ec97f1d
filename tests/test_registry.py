"""The model registry: every name constructs its card's class, settings pass through, clear errors."""

import dataclasses
import importlib
import inspect

import pandas as pd
import pytest

from zoo.cli import CHAIN_MODELS, RELATIONAL_EM_MODELS
from zoo.dirichlet.families import beta_bernoulli
from zoo.dyadic.cluster_abstraction import Tree
from zoo.registry import MODEL_NAMES, ModelCard, describe, get_model, list_models
from zoo.sklearn import ESTIMATORS

EXPECTED_CLASSES = {
    "aspect": "Aspect",
    "aspect-alternating": "Aspect",
    "one-sided": "OneSided",
    "two-sided": "TwoSided",
    "cam": "ClusterAbstraction",
    "gaussian-mixture": "GaussianMixture",
    "dp-mixture": "DPMixture",
    "cdp": "DPMixture",
    "scdp-1": "SupervisedDP",
    "scdp-2": "SupervisedDP",
    "scdp-3": "SupervisedDP",
    "latent-class-relational": "LatentClassRelational",
    "irm": "InfiniteRelational",
}


def test_the_registry_holds_every_model_of_the_zoo():
    assert set(MODEL_NAMES) == set(EXPECTED_CLASSES)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_name_constructs_its_cards_class(name):
    card = describe(name)
    assert isinstance(card, ModelCard) and card.name == name
    assert card.model_class.__name__ == EXPECTED_CLASSES[name] == card.class_name
    model = get_model(name)
    assert type(model) is card.model_class
    for key, value in card.fixed:
        assert getattr(model, key) == value
    assert card.paper and card.equations and card.latent_structure and card.engines and card.summary
    assert card.data in ("counts", "features", "relational")
    assert callable(card.program)
    if isinstance(inspect.getattr_static(card.model_class, "program", None), staticmethod):
        assert card.program is card.model_class.program  # the class's own specification


def test_cards_are_frozen_and_print_readably():
    card = describe("one-sided")
    with pytest.raises(dataclasses.FrozenInstanceError):
        card.name = "other"
    text = str(card)
    assert text.splitlines()[0] == "one-sided"
    for fragment in ("H99 eqs. 5-7", "EnumeratedEM", "zoo.dyadic.one_sided.OneSided", "acm"):
        assert fragment in text
    page = describe("two-sided")._repr_html_()
    assert page.startswith("<div><table>") and "c_νμ" in page and "<th" in page
    assert "&lt;" not in page  # nothing needed escaping here, and nothing was double-escaped


def test_list_models_is_a_table_indexed_by_name():
    table = list_models()
    assert isinstance(table, pd.DataFrame)
    assert tuple(table.index) == MODEL_NAMES
    assert {"class", "data", "summary", "equations", "latent_structure", "engines", "cli_fit"} <= set(table.columns)
    assert table.loc["scdp-3", "equations"].startswith("DM05 §5.2")
    # The names marked for the command line are exactly what `python -m zoo fit` accepts.
    assert set(table.index[table["cli_fit"]]) == set(ESTIMATORS) | set(CHAIN_MODELS) | set(RELATIONAL_EM_MODELS)


def test_settings_pass_through():
    assert get_model("one-sided", n_classes=3, side="cols").side == "cols"
    assert get_model("acm", n_classes=3).n_classes == 3
    assert get_model("two-sided", n_row_classes=2, n_col_classes=5).n_col_classes == 5
    assert get_model("cam", depth=1, branching=3).n_classes == 3
    # depth, n_leaves and tree say one thing three ways: giving one drops the card's default depth.
    assert get_model("cam", n_leaves=3).n_classes == 3
    assert get_model("cam", tree=Tree.balanced(5)).n_classes == 5
    with pytest.raises(ValueError, match="^depth: give one of depth, n_leaves or tree"):
        get_model("cam", depth=1, n_leaves=3)
    assert get_model("aspect-alternating", n_classes=2).update == "alternating"
    assert get_model("Gaussian_Mixture", n_classes=4).n_classes == 4
    assert get_model("scdp-3", alpha=2.5).alpha == 2.5 and get_model("scdp-3").model == 3
    assert get_model("lrm", n_classes={"people": 3}).n_classes == (("people", 3),)
    assert get_model("irm", max_clusters=5).max_clusters == 5
    dp = get_model("dp-mixture", n_features=4, alpha=0.5, algorithm="collapsed")
    assert (dp.family.n_features, dp.alpha, dp.algorithm) == (4, 0.5, "collapsed")
    family = beta_bernoulli(3)
    assert get_model("cdp", family=family).family is family
    # DM05 §7.1's CDP: identity precision, Normal(0, I) means, Algorithm 3 (+ split-merge) by default
    cdp = get_model("cdp", n_features=5)
    assert (cdp.family.name, cdp.family.n_features, cdp.algorithm) == ("normal_known_precision", 5, "collapsed")
    assert get_model("dp-mixture", n_features=5).family.name == "normal_gamma"


def test_unknown_names_list_close_matches():
    with pytest.raises(ValueError, match=r"^name: no model 'aspect-alternate'.*did you mean 'aspect-alternating'"):
        get_model("aspect-alternate")
    with pytest.raises(ValueError, match=r"^name: no model 'onesided'.*'one-sided'"):
        describe("onesided")
    with pytest.raises(ValueError, match=r"^name: no model 'zzz' in the zoo \(models: aspect, "):
        describe("zzz")
    with pytest.raises(TypeError, match="^name"):
        get_model(3)


def test_bad_settings():
    with pytest.raises(ValueError, match="^update: fixed to 'alternating'"):
        get_model("aspect-alternating", update="simultaneous")
    with pytest.raises(ValueError, match="^model: fixed to 2"):
        get_model("scdp-2", model=3)
    with pytest.raises(TypeError, match="^n_clusters: not a setting of 'one-sided'"):
        get_model("one-sided", n_clusters=3)
    for name in ("dp-mixture", "cdp"):
        with pytest.raises(ValueError, match="^n_features: give either a family"):
            get_model(name, family=beta_bernoulli(2), n_features=2)
    with pytest.raises(ValueError, match="^n_classes: must be >= 1"):
        get_model("aspect", n_classes=0)


@pytest.mark.parametrize("package",
                         ["zoo", "zoo.dirichlet", "zoo.dyadic", "zoo.relational", "zoo.sklearn", "inference"])
def test_dir_offers_every_public_name(package):
    # dir() is what tab completion in Jupyter offers: names a package imports lazily must be in it too.
    module = importlib.import_module(package)
    assert set(getattr(module, "__all__", ())) <= set(dir(module))
