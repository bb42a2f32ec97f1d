"""Models and fits describe themselves in a few readable lines (``repr``) and as HTML for Jupyter.

Before, a fitted aspect model's repr printed its parameter arrays (15,000 characters) and a
Dirichlet-process fit's was ``<... object at 0x...>``. Each card is checked against the figures it
is computed from, so a card that states a wrong figure fails here.
"""

import re
import warnings

import jax
import numpy as np
from inference.chains import ChainResult
from inference.concentration import GammaPrior
from inference.diagnostics import MixingWarning, mixing_verdict
from inference.display import WIDTH, Card, Described, call_text, quantity_text
from zoo.dirichlet import DPMixture, SupervisedDP, beta_bernoulli, dirichlet_multinomial, normal_gamma
from zoo.dirichlet import normal_known_precision
from zoo.dirichlet.mixture import DPMixtureFit


def _rows(text: str) -> dict[str, str]:
    """A card's text as {label: value}, the wrapped lines of a value joined again."""
    rows: dict[str, str] = {}
    label = None
    for line in text.splitlines()[1:]:
        match = re.match(r"  (\S.*?)\s{2,}(\S.*)$", line)
        if match and not line.startswith("    "):
            label = match.group(1)
            rows[label] = match.group(2)
        else:
            rows[label] += " " + line.strip()
    return rows


def _blobs(seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(-3, 0.5, (15, 2)), rng.normal(3, 0.5, (15, 2))])


def test_families_and_models_read_as_the_call_that_made_them():
    assert repr(normal_gamma(3)) == "normal_gamma(3)"
    assert repr(normal_gamma(3, rate=0.5, kappa=np.full(3, 0.1))) == (
        "normal_gamma(3, kappa=array(shape=(3,), float64), rate=0.5)")
    assert repr(normal_known_precision(64, prior_variance=0.25)) == "normal_known_precision(64, prior_variance=0.25)"
    assert repr(dirichlet_multinomial(5, concentration=0.5)) == "dirichlet_multinomial(5, concentration=0.5)"
    for family in (normal_gamma(3, shape=2.0, rate=1 / 3), beta_bernoulli(4, a=0.5),
                   normal_known_precision(2, precision=4.0, prior_variance=0.3)):
        namespace = {"normal_gamma": normal_gamma, "beta_bernoulli": beta_bernoulli,
                     "normal_known_precision": normal_known_precision}
        assert eval(repr(family), namespace) is family  # the same prior gives the same family object

    assert repr(DPMixture(normal_gamma(2))) == "DPMixture(normal_gamma(2))"
    model = DPMixture(normal_gamma(2), alpha_prior=GammaPrior(1.0, 1.0), algorithm="collapsed", n_split_merge=3)
    assert repr(model) == ("DPMixture(normal_gamma(2), alpha_prior=GammaPrior(shape=1.0, rate=1.0), "
                           "algorithm='collapsed', n_split_merge=3)")
    assert repr(SupervisedDP(3, alpha_prior=None)) == "SupervisedDP(3, alpha_prior=None)"


def test_call_text_leaves_out_defaults_and_shortens_arrays():
    assert call_text("f", [1, "g(2)"], {"a": 1.0, "b": np.ones(3), "c": np.arange(3)},
                     {"a": 1.0, "b": 1.0, "c": 0.0}) == "f(1, g(2), c=array(shape=(3,), int64))"
    assert call_text("f", [], {"x": None, "y": "auto"}, {"x": None, "y": "numba"}) == "f(y='auto')"


def test_a_dp_fit_states_its_draws_and_whether_they_mix():
    data = _blobs()
    model = DPMixture(normal_gamma(2), algorithm="collapsed", max_clusters=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        fit = model.fit(data, jax.random.key(0), n_chains=2, n_warmup=20, n_draws=30, progress=False)
    text = repr(fit)
    assert text.splitlines()[0] == "DPMixtureFit of DPMixture(normal_gamma(2), algorithm='collapsed', max_clusters=8)"
    assert "Array(" not in text and len(text) < 3000
    rows = _rows(text)
    assert rows["points"] == "30"
    assert rows["chains"].startswith("2 chains × 30 draws after 20 warm-up sweeps, ")
    k = fit.result.samples["n_clusters"]
    assert rows["clusters (K)"] == quantity_text(k)
    assert rows["mixing"] == mixing_verdict(fit.mixing)  # the fit's own verdict, not fixed text
    assert "fit.resume(data, n_draws=..., until_mixed=True)" in rows["see"]
    for line in text.splitlines():  # listed calls are not broken inside, other values wrap at WIDTH
        assert len(line) <= WIDTH or "fit.resume(" in line
    page = fit._repr_html_()
    assert page.startswith("<div><table>") and "mixing table" in page and "r_hat" in page

    stopped = DPMixtureFit(fit.result._replace(samples={}, completed=False))  # Ctrl-C during the warm-up
    rows = _rows(repr(stopped))
    # Not "after 20 warm-up sweeps": they did not all run.
    assert rows["chains"].startswith("2 chains × 0 draws, stopped during the 20 warm-up sweeps (Ctrl-C or time "
                                     "budget), ") and "mixing" not in rows
    assert "no draws" in rows["draws"].lower() or "warm-up" in rows["draws"]

    result_text = repr(fit.result)
    assert result_text.startswith("ChainResult\n") and "assignments (2, 30, 30)" in result_text
    assert len(result_text) < 1000


def test_quantity_text_reports_constant_and_non_finite_draws():
    assert quantity_text(np.full((2, 5), 9)) == "9 in every draw"
    assert quantity_text([[1.0, np.nan], [1.0, 3.0]]) == (
        "1.67 ± 0.94 (1 to 3; by chain 1, 2); 1 of 4 draws not finite")
    assert quantity_text([[np.inf]]) == "no finite draws (1 draws)"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a chain without a finite draw does not warn
        assert quantity_text([[np.nan, np.nan], [1.0, 2.0]]) == (
            "1.5 ± 0.5 (1 to 2; by chain nan, 1.5); 2 of 4 draws not finite")


def test_an_em_fit_shows_its_figures_not_its_arrays():
    from inference import tempered_em
    from zoo.data import CoOccurrence
    from zoo.dyadic import Aspect

    counts = np.random.default_rng(0).poisson(2.0, (30, 20))
    data = CoOccurrence.from_dense(counts)
    result = tempered_em(Aspect(n_classes=3), data, key=jax.random.key(0), valid=data, n_restarts=2, max_iter=30)
    text = repr(result)
    assert "Array(" not in text and len(text) < 1500
    rows = _rows(text)
    assert text.startswith("EMResult of Aspect(n_classes=3")
    assert rows["β"] == f"{result.beta:.4g}"
    assert rows["parameters"] == "class_prior (3,), row_given_class (30, 3), col_given_class (20, 3)"
    best = result.best_iteration
    assert rows["valid perplexity"].startswith(f"{result.history['valid_perplexity'][best]:.6g} ")
    assert rows["restarts"].startswith(f"best {result.best_restart} of 2 by validation perplexity")
    assert "<table>" in result._repr_html_()


def test_a_card_that_cannot_be_made_does_not_raise():
    class Broken(Described):
        def _card(self):
            raise KeyError("lost")

    assert "no description: KeyError: 'lost'" in repr(Broken())
    assert Broken()._repr_html_().startswith("<pre>&lt;")
    card = Card("title")
    card.add("skipped", None)
    card.add("items", ["a b", "c d"])
    assert card.text() == "title\n  items  a b, c d"
    assert "&lt;x&gt;" in Card("<x>").html()


def test_a_supervised_fit_states_its_test_publications(model=1):
    rng = np.random.default_rng(1)
    train = np.concatenate([rng.normal(-3, 0.5, (10, 2)), rng.normal(3, 0.5, (10, 2))])
    test = _blobs(2)[::3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = SupervisedDP(model).fit(train, [0] * 10 + [1] * 10, test, key=jax.random.key(0), n_chains=2,
                                      n_sweeps=20, progress=False)
    text = repr(fit)
    rows = _rows(text)
    assert text.splitlines()[0] == f"SupervisedDPFit of SupervisedDP({model})"
    assert rows["test points"] == "10"
    assert rows["test publications (K)"] == quantity_text(fit.result.samples["n_clusters"])
    assert rows["mixing"] == mixing_verdict(fit.mixing)
    assert "type split-merges accepted" not in rows  # n_type_split_merge=0: no such moves were made
