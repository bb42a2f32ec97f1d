"""Input validation shared by every public entry point.

Every check runs on NumPy / Python values *before* any JAX code, and raises ``ValueError``
(or ``TypeError`` for a wrong kind of object) whose message starts with the argument's name, so
a user sees ``counts: contains NaN`` rather than a traceback from inside a jitted kernel.
"""

from __future__ import annotations

import numbers
import os
import sys
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "as_float_array",
    "as_index_array",
    "check_int",
    "check_real",
    "check_fractions",
    "check_choice",
    "check_key",
    "check_model",
    "check_params_like",
    "check_distributions",
    "Support",
    "check_positive",
    "check_number_dtype",
    "as_label_codes",
    "check_relation",
    "renamed",
    "memory_limit",
    "check_memory",
    "memory_shortfall",
    "tree_nbytes",
    "user_stacklevel",
    "check_bool",
    "key_as_data",
    "key_from_data",
    "arrays_digest",
    "feature_names",
    "in_fitted_order",
]

# Source files of the library (the ``inference`` and ``zoo`` packages, installed side by side).
_LIBRARY_PREFIXES = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), package) + os.sep
                          for package in ("inference", "zoo"))


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the function calling this one that points
    the warning at the first frame outside the library: the user's line, also when the call came
    through another library function (``SupervisedDP.fit_distances`` calling ``fit``, a baseline
    calling ``DPMixture.fit``). Pointed at a library line instead, a warning would show once per
    process under Python's default filter, whatever the data of later calls.
    """
    prefixes = _LIBRARY_PREFIXES
    sklearn = sys.modules.get("sklearn")  # its frames too, for an estimator called through a Pipeline
    if getattr(sklearn, "__file__", None):  # or fit_predict: the warning then names the user's line
        prefixes += (os.path.dirname(os.path.abspath(sklearn.__file__)) + os.sep,)
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(prefixes):
        frame, level = frame.f_back, level + 1
    return level


def _is_jax_array(value: Any) -> bool:
    return type(value).__module__.startswith(("jax", "jaxlib"))


def numbers_array(value: Any) -> np.ndarray:
    """``np.asarray(value)``, but a scipy.sparse matrix densified, and a NumPy masked array with
    masked entries or a pandas object of nullable numeric or boolean columns (``Int64``,
    ``Float64``, ``boolean``, whose ``np.asarray`` is of dtype object) read as float64 with NaN
    for their masked or missing values (where NaN means missing it is read so; elsewhere it is
    refused by name)."""
    if type(value).__module__.startswith("scipy.sparse"):
        return value.toarray()
    if np.ma.isMaskedArray(value) and np.ma.getmaskarray(value).any():  # np.asarray would drop the mask
        return np.ma.filled(value.astype(np.float64), np.nan)  # masked entries are missing: NaN
    array = np.asarray(value)
    if array.dtype == object and hasattr(value, "to_numpy") and hasattr(value, "dtypes"):
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        dtypes = [value.dtypes] if not hasattr(value.dtypes, "__iter__") else list(value.dtypes)
        if dtypes and all(is_numeric_dtype(dtype) or is_bool_dtype(dtype) for dtype in dtypes):
            return value.to_numpy(dtype=np.float64, na_value=np.nan)
    return array


def as_float_array(
    name: str,
    value: Any,
    *,
    ndim: int | tuple[int, ...] | None = None,
    nonnegative: bool = False,
    allow_empty: bool = False,
) -> np.ndarray:
    """Return ``value`` as a finite float ``np.ndarray`` or raise naming ``name``.

    Parameters
    ----------
    name : str
        Argument name used in error messages.
    value : array_like
        Values to check. Booleans and numbers are accepted; strings and objects are not.
    ndim : int or tuple of int, optional
        Allowed number(s) of dimensions.
    nonnegative : bool
        Reject negative entries.
    allow_empty : bool
        Accept arrays with zero elements.
    """
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name}: expected an array of numbers, got {type(value).__name__}")
    try:
        array = numbers_array(value)
    except Exception as error:  # ragged lists and similar
        raise ValueError(f"{name}: cannot be read as an array ({error})") from None
    if array.dtype == object or not (
        np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.bool_)
    ):
        raise TypeError(f"{name}: expected numbers, got dtype {array.dtype}{_non_numeric_columns(value)}")
    if np.issubdtype(array.dtype, np.complexfloating):
        raise TypeError(f"{name}: complex values are not supported")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if array.ndim not in allowed:
            raise ValueError(
                f"{name}: expected {' or '.join(map(str, allowed))} dimension(s), "
                f"got shape {array.shape}"
            )
    if array.size == 0 and not allow_empty:
        raise ValueError(f"{name}: is empty")
    array = array.astype(np.float64) if not np.issubdtype(array.dtype, np.floating) else array
    if np.isnan(array).any():
        raise ValueError(f"{name}: contains NaN")
    if np.isinf(array).any():
        raise ValueError(f"{name}: contains infinite values")
    if nonnegative and (array < 0).any():
        raise ValueError(f"{name}: contains negative values (min {array.min()})")
    return array


def _non_numeric_columns(value: Any) -> str:
    """For a pandas DataFrame, " (non-numeric columns: 'name' (dtype), ...)" naming at most three of its
    columns that are neither numbers nor booleans; "" for anything else."""
    columns, dtypes = getattr(value, "columns", None), getattr(value, "dtypes", None)
    if columns is None or dtypes is None or not hasattr(value, "to_numpy"):
        return ""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    wrong = [(column, dtype) for column, dtype in zip(columns, dtypes)
             if not (is_numeric_dtype(dtype) or is_bool_dtype(dtype))]
    if not wrong:
        return ""
    shown = ", ".join(f"{column!r} ({dtype})" for column, dtype in wrong[:3])
    more = f", ... ({len(wrong)} in all)" if len(wrong) > 3 else ""
    return f" (non-numeric column{'s' if len(wrong) > 1 else ''}: {shown}{more})"


def as_index_array(
    name: str, value: Any, *, upper: int | None = None, ndim: int = 1, allow_empty: bool = False
) -> np.ndarray:
    """Return ``value`` as an ``int64`` array of indices in ``[0, upper)`` or raise naming ``name``."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name}: expected an array of integer indices, got {type(value).__name__}")
    array = np.asarray(value)
    if array.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimension(s), got shape {array.shape}")
    if array.size == 0 and not allow_empty:
        raise ValueError(f"{name}: is empty")
    if np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise ValueError(f"{name}: contains NaN or infinite values")
        if (array != np.round(array)).any():
            raise ValueError(f"{name}: indices must be whole numbers")
    elif not np.issubdtype(array.dtype, np.integer) and array.size:
        raise TypeError(f"{name}: expected integer indices, got dtype {array.dtype}")
    array = array.astype(np.int64)
    if array.size and array.min() < 0:
        raise ValueError(f"{name}: negative index {array.min()}")
    if upper is not None and array.size and array.max() >= upper:
        raise ValueError(f"{name}: index {array.max()} out of range for size {upper}")
    return array


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` as a bool if it is one (Python's or NumPy's), else raise a ``TypeError`` naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    return bool(value)


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as ``int`` if it is an integer in ``[minimum, maximum]``, else raise."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        if _is_jax_array(value) or isinstance(value, np.ndarray):
            if np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.integer):
                value = int(value)
            else:
                raise TypeError(f"{name}: expected an integer, got {value!r}")
        else:
            raise TypeError(f"{name}: expected an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}: must be <= {maximum}, got {value}")
    return value


def row_names(value: Any) -> list | None:
    """The row labels of a pandas DataFrame or Series whose index is not pandas' default 0, 1, ...
    (to name the points of a fit's draws); None for anything else. The labels of a MultiIndex (as
    ``groupby`` or ``set_index`` with several columns make) are tuples, which a coordinate cannot
    hold: they become their text, ``"(0, 5)"``."""
    index = getattr(value, "index", None)
    if index is None or not hasattr(value, "to_numpy") or type(index).__name__ == "RangeIndex":
        return None
    if getattr(index, "nlevels", 1) > 1:
        return [str(label) for label in index]
    return list(index)


def feature_names(value: Any) -> tuple[str, ...] | None:
    """The column names of a pandas DataFrame whose column names are all strings, in order (what
    scikit-learn keeps as ``feature_names_in_``); None for anything else (arrays, lists, a DataFrame
    with numbered columns)."""
    columns = getattr(value, "columns", None)
    if columns is None or not hasattr(value, "to_numpy") or len(columns) == 0:
        return None
    names = tuple(columns)
    return names if all(isinstance(column, str) for column in names) else None


def _quoted(names: Any, most: int = 5) -> str:
    names = list(names)
    return ", ".join(map(repr, names[:most])) + (f", ... ({len(names)} in all)" if len(names) > most else "")


def in_fitted_order(name: str, value: Any, fitted: tuple[str, ...] | None, source: str = "the fit") -> Any:
    """``value`` with its columns in the order of ``fitted``, the feature names (:func:`feature_names`)
    of ``source`` (a fit, or the argument that gave them).

    A DataFrame whose feature names are those of ``fitted`` in another order is reordered; one
    whose names differ (missing, unexpected or repeated) raises a ``ValueError`` naming ``name``
    and those names. Anything without feature names (an array, a DataFrame of numbered columns),
    and anything when ``fitted`` is None, is returned as it is: its columns are taken by position.
    """
    names = feature_names(value)
    if fitted is None or names is None or names == tuple(fitted):
        return value
    if sorted(names) == sorted(fitted) and len(set(names)) == len(names):
        return value[list(fitted)]
    missing = [column for column in fitted if column not in names]
    unexpected = [column for column in names if column not in fitted]
    differences = ([f"missing {_quoted(missing)}"] if missing else []) + (
        [f"unexpected {_quoted(unexpected)}"] if unexpected else [])
    repeated = sorted({column for column in names if names.count(column) > 1})
    if repeated or not differences:
        differences.append(f"repeated {_quoted(repeated or sorted({c for c in fitted if fitted.count(c) > 1}))}")
    raise ValueError(f"{name}: its column names are not the feature names of {source} ({'; '.join(differences)}); "
                     f"those of {source} are {_quoted(fitted, 10)}")


def check_one_length(n_draws: Any, n_sweeps: Any) -> None:
    """A sampler's length is its kept draws (``n_draws``) or its sweeps with the warm-up (``n_sweeps``), not both."""
    if n_draws is not None and n_sweeps is not None:
        raise ValueError(f"n_draws, n_sweeps: give one length, not both (n_draws={n_draws!r} draws kept after the "
                         f"warm-up, or n_sweeps={n_sweeps!r} sweeps with the warm-up included)")


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` in the given interval, else raise naming ``name``."""
    if isinstance(value, bool) or isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__} {value!r}")
    if isinstance(value, (complex, np.complexfloating)) or np.iscomplexobj(value):  # float() would drop 0j silently
        raise TypeError(f"{name}: expected a real number, got the complex number {value!r}")
    try:
        if np.ndim(value) != 0:
            raise TypeError(f"{name}: expected a scalar, got shape {np.shape(value)}")
        number = float(value)
    except (TypeError, ValueError) as error:
        if isinstance(error, TypeError) and str(error).startswith(name):
            raise
        raise TypeError(f"{name}: expected a real number, got {value!r}") from None
    if not np.isfinite(number):
        raise ValueError(f"{name}: must be finite, got {number}")
    below = low is not None and (number < low or (low_open and number == low))
    above = high is not None and (number > high or (high_open and number == high))
    if below or above:
        left = "(-inf" if low is None else f"{'(' if low_open else '['}{low}"
        right = "inf)" if high is None else f"{high}{')' if high_open else ']'}"
        raise ValueError(f"{name}: must be in {left}, {right}, got {number}")
    return number


def check_fractions(name: str, value: Any, *, parts: int | None = None) -> np.ndarray:
    """Check a vector of non-negative fractions summing to one (relative tolerance 1e-6)."""
    fractions = as_float_array(name, value, ndim=1, nonnegative=True)
    if parts is not None and fractions.shape[0] != parts:
        raise ValueError(f"{name}: expected {parts} fractions, got {fractions.shape[0]}")
    if not np.isclose(fractions.sum(), 1.0, rtol=0.0, atol=1e-6):
        raise ValueError(f"{name}: fractions must sum to 1, got {fractions.sum():.6g}")
    return fractions


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """Check that ``value`` is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


KEY_EXPECTED = "a single JAX PRNG key: jax.random.key(seed), or a legacy jax.random.PRNGKey(seed) (uint32[2])"


def key_as_data(key: Any) -> tuple[np.ndarray, str | None]:
    """A PRNG key as (NumPy ``uint32`` key data, its implementation's name or ``None`` for a raw
    ``uint32`` key): what pickles and serialises; :func:`key_from_data` gives the key back."""
    import jax

    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(key)), str(jax.random.key_impl(key))
    return np.asarray(key), None


def key_from_data(data: Any, impl: str | None) -> Any:
    """The key :func:`key_as_data` gave ``(data, impl)`` for."""
    import jax
    import jax.numpy as jnp

    return jax.random.wrap_key_data(jnp.asarray(data), impl=impl) if impl is not None else jnp.asarray(data)


def arrays_digest(*arrays: np.ndarray) -> str:
    """SHA-1 of the arrays' dtypes, shapes and bytes: tells the data a fit was made with from other data."""
    import hashlib

    digest = hashlib.sha1()
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(str((array.dtype, array.shape)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def check_key(name: str, value: Any) -> Any:
    """Return ``value`` if it is one JAX PRNG key, else raise naming ``name``.

    A key is a typed key array of shape () (``jax.random.key(seed)``) or a legacy raw key, a JAX
    ``uint32`` array of shape (2,) (``jax.random.PRNGKey(seed)``). Integer seeds are refused, as
    are NumPy arrays and batches of keys: randomness is always passed as a key, and a seed is
    turned into one explicitly (``jax.random.key(0)``). ``None`` raises ``ValueError`` (a key is
    required), every other wrong type ``TypeError``, a batch of keys ``ValueError``. Only the array's type, dtype and shape are
    read, so traced keys pass too; no JAX computation runs.
    """
    import jax  # jax is imported by every caller; kept out of this module's import for NumPy-only users

    if value is None:  # a missing key, as before this check: ValueError
        raise ValueError(f"{name}: a key is required, {KEY_EXPECTED.replace('a single ', 'one ')}")
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected {KEY_EXPECTED}, got bool {value!r}")
    if isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{name}: expected {KEY_EXPECTED}, got the int {value!r}; "
                        f"an integer seed is not accepted, pass jax.random.key({int(value)})")
    if not isinstance(value, jax.Array):
        kind = "a NumPy array" if isinstance(value, np.ndarray) else type(value).__name__
        raise TypeError(f"{name}: expected {KEY_EXPECTED}, got {kind} {value!r:.60}")
    shape = tuple(value.shape)
    if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        if shape != ():
            raise ValueError(f"{name}: expected a single key, got a batch of keys of shape {shape}; "
                             f"pass one of them (e.g. {name}[0])")
        return value
    if value.dtype != np.uint32:
        raise TypeError(f"{name}: expected {KEY_EXPECTED}, got a JAX array of dtype {value.dtype}")
    if shape != (2,):
        if len(shape) >= 2 and shape[-1] == 2:
            raise ValueError(f"{name}: expected a single key, got a batch of legacy keys of shape {shape}; "
                             f"pass one of them (e.g. {name}[0])")
        raise ValueError(f"{name}: expected {KEY_EXPECTED}, got a uint32 array of shape {shape}")
    return value


def check_model(name: str, value: Any, methods: tuple[str, ...], example: str) -> Any:
    """Return ``value`` if it is a model object with callable ``methods``, else raise ``TypeError``.

    The messages say what was passed instead: the class rather than an instance, a
    scikit-learn-style estimator rather than the model it wraps, or some other object.
    """
    if isinstance(value, type):
        raise TypeError(f"{name}: expected a model instance, got the class {value.__name__} itself; "
                        f"create one, e.g. {example}")
    missing = [method for method in methods if not callable(getattr(value, method, None))]
    if missing:
        if callable(getattr(value, "fit", None)) and callable(getattr(value, "get_params", None)):
            raise TypeError(f"{name}: got the scikit-learn-style estimator {type(value).__name__}; call its fit(X), "
                            f"or pass a model such as {example}")
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."  # cut visibly, not mid-word
        raise TypeError(f"{name}: expected a model (e.g. {example}), got {type(value).__name__} {shown}, "
                        f"which has no {', '.join(missing)}")
    return value


def check_fitted_params(name: str, value: Any, params_type: type, sizes: dict[str, int], model: Any) -> Any:
    """``value`` as the parameters of a fit of ``model``: a ``params_type`` (a fit's ``result.params``)
    whose fields named in ``sizes`` have that many entries along their last axis (the model's
    classes or nodes). Raises ``TypeError`` naming ``name`` for another type (and says to pass
    ``result.params`` for a fit result), ``ValueError`` naming the field for parameters of another
    model; before any JAX code runs.
    """
    if hasattr(value, "params") and hasattr(value, "history"):  # an EMResult
        raise TypeError(f"{name}: got a fit result ({type(value).__name__}); pass its parameters, result.params")
    if not isinstance(value, params_type):
        raise TypeError(f"{name}: expected {params_type.__name__} (a fit's result.params), got {type(value).__name__}")
    for field, size in sizes.items():
        shape = np.shape(getattr(value, field))
        if not shape or shape[-1] != size:
            raise ValueError(f"{name}.{field}: shape {shape} does not fit {model!r}, which has {size} along its "
                             "last axis (parameters of another model?)")
    return value


def check_params_like(name: str, value: Any, template: Any) -> Any:
    """Check starting parameters against ``template``, the model's own parameters for this data.

    ``template`` may be abstract (``jax.eval_shape`` of the model's ``init_params``): only its
    structure, shapes and dtypes are read. ``value`` must have the same structure (the same
    NamedTuple type or dict keys), and every leaf must be an array of finite floats of the
    template's shape, within the range of the dtype JAX computes it in (float64 values are
    computed in float32 without x64). Raises ``TypeError``/``ValueError`` naming ``name`` and the field.
    """
    import jax

    if value is None or isinstance(value, (str, bytes, type, numbers.Number)):
        got = f"the class {value.__name__}" if isinstance(value, type) else f"{type(value).__name__} {value!r:.40}"
        raise TypeError(f"{name}: expected starting parameters {_describe(template)}, got {got}")
    if hasattr(value, "params") and hasattr(value, "history"):  # an EMResult
        raise TypeError(f"{name}: got a fit result ({type(value).__name__}); pass its parameters, result.params")
    template_leaves, template_def = jax.tree_util.tree_flatten_with_path(template)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(value)
    if treedef != jax.tree_util.tree_structure(template):
        if type(value) is type(template) and hasattr(template, "_fields"):  # the right kind: name the field
            for field, part, expected in zip(template._fields, value, template):
                if jax.tree_util.tree_structure(part) != jax.tree_util.tree_structure(expected):
                    raise TypeError(f"{name}.{field}: expected {_leaves_text(expected)}, got {_leaves_text(part)}"
                                    + (" (np.asarray(...) makes an array of a list)" if isinstance(part, list)
                                       else ""))
        raise TypeError(f"{name}: expected {_describe(template)}, got {_describe(value)}")
    for (path, leaf), (_, expected) in zip(leaves, template_leaves):
        field = name + jax.tree_util.keystr(path)
        if isinstance(leaf, (str, bytes)) or leaf is None:
            raise TypeError(f"{field}: expected an array of floats, got {type(leaf).__name__}")
        array = np.asarray(leaf)
        if not np.issubdtype(array.dtype, np.floating):
            raise TypeError(f"{field}: expected floating-point values, got dtype {array.dtype}")
        if array.shape != tuple(expected.shape):
            raise ValueError(f"{field}: expected shape {tuple(expected.shape)} for this model and data, "
                             f"got {array.shape}")
        if not np.isfinite(array).all():
            raise ValueError(f"{field}: contains NaN or infinite values")
        working = np.dtype(jax.dtypes.canonicalize_dtype(array.dtype))  # float64 is float32 without x64
        if array.size and np.abs(array).max() > np.finfo(working).max:
            raise ValueError(f"{field}: values up to {np.abs(array).max():.3g} overflow {working}, the dtype "
                             "JAX computes in (enable float64 with jax.config.update('jax_enable_x64', True))")
    return value


class Support(NamedTuple):
    """A distribution's axis with the entries it may be positive at, for :func:`check_distributions`.

    ``mask`` is a boolean array broadcastable to the parameter (True where a probability may be
    positive); ``outside`` says in words what lies outside it (e.g. "levels beyond the cluster's
    leaf"), for the error message.
    """

    axis: int | None
    mask: Any
    outside: str


def check_distributions(name: str, params: Any, axes: dict[str, int | None | Support]) -> Any:
    """Check that the probability tables of ``params`` are distributions, naming ``name`` and the field.

    ``axes`` maps a field of ``params`` (a NamedTuple or dict) to the axis its values sum to 1
    along, or to None when the whole array sums to 1, or to a :class:`Support` (that axis, and the
    entries that must be 0); every array under that field (a tuple of
    arrays too) must hold non-negative values that sum to 1 within rounding: the sums are taken in
    float64 and may be off by the larger of 1e-6 and the dtype's epsilon times max(256, number of
    terms) (a float32 M-step that fuses the normaliser's sum into the division may add the terms
    in another order than the numerators: 16 epsilons off 1 over 12 terms was seen); NaN and
    infinite values are refused. Reads NumPy
    copies only: no JAX code.
    """
    import jax

    for field, axis in axes.items():
        support = axis if isinstance(axis, Support) else None
        axis = support.axis if support is not None else axis
        value = params[field] if isinstance(params, dict) else getattr(params, field)
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
            label = f"{name}.{field}{jax.tree_util.keystr(path)}"
            array = np.asarray(leaf)
            if array.size == 0:
                continue
            if not np.isfinite(array).all():  # NaN compares false with everything below
                raise ValueError(f"{label}: expected probabilities, got NaN or infinite values")
            if (array < 0).any():
                raise ValueError(f"{label}: expected probabilities, got a negative value ({array.min():.3g})")
            if support is not None:
                outside = (array > 0) & ~np.broadcast_to(np.asarray(support.mask, bool), array.shape)
                if outside.any():
                    index = tuple(int(i) for i in np.argwhere(outside)[0])
                    raise ValueError(f"{label}: expected 0 on {support.outside}, got {array[index]:.3g} at index "
                                     f"{index}")
            sums = array.sum(dtype=np.float64) if axis is None else array.sum(axis=axis, dtype=np.float64)
            n_terms = array.size if axis is None else array.shape[axis]
            eps = np.finfo(array.dtype).eps if np.issubdtype(array.dtype, np.floating) else 0.0
            tolerance = max(1e-6, float(eps) * max(256, n_terms))
            worst = float(np.max(np.abs(sums - 1.0)))
            if worst > tolerance:
                where = "in all" if axis is None else f"along axis {axis}"
                raise ValueError(f"{label}: expected probabilities that sum to 1 {where}, found a sum of "
                                 f"{float(np.ravel(sums)[np.argmax(np.abs(np.ravel(sums) - 1.0))]):.6g}")
    return params


def check_positive(name: str, params: Any, fields: tuple[str, ...]) -> Any:
    """Check that the fields ``fields`` of ``params`` (a NamedTuple or dict) hold positive values only.

    For parameters such as scales or rates, whose zero or negative values the model's formulas
    cannot take (a log of them, a division by them). A subnormal float (below the dtype's smallest
    normal number, e.g. 1e-40 in float32, or float64 values that JAX without x64 computes in float32)
    is refused too: XLA flushes subnormals to zero, so its log is -inf and a division by it infinite. Raises ``ValueError`` naming ``name`` and the field;
    reads NumPy copies only: no JAX code.
    """
    import jax

    for field in fields:
        value = params[field] if isinstance(params, dict) else getattr(params, field)
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
            array = np.asarray(leaf)
            if not array.size:
                continue
            label = f"{name}.{field}{jax.tree_util.keystr(path)}"
            if not (array > 0).all():
                raise ValueError(f"{label}: expected positive values, got {array.min():.3g}")
            if not np.issubdtype(array.dtype, np.floating):
                continue
            working = np.dtype(jax.dtypes.canonicalize_dtype(array.dtype))  # float64 is float32 without x64
            if array.min() < np.finfo(working).tiny:
                raise ValueError(f"{label}: expected positive normal {working} numbers, got {array.min():.3g}, "
                                 f"below {np.finfo(working).tiny:.3g}: XLA computes it as 0")
    return params


def _leaves_text(part: Any) -> str:
    """A parameter field in words: "an array of shape (3,)", "a tuple of 2 arrays", "a list of 3 values"."""
    if hasattr(part, "shape") and not isinstance(part, (list, tuple)):
        return f"an array of shape {tuple(part.shape)}"
    if isinstance(part, (list, tuple)):
        kinds = {"array" if hasattr(item, "shape") else "value" for item in part}
        noun = kinds.pop() if len(kinds) == 1 else "item"
        return f"a {type(part).__name__} of {len(part)} {noun}{'' if len(part) == 1 else 's'}"
    return type(part).__name__


def _describe(params: Any) -> str:
    """A short description of a parameter container: its type and fields (or keys)."""
    if hasattr(params, "_fields"):
        return f"{type(params).__name__}({', '.join(params._fields)})"
    if isinstance(params, dict):
        return f"dict with keys {sorted(map(str, params))}"
    return type(params).__name__


def check_number_dtype(name: str, value: Any) -> None:
    """Refuse arrays (or sparse matrices, or nested lists) whose values are not real numbers.

    Dates and durations (``datetime64``/``timedelta64``, which NumPy would turn into integers),
    complex numbers, text, raw bytes and object arrays holding anything but real numbers raise
    ``TypeError`` naming ``name``. Real numbers of any width, booleans, and object arrays of real
    numbers (as pandas gives) pass; ragged or otherwise unreadable input is left to the caller.
    """
    dtype = getattr(value, "dtype", None)
    if dtype is None and isinstance(value, (list, tuple)):
        try:
            value = np.asarray(value)
        except ValueError:  # ragged
            return
        dtype = value.dtype
    if dtype is None or not isinstance(dtype, np.dtype):
        return
    kinds = {"M": "dates", "m": "durations", "c": "complex numbers", "U": "text", "S": "bytes", "V": "raw records"}
    if dtype.kind in kinds:
        raise TypeError(f"{name}: expected real numbers, got {kinds[dtype.kind]} (dtype {dtype})")
    if dtype.kind == "O":
        values = getattr(value, "data", value) if hasattr(value, "tocsr") else value
        flat = np.asarray(values, dtype=object).ravel()
        wrong = [item for item in flat
                 if isinstance(item, (bool, np.bool_)) or not isinstance(item, (numbers.Real, np.number))]
        if wrong:
            raise TypeError(f"{name}: expected real numbers, got {type(wrong[0]).__name__} {wrong[0]!r:.40} "
                            "in an object array")


def as_label_codes(name: str, labels: Any) -> np.ndarray:
    """Integer codes 0..K-1 of a 1-D sequence of labels, in the labels' sorted order.

    Labels are numbers or strings of one kind; ``None`` and NaN (missing labels), labels that
    cannot be ordered against each other (mixed numbers and strings), more dimensions and empty
    input raise ``ValueError``/``TypeError`` naming ``name``.
    """
    if labels is None or isinstance(labels, (str, bytes)):
        raise TypeError(f"{name}: expected a 1-D sequence of labels, got {type(labels).__name__}")
    if isinstance(labels, (list, tuple)):  # item by item: NumPy would turn [nan, "a"] into the strings "nan", "a"
        items = list(labels)
        array = np.empty(len(items), dtype=object)
        try:
            array[:] = items
        except ValueError as error:  # nested sequences
            raise ValueError(f"{name}: expected 1 dimension, got nested sequences ({error})") from None
        if any(isinstance(item, (list, tuple, np.ndarray)) for item in items):
            raise ValueError(f"{name}: expected 1 dimension, got nested sequences")
    else:
        array = np.asarray(labels)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected 1 dimension, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name}: is empty")
    if array.dtype.kind not in "biufUSO":
        raise TypeError(f"{name}: expected numbers or strings as labels, got dtype {array.dtype}")
    if array.dtype.kind == "O":
        missing = np.array([item is None or (isinstance(item, (float, np.floating)) and item != item) for item in array])
    elif array.dtype.kind == "f":
        missing = np.isnan(array)
    else:
        missing = np.zeros(array.shape, bool)
    if missing.any():
        raise ValueError(f"{name}: the label of row {int(np.flatnonzero(missing)[0])} is missing (None or NaN)")
    try:
        _, codes = np.unique(array, return_inverse=True)
    except TypeError as error:
        raise TypeError(f"{name}: labels of different kinds cannot be ordered ({error})") from None
    return codes.reshape(-1).astype(np.int64)


def check_relation(name: str, value: Any, relation_names: tuple[str, ...]) -> int:
    """The index of a relation given by position (0 .. R-1) or by name, else raise naming ``name``;
    None is the only relation of data that hold one, and refused (naming them) where there are several."""
    if value is None:
        if len(relation_names) == 1:
            return 0
        raise ValueError(f"{name}: the data hold {len(relation_names)} relations "
                         f"({', '.join(map(repr, relation_names))}); name one, by name or position")
    if isinstance(value, str):
        if value not in relation_names:
            raise ValueError(f"{name}: no relation {value!r} (relations: {', '.join(map(repr, relation_names))})")
        return relation_names.index(value)
    return check_int(name, value, minimum=0, maximum=len(relation_names) - 1)


def renamed(name: str, check: Any, value: Any) -> Any:
    """``check(value)`` for an argument that ``check`` calls ``data``: its errors name ``name``.

    A model's ``prepare(data)`` validates whatever it is given as ``data``; the held-out data of
    a fit goes through the same ``prepare``, and its errors should name ``valid``.
    """
    try:
        return check(value)
    except (TypeError, ValueError) as error:
        message = str(error)
        if message.startswith("data"):
            raise type(error)(name + message[len("data"):]) from None
        raise


MEMORY_LIMIT_VARIABLE = "LATENTZOO_MEMORY_LIMIT"


def memory_limit(*, device: bool = True) -> int:
    """Bytes a computation may hold: ``$LATENTZOO_MEMORY_LIMIT`` when set, else what there is.

    With ``device=True`` that is the memory of JAX's first device when it reports one (GPU,
    TPU), else the host's physical memory; with ``device=False`` (Python-side structures) the
    host's physical memory.
    """
    return _memory_limit(device)[0]


def _memory_limit(device: bool) -> tuple[int, str]:
    """(bytes, where they are) for :func:`memory_limit`."""
    override = os.environ.get(MEMORY_LIMIT_VARIABLE)
    if override:
        try:
            limit = float(override)
        except ValueError:
            raise ValueError(f"{MEMORY_LIMIT_VARIABLE}: expected a number of bytes, got {override!r}") from None
        if not limit > 0 or not np.isfinite(limit):
            raise ValueError(f"{MEMORY_LIMIT_VARIABLE}: expected a positive number of bytes, got {override!r}")
        return int(limit), f"${MEMORY_LIMIT_VARIABLE}"
    if device:
        import jax

        first = jax.local_devices()[0]  # jax.devices()[0] may belong to another process
        stats = first.memory_stats() or {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"]), f"{first.platform.upper()} memory"
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "host memory"


def _in_bytes(n_bytes: float) -> str:
    units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    power = min(max(int(n_bytes).bit_length() - 1, 0) // 10, len(units) - 1)
    return f"{n_bytes / 2 ** (10 * power):.3g} {units[power]}"


def check_memory(name: str, n_bytes: float, what: str, *, device: bool = True) -> None:
    """Refuse, naming ``name``, a computation estimated to need more than :func:`memory_limit`.

    ``n_bytes`` is an estimate made from shapes alone, before anything is allocated, so that an
    impossible size is an error with the figure rather than an abort, a hang or swapping.
    """
    shortfall = memory_shortfall(n_bytes, what, device=device)
    if shortfall is not None:
        raise ValueError(f"{name}: {shortfall}")


def memory_shortfall(n_bytes: float, what: str, *, device: bool = True) -> str | None:
    """None if ``n_bytes`` fit in :func:`memory_limit`, else the sentence saying they do not.

    For a check made while a computation runs (a sampler whose capacity grows), where the caller
    decides what to do with work already done rather than raise.
    """
    limit, where = _memory_limit(device)
    if n_bytes > limit:
        return (f"{what} needs about {_in_bytes(n_bytes)}, more than the {_in_bytes(limit)} of {where} "
                f"(${MEMORY_LIMIT_VARIABLE} sets another limit)")
    return None


def tree_nbytes(tree: Any) -> int:
    """Bytes of the arrays of a pytree from their shapes and dtypes (abstract ones from
    ``jax.eval_shape`` too), computed with Python integers so that no size overflows."""
    import jax

    return sum(int(np.prod(leaf.shape, dtype=object)) * np.dtype(leaf.dtype).itemsize
               for leaf in jax.tree_util.tree_leaves(tree))
