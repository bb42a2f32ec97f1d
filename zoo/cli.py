"""Command line: fit a zoo model to a data file, list and describe the models, run the demo.

::

    python -m zoo list
    python -m zoo describe MODEL
    python -m zoo fit MODEL DATAFILE [--classes K] [--schedule tempered|em|annealing]
                      [--valid-fraction 0.1] [--restarts N] [--max-iter N] [--seed S]
                      [--out DIR] [--format mtx|ldac|csv]
    python -m zoo demo [--classes K] [--seed S]

``fit`` reads MatrixMarket (``.mtx``), LDA-C (``.ldac``, ``.lda-c``, ``.dat``) or CSV edge lists
(``.csv``: columns ``source,target[,weight]``), fits the model with the estimator of
:data:`zoo.sklearn.ESTIMATORS` (progress bar on stderr) and writes ``result.npz``
(:func:`zoo.io.save_result`) and ``report.html`` (:func:`zoo.report.write_report`) to ``--out``.
``list`` prints every model of :mod:`zoo.registry` (its data, whether ``fit`` takes it, a summary);
``describe`` prints one model's card (paper, equations, latent structure, engines).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["main", "build_parser", "read_data", "FORMATS"]

#: File formats by name, with the extensions that select them.
FORMATS = {"mtx": (".mtx", ".mm"), "ldac": (".ldac", ".lda-c", ".dat"), "csv": (".csv",)}


def _format_of(path: Path, requested: str | None) -> str:
    if requested is not None:
        return requested
    name = path.name.lower()
    for fmt, extensions in FORMATS.items():
        if name.endswith(extensions) or any(name.endswith(extension + ".gz") for extension in extensions):
            return fmt
    raise ValueError(f"DATAFILE: cannot tell the format of {path.name!r} from its extension; "
                     f"pass --format ({', '.join(FORMATS)})")


def read_data(path: str | os.PathLike, fmt: str | None = None, *, source: str = "source",
              target: str = "target", weight: str | None = None) -> Any:
    """Read a count file as a :class:`zoo.data.CoOccurrence` (format from the extension or ``fmt``)."""
    from zoo.datasets import read_edge_list, read_ldac, read_matrix_market

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"DATAFILE: {str(path)!r} does not exist")
    fmt = _format_of(path, fmt)
    if fmt == "mtx":
        return read_matrix_market(path)
    if fmt == "ldac":
        return read_ldac(path)
    if fmt == "csv":
        return read_edge_list(path, source=source, target=target, weight=weight)
    raise ValueError(f"--format: must be one of {', '.join(FORMATS)}, got {fmt!r}")


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m zoo`` argument parser (subcommands ``demo``, ``list`` and ``fit``)."""
    from zoo.sklearn import ESTIMATORS, SCHEDULES

    parser = argparse.ArgumentParser(prog="python -m zoo", description="latentzoo command line")
    commands = parser.add_subparsers(dest="command")
    demo = commands.add_parser("demo", help="aspect model on Reuters: held-out perplexity per β")
    demo.add_argument("--classes", type=int, default=32, help="number of aspects K (default 32)")
    demo.add_argument("--seed", type=int, default=0)
    commands.add_parser("list", help="print the zoo's models (those marked 'fit' work with the fit command)")
    describe = commands.add_parser("describe", help="print a model's card: paper, equations, latent structure, engines")
    describe.add_argument("model", metavar="MODEL", help="a name printed by `list` (or an alias such as acm)")
    fit = commands.add_parser("fit", help="fit a model to a data file; write result.npz and report.html")
    fit.add_argument("model", choices=sorted(ESTIMATORS), metavar="MODEL", help="one of: " + ", ".join(ESTIMATORS))
    fit.add_argument("datafile", metavar="DATAFILE", help="MatrixMarket, LDA-C or CSV edge list")
    fit.add_argument("--classes", type=int, default=8, help="number of classes K (default 8)")
    fit.add_argument("--schedule", choices=SCHEDULES, default="tempered",
                     help="β schedule: tempered EM with a validation split (default), plain EM, or annealing")
    fit.add_argument("--valid-fraction", type=float, default=0.1,
                     help="share of tokens held out to choose β (tempered; default 0.1)")
    fit.add_argument("--restarts", type=int, default=1, help="random restarts, run in parallel (default 1)")
    fit.add_argument("--max-iter", type=int, default=500, help="iteration cap (default 500)")
    fit.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    fit.add_argument("--out", default="zoo-fit", help="output directory (default ./zoo-fit)")
    fit.add_argument("--format", choices=sorted(FORMATS), default=None, help="input format (default: from the extension)")
    fit.add_argument("--source", default="source", help="CSV column of the row objects (default 'source')")
    fit.add_argument("--target", default="target", help="CSV column of the column objects (default 'target')")
    fit.add_argument("--weight", default=None, help="CSV column of the counts (default: each line counts 1)")
    fit.add_argument("--quiet", action="store_true", help="no progress bar")
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


def _fit(arguments: argparse.Namespace, argv: list[str], stream: Any) -> None:
    from zoo.io import save_result
    from zoo.report import write_report
    from zoo.sklearn import ESTIMATORS, make_schedule

    start = time.perf_counter()
    data = read_data(arguments.datafile, arguments.format, source=arguments.source, target=arguments.target,
                     weight=arguments.weight)
    estimator_type = ESTIMATORS[arguments.model]
    estimator = estimator_type(
        **estimator_type._classes_argument(arguments.classes),
        schedule=arguments.schedule, valid_fraction=arguments.valid_fraction, n_restarts=arguments.restarts,
        max_iter=arguments.max_iter, random_state=arguments.seed, progress=not arguments.quiet,
    )
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
        "restarts": arguments.restarts,
        "max iter": arguments.max_iter,
        "seed": arguments.seed,
    }
    out = Path(arguments.out)
    out.mkdir(parents=True, exist_ok=True)
    result_path = save_result(out / "result.npz", result, schedule=make_schedule(arguments.schedule), settings=settings)
    report_path = write_report(out / "report.html", result, title=f"{arguments.model} on {Path(arguments.datafile).name}",
                               settings=settings)
    seconds = time.perf_counter() - start
    stream.write(f"{arguments.model}: {data!r}\n")
    perplexities = result.history["valid_perplexity"]
    quality = (f"best validation perplexity {float(np.nanmin(perplexities)):.4g}" if np.isfinite(perplexities).any()
               else f"final training log-likelihood {float(result.history['log_lik'][-1]):.6g}")
    stream.write(f"{result.n_iter} iterations ({result.stopped_by}), β = {result.beta:.3g}, {quality}, "
                 f"{seconds:.1f} s\n")
    stream.write(f"wrote {result_path}\nwrote {report_path}\n")


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
    try:
        _fit(arguments, argv, sys.stdout)
    except (ValueError, TypeError, FileNotFoundError) as error:
        sys.stderr.write(f"python -m zoo fit: error: {error}\n")
        return 1
    return 0
