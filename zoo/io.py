"""Save and load fitted models: EM results as ``.npz`` + JSON metadata, Gibbs chains as ArviZ netCDF.

An :class:`inference.em.EMResult` is written to one ``.npz`` file (no pickle): the parameter
arrays under ``params/<field>``, the history under ``history/<name>``, the restart scores, and a
JSON document under ``metadata`` with the model's settings, the parameters' type, β, the
iteration counts, how the fit stopped, the data shape, what made the fit (``EMResult.provenance``:
versions, JAX's backend, float width, the CPU compiled for) and, optionally, the schedule and any
settings of the run (e.g. the command line). :func:`load_result` gives back an equal
``EMResult`` whose methods work (the parameters' fields and shapes are checked against the
model's own start for data of the stored shape, where the model can give one), so a notebook can
resume (bit-identically at a fixed β without validation data, see :func:`inference.em.tempered_em`)::

    save_result("fit.npz", result, schedule=schedule)
    result = load_result("fit.npz")
    more = tempered_em(result.model, data, key=key, init=result.params, schedule=FixedBeta(result.beta))

Models and schedules are stored as their class (``module:QualName``) and dataclass fields and
restored the way ``pickle`` restores objects (fields set without calling the constructor), so
derived fields (e.g. the tree of a cluster-abstraction model) round-trip exactly. Only classes
from the ``zoo`` and ``inference`` packages are imported when loading, unless more module
prefixes are trusted explicitly: a result file cannot make the loader import arbitrary code.

A model whose program (or class) was defined in a script or notebook (module ``__main__``), or is a
lambda or a function defined inside another function, is saved by that name too, but no other
process can import it: :func:`save_result` warns, :func:`read_metadata` describes the model
(class, fields, functions by name) instead of rebuilding it, and :func:`load_result` loads the
parameters and history with the model given, the program defined again or imported::

    result = load_result("fit.npz", model=EnumeratedEM(my_program, static_kwargs={"n_classes": 4}))

A program put in a module that can be imported (``my_models.py``) needs no more than
``load_result("fit.npz", trusted_modules=("my_models",))``.

A result of another kind that can check itself when loaded (a method ``_check_loaded``) is written
field by field to the same kind of file: :class:`zoo.relational.LRMResult`, Chiang and Poole's
latent-class relational model fitted by incremental EM, with its model, schema, parameters, history
and provenance. The arrays go into the archive and the rest into the JSON document, which names
them; NamedTuples (the schema, the parameters) are stored by class and fields, like dataclasses::

    save_result("lrm.npz", result, settings={"data": "karate club"})
    result = load_result("lrm.npz")   # an LRMResult: classes(), predict_proba(), write_report

A cluster-abstraction tree grown by :func:`zoo.dyadic.cluster_abstraction.anneal_tree` (a
:class:`~zoo.dyadic.cluster_abstraction.GrownTree`) is saved the same way, its history table as one
array a column. An EM result keeps the fitted data's row and column names (from 2026-12-07; older
files load without them), so that the loaded result refuses held-out data named in another order.

Gibbs chains are ArviZ ``InferenceData``; :func:`save_chains` writes them with
``InferenceData.to_netcdf`` and stores the model's settings as a JSON attribute of the posterior
group; :func:`load_chains` reads them back with ``arviz.from_netcdf``.

A run of chains that is to be continued later (another session, another machine) is saved with
:func:`save_checkpoint`: the chains' final kernel state, the PRNG key and the index of the next
sweep, in one ``.npz`` file (no pickle), with what drew them (``ChainResult.provenance``).
:func:`load_checkpoint` restores them, and :func:`inference.chains.sample_chains` continues the
chains bit-identically where the versions, JAX's backend, float width and CPU are those that drew
them (loading a checkpoint drawn elsewhere warns with a
:class:`inference.provenance.ProvenanceWarning`)::

    result = sample_chains(key, step, states, data, n_warmup=500, n_draws=1000)  # Ctrl-C: partial
    save_checkpoint("chains.npz", result, key)
    # ... later
    checkpoint = load_checkpoint("chains.npz", like=states)
    more = sample_chains(checkpoint.rng_key, step, checkpoint.state, data, n_warmup=0,
                         n_draws=1000 - result.n_draws, thin=checkpoint.thin,
                         first_sweep=checkpoint.next_sweep)
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os
import sys
import types
import warnings
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from inference.em import EMResult
from inference._validation import key_as_data, key_from_data, user_stacklevel

__all__ = [
    "save_result",
    "load_result",
    "read_metadata",
    "save_chains",
    "load_chains",
    "chains_settings",
    "encode_settings",
    "describe_settings",
    "decode_settings",
    "ChainCheckpoint",
    "save_checkpoint",
    "load_checkpoint",
]

CHECKPOINT_FORMAT = "latentzoo-chain-checkpoint"
FORMAT = "latentzoo-em-result"
RESULT_FORMAT = "latentzoo-result"  # results other than EMResults, field by field
FORMAT_VERSION = 1
CHAINS_ATTRIBUTE = "latentzoo_settings"
_TRUSTED = ("zoo", "inference")
STOPPED_BY = ("converged", "max_iter", "time_budget", "interrupted")


# ----------------------------------------------------------------------------- settings as JSON
def _qualified_name(kind: Any) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def encode_settings(value: Any, name: str = "model") -> Any:
    """A JSON-ready description of ``value``: numbers, strings, tuples, lists, dicts of str keys,
    dataclass instances (class + fields) and module-level functions (by name).

    Raises
    ------
    TypeError
        Naming ``name`` (and the field path) for anything else.
    """
    return _encode(value, name, None)


def _encode(value: Any, name: str, arrays: dict[str, np.ndarray] | None, local: bool = False) -> Any:
    """:func:`encode_settings`; with ``arrays`` (a result's fields), arrays are also accepted, kept in
    ``arrays`` under ``arrays/<n>`` and referred to by that name, and NamedTuples by class and fields.
    With ``local``, lambdas and functions defined inside functions are written by their qualified name
    too (``module:outer.<locals>.inner``), which no process can import: an EM result's model, whose
    file then loads with the model given (:func:`load_result`, ``model=``)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not np.isfinite(value):
            return {"float": repr(value)}
        return value
    if isinstance(value, np.generic) and np.ndim(value) == 0 and not isinstance(value, np.str_):
        return _encode(value.item(), name, arrays, local)
    if arrays is not None and _is_array(value):
        stored = np.asarray(value)
        if stored.dtype.kind not in "biuf":
            raise TypeError(f"{name}: cannot save an array of {stored.dtype} in a result file")
        reference = f"arrays/{len(arrays)}"
        arrays[reference] = stored
        return {"array": reference}
    if arrays is not None and isinstance(value, tuple) and hasattr(value, "_fields"):
        return {"namedtuple": _qualified_name(type(value)),
                "fields": {field: _encode(getattr(value, field), f"{name}.{field}", arrays, local)
                           for field in value._fields}}
    if arrays is not None and _is_frame(value):  # a table of numeric columns (a GrownTree's history)
        if not all(isinstance(column, str) for column in value.columns):
            raise TypeError(f"{name}: a table's column names must be strings to be saved")
        return {"dataframe": {column: _encode(value[column].to_numpy(), f"{name}.{column}", arrays, local)
                              for column in value.columns}}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"tuple": [_encode(item, f"{name}[{index}]", arrays, local) for index, item in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(item, f"{name}[{index}]", arrays, local) for index, item in enumerate(value)]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError(f"{name}: dictionary keys must be strings to be saved")
        return {"dict": {key: _encode(item, f"{name}.{key}", arrays, local) for key, item in value.items()}}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "dataclass": _qualified_name(type(value)),
            "fields": {
                field.name: _encode(getattr(value, field.name), f"{name}.{field.name}", arrays, local)
                for field in dataclasses.fields(value)
            },
        }
    if isinstance(value, types.FunctionType) and (local or "<" not in value.__qualname__):  # module-level ones
        return {"function": _qualified_name(value)}
    raise TypeError(f"{name}: cannot save a {type(value).__name__} ({value!r:.80}) in a result file")


def _is_frame(value: Any) -> bool:
    """A pandas DataFrame (pandas is only looked at once something imported it)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame)


def _is_array(value: Any) -> bool:
    """A NumPy array or a JAX array (JAX is only looked at once something imported it)."""
    if isinstance(value, np.ndarray):
        return True
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)


def describe_settings(value: Any, name: str = "model") -> Any:
    """Like :func:`encode_settings`, but what cannot be rebuilt is described instead of refused:
    plain objects as their class and public attributes, callables that are not module-level
    functions (closures, partials) by their ``repr``. Decoding gives dicts and strings back."""
    try:
        return encode_settings(value, name)
    except TypeError:
        pass
    if callable(value) and not isinstance(value, type):
        return {"repr": repr(value)[:200]}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        attributes = {field: getattr(value, field) for field in value._fields}
    elif isinstance(value, (list, tuple)):
        return [describe_settings(item, f"{name}[{index}]") for index, item in enumerate(value)]
    elif hasattr(value, "__dict__"):
        attributes = {key: item for key, item in vars(value).items() if not key.startswith("_")}
    else:
        return {"repr": repr(value)[:200]}
    return {"object": _qualified_name(type(value)),
            "attributes": {key: describe_settings(item, f"{name}.{key}") for key, item in attributes.items()}}


class _Unimportable(ValueError):
    """A well-formed reference (``module:QualName``) to a class or function that is not imported:
    its module is not trusted, or it is not found there (a program defined in another process's
    ``__main__``, a lambda). :func:`read_metadata` describes such an entry instead."""


def _import(qualified: str, trusted: tuple[str, ...], name: str) -> Any:
    if not isinstance(qualified, str) or qualified.count(":") != 1:
        raise ValueError(f"{name}: malformed class reference {qualified!r}")
    module_name, qualname = qualified.split(":")
    if not any(module_name == prefix or module_name.startswith(prefix + ".") for prefix in trusted):
        raise _Unimportable(
            f"{name}: refusing to import {module_name!r}; pass trusted_modules=({module_name.split('.')[0]!r},) "
            "if you trust the file"
        )
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as error:
        raise _Unimportable(f"{name}: cannot find {qualified!r} ({error})") from None
    return target


def _unimportable_references(document: Any) -> list[str]:
    """The classes and functions (``module:QualName``) an encoded document refers to that another
    process cannot import: those of ``__main__`` (a script's, or a notebook's) and lambdas and
    functions defined inside functions (``<lambda>``, ``<locals>``)."""
    found: list[str] = []
    if isinstance(document, list):
        for item in document:
            found.extend(_unimportable_references(item))
    elif isinstance(document, dict):
        for key, item in document.items():
            if key in ("function", "dataclass", "namedtuple") and isinstance(item, str):
                module_name, _, qualname = item.partition(":")
                if module_name == "__main__" or "<" in qualname:
                    found.append(item)
            else:
                found.extend(_unimportable_references(item))
    return list(dict.fromkeys(found))


def _described(value: Any, arrays: dict[str, np.ndarray] | None = None) -> Any:
    """An encoded entry as plain values, importing nothing: dataclasses and NamedTuples as a dict of
    ``class`` (``module:QualName``) and their fields, functions by their ``module:QualName``, the
    rest as :func:`decode_settings` gives it (what :func:`read_metadata` returns for an entry whose
    classes or functions cannot be imported)."""
    if isinstance(value, list):
        return [_described(item, arrays) for item in value]
    if isinstance(value, dict) and len(value) in (1, 2):
        if isinstance(value.get("function"), str):
            return value["function"]
        for kind, members in (("dataclass", "fields"), ("namedtuple", "fields"), ("object", "attributes")):
            if isinstance(value.get(kind), str) and isinstance(value.get(members, {}), dict):
                return {"class": value[kind], **{key: _described(item, arrays)
                                                 for key, item in value.get(members, {}).items()}}
        if isinstance(value.get("tuple"), list):
            return tuple(_described(item, arrays) for item in value["tuple"])
        if isinstance(value.get("dict"), dict):
            return {key: _described(item, arrays) for key, item in value["dict"].items()}
    return _decode(value, "model", (), arrays)


def decode_settings(value: Any, name: str = "model", *, trusted_modules: Sequence[str] = ()) -> Any:
    """Inverse of :func:`encode_settings` (dataclasses restored field by field, like pickle)."""
    return _decode(value, name, _TRUSTED + tuple(trusted_modules), None)


def _decode(value: Any, name: str, trusted: tuple[str, ...], arrays: dict[str, np.ndarray] | None) -> Any:
    """:func:`decode_settings`; with ``arrays`` (a result's fields), array references and NamedTuples too."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decode(item, name, trusted, arrays) for item in value]
    if not isinstance(value, dict) or len(value) not in (1, 2):
        raise ValueError(f"{name}: malformed settings entry {value!r:.80}")
    if "float" in value:
        return float(value["float"])
    if "repr" in value:
        return value["repr"]
    if "object" in value:
        attributes = value.get("attributes", {})
        return {"class": value["object"], **{key: _decode(item, f"{name}.{key}", trusted, arrays)
                                            for key, item in attributes.items()}}
    if "tuple" in value:
        return tuple(_decode(item, name, trusted, arrays) for item in value["tuple"])
    if "dict" in value:
        return {key: _decode(item, f"{name}.{key}", trusted, arrays) for key, item in value["dict"].items()}
    if "function" in value:
        return _import(value["function"], trusted, name)
    if "array" in value and arrays is not None:
        reference = value["array"]
        if not isinstance(reference, str) or reference not in arrays:
            raise ValueError(f"{name}: the array {reference!r:.60} is missing")
        if arrays[reference].dtype.kind not in "biuf":
            raise ValueError(f"{name}: the array {reference!r} holds {arrays[reference].dtype}, not numbers")
        return arrays[reference]
    if "dataframe" in value and arrays is not None:
        import pandas as pd

        columns = value["dataframe"]
        if not isinstance(columns, dict):
            raise ValueError(f"{name}: malformed table entry {value!r:.80}")
        return pd.DataFrame({column: _decode(item, f"{name}.{column}", trusted, arrays)
                             for column, item in columns.items()})
    if "namedtuple" in value and arrays is not None:
        kind = _import(value["namedtuple"], trusted, name)
        fields = value.get("fields")
        if not (isinstance(kind, type) and issubclass(kind, tuple) and isinstance(fields, dict)
                and tuple(fields) == tuple(getattr(kind, "_fields", ()))):
            raise ValueError(f"{name}: {value['namedtuple']!r:.80} is not a NamedTuple of the fields "
                             f"{list(fields) if isinstance(fields, dict) else fields!r:.80}")
        return kind(**{field: _decode(item, f"{name}.{field}", trusted, arrays) for field, item in fields.items()})
    if "dataclass" in value:
        kind = _import(value["dataclass"], trusted, name)
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            raise ValueError(f"{name}: {value['dataclass']!r} is not a dataclass")
        fields = value.get("fields", {})
        expected = {field.name for field in dataclasses.fields(kind)}
        if not isinstance(fields, dict) or set(fields) != expected:
            raise ValueError(f"{name}: fields {sorted(fields)} do not match {kind.__name__}'s {sorted(expected)}")
        instance = kind.__new__(kind)
        for field_name, field_value in fields.items():
            object.__setattr__(instance, field_name, _decode(field_value, f"{name}.{field_name}", trusted, arrays))
        return instance
    raise ValueError(f"{name}: malformed settings entry {value!r:.80}")


# ----------------------------------------------------------------------------- EM results
def _params_arrays(params: Any) -> tuple[dict[str, np.ndarray], dict]:
    """Flat parameter containers: a NamedTuple of arrays or a dict of arrays."""
    if hasattr(params, "_fields"):
        names, kind = list(params._fields), {"namedtuple": _qualified_name(type(params))}
        leaves = [getattr(params, field) for field in names]
    elif isinstance(params, dict) and all(isinstance(key, str) for key in params):
        names, kind = list(params), {"dict": None}
        leaves = [params[key] for key in names]
    else:
        raise TypeError(f"result: cannot save parameters of type {type(params).__name__} "
                        "(expected a NamedTuple or a dict of arrays)")
    arrays = {}
    for field, leaf in zip(names, leaves):
        if "/" in field:
            raise ValueError(f"result: parameter name {field!r} contains '/'")
        arrays[field] = np.asarray(leaf)
    return arrays, {**kind, "fields": names}


def _npz_path(path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    path = Path(path)
    if path.is_dir():  # np.savez would write "<folder>.npz" beside it
        raise ValueError(f"path: {str(path)!r} is a folder; give a file name in it, such as "
                         f"{str(path / 'result.npz')!r}")
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def save_result(path: str | os.PathLike, result: Any, *, schedule: Any = None,
                settings: dict[str, Any] | None = None) -> Path:
    """Write a fitted result to one ``.npz`` file (no pickle).

    Parameters
    ----------
    path : str or PathLike
        Destination; ``.npz`` is appended when missing.
    result : EMResult, LRMResult or GrownTree
        A fit of tempered EM (:class:`inference.em.EMResult`, stored with the fitted data's row and
        column names where they had some, so that the loaded result refuses held-out data in another
        order), or of a model whose result checks itself when loaded: Chiang and Poole's
        latent-class relational model (:class:`zoo.relational.LRMResult`), stored with its model,
        schema, parameters, history and provenance, or a cluster-abstraction tree grown by
        :func:`zoo.dyadic.cluster_abstraction.anneal_tree` (:class:`~zoo.dyadic.cluster_abstraction.GrownTree`:
        its model, parameters, β, history table and how it stopped).
    schedule : FixedBeta, TemperedEM or DeterministicAnnealing, optional
        EM results only: the schedule of the fit, stored so that a resumed fit can use it
        (default: the one the fit ran, ``result.schedule``).
    settings : dict, optional
        Anything else worth keeping with the result (numbers, strings, lists, dicts).

    Returns
    -------
    pathlib.Path of the written file.

    Warns
    -----
    UserWarning
        When an EM result's model refers to a function or class that another process cannot
        import: one defined in a script or notebook (``__main__``), a lambda, or a function
        defined inside another function. The file is written, but its parameters and history load
        elsewhere only with the model given, ``load_result(path, model=model)``.
    """
    if settings is not None and not isinstance(settings, dict):
        raise TypeError(f"settings: expected a dict, got {type(settings).__name__}")
    if not isinstance(result, EMResult):
        if not (dataclasses.is_dataclass(result) and callable(getattr(result, "_check_loaded", None))):
            raise TypeError(f"result: expected an inference.em.EMResult, a zoo.relational.LRMResult or a "
                            f"zoo.dyadic.cluster_abstraction.GrownTree, got "
                            f"{type(result).__name__}{_chains_advice(result)}")
        if schedule is not None:
            raise TypeError(f"schedule: only for an EM result, not a {type(result).__name__}")
        return _save_fields(_npz_path(path), result, settings)
    path = _npz_path(path)
    schedule = getattr(result, "schedule", None) if schedule is None else schedule
    params, params_kind = _params_arrays(result.params)
    shape = getattr(result, "_shape", None)
    model = _encode(result.model, "model", None, local=True)
    metadata = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "model": model,
        "params": params_kind,
        "beta": float(result.beta),
        "best_restart": int(result.best_restart),
        "n_iter": int(result.n_iter),
        "converged": bool(result.converged),
        "best_iteration": int(result.best_iteration),
        "stopped_by": str(result.stopped_by),
        "log_lik": float(result.log_lik) if np.isfinite(result.log_lik) else None,
        "history": sorted(result.history),
        "shape": encode_settings(shape, "result._shape"),
        "schedule": encode_settings(schedule, "schedule"),
        "settings": encode_settings(settings, "settings"),
        "provenance": dict(getattr(result, "provenance", None) or {}),
        "row_names": _names_entry(getattr(result, "row_names", None)),
        "col_names": _names_entry(getattr(result, "col_names", None)),
    }
    arrays = {f"params/{field}": values for field, values in params.items()}
    arrays.update({f"history/{name}": np.asarray(values) for name, values in result.history.items()})
    arrays["restart_scores"] = np.asarray(result.restart_scores)
    arrays["metadata"] = np.asarray(json.dumps(metadata))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    _warn_if_not_importable(path, _unimportable_references([model, params_kind]))
    return path


def _names_entry(names: Any) -> list | None:
    """The fitted data's row or column names as JSON (strings and numbers; NumPy scalars as Python
    ones), or None where there are none or some other kind of label, which is then not kept (the
    result then checks no names, as one saved before names were kept)."""
    if names is None:
        return None
    plain = [name.item() if isinstance(name, np.generic) else name for name in names]
    if not all(isinstance(name, (str, int, float)) and not isinstance(name, bool) for name in plain):
        return None
    if any(isinstance(name, float) and not np.isfinite(name) for name in plain):
        return None
    return plain


def _names_loaded(path: Path, metadata: dict, key: str, size: Any) -> tuple | None:
    """The ``row_names`` or ``col_names`` entry of an EM result as a tuple (``size`` of them where the
    data's shape is known); None in a file saved without it (before 2026-12-07) or with none."""
    value = _entry(path, metadata, key, lambda value: value is None or (isinstance(value, list) and all(
        isinstance(name, (str, int, float)) and not isinstance(name, bool) for name in value) and (
        not _is_int(size) or len(value) == size)), f"null or a list of {size} names", None)
    return None if value is None else tuple(value)


def _chains_advice(result: Any) -> str:
    """How to save the chains of a Gibbs result instead (its class has ``idata`` or
    ``to_inference_data``), or ``""``: with every draw's clusters where the result can be read
    back from them (an IRMResult: ``to_inference_data(assignments=True)``, ``from_inference_data``)."""
    kind = type(result)
    if hasattr(kind, "idata"):
        return (": Gibbs chains, whose draws zoo.io.save_chains(path, result.idata) saves (or pickle it, to "
                "continue it later with resume)")
    to_inference_data = getattr(kind, "to_inference_data", None)
    if to_inference_data is None:
        return ""
    try:
        keeps_assignments = "assignments" in inspect.signature(to_inference_data).parameters
    except (TypeError, ValueError):
        keeps_assignments = False
    if keeps_assignments and hasattr(kind, "from_inference_data"):
        return (": Gibbs chains, whose draws, every draw's clusters with them, zoo.io.save_chains(path, "
                f"result.to_inference_data(assignments=True)) saves, and {kind.__name__}.from_inference_data("
                "zoo.io.load_chains(path), data) reads back into a result (or pickle it, to continue it later "
                "with resume)")
    return (": Gibbs chains, whose draws zoo.io.save_chains(path, result.to_inference_data()) saves (or pickle "
            "it, to continue it later with resume)")


def _warn_if_not_importable(path: Path, references: list[str]) -> None:
    """Say (``UserWarning``) that an EM result's file refers to classes or functions that another
    process cannot import (``references``, :func:`_unimportable_references`): its parameters and
    history will load there only with the model given to :func:`load_result`."""
    if not references:
        return
    named = ", ".join(map(repr, references))
    main = any(reference.startswith("__main__:") for reference in references)
    local = any("<" in reference for reference in references)
    kinds = " and ".join(part for part, present in (
        ("defined in a script or notebook (module '__main__': in another process, that process's own script)",
         main),
        ("a lambda or a function defined inside another function", local)) if present)
    warnings.warn(f"save_result: the model refers to {named}, {kinds}, which another process cannot import: the "
                  f"parameters and history in {str(path)!r} will load there only with the model supplied, "
                  "load_result(path, model=model) (read_metadata(path) reads the rest without it). For a file "
                  "that loads by itself, put the program (or class) in a module that can be imported, such as "
                  "my_models.py beside the script or notebook, import it from there, and load with "
                  "load_result(path, trusted_modules=('my_models',)).", UserWarning, stacklevel=user_stacklevel())


def _save_fields(path: Path, result: Any, settings: dict[str, Any] | None) -> Path:
    """A result other than an EMResult, field by field: its arrays in the archive, the rest (its
    model, the schema, the history's names) as JSON that refers to them."""
    arrays: dict[str, np.ndarray] = {}
    metadata = {
        "format": RESULT_FORMAT,
        "version": FORMAT_VERSION,
        "result": _encode(result, "result", arrays),
        "settings": encode_settings(settings, "settings"),
    }
    arrays["metadata"] = np.asarray(json.dumps(metadata))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return path


def _existing_path(path: Any, suffix: str | None = None) -> Path:
    """``path`` if it exists, else the same with ``suffix`` appended where that exists (the name
    :func:`save_result` and :func:`save_checkpoint` wrote, which append ``.npz``)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    path = Path(path)
    if not path.exists() and suffix is not None and path.suffix != suffix:
        appended = path.with_name(path.name + suffix)
        if appended.exists():
            return appended
    if not path.exists():
        raise FileNotFoundError(f"path: {str(path)!r} does not exist")
    return path


def _read_archive(path: Path, file_format: str | tuple[str, ...], what: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The JSON metadata and the arrays of a ``.npz`` file written by this module.

    Every way a file can be damaged (empty, truncated, bytes altered: zip, zlib, CRC and NumPy
    header errors) or be another file is reported as a ``ValueError`` naming ``path``.
    """
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as error:  # a damaged archive fails in zipfile, zlib or NumPy with any of their errors
        raise ValueError(f"path: {str(path)!r} is not a {what} file, or is damaged "
                         f"({type(error).__name__}: {error})") from None
    if "metadata" not in arrays:
        raise ValueError(f"path: {str(path)!r} has no metadata entry; not a {what} file")
    raw = arrays.pop("metadata")
    if raw.ndim != 0 or raw.dtype.kind != "U":
        raise ValueError(f"path: {str(path)!r}: the metadata entry is not a JSON string (dtype {raw.dtype}, "
                         f"shape {raw.shape})")
    try:
        metadata = json.loads(str(raw))
    except json.JSONDecodeError as error:
        raise ValueError(f"path: {str(path)!r}: metadata is not valid JSON ({error})") from None
    formats = (file_format,) if isinstance(file_format, str) else file_format
    if not isinstance(metadata, dict) or metadata.get("format") not in formats:
        found = metadata.get("format") if isinstance(metadata, dict) else type(metadata).__name__
        raise ValueError(f"path: {str(path)!r} is not a {what} (format {found!r})")
    if metadata.get("version") != FORMAT_VERSION:
        raise ValueError(f"path: {str(path)!r}: unsupported format version {metadata.get('version')!r}")
    return metadata, arrays


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_MISSING = object()


def _entry(path: Path, metadata: dict, key: str, valid: Any, expected: str, default: Any = _MISSING) -> Any:
    """``metadata[key]`` if ``valid(value)``, else a ValueError naming ``path`` and the entry."""
    if key not in metadata:
        if default is not _MISSING:
            return default
        raise ValueError(f"path: {str(path)!r}: metadata entry {key!r} is missing")
    value = metadata[key]
    if not valid(value):
        raise ValueError(f"path: {str(path)!r}: metadata entry {key!r} is {value!r:.60}, expected {expected}")
    return value


def _provenance_entry(path: Path, metadata: dict) -> dict[str, str] | None:
    """The ``provenance`` entry (what made the fit, :mod:`inference.provenance`): a dict of strings,
    or ``None`` in a file saved without it (before 2026-12-01, or a result built by hand)."""
    value = _entry(path, metadata, "provenance", lambda value: value is None or (isinstance(value, dict) and all(
        isinstance(key, str) and isinstance(item, str) for key, item in value.items())),
        "null or a dict of strings", None)
    return dict(value) if value else None


def _numeric_array(path: Path, arrays: dict[str, np.ndarray], name: str, *, ndim: int | None = None) -> np.ndarray:
    """``arrays[name]``, present and of numbers (or booleans), else a ValueError naming ``path``."""
    if name not in arrays:
        raise ValueError(f"path: {str(path)!r}: the array {name!r} is missing")
    values = arrays[name]
    if values.dtype.kind not in "biuf":
        raise ValueError(f"path: {str(path)!r}: the array {name!r} holds {values.dtype}, not numbers")
    if ndim is not None and values.ndim != ndim:
        raise ValueError(f"path: {str(path)!r}: the array {name!r} has shape {values.shape}, "
                         f"expected {ndim} dimension(s)")
    return values


def _decoded(path: Path, value: Any, name: str, trusted_modules: Sequence[str],
             arrays: dict[str, np.ndarray] | None = None, *, describe: bool = False) -> Any:
    """:func:`decode_settings` (with ``arrays``, a result's fields; with ``describe``,
    :func:`_described`) with any failure (a malformed or untrusted entry) naming ``path``."""
    try:
        if describe:
            return _described(value, arrays)
        return _decode(value, name, _TRUSTED + tuple(trusted_modules), arrays)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        kind = _Unimportable if isinstance(error, _Unimportable) else ValueError
        raise kind(f"path: {str(path)!r}: {error}") from None


def _read(path: Any) -> tuple[dict, dict[str, np.ndarray]]:
    path = _existing_path(path, ".npz")
    return _read_archive(path, (FORMAT, RESULT_FORMAT), "latentzoo result")


def read_metadata(path: str | os.PathLike, *, trusted_modules: Sequence[str] = ()) -> dict[str, Any]:
    """The metadata of a result file, with ``model``, ``schedule`` and ``settings`` decoded (an
    LRMResult's file: ``result``, the result's class, ``model``, ``settings`` and ``provenance``).

    An entry is rebuilt (an equal model, schedule) where the classes and functions it names can be
    imported from ``zoo``, ``inference`` and ``trusted_modules``. Where they cannot (a model whose
    program was defined in a script or notebook, ``__main__``, or a module not trusted), the entry
    is described instead, importing nothing: dataclasses as a dict of ``class``
    (``"module:QualName"``) and their fields, functions by their ``"module:QualName"``, e.g.
    ``{"class": "inference.enumerated:EnumeratedEM", "program": "__main__:mixture", ...}``. A
    malformed entry raises a ``ValueError`` naming ``path``.
    """
    metadata, arrays = _read(path)
    if metadata["format"] == RESULT_FORMAT:
        entry = _result_entry(Path(path), metadata)
        fields = entry["fields"]
        return {"format": RESULT_FORMAT, "version": metadata["version"], "result": entry["dataclass"],
                **{key: _decoded_or_described(Path(path), value, key, trusted_modules, arrays) for key, value in
                   (("model", fields.get("model")), ("settings", metadata.get("settings")),
                    ("provenance", fields.get("provenance")))}}
    for key in ("model", "schedule", "settings"):
        metadata[key] = _decoded_or_described(Path(path), metadata.get(key), key, trusted_modules)
    return metadata


def _decoded_or_described(path: Path, value: Any, name: str, trusted_modules: Sequence[str],
                          arrays: dict[str, np.ndarray] | None = None) -> Any:
    """:func:`_decoded`, or :func:`_described` where the entry names a class or function that is
    not imported (not trusted, or not found)."""
    try:
        return _decoded(path, value, name, trusted_modules, arrays)
    except _Unimportable:
        return _decoded(path, value, name, trusted_modules, arrays, describe=True)


def load_result(path: str | os.PathLike, *, trusted_modules: Sequence[str] = (), model: Any = None) -> Any:
    """Read a file written by :func:`save_result` back into an equal result.

    Parameters
    ----------
    path : str or PathLike
        The file; ``.npz`` is appended where the path as given does not exist (as
        :func:`save_result` appends it).
    trusted_modules : sequence of str
        Module prefixes besides ``zoo`` and ``inference`` whose classes may be imported to
        rebuild the model and the parameters (e.g. the module of a user-defined model).
    model : object, optional
        EM results only: the fitted model itself, used instead of the one the file names, which
        is then not imported. For a file whose model cannot be imported here: one fitted in a
        script or notebook (its program in ``__main__``, another process's own), or with a
        lambda or a function defined inside another function (:func:`save_result` warns when it
        writes such a file). It must be the saved model but for its functions (the program),
        which are the caller's: the same class (by name) and the same settings, else a
        ``ValueError``.

    Returns
    -------
    EMResult, or the result of another kind that was saved (an LRMResult), whose methods work.
    """
    import jax.numpy as jnp

    metadata, arrays = _read(path)
    path = Path(path)
    if metadata["format"] == RESULT_FORMAT:
        if model is not None:
            raise TypeError(f"model: only for an EM result's file; {str(path)!r} holds a "
                            f"{_result_entry(path, metadata)['dataclass'].rpartition(':')[2]}, whose model loads "
                            "with it")
        return _load_fields(path, metadata, arrays, trusted_modules)
    if "model" not in metadata:
        raise ValueError(f"path: {str(path)!r}: metadata entry 'model' is missing")
    if model is None:
        try:
            model = _decoded(path, metadata["model"], "model", trusted_modules)
        except _Unimportable as error:
            raise ValueError(f"{error}. Its parameters and history load with the fitted model given instead: "
                             "load_result(path, model=model), the model as it was fitted, its program (or class) "
                             "defined again or imported (read_metadata(path)['model'] describes it)") from None
        if not all(callable(getattr(model, method, None)) for method in ("prepare", "em_step", "heldout_log_lik")):
            raise ValueError(f"path: {str(path)!r}: the model entry gives {model!r:.60}, not a model fitted by EM")
        given = False
    else:
        _check_given_model(path, model, metadata["model"])
        given = True
    kind = _entry(path, metadata, "params", lambda value: isinstance(value, dict) and (
        isinstance(value.get("fields"), list) and all(isinstance(field, str) for field in value["fields"])
        and (isinstance(value.get("namedtuple"), str) or ("dict" in value and "namedtuple" not in value))),
        "{'fields': [names], 'namedtuple': 'module:Class'} or {'fields': [names], 'dict': null}")
    leaves = {field: jnp.asarray(_numeric_array(path, arrays, f"params/{field}")) for field in kind["fields"]}
    if "namedtuple" in kind:
        params_type = _params_type(path, kind["namedtuple"], trusted_modules, model if given else None)
        if tuple(getattr(params_type, "_fields", ())) != tuple(kind["fields"]):
            raise ValueError(f"path: {str(path)!r}: parameter fields {kind['fields']} do not match "
                             f"{getattr(params_type, '__name__', params_type)!r}")
        params = params_type(**leaves)
    else:
        params = leaves
    names = _entry(path, metadata, "history", lambda value: isinstance(value, list) and all(
        isinstance(name, str) for name in value), "a list of names")
    history = {name: _numeric_array(path, arrays, f"history/{name}", ndim=1) for name in names}
    restart_scores = _numeric_array(path, arrays, "restart_scores", ndim=1)
    best_restart = _entry(path, metadata, "best_restart",
                          lambda value: _is_int(value) and 0 <= value < restart_scores.shape[0],
                          f"an index below the {restart_scores.shape[0]} restart scores")
    n_iter = _entry(path, metadata, "n_iter", lambda value: _is_int(value) and value >= 0, "an integer >= 0")
    best_iteration = _entry(path, metadata, "best_iteration", lambda value: _is_int(value) and value >= -1,
                            "an integer >= -1")
    beta = _entry(path, metadata, "beta", lambda value: isinstance(value, (int, float)) and not isinstance(
        value, bool) and 0.0 < value <= 1.0, "an inverse temperature in (0, 1]")
    converged = _entry(path, metadata, "converged", lambda value: isinstance(value, bool), "true or false")
    stopped_by = _entry(path, metadata, "stopped_by", lambda value: value in STOPPED_BY, f"one of {STOPPED_BY}")
    log_lik = metadata.get("log_lik")  # absent from files saved before 2026-12-05
    if log_lik is not None and (isinstance(log_lik, bool) or not isinstance(log_lik, (int, float))):
        raise ValueError(f"path: {str(path)!r}: metadata entry 'log_lik' is {log_lik!r:.60}, expected a number or null")
    shape = _decoded(path, metadata.get("shape"), "shape", ())
    if shape is not None and not isinstance(shape, tuple):
        raise ValueError(f"path: {str(path)!r}: metadata entry 'shape' is {shape!r:.60}, expected the data's shape")
    _check_params_shapes(path, model, params, shape)
    made_by = _provenance_entry(path, metadata)
    return EMResult(
        model=model,
        params=params,
        beta=float(beta),
        history=history,
        restart_scores=restart_scores,
        best_restart=best_restart,
        n_iter=n_iter,
        converged=converged,
        best_iteration=best_iteration,
        stopped_by=stopped_by,
        log_lik=float("nan") if log_lik is None else float(log_lik),
        _shape=shape,
        provenance=made_by or {},
        schedule=_decoded(path, metadata.get("schedule"), "schedule", trusted_modules),
        row_names=_names_loaded(path, metadata, "row_names", None if shape is None or len(shape) != 2 else shape[0]),
        col_names=_names_loaded(path, metadata, "col_names", None if shape is None or len(shape) != 2 else shape[1]),
    )


def _check_given_model(path: Path, model: Any, stored: Any) -> None:
    """``model`` (``load_result(path, model=...)``) is a model fitted by EM, and the saved one but
    for where its classes and functions come from: the same classes by name and the same settings,
    whatever the functions (its program, the caller's own)."""
    if not all(callable(getattr(model, method, None)) for method in ("prepare", "em_step", "heldout_log_lik")):
        raise TypeError(f"model: expected the model fitted by EM whose result {str(path)!r} holds, got "
                        f"{type(model).__name__}")
    try:
        given = _encode(model, "model", None, local=True)
    except TypeError as error:
        raise TypeError(f"model: cannot be compared with the model saved in {str(path)!r} ({error})") from None
    if _comparable(given) == _comparable(stored):
        return
    saved_class = stored.get("dataclass") if isinstance(stored, dict) else None
    if (not isinstance(saved_class, str) or not isinstance(given, dict) or not isinstance(stored.get("fields"), dict)
            or str(given.get("dataclass")).rpartition(":")[2] != saved_class.rpartition(":")[2]):
        saved = f"one of class {saved_class!r}" if isinstance(saved_class, str) else "not a dataclass"
        raise ValueError(f"model: the {type(model).__name__} given is not the model saved in {str(path)!r}, "
                         f"{saved}")
    fields, saved = given["fields"], stored["fields"]
    differ = [field for field in fields
              if field not in saved or _comparable(fields[field]) != _comparable(saved[field])]
    differ += [field for field in saved if field not in fields]
    described = ", ".join(f"{field}={_described(saved[field])!r:.60}" if field in saved else f"no {field}"
                          for field in differ)
    raise ValueError(f"model: the {type(model).__name__} given differs from the model saved in {str(path)!r} in "
                     f"{', '.join(differ)}: the saved one has {described}")


def _comparable(document: Any) -> Any:
    """An encoded document as :func:`load_result` compares a model given with the saved one: every
    function reference the same (the caller brings the program, defined again or imported from
    elsewhere), classes by name (a class of a script's ``__main__`` moved to a module)."""
    if isinstance(document, list):
        return [_comparable(item) for item in document]
    if not isinstance(document, dict):
        return document
    if "function" in document:
        return {"function": None}
    return {key: item.rpartition(":")[2] if key in ("dataclass", "namedtuple") and isinstance(item, str)
            else _comparable(item) for key, item in document.items()}


def _params_type(path: Path, qualified: str, trusted_modules: Sequence[str], model: Any) -> Any:
    """The NamedTuple class of an EM result's parameters; with a ``model`` given to
    :func:`load_result`, one that cannot be imported (a class of a script's ``__main__``) is looked
    up by name in the module of the model's class (already imported; nothing is imported)."""
    try:
        return _import_for(path, qualified, trusted_modules)
    except _Unimportable:
        if model is None:
            raise
        target: Any = sys.modules.get(type(model).__module__)
        for part in qualified.rpartition(":")[2].split("."):
            target = getattr(target, part, None)
        if not (isinstance(target, type) and issubclass(target, tuple)):
            raise ValueError(f"path: {str(path)!r}: the parameters' class {qualified!r} cannot be imported, nor "
                             f"found beside the model's class in {type(model).__module__!r}") from None
        return target


def _result_entry(path: Path, metadata: dict) -> dict:
    """The ``result`` entry of a result saved field by field: its class and its fields."""
    return _entry(path, metadata, "result", lambda value: isinstance(value, dict) and isinstance(
        value.get("dataclass"), str) and isinstance(value.get("fields"), dict), "a class and its fields")


def _load_fields(path: Path, metadata: dict, arrays: dict[str, np.ndarray], trusted_modules: Sequence[str]) -> Any:
    """A result saved field by field (:func:`_save_fields`), rebuilt like pickle and then checked by
    its own ``_check_loaded`` (shapes that agree with each other and with the model)."""
    entry = _result_entry(path, metadata)
    kind = _import_for(path, entry["dataclass"], trusted_modules, "result")
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind) and callable(getattr(kind, "_check_loaded",
                                                                                        None))):
        raise ValueError(f"path: {str(path)!r}: {entry['dataclass']!r} is not a result that can be loaded")
    result = _decoded(path, entry, "result", trusted_modules, arrays)
    try:
        result._check_loaded()
    except (ValueError, TypeError, IndexError, KeyError, AttributeError) as error:
        raise ValueError(f"path: {str(path)!r}: {error}") from None
    return result


def _stand_in_data(shape: tuple) -> Any:
    """Data of ``shape`` for the shapes of a model's start: counts on a diagonal band (every row and
    column has one) for an (n_rows, n_cols) co-occurrence shape, else zeros (small shapes only)."""
    from zoo.data import CoOccurrence

    if len(shape) == 2 and all(_is_int(size) and size >= 1 for size in shape):
        cells = np.arange(max(shape))
        yield CoOccurrence(cells % shape[0], cells % shape[1], np.ones(cells.shape[0]), shape)
    if all(_is_int(size) and size >= 1 for size in shape) and np.prod(shape, dtype=float) <= 1e6:
        yield np.zeros(shape)


def _params_template(model: Any, shape: Any) -> Any:
    """The shapes of ``model``'s own start for data of ``shape`` (``jax.eval_shape``; nothing is
    computed), or None where the model cannot say (no stored shape, data of another kind)."""
    import jax

    if not isinstance(shape, tuple) or not callable(getattr(model, "init_params", None)):
        return None
    for data in _stand_in_data(shape):
        try:
            arrays = model.prepare(data)
            return jax.eval_shape(model.init_params, jax.random.key(0), arrays)
        except Exception:  # the model takes data of another kind, or needs values to size its start
            continue
    return None


def _check_params_shapes(path: Path, model: Any, params: Any, shape: Any) -> None:
    """The stored parameters against the model's own for data of the stored shape: the same
    fields, each of the same shape, else a ValueError naming ``path``."""
    import jax

    template = _params_template(model, shape)
    if template is None:
        return
    expected = {jax.tree_util.keystr(key): leaf for key, leaf in jax.tree_util.tree_flatten_with_path(template)[0]}
    stored = {jax.tree_util.keystr(key): leaf for key, leaf in jax.tree_util.tree_flatten_with_path(params)[0]}
    if sorted(expected) != sorted(stored):
        raise ValueError(f"path: {str(path)!r}: parameters {sorted(stored)} do not match the fields "
                         f"{sorted(expected)} of {type(model).__name__}")
    for name, leaf in stored.items():
        if tuple(np.shape(leaf)) != tuple(expected[name].shape):
            raise ValueError(f"path: {str(path)!r}: parameter {name.lstrip('.')} has shape {tuple(np.shape(leaf))}, "
                             f"where {model!r:.80} fitted to data of shape {shape} has {tuple(expected[name].shape)}")


def _import_for(path: Path, qualified: Any, trusted_modules: Sequence[str], name: str = "params") -> Any:
    try:
        return _import(qualified, _TRUSTED + tuple(trusted_modules), name)
    except ValueError as error:
        kind = _Unimportable if isinstance(error, _Unimportable) else ValueError
        raise kind(f"path: {str(path)!r}: {error}") from None


# ----------------------------------------------------------------------------- Gibbs chains
def save_chains(path: str | os.PathLike, idata: Any, *, model: Any = None,
                settings: dict[str, Any] | None = None) -> Path:
    """Write Gibbs chains (ArviZ ``InferenceData``) to a netCDF file with the model's settings.

    The settings go, as JSON, into the attribute ``latentzoo_settings`` of the posterior group,
    next to ArviZ's own attributes; :func:`chains_settings` decodes them. Dataclass models come
    back as equal objects; others (e.g. :class:`zoo.dirichlet.mixture.DPMixture`, whose component
    family is made of closures) as a description (:func:`describe_settings`).
    """
    import arviz as az

    if not isinstance(idata, az.InferenceData):
        hint = ""
        if hasattr(idata, "to_inference_data"):  # an IRM result
            hint = "; its to_inference_data(assignments=True) is one"
        elif hasattr(idata, "idata"):  # a DP or SCDP fit
            hint = "; the fit's .idata is one"
        raise TypeError(f"idata: expected an arviz.InferenceData, got {type(idata).__name__}{hint}")
    if "posterior" not in idata.groups():
        raise ValueError("idata: has no posterior group")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    if Path(path).is_dir():
        raise ValueError(f"path: {str(path)!r} is a folder; give a file name in it, such as "
                         f"{str(Path(path) / 'chains.nc')!r}")
    if settings is not None and not isinstance(settings, dict):
        raise TypeError(f"settings: expected a dict, got {type(settings).__name__}")
    document = json.dumps({"model": describe_settings(model, "model"),
                           "settings": encode_settings(settings, "settings")})
    stored = idata.copy()
    stored.posterior.attrs[CHAINS_ATTRIBUTE] = document
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    stored.to_netcdf(str(path))
    return Path(path)


def load_chains(path: str | os.PathLike) -> Any:
    """Read chains written by :func:`save_chains` (or any ArviZ netCDF file).

    The groups are read into memory here, so a damaged file (not netCDF, truncated, a checksum
    that does not match) raises a ``ValueError`` naming ``path`` now rather than later.
    """
    import arviz as az

    path = _existing_path(path)
    try:
        idata = az.from_netcdf(str(path))
        groups = idata.groups()
        for group in groups:
            getattr(idata, group).load()
    except Exception as error:  # netCDF4/h5py/xarray each raise their own errors on a damaged file
        raise ValueError(f"path: {str(path)!r} is not a readable ArviZ netCDF file, or is damaged "
                         f"({type(error).__name__}: {error})") from None
    if not groups:
        raise ValueError(f"path: {str(path)!r} holds no ArviZ groups (posterior, sample_stats, ...)")
    return idata


def chains_settings(idata: Any, *, trusted_modules: Sequence[str] = ()) -> dict[str, Any]:
    """``{"model": ..., "settings": ...}`` stored by :func:`save_chains` (empty values if none)."""
    attrs = getattr(getattr(idata, "posterior", None), "attrs", None)
    if attrs is None:
        raise TypeError(f"idata: expected an arviz.InferenceData with a posterior, got {type(idata).__name__}")
    if CHAINS_ATTRIBUTE not in attrs:
        return {"model": None, "settings": None}
    try:
        document = json.loads(attrs[CHAINS_ATTRIBUTE])
    except (TypeError, json.JSONDecodeError) as error:
        raise ValueError(f"idata: the {CHAINS_ATTRIBUTE} attribute is not valid JSON ({error})") from None
    if not isinstance(document, dict):
        raise ValueError(f"idata: the {CHAINS_ATTRIBUTE} attribute is {type(document).__name__}, not a JSON object")
    return {key: decode_settings(document.get(key), key, trusted_modules=trusted_modules)
            for key in ("model", "settings")}


# ----------------------------------------------------------------------------- chain checkpoints
class ChainCheckpoint(NamedTuple):
    """What :func:`load_checkpoint` restores.

    Attributes
    ----------
    state : pytree
        The chains' kernel state (chains first), shaped like the ``like`` template.
    rng_key : jax.Array
        The key the chains were started with.
    next_sweep : int
        Index of the next sweep (pass as ``first_sweep``).
    thin : int
        Sweeps per draw of the saved run.
    settings : dict
        The model description and settings stored with the checkpoint.
    provenance : dict or None
        What drew the saved chains (``ChainResult.provenance``: versions, JAX's backend, float
        width, the CPU compiled for); ``None`` when the file does not say.
    """

    state: Any
    rng_key: Any
    next_sweep: int
    thin: int
    settings: dict
    provenance: dict | None = None


def _state_leaves(state: Any) -> tuple[list[str], list[np.ndarray]]:
    import jax

    with_paths, _ = jax.tree_util.tree_flatten_with_path(state)
    return [jax.tree_util.keystr(path) for path, _ in with_paths], [np.asarray(leaf) for _, leaf in with_paths]


def save_checkpoint(path: str | os.PathLike, result: Any, rng_key: Any, *, model: Any = None,
                    settings: dict[str, Any] | None = None) -> Path:
    """Write what is needed to continue a run of chains: final state, key and next sweep.

    Parameters
    ----------
    path : str or PathLike
        Destination; ``.npz`` is appended when missing.
    result : inference.chains.ChainResult
        The run to continue (complete, or stopped by Ctrl-C or a time budget).
    rng_key : jax.Array
        The key the run was started with (typed or raw ``uint32`` key data).
    model : object, optional
        The model, stored as a description (see :func:`describe_settings`).
    settings : dict, optional
        Anything else worth keeping (numbers, strings, lists, dicts).

    Returns
    -------
    pathlib.Path of the written file.
    """
    import jax

    from inference.chains import ChainResult

    if not isinstance(result, ChainResult):
        raise TypeError(f"result: expected an inference.chains.ChainResult, got {type(result).__name__}")
    if settings is not None and not isinstance(settings, dict):
        raise TypeError(f"settings: expected a dict, got {type(settings).__name__}")
    if not isinstance(rng_key, jax.Array):
        raise TypeError(f"rng_key: expected a jax PRNG key, got {type(rng_key).__name__}")
    key_data, key_impl = key_as_data(rng_key)
    names, leaves = _state_leaves(result.final_state)
    path = _npz_path(path)
    metadata = {
        "format": CHECKPOINT_FORMAT,
        "version": FORMAT_VERSION,
        "leaves": names,
        "key_impl": key_impl,
        "next_sweep": int(result.next_sweep),
        "thin": int(result.thin),
        "n_draws": int(result.n_draws),
        "model": describe_settings(model, "model"),
        "settings": encode_settings(settings, "settings"),
        "provenance": dict(result.provenance) if result.provenance else None,
    }
    arrays = {f"state/{index}": leaf for index, leaf in enumerate(leaves)}
    arrays["key"] = key_data
    arrays["metadata"] = np.asarray(json.dumps(metadata))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return path


def _check_state_shapes(path: Path, names: list[str], shapes: list[tuple], like_shapes: list[tuple]) -> None:
    """The saved state's shapes against each other and ``like``'s, else a ValueError naming ``path``.

    Every leaf has the chains first, as many in all of them. An axis may only be longer than in
    ``like`` where a capacity grew during the run, and then every axis of that length in ``like``
    that grew grew to the same length (one capacity, doubled); no axis is shorter.
    """
    chains = {shape[0] for shape in shapes if len(shape)}
    if len(chains) > 1:
        raise ValueError(f"path: {str(path)!r}: the state leaves hold different numbers of chains "
                         f"({', '.join(f'{name} {shape}' for name, shape in zip(names, shapes))})")
    grown: dict[int, tuple[int, str]] = {}
    for name, shape, like_shape in zip(names, shapes, like_shapes):
        for axis, (size, like_size) in enumerate(zip(shape[1:], like_shape[1:]), start=1):
            if size < like_size:
                raise ValueError(f"path: {str(path)!r}: the state leaf {name} has shape {shape}, shorter on axis "
                                 f"{axis} than like's {like_shape}")
            if size > like_size:
                first = grown.setdefault(like_size, (size, name))
                if first[0] != size:
                    raise ValueError(f"path: {str(path)!r}: the state leaf {name} has grown from {like_size} to "
                                     f"{size} on axis {axis}, where {first[1]} grew from {like_size} to {first[0]}")


def load_checkpoint(path: str | os.PathLike, like: Any) -> ChainCheckpoint:
    """Read a file written by :func:`save_checkpoint`.

    Parameters
    ----------
    path : str or PathLike
    like : pytree
        A state of the same kind (e.g. the initial states of the run, from
        :func:`inference.chains.stack_states`): its structure rebuilds the saved state. Shapes
        may differ where a capacity grew during the run (every leaf has as many chains, no axis
        is shorter than ``like``'s, and axes of one length in ``like`` grew to one length); the
        structure must match.

    Returns
    -------
    ChainCheckpoint

    Warns
    -----
    inference.provenance.ProvenanceWarning
        When the saved chains were drawn with other versions, another JAX backend, float width or
        CPU than this process has (:func:`inference.provenance.provenance_differences`): continued
        here, they need not be bit for bit those of one uninterrupted run.
    """
    import jax
    import jax.numpy as jnp

    path = _existing_path(path, ".npz")
    metadata, arrays = _read_archive(path, CHECKPOINT_FORMAT, "latentzoo chain checkpoint")
    saved_names = _entry(path, metadata, "leaves", lambda value: isinstance(value, list) and all(
        isinstance(name, str) for name in value), "a list of leaf paths")
    next_sweep = _entry(path, metadata, "next_sweep", lambda value: _is_int(value) and value >= 0, "an integer >= 0")
    thin = _entry(path, metadata, "thin", lambda value: _is_int(value) and value >= 1, "an integer >= 1")
    n_draws = _entry(path, metadata, "n_draws", lambda value: _is_int(value) and value >= 0, "an integer >= 0", 0)
    impl = _entry(path, metadata, "key_impl", lambda value: value is None or isinstance(value, str),
                  "null or the name of a PRNG implementation", None)
    settings = _decoded(path, metadata.get("settings"), "settings", ())
    made_by = _provenance_entry(path, metadata)
    names, like_leaves = _state_leaves(like)
    if names != saved_names:
        raise ValueError(f"like: its structure {names} differs from that of the state saved in {str(path)!r}, "
                         f"{saved_names}")
    treedef = jax.tree_util.tree_structure(like)
    leaves = []
    for index, (name, template) in enumerate(zip(names, like_leaves)):
        values = _numeric_array(path, arrays, f"state/{index}", ndim=template.ndim)
        if values.dtype.kind != template.dtype.kind:
            raise ValueError(f"path: {str(path)!r}: the state leaf {name} holds {values.dtype}, "
                             f"where like holds {template.dtype}")
        leaves.append(jnp.asarray(values))
    _check_state_shapes(path, names, [np.shape(leaf) for leaf in leaves], [np.shape(leaf) for leaf in like_leaves])
    key_data = _numeric_array(path, arrays, "key")
    if key_data.dtype != np.uint32 or (impl is None and key_data.shape != (2,)):
        raise ValueError(f"path: {str(path)!r}: the key is {key_data.dtype}{list(key_data.shape)}, "
                         "expected uint32 key data")
    try:
        rng_key = key_from_data(key_data, impl)
    except (TypeError, ValueError) as error:
        raise ValueError(f"path: {str(path)!r}: the key data do not fit its implementation {impl!r} "
                         f"({error})") from None
    if rng_key.shape != ():
        raise ValueError(f"path: {str(path)!r}: the key data hold {rng_key.shape} keys, not one key")
    from inference.provenance import warn_if_made_elsewhere

    warn_if_made_elsewhere(made_by, f"path: the chains in {str(path)!r}", stacklevel=2)
    return ChainCheckpoint(
        state=jax.tree_util.tree_unflatten(treedef, leaves),
        rng_key=rng_key,
        next_sweep=next_sweep,
        thin=thin,
        settings={"model": metadata.get("model"), "settings": settings, "n_draws": n_draws},
        provenance=made_by,
    )

