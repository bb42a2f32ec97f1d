"""Short, readable descriptions of models and fits, as text and as HTML for Jupyter.

A fit typed at the end of a notebook cell used to print its repr: for :class:`inference.em.EMResult`
the whole parameter arrays (15,000 characters for an 8-class aspect model of the Reuters stories),
for a Dirichlet-process fit ``<... object at 0x7f...>``. Objects that mix in :class:`Described`
show a :class:`Card` instead: a title, one labelled row per fact (what was fitted, how long, what
the chains hold, whether they mix) and, in HTML, tables such as the mixing table. Every figure on a
card is computed from the object; nothing is fixed text.

:func:`call_text` writes a constructor call with the arguments that differ from their defaults, as
scikit-learn prints its estimators, for the models that are not dataclasses.
"""

from __future__ import annotations

import html
import inspect
import textwrap
import warnings
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["Card", "Described", "add_mixing", "call_text", "chains_card", "chains_text", "init_defaults", "made_with", "params_text",
           "quantity_text", "scores_text", "short_value", "stopped_text"]

#: Characters per line of a card's text (values are wrapped under their label beyond it).
WIDTH = 100
#: Stands for a space inside one item of a listed value while it is wrapped (textwrap does not break at it).
_UNBROKEN = "\u00a0"


def short_value(value: Any) -> str:
    """A value as it reads in a call: arrays by shape and dtype, floats as the shortest text that
    reads back as the same float, others by repr.

    >>> short_value(np.zeros((64,), np.float32)), short_value(np.float64(0.5)), short_value("auto")
    ('array(shape=(64,), float32)', '0.5', "'auto'")
    """
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    shape = getattr(value, "shape", None)
    if shape is not None and getattr(value, "dtype", None) is not None:
        if shape == ():
            return short_value(np.asarray(value).item())
        return f"array(shape={tuple(shape)}, {np.dtype(value.dtype).name})"
    return repr(value)


def call_text(name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None,
              defaults: Mapping[str, Any] | None = None) -> str:
    """``name(arg, ..., key=value, ...)``, leaving out keywords whose value equals ``defaults[key]``.

    Positional arguments that are strings are written as they are (a nested call's text); the
    others, and keyword values, by :func:`short_value`. An array counts as equal to a scalar
    default when all its entries are that scalar.

    >>> call_text("normal_gamma", [4], {"mean": 0.0, "rate": 0.5}, {"mean": 0.0, "rate": 1.0})
    'normal_gamma(4, rate=0.5)'
    """
    defaults = defaults or {}
    parts = [value if isinstance(value, str) else short_value(value) for value in args]
    for key, value in (kwargs or {}).items():
        if key in defaults and _equal(value, defaults[key]):
            continue
        parts.append(f"{key}={short_value(value)}")
    return f"{name}({', '.join(parts)})"


def init_defaults(callable_: Any) -> dict[str, Any]:
    """The parameters of a function, or of a class's ``__init__``, that have defaults, with them.

    >>> init_defaults(lambda x, y=2, *, z="a": None)
    {'y': 2, 'z': 'a'}
    """
    target = callable_.__init__ if isinstance(callable_, type) else callable_
    return {name: parameter.default for name, parameter in inspect.signature(target).parameters.items()
            if parameter.default is not inspect.Parameter.empty}


def _equal(value: Any, default: Any) -> bool:
    if value is default:
        return True
    if value is None or default is None:
        return False
    try:
        array, reference = np.asarray(value), np.asarray(default)
        if array.dtype == object or reference.dtype == object:
            return bool(value == default)
        if reference.shape != () and array.shape != reference.shape:
            return False
        return array.size > 0 and bool(np.all(array == reference))
    except (TypeError, ValueError):
        return False


def made_with(provenance: Mapping[str, str] | None) -> str | None:
    """``"latentzoo 0.3.0, JAX 0.10.2 on cpu (float32, znver4)"`` from a fit's provenance, or None
    (:func:`inference.provenance.provenance`)."""
    if not provenance:
        return None
    width = "float64" if provenance.get("jax_enable_x64") == "true" else "float32"
    where = ", ".join(part for part in (width, provenance.get("host_cpu")) if part)
    return (f"{provenance.get('inference_library', 'latentzoo')} {provenance.get('inference_library_version', '?')}, "
            f"JAX {provenance.get('jax_version', '?')} on {provenance.get('jax_backend', '?')} ({where})")


def quantity_text(draws: Any, *, spec: str = ".3g") -> str:
    """Mean ± sd, range and chain means of a (chain, draw) array of one scalar quantity, each
    written with the format ``spec``: ``"3.17 ± 0.41 (2 to 5; by chain 3.1, 3.2, 3.2, 3.2)"``, or
    ``"9 in every draw"`` when it is constant. Non-finite draws are counted, not averaged.

    >>> quantity_text([[3, 3, 4], [3, 4, 4]])
    '3.5 ± 0.5 (3 to 4; by chain 3.33, 3.67)'
    """
    values = np.asarray(draws, np.float64)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return f"no finite draws ({values.size} draws)"
    low, high = finite.min(), finite.max()
    if low == high:
        text = f"{low:{spec}} in every draw"
    else:
        text = f"{finite.mean():{spec}} ± {finite.std():.2g} ({low:{spec}} to {high:{spec}}"
        if values.ndim == 2 and values.shape[0] > 1:
            with warnings.catch_warnings():  # a chain without a finite draw: its mean is nan, silently
                warnings.simplefilter("ignore", RuntimeWarning)
                means = np.nanmean(np.where(np.isfinite(values), values, np.nan), axis=1)
            text += f"; by chain {', '.join(f'{mean:{spec}}' for mean in means)}"
        text += ")"
    if finite.size < values.size:
        text += f"; {values.size - finite.size:,} of {values.size:,} draws not finite"
    return text


def chains_text(*, n_chains: int, n_draws: int, n_warmup: int, thin: int, seconds: float, completed: bool,
                stopped_by: str | None = None) -> str:
    """``"4 chains × 1,000 draws after 200 warm-up sweeps, 8.9 s"``, with the thinning and why the run
    ended when it did not end as asked (``stopped_by``, :attr:`inference.chains.ChainResult.stopped_by`;
    ``None``: not recorded).

    >>> chains_text(n_chains=2, n_draws=50, n_warmup=10, thin=2, seconds=1.25, completed=False,
    ...             stopped_by="time_budget")
    '2 chains × 50 draws (every 2nd sweep) after 10 warm-up sweeps, 1.2 s; stopped early by the time budget'
    >>> chains_text(n_chains=2, n_draws=0, n_warmup=200, thin=1, seconds=2.0, completed=False,
    ...             stopped_by="interrupted")
    '2 chains × 0 draws, stopped during the 200 warm-up sweeps (Ctrl-C), 2.0 s'
    >>> chains_text(n_chains=4, n_draws=440, n_warmup=200, thin=1, seconds=3.0, completed=True, stopped_by="mixed")
    '4 chains × 440 draws after 200 warm-up sweeps, 3.0 s; ended when the chains mixed'
    """
    why = _CHAINS_STOPPED_BY.get(stopped_by, "Ctrl-C or time budget")
    text = f"{n_chains} chain{'s' if n_chains != 1 else ''} × {n_draws:,} draws"
    if n_draws == 0 and not completed:  # not "after" sweeps that did not all run
        return text + f", stopped during the {n_warmup:,} warm-up sweeps ({why}), {seconds:.1f} s"
    if thin > 1:
        suffix = "nd" if thin % 10 == 2 and thin % 100 != 12 else "rd" if thin % 10 == 3 and thin % 100 != 13 else "th"
        text += f" (every {thin}{suffix} sweep)"
    text += f" after {n_warmup:,} warm-up sweeps, {seconds:.1f} s"
    if completed:
        return text + ("; ended when the chains mixed" if stopped_by == "mixed" else "")
    return text + (f"; stopped early {_STOPPED_EARLY[stopped_by]}" if stopped_by in _STOPPED_EARLY
                   else f"; stopped early ({why})")


#: Why chains stopped before their end (:func:`chains_text`), in a parenthesis and after "stopped early".
_CHAINS_STOPPED_BY = {"interrupted": "Ctrl-C", "time_budget": "time budget",
                      "capacity": "memory could not hold the grown capacity; a warning gave the figure"}
_STOPPED_EARLY = {"interrupted": "by Ctrl-C", "time_budget": "by the time budget",
                  "capacity": "(memory could not hold the grown capacity; a warning gave the figure)"}


_STOPPED_BY = {"converged": "converged", "max_iter": "stopped at max_iter", "max_passes": "stopped at max_passes",
               "beta_stop": "every β level run",
               "time_budget": "stopped by time_budget (the finished work is kept)",
               "interrupted": "interrupted by Ctrl-C (the finished work is kept)"}


def stopped_text(stopped_by: str) -> str:
    """What a fit's ``stopped_by`` means, in words (``"stopped at max_iter"``)."""
    return _STOPPED_BY.get(stopped_by, str(stopped_by))


def params_text(params: Any) -> str:
    """The fields of a parameter NamedTuple with their shapes: ``"class_prior (8,), row_given_class (395, 8)"``."""
    fields = getattr(params, "_fields", None)
    if fields is None:
        return type(params).__name__
    return ", ".join(f"{name} {tuple(np.shape(getattr(params, name)))}" for name in fields)


def scores_text(scores: Any, spec: str) -> str:
    """Every score when there are at most eight, else their range.

    >>> scores_text([1.5, 2.25], ".3g"), scores_text(range(10), ".0f")
    ('1.5, 2.25', '0 to 9')
    """
    values = np.asarray(scores, np.float64).ravel()
    if values.size <= 8:
        return ", ".join(f"{value:{spec}}" for value in values)
    return f"{values.min():{spec}} to {values.max():{spec}}"


@dataclass
class Card:
    """What :meth:`Described.__repr__` and :meth:`Described._repr_html_` show.

    Attributes
    ----------
    title : str
        First line (the HTML caption).
    rows : list of (label, value)
        One fact each; values longer than a line are wrapped under their label.
    tables : list of (caption, pandas.DataFrame)
        Shown in the HTML only (the text names them through a row instead).
    """

    title: str
    rows: list[tuple[str, str]] = field(default_factory=list)
    tables: list[tuple[str, Any]] = field(default_factory=list)

    def add(self, label: str, value: Any) -> None:
        """Append a row; ``None`` values are left out. A list or tuple of strings is written with
        commas between them, and text lines break only between its items."""
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(item).replace(" ", _UNBROKEN) for item in value)
        if value is not None:
            self.rows.append((label, str(value)))

    def text(self) -> str:
        """The title, then each row as ``label  value`` with the values aligned and wrapped."""
        if not self.rows:
            return self.title
        width = max(len(label) for label, _ in self.rows)
        indent = " " * (width + 4)
        lines = [self.title]
        for label, value in self.rows:
            lines.append(textwrap.fill(value, WIDTH, initial_indent=f"  {label:<{width}}  ",
                                       subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)
                         if len(value) + len(indent) > WIDTH else f"  {label:<{width}}  {value}")
        return "\n".join(lines).replace(_UNBROKEN, " ")

    def html(self) -> str:
        """The rows as a two-column table under the title, then the tables."""
        cells = "".join(f"<tr><th style='text-align:left;vertical-align:top'>{html.escape(label)}</th>"
                        f"<td style='text-align:left'>{html.escape(value.replace(_UNBROKEN, ' '))}</td></tr>"
                        for label, value in self.rows)
        parts = [f"<table><caption style='text-align:left'><b>{html.escape(self.title)}</b></caption>{cells}</table>"]
        for caption, table in self.tables:
            parts.append(f"<details><summary>{html.escape(caption)}</summary>{table.to_html()}</details>")
        return "<div>" + "".join(parts) + "</div>"


class Described:
    """Mixin: ``repr`` and Jupyter's HTML from the object's :meth:`_card`.

    A card that cannot be made (an object restored without what it needs) falls back to the
    default repr with the error named, so that displaying an object never raises. Dataclasses
    that mix this in must be declared with ``repr=False``, or their generated repr replaces it.
    """

    @abstractmethod
    def _card(self) -> Card:
        """The object's card (each class that mixes this in defines it)."""

    def _safe_card(self) -> Card | str:
        try:
            return self._card()
        except Exception as error:  # noqa: BLE001 - displaying must not raise; the error is shown
            return (f"<{type(self).__module__}.{type(self).__qualname__} object; no description: "
                    f"{type(error).__name__}: {error}>")

    def __repr__(self) -> str:
        card = self._safe_card()
        return card if isinstance(card, str) else card.text()

    def _repr_html_(self) -> str:
        card = self._safe_card()
        return f"<pre>{html.escape(card)}</pre>" if isinstance(card, str) else card.html()


def chains_card(card: Card, result: Any, fit: Any, *, quantities: Sequence[tuple[str, str, str]]) -> Card:
    """Add to ``card`` what the chains of a :class:`inference.chains.ChainResult` hold.

    Rows: ``chains`` (:func:`chains_text`); then, for each ``(label, name, spec)`` of
    ``quantities`` that the draws record, :func:`quantity_text` of ``result.samples[name]``; then
    ``mixing``, the sentence of :func:`inference.diagnostics.mixing_verdict` on ``fit.mixing``
    (whose table the HTML shows); and ``made with`` (:func:`made_with`). Chains stopped before
    their first draw get the message that says where their states are instead.
    """
    from inference import diagnostics  # ArviZ: only when a fit is shown

    card.add("chains", chains_text(n_chains=result.n_chains, n_draws=result.n_draws, n_warmup=result.n_warmup,
                                   thin=result.thin, seconds=result.seconds, completed=result.completed,
                                   stopped_by=result.stopped_by))
    if not result.samples:
        card.add("draws", diagnostics.no_draws_message(result, getattr(fit, "_continue_with", None)))
    else:
        for label, name, spec in quantities:
            if name in result.samples:
                card.add(label, quantity_text(result.samples[name], spec=spec))
        add_mixing(card, fit.mixing)
    card.add("made with", made_with(result.provenance))
    return card


def add_mixing(card: Card, table: Any) -> None:
    """Add the ``mixing`` row, the sentence of :func:`inference.diagnostics.mixing_verdict` on
    ``table`` (a :func:`~inference.diagnostics.mixing_table`), and the table itself for the HTML."""
    from inference import diagnostics  # ArviZ: only when a fit is shown

    card.add("mixing", diagnostics.mixing_verdict(table))
    card.tables.append(("mixing table (summary())", table))
