"""Command line: fit a zoo model to a data file, list and describe the models, run the demo.

::

    python -m zoo list
    python -m zoo describe MODEL
    python -m zoo fit MODEL DATAFILE [--classes K] [--schedule auto|tempered|em|annealing]
                      [--valid-fraction 0.1] [--prior-count C] [--floor P] [--restarts N]
                      [--max-iter N] [--seed S]
                      [--out DIR] [--format mtx|ldac|csv]
                      [--processes N [--process-id I --coordinator HOST:PORT]]
    python -m zoo fit gaussian-mixture TABLE.csv [--classes K] [--id-column NAME] [--label-column NAME]
                      [--no-standardize] [the EM options above]
    python -m zoo fit dp-mixture|cdp TABLE.csv [--chains 4] [--warmup 200] [--draws N]
                      [--sampler collapsed|auxiliary|conjugate|subcluster] [--split-merge 10]
                      [--id-column NAME] [--label-column NAME] [--no-standardize] [--seed S] [--out DIR]
    python -m zoo fit scdp-1|scdp-2|scdp-3 TABLE.csv --label-column NAME [--truth-column NAME]
                      [--chains 4] [--warmup 500] [--draws N] [--split-merge N] [--type-split-merge N]
                      [--precision-shape 1] [--precision-rate 1]
                      [--id-column NAME] [--no-standardize] [--seed S] [--out DIR]
    python -m zoo fit irm EDGES.csv [--source COLUMN] [--target COLUMN] [--directed] [--chains 4]
                      [--warmup 1000] [--draws N] [--split-merge 10] [--seed S] [--out DIR]
    python -m zoo fit latent-class-relational EDGES.csv [--source COLUMN] [--target COLUMN] [--directed]
                      [--classes 2] [--restarts 10] [--max-iter 200] [--prior-count 1] [--init RESULT.npz]
                      [--seed S] [--out DIR]
    python -m zoo fit irm|latent-class-relational RATINGS.csv --source USER --target ITEM --rating COLUMN
                      [--threshold T] [the options above]
    python -m zoo demo [--classes K] [--seed S]

``fit`` reads MatrixMarket (``.mtx``), LDA-C (``.ldac``, ``.lda-c``, ``.dat``) or CSV edge lists
(``.csv``: columns ``source,target[,weight]``), fits the model with the estimator of
:data:`zoo.sklearn.ESTIMATORS` (progress bar on stderr; by default with the model's own β
schedule on a validation split, ``--schedule auto``) and writes ``result.npz``
(:func:`zoo.io.save_result`), ``labels.csv`` (each row's cluster, the CAM's leaf or the aspect
model's likeliest aspect; ``column_labels.csv`` too for the two-sided model's columns) and
``report.html`` (:func:`zoo.report.write_report`) to ``--out``. The Gaussian mixture
(``gaussian-mixture``) reads a CSV file as a table of points instead, as the Dirichlet-process
mixtures do (``--id-column``, ``--label-column``, ``--no-standardize``), and a MatrixMarket or
LDA-C file as one row of features per point.
The Dirichlet-process mixtures (``dp-mixture``: Normal–Gamma Gaussians; ``cdp``: DM05's
identity-precision Gaussians) read a CSV table instead, one row per point and one numeric column
per feature (:func:`read_table`), standardise the features unless ``--no-standardize``, and run
:meth:`zoo.dirichlet.mixture.DPMixture.fit` with the model's registry settings
(:func:`zoo.registry.get_model`): by default until the chains mix, 10,000 draws per chain at most
(``--draws N`` for exactly N), with Algorithm 3 and ten split–merge moves per sweep unless
``--sampler`` and ``--split-merge`` say otherwise. They write ``chains.nc`` (:func:`zoo.io.save_chains`: ArviZ
netCDF with the settings), ``labels.csv`` (the point-estimate cluster of each row, by
``--id-column`` when given, else by its position in the file, ``row``, the index ``pd.read_csv`` gives
it; the draw of highest log joint instead, said before sampling, when the
point estimate's N × N matrices would not fit in memory) and ``report.html``, and print the chains'
mixing verdict; a
``--label-column`` of known classes is left out of the fit and the point estimate is scored
against it (DM05 §6). The infinite relational model (``irm``) reads a CSV edge list (columns
``--source`` and ``--target``; :func:`read_network`) as a network in which every pair of nodes is
observed, linked or not, runs :meth:`zoo.relational.infinite.InfiniteRelational.sample` with ten
split–merge moves per sweep until its chains mix (that method's default: at most
:data:`zoo.relational.infinite.UNTIL_MIXED_DRAWS` draws per chain after 1,000 warm-up sweeps),
and writes the same three files, ``labels.csv`` holding each node's cluster in the kept draw of
highest log joint and ``chains.nc`` every kept draw's clusters (``assignments_<domain>``;
:meth:`zoo.relational.infinite.IRMResult.from_inference_data` of it and the network gives the
result again). The supervised models (``scdp-1``, ``scdp-2``, ``scdp-3``; DM05) read the same
tables: the rows whose ``--label-column`` holds a value are the training references and that value
their publication, the rows whose label is empty are the test references to cluster;
:meth:`zoo.dirichlet.supervised.SupervisedDP.fit` runs until its chains mix (500 warm-up sweeps, at
most 4,000 draws per chain), and ``labels.csv`` holds each test row's publication in the point
estimate; a ``--truth-column`` of the test rows' true classes (not a feature) scores it (DM05 §6).
``--precision-shape`` and ``--precision-rate`` set the Gamma(shape, rate) prior of the reference types'
precisions (G0^t, default Gamma(1, 1) as DM05 §5; SCDP-2 re-sets it each sweep from the spread of the
publication means and keeps it only where the means do not spread), as the warning about a prior
that outweighs the training publications advises (``--precision-rate`` with a value).
The latent-class relational model (``latent-class-relational``, alias ``lrm``; Chiang and Poole)
reads the same edge lists as the IRM and fits
:meth:`zoo.relational.latent_class.LatentClassRelational.fit` by incremental EM, its restarts in
parallel and the best kept (``--classes`` classes per domain, default 2; ``--restarts``, default 10;
``--max-iter`` passes over the nodes at most, default 200; ``--prior-count`` the model's
``prior_count``, default 1), and writes ``result.npz`` (:func:`zoo.io.save_result`; ``load_result``
gives the ``LRMResult`` back), ``labels.csv`` (each node's most probable class and its probability),
``blocks.csv`` (the probability of a link from a node of one class to one of another, θ_r of CP
eq. 5) and ``report.html``. ``--init RESULT.npz`` continues the fit saved there on the same data
file: one run from its class posteriors, ``--max-iter`` more passes (those its kept restart would
have made next), its classes and ``prior_count`` unless given. With ``--rating COLUMN`` both relational models read a
table of ratings instead (:func:`read_ratings`: one line per rated ``--source``, ``--target`` pair)
as CP §3 do, a binary ``likes`` between two domains named after the two columns, 1 where the rating
is above ``--threshold`` (default: the mean rating), the pairs not rated missing; ``labels.csv``
then gives each individual's domain as well. Options that a model has no use for (the EM
options for the Gibbs models, the chains' options for the EM ones) are refused, not ignored.
The mixing verdict, printed and in the report, names these options where the fits' advice names
Python's settings (``--split-merge`` for ``n_split_merge``, ``--sampler subcluster`` for the
sub-cluster sampler, ``--type-split-merge`` for ``n_type_split_merge``, a larger ``--draws`` for
``fit.resume``).
Ctrl-C or ``--time-budget`` stops the chains after the call in flight (the fits act on the first
Ctrl-C, :class:`inference.interrupts.DeferredInterrupt`); ``fit`` writes what finished and names
which stopped it (the fits' ``stopped_by``), exiting with :data:`EXIT_INTERRUPTED` (130) after
Ctrl-C; it also writes :data:`WARMUP_FILE` (``fit.pkl``: the fit and the data it was given, pickled)
and says how ``fit.resume`` continues the chains from Python. Chains stopped in their warm-up have
no draws: ``fit`` then writes ``fit.pkl`` alone and exits with 130 after Ctrl-C, 1 after the time
budget. The EM fits stop after the segment in flight, write what finished
(``stopped_by`` printed) and exit with 130 after Ctrl-C too.
``list`` prints every model of :mod:`zoo.registry` (its data, whether ``fit`` takes it, a summary);
``describe`` prints one model's card (paper, equations, latent structure, engines).

Several processes (``--processes N``, the count-data models): each process fits the rows it
holds and the processes add up their statistics (:func:`inference.em.tempered_em` with
``process_local=True`` over ``jax.distributed``); process 0 writes the outputs. On one machine
``--processes N`` alone starts the N processes on 127.0.0.1 (CPU, gloo collectives). On several
machines start one process per machine yourself, each with ``--processes N --process-id I
--coordinator HOST:PORT`` (HOST: the machine of process 0, PORT: a free port there)::

    python -m zoo fit aspect part-{process}.mtx --processes 4 --process-id 2 --coordinator node0:12345

A ``{process}`` in DATAFILE is replaced by the process id: each process then reads only its own
file, a MatrixMarket file with the global shape in its header and its own cells (a part of the
rows for the one-sided and CAM models; any part for the aspect and two-sided models). Without it
every process reads DATAFILE and keeps its contiguous range of rows. Each process holds out its
own validation tokens (seed + process id).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

__all__ = ["main", "build_parser", "read_data", "read_table", "read_network", "read_ratings", "FORMATS",
           "CHAIN_MODELS", "RELATIONAL_EM_MODELS"]

#: File formats by name, with the extensions that select them.
FORMATS = {"mtx": (".mtx", ".mm"), "ldac": (".ldac", ".lda-c", ".dat"), "csv": (".csv",)}

#: The models ``fit`` samples with Gibbs chains (registry names): the Dirichlet-process mixtures,
#: unsupervised and supervised, from a CSV table of features, the IRM from a CSV edge list.
SUPERVISED_MODELS = ("scdp-1", "scdp-2", "scdp-3")
CHAIN_MODELS = ("dp-mixture", "cdp", *SUPERVISED_MODELS, "irm")
#: The models ``fit`` fits by incremental EM on a CSV edge list (CP): the latent-class relational model.
RELATIONAL_EM_MODELS = ("latent-class-relational",)
#: The EM options' values when not given, for the EM models of :data:`zoo.sklearn.ESTIMATORS` and for
#: the latent-class relational model (its Python defaults: CP §3's ten restarts, two classes).
EM_DEFAULTS = {"classes": 8, "restarts": 1, "max_iter": 500, "valid_fraction": 0.1, "prior_count": 0.0}
RELATIONAL_EM_DEFAULTS = {"classes": 2, "restarts": 10, "max_iter": 200}
#: Warm-up sweeps of the DP mixtures without ``--warmup`` (their Python default; the IRM and the
#: supervised models take theirs, ``zoo.relational.infinite.DEFAULT_WARMUP`` and half of
#: ``zoo.dirichlet.supervised.fit.DEFAULT_SWEEPS``).
DP_WARMUP = 200
#: ``--sampler``'s choices for dp-mixture and cdp: ``DPMixture``'s algorithms (Neal's 3, 8 and 2, and
#: the sub-cluster sampler).
DP_SAMPLERS = ("collapsed", "auxiliary", "conjugate", "subcluster")
#: Chains of ``fit`` for the Gibbs models without ``--chains``.
DEFAULT_CHAINS = 4
#: The exit status of ``fit`` after Ctrl-C (128 + SIGINT, as shells give), whatever it wrote; a
#: run of chains that a time budget stopped in its warm-up, before any draw, exits with 1.
EXIT_INTERRUPTED = 130
#: What a run of chains stopped before its end (Ctrl-C, the time budget) writes to ``--out``: ``(fit, data)``,
#: pickled, whose ``fit.resume(*data, ...)`` continues the chains, finishing a warm-up cut short first
#: (the command line has no way to continue).
WARMUP_FILE = "fit.pkl"


class _Stopped(Exception):
    """A run that stopped before it had anything to report (``fit`` says why, exits with ``status``)."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def _format_of(path: Path, requested: str | None) -> str:
    if requested is not None:
        return requested
    name = path.name.lower()
    for fmt, extensions in FORMATS.items():
        if name.endswith(extensions) or any(name.endswith(extension + ".gz") for extension in extensions):
            return fmt
    raise ValueError(f"DATAFILE: cannot tell the format of {path.name!r} from its extension; "
                     f"pass --format ({', '.join(FORMATS)})")


def _data_file(path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"DATAFILE: expected a path (str or os.PathLike), got {type(path).__name__} {path!r:.40}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"DATAFILE: {str(path)!r} " + ("is a directory, not a data file" if path.is_dir()
                                                               else "does not exist"))
    return path


def _read_csv(path: Any, columns: dict[str, str | None]) -> tuple[Path, Any]:
    """The CSV file at ``path`` as a pandas table, having the ``columns`` that options name
    (``{"--id-column": name or None, ...}``)."""
    import pandas as pd

    path = _data_file(path)
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise ValueError(f"DATAFILE: {path.name!r} is not a CSV table ({type(error).__name__}: {error})") from None
    for option, column in columns.items():
        if column is not None and column not in frame.columns:
            raise ValueError(f"{option}: no column {column!r} in {path.name} (columns: "
                             f"{', '.join(map(str, frame.columns[:10]))}{', ...' if frame.shape[1] > 10 else ''})")
    return path, frame


def read_table(path: str | os.PathLike, *, id_column: str | None = None, label_column: str | None = None,
               truth_column: str | None = None) -> tuple[np.ndarray, list[str], Any, Any]:
    """Read a CSV table of points: one row per point, a header, one numeric column per feature.

    Parameters
    ----------
    path : str or PathLike
    id_column, label_column : str, optional
        Columns that are not features: the rows' names, and known classes (to score against).
    truth_column : str, optional
        A column of true classes that is not a feature either (``--truth-column``): checked to
        exist and left out of the features (read it with pandas).

    Returns
    -------
    (features, feature_names, ids, labels)
        ``features`` a float array (N, D); ``ids`` and ``labels`` pandas Series or None.

    Raises
    ------
    ValueError
        A named column that the table lacks, a column that is not numeric, no feature column, no
        row, or a missing value (naming its row and column).
    """
    import pandas as pd

    path, frame = _read_csv(path, {"--id-column": id_column, "--label-column": label_column,
                                   "--truth-column": truth_column})
    if id_column is not None and id_column == label_column:
        raise ValueError(f"--label-column: {label_column!r} is also the --id-column")
    if truth_column is not None and truth_column in (id_column, label_column):
        raise ValueError(f"--truth-column: {truth_column!r} is also the "
                         + ("--id-column" if truth_column == id_column else "--label-column"))
    ids = frame.pop(id_column) if id_column is not None else None
    labels = frame.pop(label_column) if label_column is not None else None
    if truth_column is not None:
        frame.pop(truth_column)
    text = [str(column) for column in frame.columns if not pd.api.types.is_numeric_dtype(frame[column])]
    if text:
        raise ValueError(f"DATAFILE: column(s) {', '.join(map(repr, text[:5]))} of {path.name} are not numbers; "
                         "name a column of row names with --id-column and one of known classes with --label-column, "
                         "or remove the others")
    if frame.shape[1] == 0 or frame.shape[0] == 0:
        raise ValueError(f"DATAFILE: {path.name} has no feature column or no row")
    features = frame.to_numpy(dtype=float)
    missing = ~np.isfinite(features)
    if missing.any():
        row, column = np.argwhere(missing)[0]
        raise ValueError(f"DATAFILE: {int(missing.any(axis=1).sum())} row(s) of {path.name} have missing or "
                         f"infinite values (the first: row {row + 1}, column {frame.columns[column]!r}); "
                         "fill or drop them")
    return features, [str(column) for column in frame.columns], ids, labels


def read_data(path: str | os.PathLike, fmt: str | None = None, *, source: str = "source",
              target: str = "target", weight: str | None = None) -> Any:
    """Read a count file as a :class:`zoo.data.CoOccurrence` (format from the extension or ``fmt``).

    Errors name what the command line calls the file and the columns: ``DATAFILE`` with the path as
    given (``DATAFILE: 'empty.csv' is empty``) and ``--source``, ``--target``, ``--weight``."""
    from zoo.datasets import read_edge_list, read_ldac, read_matrix_market

    typed = path
    path = _data_file(path)
    fmt = _format_of(path, fmt)
    readers = {"mtx": lambda: read_matrix_market(path), "ldac": lambda: read_ldac(path),
               "csv": lambda: read_edge_list(path, source=source, target=target, weight=weight)}
    if fmt not in readers:
        raise ValueError(f"--format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    try:
        return readers[fmt]()
    except (ValueError, TypeError) as error:
        raise type(error)(_as_data_file_error(str(error), os.fspath(typed))) from None


def _as_data_file_error(message: str, typed: str) -> str:
    """An error of :mod:`zoo.datasets`' readers, which name their arguments (``path: is empty``,
    ``source: column 'doc' not in the file``), named as the command line's: ``DATAFILE`` and the
    path as typed, ``--source``, ``--target``, ``--weight``."""
    name, colon, rest = message.partition(": ")
    if colon and name in ("source", "target", "weight"):
        return f"--{name}: {rest}"
    if not (colon and name == "path"):
        return message
    if re.match(r"line \d+ ", rest):  # line 3 is not in LDA-C format -> line 3 of 'x.ldac' is ...
        return "DATAFILE: " + re.sub(r"^(line \d+)", lambda match: f"{match.group(1)} of {typed!r}", rest)
    if rest.startswith("not "):
        rest = "is " + rest
    joined = " " if rest.startswith(("is ", "contains ", "has ")) else ": "
    return f"DATAFILE: {typed!r}{joined}{rest}"


def _training_rows(labels: Any, label_column: str | None, name: str) -> np.ndarray:
    """The rows of a supervised table that hold a label (training); the others are the test rows."""
    if labels is None:
        raise ValueError("--label-column: the supervised models need a column of the training rows' publications "
                         "(empty in the test rows to cluster)")
    is_train = labels.notna().to_numpy() & (labels.astype(str).str.strip() != "").to_numpy()
    if not is_train.any() or is_train.all():
        raise ValueError(f"--label-column: {label_column!r} of {name} has {'no' if not is_train.any() else 'every'} "
                         "row labelled; label the training rows and leave the test rows to cluster empty")
    return is_train


def _test_truth(path: Any, truth_column: str | None, is_train: np.ndarray) -> Any:
    """The ``--truth-column`` classes of the test rows of a supervised table (None without it)."""
    if truth_column is None:
        return None
    import pandas as pd

    truth = pd.read_csv(path, usecols=[truth_column])[truth_column][~is_train].reset_index(drop=True)
    missing = truth.isna().to_numpy() | (truth.astype(str).str.strip() == "").to_numpy()
    if missing.any():
        raise ValueError(f"--truth-column: {int(missing.sum())} test row(s) have no class in {truth_column!r} "
                         f"(the first: row {int(np.flatnonzero(~is_train)[np.argmax(missing)]) + 1})")
    return truth


def _seed(text: str) -> int:
    """``--seed``: a whole number >= 0 (scikit-learn's random_state, which the EM estimators take, and
    NumPy's seeds refuse negative ones)."""
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if seed < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {seed}")
    return seed


def _fit_model(name: str) -> str:
    """The ``fit`` command's model name for ``name``: a name the command fits, or an alias of one in
    the registry (``plsa``, ``acm``, ``gmm``, ``scdp1``, ...), in any case, ``_`` for ``-``."""
    from zoo.registry import canonical_name
    from zoo.sklearn import ESTIMATORS

    fitted = [*ESTIMATORS, *CHAIN_MODELS, *RELATIONAL_EM_MODELS]
    try:
        key = canonical_name(name)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"invalid choice: {str(error).removeprefix('name: ')}; the fit command "
                                         f"takes {', '.join(fitted)} or their aliases (python -m zoo list)") from None
    if key not in fitted:
        raise argparse.ArgumentTypeError(f"{name!r} ({key}) is in the zoo but has no fit command: fit it from Python "
                                         f"(python -m zoo describe {key} names its class)")
    return key


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m zoo`` argument parser (subcommands ``demo``, ``list`` and ``fit``)."""
    from zoo.sklearn import ESTIMATORS, SCHEDULES

    parser = argparse.ArgumentParser(prog="python -m zoo", description="latentzoo command line")
    commands = parser.add_subparsers(dest="command")
    demo = commands.add_parser("demo", help="aspect model on Reuters: held-out perplexity per β")
    demo.add_argument("--classes", type=int, default=32, help="number of aspects K (default 32)")
    demo.add_argument("--seed", type=_seed, default=0)
    commands.add_parser("list", help="print the zoo's models (those marked 'fit' work with the fit command)")
    describe = commands.add_parser("describe", help="print a model's card: paper, equations, latent structure, engines")
    describe.add_argument("model", metavar="MODEL", help="a name printed by `list` (or an alias such as acm)")
    fit = commands.add_parser("fit", help="fit a model to a data file; write the fit and report.html")
    fit.add_argument("model", type=_fit_model, metavar="MODEL",
                     help="one of: " + ", ".join([*ESTIMATORS, *CHAIN_MODELS, *RELATIONAL_EM_MODELS])
                          + " (or an alias such as plsa, acm or lrm)")
    fit.add_argument("datafile", metavar="DATAFILE",
                     help="MatrixMarket, LDA-C or CSV edge list; for dp-mixture, cdp and scdp-* a CSV table of "
                          "features")
    fit.add_argument("--classes", type=int, default=None,
                     help="number of classes K (default 8; latent-class-relational: classes per domain, default 2)")
    fit.add_argument("--schedule", choices=SCHEDULES, default="auto",
                     help="β schedule: the model's own with a validation split (auto, the default: annealing up "
                          "from β = 0.01 for one-sided and cam, tempered EM for the others), tempered EM, plain EM, "
                          "or annealing")
    fit.add_argument("--valid-fraction", type=float, default=None,
                     help="share of tokens held out to choose β (auto and tempered; default 0.1)")
    fit.add_argument("--prior-count", type=float, default=None, metavar="C",
                     help="count models: MAP-EM, C pseudo-counts added to every expected count, so that no held-out "
                          "token has probability 0 (default 0: maximum likelihood); latent-class-relational: its "
                          "prior_count (default 1)")
    fit.add_argument("--floor", type=float, default=None, metavar="P",
                     help="count models: score held-out tokens of probability 0 at P in the validation perplexity "
                          "(default: count them, preferring iterates with fewer)")
    fit.add_argument("--restarts", type=int, default=None,
                     help="random restarts, run in parallel (default 1; latent-class-relational: 10, the best kept)")
    fit.add_argument("--max-iter", type=int, default=None,
                     help="iteration cap (default 500; latent-class-relational: passes over the individuals, 200)")
    fit.add_argument("--init", default=None, metavar="RESULT.npz",
                     help="latent-class-relational: continue the fit saved there (its result.npz) on the same "
                          "data file, one restart, --max-iter more passes")
    fit.add_argument("--seed", type=_seed, default=0, help="random seed, a whole number >= 0 (default 0)")
    fit.add_argument("--out", default="zoo-fit", help="output directory (default ./zoo-fit)")
    fit.add_argument("--format", choices=sorted(FORMATS), default=None, help="input format (default: from the extension)")
    fit.add_argument("--source", default="source", help="CSV column of the row objects (default 'source')")
    fit.add_argument("--target", default="target", help="CSV column of the column objects (default 'target')")
    fit.add_argument("--weight", default=None, help="CSV column of the counts (default: each line counts 1)")
    fit.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                     help="stop after the segment of iterations in which these run out, keeping the fit so far "
                          "(with --processes, all processes stop together)")
    fit.add_argument("--quiet", action="store_true", help="no progress bar")
    fit.add_argument("--processes", type=int, default=1,
                     help="fit with N processes, each holding its rows (default 1); alone: N on this machine")
    fit.add_argument("--process-id", type=int, default=None,
                     help="with --processes and --coordinator: this process's id, 0 to N-1 (one per machine)")
    fit.add_argument("--coordinator", default=None, help="HOST:PORT of process 0 (jax.distributed's coordinator)")
    chains = fit.add_argument_group("dp-mixture, cdp, scdp-1, scdp-2, scdp-3 and irm (Gibbs chains; --classes, "
                                    "--schedule and the EM options do not apply), and the relational models' data "
                                    "(--directed, --rating, --threshold: irm and latent-class-relational)")
    chains.add_argument("--chains", type=int, default=None, help="chains from dispersed starts (default 4)")
    chains.add_argument("--warmup", type=int, default=None,
                        help="warm-up sweeps per chain (default 200 for the DP mixtures, 500 for scdp-*, 1000 "
                             "for the IRM)")
    chains.add_argument("--draws", type=int, default=None,
                        help="draws per chain (default: until the chains mix, at most 10,000; 4,000 for scdp-*)")
    chains.add_argument("--directed", action="store_true",
                        help="irm, latent-class-relational: the edge list's links have a direction")
    chains.add_argument("--rating", default=None, metavar="COLUMN",
                        help="irm, latent-class-relational: DATAFILE is a table of ratings, one line per rated "
                             "--source and --target pair (two domains), fitted as likes = rating above --threshold "
                             "(CP §3); pairs not rated are missing")
    chains.add_argument("--threshold", type=float, default=None,
                        help="with --rating: the rating above which a pair counts as liked (default: the mean "
                             "rating, as CP §3)")
    chains.add_argument("--split-merge", type=int, default=None, metavar="N",
                        help="split-merge moves per sweep of the partition (default: the model's; 10 for the DP "
                             "mixtures and irm, for scdp-* one per two test classes the training rows lead one to "
                             "expect, 10 to 100)")
    chains.add_argument("--sampler", choices=DP_SAMPLERS, default=None,
                        help="dp-mixture, cdp: Neal's Algorithm 3 (collapsed, the default), 8 (auxiliary) or 2 "
                             "(conjugate), with --split-merge moves, or the sub-cluster split/merge sampler of "
                             "Chang & Fisher (subcluster, its own splits and merges)")
    chains.add_argument("--type-split-merge", type=int, default=None, metavar="N",
                        help="scdp-1, scdp-2: split-merge moves of the reference types per sweep (default 0 for "
                             "scdp-1, 5 for scdp-2)")
    chains.add_argument("--precision-shape", type=float, default=None, metavar="A",
                        help="scdp-*: shape of the Gamma(A, rate B) prior of the reference types' precisions "
                             "(G0^t; default 1, DM05 §5; scdp-2 re-sets the prior each sweep from the spread of the "
                             "publication means, keeping this one only where they do not spread)")
    chains.add_argument("--precision-rate", type=float, default=None, metavar="B",
                        help="scdp-*: rate of that prior (default 1), whose mean precision is A / B: lower it when "
                             "the training publications are tighter than the data (the fit's warning says to what)")
    chains.add_argument("--id-column", default=None,
                        help="column of row names (not a feature; a gaussian-mixture CSV table's too)")
    chains.add_argument("--label-column", default=None,
                        help="column of known classes: not a feature; the point estimate is scored against it "
                             "(scdp-*: the training rows' publications, empty in the test rows to cluster; "
                             "gaussian-mixture: left out of its table's features)")
    chains.add_argument("--truth-column", default=None,
                        help="scdp-*: column of the true classes of the test rows (not a feature): their point "
                             "estimate is scored against it")
    chains.add_argument("--no-standardize", action="store_true",
                        help="fit the features as they are (default: centred and scaled to unit variance; "
                             "gaussian-mixture's CSV table too)")
    return parser


def _list_models(stream: Any) -> None:
    from zoo.registry import MODEL_NAMES, describe

    width = max(len(name) for name in MODEL_NAMES)
    for name in MODEL_NAMES:
        card = describe(name)
        fit = "fit" if card.cli_fit else ""
        stream.write(f"{name:<{width}}  {'[' + card.data + ']':<12}  {fit:<3}  {card.summary}\n")
    stream.write("\n'fit': python -m zoo fit MODEL DATAFILE; the others are fitted from Python "
                 "(python -m zoo describe MODEL)\n")


def _launch_processes(arguments: argparse.Namespace, argv: list[str]) -> int:
    """Start ``--processes`` copies of this command on 127.0.0.1 (one CPU device each, gloo); wait for all.

    If one fails the others fail too (their next sum across processes breaks); the exit status is
    the first non-zero one.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    workers = [subprocess.Popen([sys.executable, "-m", "zoo", *argv, "--process-id", str(index),
                                 "--coordinator", f"127.0.0.1:{port}"], env=environment)
               for index in range(arguments.processes)]
    codes = [worker.wait() for worker in workers]
    return next((code for code in codes if code), 0)


def _with_global_names(data: Any) -> Any:
    """A CSV part's counts indexed by the names of every process's part (their sorted union).

    A MatrixMarket part carries the global shape; a CSV edge list only its own names. The processes
    exchange their names (not their cells) and each re-indexes its cells into the union, sorted as
    a one-process read of all the lines sorts them, so the fit equals the one-process fit.
    """
    import json

    from jax.experimental import multihost_utils

    from zoo.data import CoOccurrence

    def plain(name: Any) -> Any:  # a NumPy scalar as the Python value JSON keeps (ints stay ints)
        return name.item() if isinstance(name, np.generic) else name

    def union(names: tuple) -> list:
        encoded = np.frombuffer(json.dumps([plain(name) for name in names]).encode(), np.uint8)
        lengths = np.asarray(multihost_utils.process_allgather(np.asarray([encoded.size], np.int32))).reshape(-1)
        padded = np.zeros(int(lengths.max()), np.uint8)
        padded[: encoded.size] = encoded
        gathered = np.asarray(multihost_utils.process_allgather(padded)).reshape(lengths.size, -1)
        every = {name for row, length in zip(gathered, lengths) for name in json.loads(bytes(row[:length]).decode())}
        return sorted(every)

    rows, cols = union(data.row_names), union(data.col_names)
    row_index = {name: index for index, name in enumerate(rows)}
    col_index = {name: index for index, name in enumerate(cols)}
    new_rows = np.asarray([row_index[plain(name)] for name in data.row_names], np.int64)[data.rows]
    new_cols = np.asarray([col_index[plain(name)] for name in data.col_names], np.int64)[data.cols]
    return CoOccurrence(new_rows, new_cols, data.counts, (len(rows), len(cols)), tuple(rows), tuple(cols))


def _own_part(arguments: argparse.Namespace) -> tuple[Any, str]:
    """This process's data (``{process}`` in DATAFILE: its own file; else its range of rows) and its file name."""
    import jax

    from zoo.data import CoOccurrence

    datafile = arguments.datafile.replace("{process}", str(arguments.process_id))
    data = read_data(datafile, arguments.format, source=arguments.source, target=arguments.target,
                     weight=arguments.weight)
    if datafile != arguments.datafile and _format_of(Path(datafile), arguments.format) == "csv":
        data = _with_global_names(data)
    if datafile == arguments.datafile:
        bounds = np.linspace(0, data.n_rows, jax.process_count() + 1).astype(int)
        keep = (data.rows >= bounds[arguments.process_id]) & (data.rows < bounds[arguments.process_id + 1])
        data = CoOccurrence(data.rows[keep], data.cols[keep], data.counts[keep], data.shape, data.row_names,
                            data.col_names)
    return data, datafile


def _fit_in_processes(arguments: argparse.Namespace, estimator: Any) -> tuple[Any, Any]:
    """One of ``--processes``: join the others, fit this process's part with ``process_local=True``."""
    import jax

    from inference.em import tempered_em
    from zoo.data import as_numpy_rng

    if not estimator._count_data:
        raise ValueError(f"--processes: {arguments.model} is fitted in one process (it takes features, not counts)")
    if arguments.coordinator is None or not 0 <= arguments.process_id < arguments.processes:
        raise ValueError("--process-id: expected 0 to --processes - 1, with --coordinator HOST:PORT")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # the CPU's; GPUs and TPUs bring their own
    jax.distributed.initialize(coordinator_address=arguments.coordinator, num_processes=arguments.processes,
                               process_id=arguments.process_id)
    data, _ = _own_part(arguments)
    schedule, key = estimator._check_params()
    key_split, key_fit = jax.random.split(key)
    train, valid = data, None
    if estimator._validated(schedule):
        rng = as_numpy_rng(arguments.seed + arguments.process_id)
        with warnings.catch_warnings():  # an empty part is refused just below, naming --valid-fraction
            warnings.filterwarnings("ignore", "fractions: part", UserWarning)
            train, valid = data.split_tokens([1.0 - arguments.valid_fraction, arguments.valid_fraction], rng=rng)
        if train is None or valid is None:
            raise ValueError(f"--valid-fraction: process {arguments.process_id}'s tokens left an empty part")
    floor = {"floor": estimator.floor} if valid is not None and estimator.floor is not None else {}
    result = tempered_em(estimator._build_model(), train, key=key_fit, valid=valid, schedule=schedule,
                         n_restarts=arguments.restarts, max_iter=arguments.max_iter, tol=estimator.tol,
                         progress=estimator.progress and arguments.process_id == 0, devices=jax.devices(),
                         process_local=True, time_budget=estimator.time_budget, **floor)
    return data, result


def _pairs(path: Path, frame: Any, source: str, target: str) -> Any:
    """The ``source`` and ``target`` columns of an edge list or a table of ratings, every line
    holding both (else a ``ValueError`` naming the first line that does not)."""
    pairs = frame[[source, target]]
    if pairs.isna().any().any():
        row = int(np.flatnonzero(pairs.isna().any(axis=1).to_numpy())[0])
        raise ValueError(f"DATAFILE: line {row + 2} of {path.name} lacks a {source} or a {target}")
    return pairs


def read_network(path: str | os.PathLike, *, source: str = "source", target: str = "target",
                 directed: bool = False) -> Any:
    """Read a CSV edge list (columns ``source`` and ``target``) as a network over its nodes: a
    :class:`zoo.relational.data.RelationalData` with one binary relation in which every pair of
    nodes is observed, linked or not (:meth:`~zoo.relational.data.RelationalData.from_networkx`).

    Repeated lines count once, self-links are dropped (the diagonal is not observed) and the nodes
    are sorted by their labels (numbers as numbers, 2 before 10, and before any text).

    Raises
    ------
    ValueError
        A missing column, a line without both nodes, or fewer than two nodes.
    """
    import networkx as nx

    from zoo.relational.data import RelationalData

    path, frame = _read_csv(path, {"--source": source, "--target": target})
    pairs = _pairs(path, frame, source, target)
    sources, targets = set(pairs[source]), set(pairs[target])
    if len(sources) >= 2 and len(targets) >= 2 and not sources & targets:
        warnings.warn(f"DATAFILE: the {source} and {target} columns of {path.name} share no node: if it is a "
                      f"two-mode network ({len(sources)} × {len(targets)} nodes, such as people × events), "
                      "reading it as one network of all the nodes makes every pair within a side an observed "
                      "non-link; in Python, RelationalData.from_networkx(graph, rows=..., cols=...) reads the two "
                      "sides as two domains", UserWarning, stacklevel=2)
    graph = nx.DiGraph() if directed else nx.Graph()
    graph.add_nodes_from(sorted(set(pairs[source]) | set(pairs[target]), key=_label_order))
    graph.add_edges_from((a, b) for a, b in pairs.itertuples(index=False) if a != b)
    if graph.number_of_nodes() < 2:
        raise ValueError(f"DATAFILE: {path.name} names fewer than two nodes")
    return RelationalData.from_networkx(graph)


def _label_order(label: Any) -> tuple:
    """Sort key of node labels: numbers by value (2 before 10), then the others by their text."""
    import numbers

    if isinstance(label, numbers.Real) and not isinstance(label, bool):
        return (0, float(label), "")
    return (1, 0.0, str(label))


def read_ratings(path: str | os.PathLike, *, source: str = "source", target: str = "target",
                 rating: str = "rating", threshold: float | str = "mean") -> Any:
    """Read a CSV table of ratings (one line per rated pair: columns ``source``, ``target`` and
    ``rating``) as CP §3's binary relation ``likes(source, target)``, 1 where the rating is above
    ``threshold`` (``"mean"``: the global mean rating), between two domains named after the two
    columns (:meth:`~zoo.relational.data.RelationalData.from_ratings`). Only the rated pairs are
    observed; the others are missing, not "dislikes".

    Raises
    ------
    ValueError
        A missing column, a line without both individuals or a rating that is not a number, a pair
        rated twice, or a ``source`` column that is the ``target`` column.
    """
    import pandas as pd

    from zoo.relational.data import RelationalData

    if source == target:
        raise ValueError(f"--target: the ratings' items need a column of their own, not --source's {source!r}")
    path, frame = _read_csv(path, {"--source": source, "--target": target, "--rating": rating})
    _pairs(path, frame, source, target)
    values = pd.to_numeric(frame[rating], errors="coerce")
    if (values.isna() & frame[rating].notna()).any():
        row = int(np.flatnonzero((values.isna() & frame[rating].notna()).to_numpy())[0])
        raise ValueError(f"--rating: line {row + 2} of {path.name} has {frame[rating].iloc[row]!r} in {rating!r}, "
                         "not a number")
    frame = frame.assign(**{rating: values})
    return RelationalData.from_ratings(frame, user=source, item=target, rating=rating, threshold=threshold,
                                       domains=(str(source), str(target)), relation="likes")


def _relational_data(arguments: argparse.Namespace) -> tuple[Any, str, str]:
    """The network (an edge list) or the ratings (``--rating``) that the IRM and the latent-class
    relational model fit; what the command prints of them, and the report's line."""
    if arguments.rating is None:
        if arguments.threshold is not None:
            raise ValueError("--threshold: only with --rating (a table of ratings, not an edge list)")
        data = read_network(arguments.datafile, source=arguments.source, target=arguments.target,
                            directed=arguments.directed)
        links = int(np.sum(data.relation().values)) // (1 if arguments.directed else 2)  # both ways stored
        what = f"{data.domain('nodes').size} nodes, {links} links"
        return data, what, ("directed" if arguments.directed else "undirected") + f", {what}"
    if arguments.directed:
        raise ValueError("--directed: ratings go from a --source to a --target of another domain already")
    threshold = "mean" if arguments.threshold is None else arguments.threshold
    data = read_ratings(arguments.datafile, source=arguments.source, target=arguments.target,
                        rating=arguments.rating, threshold=threshold)
    likes = data.relation()
    sources, targets = (data.domain(name) for name in data.schema.domain_names)
    cut = "the mean rating" if threshold == "mean" else f"{threshold:g}"
    what = (f"{sources.name} ({sources.size}) x {targets.name} ({targets.size}), {likes.n_observed} ratings, "
            f"{int(np.sum(likes.values))} above {cut}")
    return data, what, what


def _class_table(data: Any, classes: dict[str, np.ndarray], column: str,
                 probabilities: dict[str, np.ndarray] | None = None) -> Any:
    """labels.csv of a relational fit: each node's class (a network), or each individual's with its
    domain (ratings: two domains), and the probability of that class where there is one."""
    import pandas as pd

    frames = []
    network = len(data.schema.domain_names) == 1
    for name in data.schema.domain_names:
        domain = data.domain(name)
        frame = pd.DataFrame({"node" if network else "individual":
                              list(domain.labels if domain.labels is not None else range(domain.size)),
                              column: classes[name]})
        if probabilities is not None:
            frame["probability"] = probabilities[name]
        if not network:
            frame.insert(0, "domain", name)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


#: Options whose default is None, by their attribute: given, they are named when a model has no use for them.
_OPTIONAL = {"classes": "--classes", "restarts": "--restarts", "max_iter": "--max-iter",
             "valid_fraction": "--valid-fraction", "prior_count": "--prior-count", "floor": "--floor",
             "weight": "--weight", "warmup": "--warmup", "draws": "--draws", "split_merge": "--split-merge",
             "sampler": "--sampler", "type_split_merge": "--type-split-merge", "id_column": "--id-column",
             "label_column": "--label-column", "truth_column": "--truth-column", "rating": "--rating",
             "threshold": "--threshold", "init": "--init", "precision_shape": "--precision-shape",
             "precision_rate": "--precision-rate", "chains": "--chains"}


def _refuse_options(arguments: argparse.Namespace, names: Sequence[str], why: str) -> None:
    """A ``ValueError`` naming the first of ``names`` (attributes of :data:`_OPTIONAL`) that was given."""
    for name in names:
        if getattr(arguments, name, None) is not None:
            raise ValueError(f"{_OPTIONAL[name]}: {why}")


def _refuse_relational_options(arguments: argparse.Namespace) -> None:
    """``--rating``, ``--threshold`` and ``--directed``, given to a model that reads no edge list."""
    _refuse_options(arguments, ("rating", "threshold"), f"for the relational models, not {arguments.model}")
    if arguments.directed:
        raise ValueError(f"--directed: for the relational models' edge lists, not {arguments.model}")


def _with_defaults(arguments: argparse.Namespace, defaults: dict[str, Any]) -> None:
    """The options of ``defaults`` that were not given set to their values there."""
    for name, value in defaults.items():
        if getattr(arguments, name) is None:
            setattr(arguments, name, value)


def _continued_fit(arguments: argparse.Namespace) -> Any:
    """The ``LRMResult`` that ``--init`` names, loaded; its model's settings fill in ``--classes`` and
    ``--prior-count`` where they were not given, and one restart continues it."""
    from zoo.io import load_result
    from zoo.relational.latent_class import LRMResult

    if arguments.restarts not in (None, 1):
        raise ValueError(f"--restarts: a fit continued from --init runs one restart, got {arguments.restarts}")
    arguments.restarts = 1
    path = Path(arguments.init)
    if not path.is_file():
        raise ValueError(f"--init: no file {str(path)!r} (the result.npz of an earlier fit)")
    try:
        init = load_result(path)
    except ValueError as error:
        raise ValueError(f"--init: {error}") from None
    if not isinstance(init, LRMResult):
        raise ValueError(f"--init: {str(path)!r} holds a fit of {init.model!r:.60}, not of the latent-class "
                         "relational model")
    if arguments.classes is None and isinstance(init.model.n_classes, int):
        arguments.classes = init.model.n_classes
    if arguments.prior_count is None:
        arguments.prior_count = init.model.prior_count
    return init


def _check_continued(arguments: argparse.Namespace, init: Any, model: Any, data: Any) -> None:
    """A ``ValueError`` naming ``--init`` or ``--classes`` unless ``init`` was fitted to data of
    ``data``'s schema with the classes per domain that ``model`` gives it."""
    if init.schema != data.schema:
        fitted, read = ({domain: size for domain, size in zip(schema.domain_names, schema.domain_sizes)}
                        for schema in (init.schema, data.schema))
        raise ValueError(f"--init: {arguments.init!r} is a fit to data of domains {fitted}, not to "
                         f"{Path(arguments.datafile).name}'s {read}: continue it on the data file it was fitted to")
    fitted, asked = init.model.classes_for(init.schema), model.classes_for(data.schema)
    if fitted != asked:
        raise ValueError(f"--classes: {arguments.init!r} holds {fitted} classes per domain, not {asked}")


def _fit_relational(arguments: argparse.Namespace, argv: list[str], stream: Any) -> int:
    """``fit latent-class-relational``: incremental EM (CP §2) on a network read from a CSV edge list,
    restarts in parallel and the best kept; write result.npz, labels.csv, blocks.csv and report.html."""
    import jax
    import pandas as pd

    from zoo.io import save_result
    from zoo.registry import get_model
    from zoo.report import write_report

    start = time.perf_counter()
    model_name = arguments.model
    _refuse_options(arguments, ("valid_fraction", "floor", "weight"),
                    f"not for {model_name}: incremental EM fits every cell of the network, and each line of the "
                    "edge list is one link")
    _refuse_options(arguments, ("chains", "warmup", "draws", "split_merge", "sampler", "type_split_merge",
                                "id_column", "label_column", "truth_column", "precision_shape", "precision_rate"),
                    f"for the Gibbs chains and feature tables, not {model_name}")
    if arguments.schedule != "auto":
        raise ValueError(f"--schedule: {model_name} runs incremental EM at β = 1 (CP §2), not {arguments.schedule}")
    if arguments.format not in (None, "csv"):
        raise ValueError(f"--format: {model_name} reads a CSV edge list, not {arguments.format}")
    init = None if arguments.init is None else _continued_fit(arguments)
    _with_defaults(arguments, RELATIONAL_EM_DEFAULTS)
    for option, value in (("--classes", arguments.classes), ("--restarts", arguments.restarts),
                          ("--max-iter", arguments.max_iter)):
        if value < 1:
            raise ValueError(f"{option}: must be >= 1, got {value}")
    settings = {"n_classes": arguments.classes}
    if arguments.prior_count is not None:
        settings["prior_count"] = arguments.prior_count
    model = get_model(model_name, **settings)  # its settings checked before the file is read
    name = Path(arguments.datafile).name
    with warnings.catch_warnings(record=True) as caught:  # printed below, after what the run did
        warnings.simplefilter("always")
        data, what, described = _relational_data(arguments)
        if init is not None:
            _check_continued(arguments, init, model, data)
        result = model.fit(data, key=jax.random.key(arguments.seed), n_restarts=arguments.restarts,
                           max_passes=arguments.max_iter, time_budget=arguments.time_budget,
                           progress=not arguments.quiet, init=init)
    out = Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    domains = data.schema.domain_names
    posteriors = {domain: np.asarray(posterior, np.float64)
                  for domain, posterior in zip(domains, result.params.responsibilities)}
    classes = {domain: posterior.argmax(axis=1) for domain, posterior in posteriors.items()}
    labels_path = out / "labels.csv"
    _class_table(data, classes, "class", {domain: posterior[np.arange(posterior.shape[0]), classes[domain]]
                                          for domain, posterior in posteriors.items()}).to_csv(labels_path, index=False)
    # θ_r (CP eq. 5) of the value 1: the probability of a link (a like) from a class to another.
    given = np.asarray(result.params.relation_probs[0], np.float64)[..., 1]
    sources, targets = np.meshgrid(np.arange(given.shape[0]), np.arange(given.shape[1]), indexing="ij")
    network = len(domains) == 1
    ends = ("source", "target") if network else domains
    blocks_path = out / "blocks.csv"
    pd.DataFrame({f"{ends[0]}_class": sources.ravel(), f"{ends[1]}_class": targets.ravel(),
                  ("link" if network else "likes") + "_probability": given.ravel()}
                 ).to_csv(blocks_path, index=False)
    settings = {"command": "python -m zoo " + " ".join(argv), "model name": model_name,
                "data file": str(Path(arguments.datafile).resolve()),
                ("network" if arguments.rating is None else "ratings"): described,
                "restarts": arguments.restarts, "max passes": arguments.max_iter, "seed": arguments.seed,
                "time budget": arguments.time_budget}
    if init is not None:
        settings["continued from"] = str(Path(arguments.init).resolve())
    result_path = save_result(out / "result.npz", result, settings=settings)
    report_path = write_report(out / "report.html", result, title=f"{model_name} on {name}", settings=settings,
                               data=data)
    sizes = "; ".join(
        f"classes of {', '.join(map(str, np.bincount(classes[domain], minlength=posteriors[domain].shape[1])))} "
        f"{'nodes' if network else 'in ' + domain}" for domain in domains)
    stream.write(f"{model_name}: {what} from {name}\n")
    run = (f"continued from {Path(arguments.init).name} by" if init is not None else
           f"{np.size(result.restart_scores)} restarts, the best ({result.best_restart}) after")
    passes = f"{result.n_passes} pass{'es' if result.n_passes != 1 else ''}"
    stream.write(f"{run} {passes}, {result.stopped_by.replace('_', ' ')}; objective "
                 f"{float(result.history['objective'][-1]):.6g}; {sizes}; {time.perf_counter() - start:.1f} s\n")
    _write_warnings(stream, caught)  # ClassesAlikeWarning among them: the kept fit tells no nodes apart
    stream.write(f"wrote {result_path}\nwrote {labels_path}\nwrote {blocks_path}\nwrote {report_path}\n")
    return EXIT_INTERRUPTED if result.stopped_by == "interrupted" else 0  # what finished is written, as chains'


def _fit_chains(arguments: argparse.Namespace, argv: list[str], stream: Any) -> int:
    """``fit dp-mixture|cdp|scdp-*|irm``: Gibbs chains on a table of features (the DP mixtures) or on a
    network (the IRM); write chains.nc, labels.csv and report.html. Returns the exit status:
    :data:`EXIT_INTERRUPTED` after Ctrl-C (having written what finished), else 0. A run stopped before
    its end (Ctrl-C, ``--time-budget``) also writes :data:`WARMUP_FILE` to continue from Python; one
    stopped in its warm-up has no draws: it writes that file alone and raises :class:`_Stopped`."""
    import jax
    import pandas as pd

    from inference.diagnostics import MixingWarning, mixing_verdict
    from inference.partitions import most_probable_draw, point_partition_shortfall
    from zoo.dirichlet.mixture import RESUME_CALL
    from zoo.dirichlet.supervised.fit import DEFAULT_SWEEPS, RESUME_CALL as SCDP_RESUME_CALL
    from zoo.relational.infinite import DEFAULT_WARMUP as DEFAULT_IRM_WARMUP, RESUME_CALL as IRM_RESUME_CALL
    from zoo.io import save_chains
    from zoo.metrics import clustering_scores
    from zoo.registry import get_model
    from zoo.report import write_report

    start = time.perf_counter()
    _refuse_options(arguments, ("classes", "restarts", "max_iter", "valid_fraction", "prior_count", "floor"),
                    f"for the EM models, not {arguments.model}, whose chains sample their clusters (--chains, "
                    "--warmup, --draws)")
    _refuse_options(arguments, ("init",), f"continues a latent-class-relational fit, not {arguments.model} (the "
                    "chains continue from Python, fit.resume)")
    if arguments.schedule != "auto":
        raise ValueError(f"--schedule: for the EM models, not {arguments.model}, whose chains sample at β = 1")
    if arguments.model != "irm":
        _refuse_relational_options(arguments)
    if arguments.chains is None:
        arguments.chains = DEFAULT_CHAINS
    for option, value, minimum in (("--chains", arguments.chains, 1), ("--warmup", arguments.warmup, 0),
                                   ("--draws", arguments.draws, 1), ("--split-merge", arguments.split_merge, 0),
                                   ("--type-split-merge", arguments.type_split_merge, 0)):
        if value is not None and value < minimum:
            raise ValueError(f"{option}: must be >= {minimum}, got {value}")
    for option, value, models in (("--sampler", arguments.sampler, ("dp-mixture", "cdp")),
                                  ("--type-split-merge", arguments.type_split_merge, ("scdp-1", "scdp-2")),
                                  ("--precision-shape", arguments.precision_shape, SUPERVISED_MODELS),
                                  ("--precision-rate", arguments.precision_rate, SUPERVISED_MODELS)):
        if value is not None and arguments.model not in models:
            raise ValueError(f"{option}: only for {', '.join(models)}, not {arguments.model}")
    # The settings given (the others are the model's defaults), by the model's names for them.
    given = {name: value for name, value in (("n_split_merge", arguments.split_merge),
                                             ("algorithm", arguments.sampler),
                                             ("n_type_split_merge", arguments.type_split_merge),
                                             ("precision_shape", arguments.precision_shape),
                                             ("precision_rate", arguments.precision_rate))
             if value is not None}
    name = Path(arguments.datafile).name
    key = jax.random.key(arguments.seed)
    until_mixed = arguments.draws is None
    settings = {"command": "python -m zoo " + " ".join(argv), "model name": arguments.model,
                "data file": str(Path(arguments.datafile).resolve())}
    keep_best_draw = False  # labels.csv: the draw of highest log joint instead of the point estimate
    # The warnings are printed below, after what the run did.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if arguments.model == "irm":
            data, what, described = _relational_data(arguments)
            warmup = DEFAULT_IRM_WARMUP if arguments.warmup is None else arguments.warmup
            model = get_model("irm", **given)
            settings["network" if arguments.rating is None else "ratings"] = described
            fit = model.sample(data, key, n_chains=arguments.chains, n_warmup=warmup, n_draws=arguments.draws,
                               time_budget=arguments.time_budget, progress=not arguments.quiet,
                               until_mixed=until_mixed)
            n_draws = fit.log_joint.shape[1]
            idata = fit.to_inference_data(assignments=True) if n_draws else None
            labels, kind = None, "the most probable draw"
            resume, fitted_to = IRM_RESUME_CALL, (data,)
        else:
            supervised = arguments.model in SUPERVISED_MODELS
            if arguments.truth_column is not None and not supervised:
                raise ValueError(f"--truth-column: only for {', '.join(SUPERVISED_MODELS)}; {arguments.model} "
                                 "scores its point estimate against --label-column")
            features, names, row_names, labels = read_table(arguments.datafile, id_column=arguments.id_column,
                                                            label_column=arguments.label_column,
                                                            truth_column=arguments.truth_column)
            if supervised:
                is_train = _training_rows(labels, arguments.label_column, Path(arguments.datafile).name)
                truth = _test_truth(arguments.datafile, arguments.truth_column, is_train)
            if not arguments.no_standardize:  # over all rows, training and test alike (DM05 §5)
                features = _standardised(features)
            what = f"{features.shape[0]} rows x {features.shape[1]} features"
            settings["features"] = (f"{what}{'' if arguments.no_standardize else ', standardised'}: "
                                    + ", ".join(names[:20]) + (", ..." if len(names) > 20 else ""))
            id_column, kind = arguments.id_column, "point estimate"
            # Decided before sampling: a point estimate holds N x N matrices of the rows it clusters.
            too_large = point_partition_shortfall(int((~is_train).sum()) if supervised else features.shape[0])
            keep_best_draw = too_large is not None
            if keep_best_draw:
                kind = "the most probable draw"
                stream.write(f"{kind} goes to labels.csv, not the point estimate: {too_large}\n")
            if supervised:
                warmup = DEFAULT_SWEEPS // 2 if arguments.warmup is None else arguments.warmup
                model = get_model(arguments.model, **given)
                what += f" ({int(is_train.sum())} training, {int((~is_train).sum())} test)"
                named = pd.DataFrame(features, columns=names)  # so that warnings name the features
                fit = model.fit(named[is_train], labels[is_train].to_numpy(), named[~is_train], key,
                                n_chains=arguments.chains, n_warmup=warmup, n_draws=arguments.draws,
                                time_budget=arguments.time_budget, progress=not arguments.quiet,
                                until_mixed=until_mixed)
                # The partition is of the test rows, scored against --truth-column if given (the labels
                # were the training rows').
                row_names = None if row_names is None else row_names[~is_train]
                positions = np.flatnonzero(~is_train)
                fitted_to = (named[is_train], labels[is_train].to_numpy(), named[~is_train])
                labels, resume = truth, SCDP_RESUME_CALL
                clustered = features[~is_train]
            else:
                warmup = DP_WARMUP if arguments.warmup is None else arguments.warmup
                model = get_model(arguments.model, n_features=features.shape[1], **given)
                named = pd.DataFrame(features, columns=names)  # so that warnings name the features
                fit = model.fit(named, key, n_chains=arguments.chains, n_warmup=warmup, n_draws=arguments.draws,
                                time_budget=arguments.time_budget, progress=not arguments.quiet)
                resume, fitted_to = RESUME_CALL, (named,)
                clustered = features
            idata, n_draws = (fit.idata if fit.result.samples else None), fit.result.n_draws
    settings |= {"model": repr(model), "chains": arguments.chains, "warm-up sweeps": warmup,
                 "draws": arguments.draws if not until_mixed else "until the chains mix",
                 "seed": arguments.seed, "time budget": arguments.time_budget}
    stream.write(f"{arguments.model}: {what} from {name}\n")
    result = fit if arguments.model == "irm" else fit.result
    completed, stopped = result.completed, (None if result.completed else result.stopped_by)
    if not n_draws:  # stopped in the warm-up: nothing to estimate from, but the chains can go on
        swept, planned = ((fit.warmup_log_joint.shape[1], warmup) if arguments.model == "irm"
                          else (fit.result.next_sweep, fit.result.n_warmup))
        _keep_the_warm_up(arguments, fit, fitted_to, stopped, swept, planned, caught, stream)
    out = Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    chains_path = save_chains(out / "chains.nc", idata, model=model, settings=settings)
    if arguments.model == "irm":  # each domain's clusters in the draw of highest log joint
        partitions = {domain: np.unique(np.asarray(partition), return_inverse=True)[1]
                      for domain, partition in fit.map_partition().items()}
        table = _class_table(data, partitions, "cluster")
        clusters = "; ".join(f"{int(partition.max()) + 1} clusters"
                             + ("" if len(partitions) == 1 else f" of the {domain}")
                             for domain, partition in partitions.items())
    else:
        samples = fit.result.samples
        partition = (np.asarray(samples["assignments"])[most_probable_draw(samples["log_joint"])] if keep_best_draw
                     else fit.point_estimate())
        partition = np.unique(np.asarray(partition), return_inverse=True)[1]
        table = pd.DataFrame({"cluster": partition})
        if row_names is not None:
            table.insert(0, id_column, row_names.to_numpy())
        else:  # each row's position in DATAFILE (the index pd.read_csv gives it), to join the two on
            table.insert(0, "row", positions if supervised else np.arange(partition.shape[0]))
        clusters = f"{int(partition.max()) + 1} clusters"
    labels_path = out / "labels.csv"
    table.to_csv(labels_path, index=False)
    # The fit's advice names Python's ways to run longer and with other moves; here they are the command's.
    calls = {f"({resume} continues these chains)": "(a larger --draws)"} | _command_line_calls()
    # The report shows the clusters of labels.csv: the IRM's by the network's nodes, the others' by the
    # clustered rows' features (standardised unless --no-standardize) and ids.
    shown = {"data": data} if arguments.model == "irm" else {
        "data": clustered, "col_names": list(names), "partition": partition,
        "row_names": None if row_names is None else [str(name) for name in row_names]}
    report_path = write_report(out / "report.html", fit, title=f"{arguments.model} on {name}", settings=settings,
                               calls=calls, **shown)
    how = "" if completed else ", " + _stopped_by(stopped, arguments)
    stream.write(f"{arguments.chains} chains x {n_draws} draws{how}; {kind}: {clusters}; "
                 f"{time.perf_counter() - start:.1f} s\n")
    if labels is not None:
        scores = clustering_scores(labels.to_numpy(), partition)
        against = (f"{arguments.truth_column} ({partition.size} test rows)" if arguments.truth_column is not None
                   else arguments.label_column)
        stream.write(f"against {against}: F {scores['F']:.3f}, VI {scores['VI']:.3f}, "
                     f"NVI {scores['NVI']:.3f} (DM05 §6)\n")
    verdict = mixing_verdict(fit.mixing)
    for call, option in calls.items():
        verdict = verdict.replace(call, option)
    stream.write(verdict + "\n")
    _write_warnings(stream, caught, leave_out=(MixingWarning,))  # its text is the verdict above
    stream.write(f"wrote {chains_path}\nwrote {labels_path}\nwrote {report_path}\n")
    if stopped is not None and stopped != "capacity":  # the chains can go on where they stopped
        path, resume = _keep_the_fit(arguments, fit, fitted_to)
        stream.write(f"wrote {path} (the chains and their data; in Python, {resume} continues them)\n")
    return EXIT_INTERRUPTED if stopped == "interrupted" else 0


def _stopped_by(stopped: str, arguments: argparse.Namespace) -> str:
    """Why chains stopped before their end (their ``stopped_by``: ``"interrupted"``, ``"time_budget"`` or
    ``"capacity"``) as the command line says it."""
    if stopped == "time_budget":
        return f"stopped by the time budget (--time-budget {arguments.time_budget:g} s)"
    return {"interrupted": "interrupted by Ctrl-C"}.get(stopped, "stopped early (a warning says why)")


def _keep_the_fit(arguments: argparse.Namespace, fit: Any, fitted_to: tuple) -> tuple[Path, str]:
    """Pickle a run of chains that stopped before its end, with the data it was given, for Python's
    ``resume`` (:data:`WARMUP_FILE`); returns the file and the Python that goes on from it."""
    import pickle

    from zoo.dirichlet import mixture
    from zoo.dirichlet.supervised import fit as supervised
    from zoo.relational import infinite

    out = Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / WARMUP_FILE
    with open(path, "wb") as file:
        pickle.dump((fit, fitted_to), file)
    if arguments.draws is not None:
        more = f"n_draws={arguments.draws}"
    else:  # the model's most draws until the chains mix, as the command would have run
        limit = (infinite.UNTIL_MIXED_DRAWS if arguments.model == "irm" else supervised.UNTIL_MIXED_DRAWS
                 if arguments.model in SUPERVISED_MODELS else mixture.UNTIL_MIXED_DRAWS)
        more = f"n_draws={limit}, until_mixed=True"
    return path, f"fit, data = pickle.load(open({str(path)!r}, 'rb')); fit.resume(*data, {more})"


def _keep_the_warm_up(arguments: argparse.Namespace, fit: Any, fitted_to: tuple, stopped: str, swept: int,
                      planned: int, caught: Sequence[warnings.WarningMessage], stream: Any) -> None:
    """A run of chains stopped in its warm-up (``swept`` of its ``planned`` sweeps): no draws, labels or
    report to write, but the chains so far are kept for Python's ``resume`` (:func:`_keep_the_fit`);
    raises :class:`_Stopped`, which says so and how to go on."""
    from zoo.relational import infinite

    path, resume = _keep_the_fit(arguments, fit, fitted_to)
    # The fits' own warning says the same in Python's terms, with a call on data the command line read.
    said = ("before their first draw", infinite.NO_DRAWS)
    _write_warnings(stream, [warning for warning in caught if not any(text in str(warning.message) for text in said)])
    stream.write(f"wrote {path}\n")
    again = " with a larger --time-budget or fewer --warmup sweeps" if stopped == "time_budget" else ""
    raise _Stopped(f"{_stopped_by(stopped, arguments)} in the warm-up, after {swept} of its {planned} sweeps, before "
                   f"the first draw: no draws, labels or report to write. {path} keeps the chains and their data: in "
                   f"Python, {resume} finishes the warm-up and draws. Or run the command again{again}.",
                   EXIT_INTERRUPTED if stopped == "interrupted" else 1)


def _fit(arguments: argparse.Namespace, argv: list[str], stream: Any) -> int:
    from zoo.io import save_result
    from zoo.report import write_report
    from zoo.sklearn import ESTIMATORS, make_schedule

    start = time.perf_counter()
    _refuse_options(arguments, ("chains", "warmup", "draws", "split_merge", "sampler", "type_split_merge",
                                "truth_column", "precision_shape", "precision_rate"),
                    f"for the Gibbs chains, not {arguments.model}")
    _refuse_relational_options(arguments)
    _refuse_options(arguments, ("init",), f"continues a latent-class-relational fit, not {arguments.model}")
    _with_defaults(arguments, EM_DEFAULTS)
    estimator_type = ESTIMATORS[arguments.model]
    counts = ({"prior_count": arguments.prior_count, "floor": arguments.floor}
              if "prior_count" in estimator_type._get_param_names() else {})
    if not counts and (arguments.prior_count != 0.0 or arguments.floor is not None):
        raise ValueError(f"--prior-count, --floor: {arguments.model} is not fitted to counts")
    estimator = estimator_type(
        **estimator_type._classes_argument(arguments.classes), **counts,
        schedule=arguments.schedule, valid_fraction=arguments.valid_fraction, n_restarts=arguments.restarts,
        max_iter=arguments.max_iter, random_state=arguments.seed, progress=not arguments.quiet,
        time_budget=arguments.time_budget,
    )
    with warnings.catch_warnings(record=True) as caught:  # printed below, after what the run did
        warnings.simplefilter("always")
        if arguments.processes > 1:
            data, result = _fit_in_processes(arguments, estimator)
            if arguments.process_id != 0:  # every process has the result; process 0 writes it
                return
        elif not estimator._count_data and _format_of(Path(arguments.datafile), arguments.format) == "csv":
            # A table of points, one row per point and a column per feature, read as the DP mixtures read it
            # (an edge list of (source, target) pairs before, so that no feature table could be fitted).
            features, names, row_names, _ = read_table(arguments.datafile, id_column=arguments.id_column,
                                                       label_column=arguments.label_column)
            if not arguments.no_standardize:
                features = _standardised(features)
            estimator.fit(features)
            result = estimator.result_
            data = _PointTable(features.shape, None if row_names is None else tuple(row_names), tuple(names),
                               not arguments.no_standardize)
        else:
            data = read_data(arguments.datafile, arguments.format, source=arguments.source, target=arguments.target,
                             weight=arguments.weight)
            matrix = data.to_sparse()
            estimator.fit(matrix if estimator._count_data else matrix.toarray())
            result = estimator.result_
    settings = {
        "command": "python -m zoo " + " ".join(argv),
        "model name": arguments.model,
        "data file": str(Path(arguments.datafile).resolve()),
        "data": repr(data),
        "schedule": arguments.schedule,
        "valid fraction": arguments.valid_fraction,
        **({"prior count": arguments.prior_count, "floor": arguments.floor} if counts else {}),
        "restarts": arguments.restarts,
        "max iter": arguments.max_iter,
        "seed": arguments.seed,
        "processes": arguments.processes,
        "time budget": arguments.time_budget,
    }
    out = Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    result_path = save_result(out / "result.npz", result, schedule=make_schedule(arguments.schedule, result.model),
                              settings=settings)
    # The report and the labels name the rows and columns as the data does (one process read all
    # of them; with --processes each read only its rows).
    whole = data if arguments.processes == 1 else None
    label_paths = []
    for file_name, table in _em_labels(result.params, whole, estimator if whole is not None else None).items():
        label_paths.append(out / file_name)
        table.to_csv(label_paths[-1], index=False)
    report_path = write_report(out / "report.html", result, title=f"{arguments.model} on {Path(arguments.datafile).name}",
                               settings=settings, data=None if isinstance(whole, _PointTable) else whole,
                               col_names=list(data.col_names) if isinstance(data, _PointTable) else None)
    seconds = time.perf_counter() - start
    held = f" in process 0 of {arguments.processes}" if arguments.processes > 1 else ""
    stream.write(f"{arguments.model}: {data!r}{held}\n")
    perplexities = np.asarray(result.history["valid_perplexity"], dtype=float)
    quality = (f"best validation perplexity {float(np.nanmin(perplexities)):.4g}" if np.isfinite(perplexities).any()
               else f"training log-likelihood {result.log_lik:.6g}")
    if np.isinf(perplexities).any() and not np.isfinite(perplexities).any():
        # Validation tokens of probability 0 at every iterate: no perplexity chose β (the warning says how).
        quality = ("validation perplexity inf at every iterate (held-out tokens of probability 0; --floor or "
                   f"--prior-count gives them some), {quality}")
    stream.write(f"{result.n_iter} iterations ({result.stopped_by}), β = {result.beta:.3g}, {quality}, "
                 f"{seconds:.1f} s\n")
    _write_warnings(stream, caught)
    stream.write("".join(f"wrote {path}\n" for path in (result_path, *label_paths, report_path)))
    return EXIT_INTERRUPTED if result.stopped_by == "interrupted" else 0  # what finished is written, as chains'


def _standardised(features: np.ndarray) -> np.ndarray:
    """Each feature centred and scaled to unit variance over all rows (DM05 §5); constant ones stay 0."""
    scale = features.std(axis=0)
    return (features - features.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


class _PointTable(NamedTuple):
    """What the command line says of a table of points fitted by an EM model (the Gaussian mixture)."""

    shape: tuple[int, int]
    row_names: tuple | None
    col_names: tuple
    standardised: bool

    def __repr__(self) -> str:
        return (f"{self.shape[0]} rows x {self.shape[1]} features{', standardised' if self.standardised else ''}: "
                + ", ".join(map(str, self.col_names[:20])) + (", ..." if len(self.col_names) > 20 else ""))


def _em_labels(params: Any, data: Any, estimator: Any) -> dict[str, Any]:
    """The hard labels of an EM fit, by file name: each row's cluster (the one-sided model, the CAM's
    leaf, the two-sided model's rows, with ``column_labels.csv`` for its columns), its most probable
    aspect (the aspect model) or its mixture component; rows and columns named as ``data`` names
    them, else numbered from 0."""
    import pandas as pd

    def table(side: str, column: str, values: Any, names: Any) -> Any:
        values = np.asarray(values)
        return pd.DataFrame({side: list(names) if names is not None else np.arange(values.size), column: values})

    rows = getattr(data, "row_names", None)
    if hasattr(params, "row_assignments"):  # two-sided: a cluster for every row and every column
        return {"labels.csv": table("row", "cluster", params.row_assignments(), rows),
                "column_labels.csv": table("column", "cluster", params.col_assignments(),
                                           getattr(data, "col_names", None))}
    if hasattr(params, "assignments"):
        return {"labels.csv": table("row", "cluster", params.assignments(), rows)}
    if hasattr(params, "class_given_row"):  # the aspect model: no hard clusters, the likeliest aspect
        return {"labels.csv": table("row", "aspect", np.argmax(np.asarray(params.class_given_row()), axis=1), rows)}
    if estimator is not None and hasattr(estimator, "labels_"):  # the Gaussian mixture's component per point
        return {"labels.csv": table("row", "cluster", estimator.labels_, rows)}
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    arguments = parser.parse_args(argv)
    if arguments.command in (None, "demo"):
        from zoo.demo import run_demo

        run_demo(n_classes=getattr(arguments, "classes", 32), seed=getattr(arguments, "seed", 0))
        return 0
    if arguments.command == "list":
        _list_models(sys.stdout)
        return 0
    if arguments.command == "describe":
        from zoo.registry import describe

        try:
            card = describe(arguments.model)
        except ValueError as error:
            sys.stderr.write(f"python -m zoo describe: error: {error}\n")
            return 1
        sys.stdout.write(f"{card}\n")
        return 0
    if arguments.processes < 1:
        sys.stderr.write(f"python -m zoo fit: error: --processes: expected at least 1, got {arguments.processes}\n")
        return 1
    if arguments.processes > 1 and arguments.model in (*CHAIN_MODELS, *RELATIONAL_EM_MODELS):
        sys.stderr.write(f"python -m zoo fit: error: --processes: {arguments.model} is fitted in one process\n")
        return 1
    if arguments.processes > 1 and arguments.process_id is None:
        if arguments.coordinator is not None:
            sys.stderr.write("python -m zoo fit: error: --coordinator: needs --process-id (one process per machine)\n")
            return 1
        return _launch_processes(arguments, argv)
    try:
        fit = (_fit_chains if arguments.model in CHAIN_MODELS
               else _fit_relational if arguments.model in RELATIONAL_EM_MODELS else _fit)
        status = fit(arguments, argv, sys.stdout)
    except _Stopped as stopped:  # Ctrl-C or the time budget before there was anything to report
        sys.stdout.flush()
        sys.stderr.write(f"python -m zoo fit: {stopped}\n")
        return stopped.status
    except KeyboardInterrupt:  # a second Ctrl-C, or one outside the calls that the fits stop after
        sys.stdout.flush()
        sys.stderr.write("python -m zoo fit: interrupted by Ctrl-C where the run could not stop after a finished "
                         "call (a second Ctrl-C, or one before or after the fitting): abandoned\n")
        return EXIT_INTERRUPTED
    except (ValueError, TypeError, FileNotFoundError) as error:
        sys.stderr.write(f"python -m zoo fit: error: {_named_as_option(str(error))}\n")
        return 1
    return status or 0


def _command_line_calls() -> dict[str, str]:
    """The Python settings and calls that the chains' advice names, each with the command line's way
    to do the same."""
    from inference import diagnostics
    from zoo.dirichlet.supervised import fit as supervised
    from zoo.relational import infinite

    return {
        f"with {diagnostics.MORE_MOVES} or {diagnostics.SUBCLUSTER_SAMPLER}":
            f"with {diagnostics.MORE_MOVES} (a larger --split-merge) or {diagnostics.SUBCLUSTER_SAMPLER} "
            "(--sampler subcluster)",
        f"with {diagnostics.MORE_MOVES}, {diagnostics.SUBCLUSTER_SAMPLER}":
            f"with {diagnostics.MORE_MOVES} (a larger --split-merge), {diagnostics.SUBCLUSTER_SAMPLER} "
            "(--sampler subcluster)",
        infinite.MORE_MOVES: infinite.MORE_MOVES.replace("(n_split_merge)", "(a larger --split-merge)"),
        infinite.MOVES_ON: "split-merge moves (--split-merge 10)",
        supervised.MORE_MOVES: supervised.MORE_MOVES.replace("(n_split_merge)", "(a larger --split-merge)"),
        supervised.TYPE_MOVES_ON: "--type-split-merge 5",
        f"({supervised.RESTART_CALL})": f"(in Python: SupervisedDP.fit(..., {supervised.RESTART_CALL}))",
    }


#: The Python arguments that errors name, by the command-line option that sets them.
_OPTIONS = {"n_classes": "--classes", "n_row_classes": "--classes", "depth": "--classes", "n_leaves": "--classes",
            "valid_fraction": "--valid-fraction", "n_restarts": "--restarts", "max_iter": "--max-iter",
            "time_budget": "--time-budget", "prior_count": "--prior-count", "floor": "--floor", "X": "DATAFILE",
            "n_chains": "--chains", "n_warmup": "--warmup", "n_draws": "--draws", "n_sweeps": "--draws",
            "n_split_merge": "--split-merge", "algorithm": "--sampler", "n_type_split_merge": "--type-split-merge",
            "precision_shape": "--precision-shape", "precision_rate": "--precision-rate"}

#: Errors that name the data (X) for too many classes, which the command line sets with --classes: named by
#: that option (the estimators' checks: every row class needs a row, every column class a column).
_CLASSES_ERRORS = (
    (re.compile(r"^X: (\d+) sample\(s\) for n_classes=(\d+); every class needs a sample to start from$"),
     r"--classes: \2 classes for the \1 rows of DATAFILE; every class needs a row to start from (give --classes \1 "
     r"or fewer)"),
    (re.compile(r"^X: (\d+) feature\(s\) for n_col_classes=(\d+); every column cluster needs a column to start "
                r"from$"),
     r"--classes: \2 column classes for the \1 columns of DATAFILE; every column class needs a column to start "
     r"from (give --classes \1 or fewer)"),
)


#: Python settings that errors' and warnings' advice names, as the command's options.
_ADVICE_OPTIONS = {"another valid_fraction": "another --valid-fraction", "schedule='em'": "--schedule em",
                   "set floor=": "set --floor", "give floor=": "give --floor", "Give floor=": "Give --floor",
                   "prior_count > 0": "--prior-count > 0", "raise max_iter": "raise --max-iter",
                   "warm_start=True and fit again to continue": "a larger --time-budget fits longer",
                   "as DM05 §5 do and the command line does": "as DM05 §5 do: leave out --no-standardize",
                   "(precision_shape × ": "(--precision-shape × "}
#: Python settings given a value (``max_iter=200``) in warnings, by the option that sets them.
#: ``(n_restarts, now 1; ...)`` names the option too.
_VALUED_OPTIONS = {"max_iter": "--max-iter", "time_budget": "--time-budget", "valid_fraction": "--valid-fraction",
                   "n_split_merge": "--split-merge", "n_draws": "--draws", "n_warmup": "--warmup",
                   "n_restarts": "--restarts", "precision_shape": "--precision-shape",
                   "precision_rate": "--precision-rate"}


def _model_names() -> dict[str, str]:
    """The Python classes that warnings name (``OneSidedEstimator: ...``, ``SupervisedDP(1): ...``) by the
    command's MODEL (``one-sided``, ``scdp-1``)."""
    from zoo.sklearn import ESTIMATORS

    return {rf"\b{estimator.__name__}\b": model for model, estimator in ESTIMATORS.items()} | {
        rf"\bSupervisedDP\({model[-1]}\)": model for model in SUPERVISED_MODELS}


def _in_option_terms(text: str) -> str:
    """``text`` with the Python settings it advises (``raise max_iter``, ``time_budget=30``,
    ``(n_restarts, now 1)``) named by the command's options (``raise --max-iter``, ``--time-budget 30``,
    ``(--restarts, now 1)``), and the Python classes it names by the command's MODEL (``one-sided``)."""
    for setting, option in _ADVICE_OPTIONS.items():
        text = text.replace(setting, option)
    for pattern, model in _model_names().items():
        text = re.sub(pattern, model, text)
    return re.sub(r"\b(" + "|".join(_VALUED_OPTIONS) + r")(=(?=[\w.])|(?=, now ))",
                  lambda match: _VALUED_OPTIONS[match.group(1)] + (" " if match.group(2) else ""), text)


def _named_as_option(message: str) -> str:
    """An error that names a Python argument (``n_classes: must be >= 1``) named by the option
    that sets it as well (``--classes (n_classes): must be >= 1``), its advice in the options' terms;
    one that names the data for too many classes, by ``--classes`` (:data:`_CLASSES_ERRORS`)."""
    for pattern, replacement in _CLASSES_ERRORS:
        if pattern.match(message):
            return pattern.sub(replacement, message)
    name, colon, rest = message.partition(":")
    rest = _in_option_terms(rest)
    return f"{_OPTIONS[name]} ({name}):{rest}" if colon and name in _OPTIONS else name + colon + rest


def _write_warnings(stream: Any, caught: Sequence[warnings.WarningMessage], *, leave_out: tuple = ()) -> None:
    """The warnings a fit raised, one a line after what the run did, in the options' terms; those
    of the categories ``leave_out`` (said otherwise) are not repeated, nor is a line said before."""
    lines = (f"{warning.category.__name__}: {_in_option_terms(str(warning.message))}\n" for warning in caught
             if not issubclass(warning.category, leave_out))
    stream.write("".join(dict.fromkeys(lines)))
