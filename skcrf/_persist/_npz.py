"""The skcrf model format: a fitted state in one npz archive, never pickled.

The format (file layout, JSON document, the checks on reading) is specified in
:mod:`skcrf.io`'s docstring, the public face of this module. Nothing here
imports an estimator: :func:`save_model` duck-types one (``skcrf.io.load_model`` builds it back).
"""

import json
import math
import mmap
import operator
import os
import zlib
from fractions import Fraction
from typing import Any

import numpy as np

from .._model import (
    ConditionedTransitions,
    CRFModel,
    FittedState,
    check_csr,
    check_finite,
    check_model_arrays,
    kept_state_ptr,
)
from .._training._lbfgs import LBFGSStatus
from .._training._online_train import OnlineStatus
from .._training._training_log import LabelScore, TrainingLog
from .._utils._atomic import write_atomically
from .._utils._cqdb_index import CQDBIndex, LazyNames
from .._utils._name_index import PackedNameIndex, pack_names, table_layout
from .._version import __version__
from ._aligned import (
    HEAD_SIZE,
    aligned_npz_bytes,
    is_aligned_archive,
    member_crc_problem,
    read_aligned_members,
)
from ._cqdb import cqdb_bytes, encode_strings, read_cqdb
from ._files import open_regular_file
from ._json import (
    NOT_PLAIN,
    decode_value,
    encode_value,
    is_hashable,
    no_duplicate_keys,
    plain_value,
    reject_constant,
)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "load_state",
    "save_model",
    "save_state",
]

#: The ``format`` value of every skcrf model file.
FORMAT_NAME = "skcrf-model"
#: The format version this skcrf writes, and the newest it reads.
FORMAT_VERSION = 6
#: The dtypes formats 5 and 6 store the weights in.
WEIGHTS_DTYPES = ("float64", "float32")

# The arrays of each format version, in the order they are written.
_ARRAY_NAMES = {
    1: ("metadata", "coef_indices", "coef_values", "transition"),
    2: (
        "metadata",
        "state_ptr",
        "state_labels",
        "state_weights",
        "transition_index",
        "transition_weights",
    ),
    3: (
        "metadata",
        "attributes",
        "state_ptr",
        "state_labels",
        "state_weights",
        "transition_index",
        "transition_weights",
    ),
}
_JSON_KEYS = {
    1: frozenset(
        {
            "format",
            "format_version",
            "skcrf_version",
            "estimator",
            "params",
            "labels",
            "vocabulary",
            "vectorizer",
            "n_features",
            "n_iter",
            "status",
            "training_log",
        }
    ),
    2: frozenset(
        {
            "format",
            "format_version",
            "skcrf_version",
            "estimator",
            "params",
            "labels",
            "attributes",
            "value_separator",
            "n_iter",
            "status",
            "training_log",
            "extra",
        }
    ),
}
_JSON_KEYS[3] = _JSON_KEYS[2] - {"attributes"} | {"n_attributes"}
# Format 4: format 3 and a model's input-conditioned transitions (written only
# for such a model: the others keep format 3, which older skcrf reads).
_CONDITIONED_ARRAYS = ("conditioned_ptr", "conditioned_pairs", "conditioned_weights")
_ARRAY_NAMES[4] = _ARRAY_NAMES[3] + _CONDITIONED_ARRAYS
_JSON_KEYS[4] = _JSON_KEYS[3] | {"conditioned_attributes"}
# Format 5: format 4's arrays (conditioned_attributes null and the conditioned
# arrays empty for a model without them), only what prediction needs, aligned
# and uncompressed (skcrf._persist._aligned), weights in float64 or float32.
_ARRAY_NAMES[5] = _ARRAY_NAMES[4]
_JSON_KEYS[5] = _JSON_KEYS[4] | {"weights_dtype"}
# Format 6: format 5 with the names in a packed table
# (skcrf._utils._name_index) instead of a CQDB chunk, and, in a float32
# file, the state offsets and labels in the narrowest unsigned type.
_NAME_ARRAYS = ("attribute_text", "attribute_starts", "attribute_table")
_ARRAY_NAMES[6] = ("metadata", *_NAME_ARRAYS, *_ARRAY_NAMES[5][2:])
_JSON_KEYS[6] = _JSON_KEYS[5]
# The aligned formats (skcrf._persist._aligned).
_ALIGNED_VERSIONS = (5, 6)
_V1_VECTORIZER_KEYS = frozenset({"dtype", "separator", "sparse", "sort"})
_V1_VECTORIZER_DTYPES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    }
)
# Status names of the online trainers carry this prefix (L-BFGS's have none).
_ONLINE_PREFIX = "OnlineStatus."
_LOG_KEYS = frozenset({"iterations", "status", "message", "verbose"})

# Guards against "zip bombs": an array member larger than this must not be
# more than _MAX_COMPRESSION_RATIO times larger than its compressed size. The
# weights are barely compressible (zeros aside). The integer arrays of format
# 2 are exempt (they compress very well: ``state_ptr`` of a model with every
# attribute/label pair is an arithmetic sequence), because their lengths are
# checked, before any of their data is read, against the metadata
# (``state_ptr``) and the weight arrays (``state_labels``,
# ``transition_index``), which are not exempt.
_FREE_UNCOMPRESSED_BYTES = 64 * 2**20
_MAX_COMPRESSION_RATIO = 100
_RATIO_EXEMPT = frozenset(
    {"state_ptr", "state_labels", "transition_index", "conditioned_ptr", "conditioned_pairs"}
)
_MAX_HEADER_SIZE = 10_000  # numpy's own default limit for .npy headers


def _valid_param_name(name):
    return type(name) is str and name.isidentifier() and not name.startswith("_")


# -- the model arrays: one set of rules for saving and loading --------------
# (check_model_arrays is skcrf._model's: the CRFsuite reader uses it without this module)


def check_conditioned_arrays(n_attributes, n_labels, ptr, pairs, weights):
    """Check the arrays of input-conditioned transitions (ValueError naming it)."""
    n = len(pairs)
    if len(ptr) != n_attributes + 1 or len(weights) != n:
        raise ValueError(
            "conditioned_ptr must have one entry per transition attribute and one "
            "more, conditioned_weights one per conditioned_pairs entry."
        )
    check_csr(
        ptr,
        pairs,
        n_labels * n_labels,
        f"conditioned_ptr must be non-decreasing from 0 to {n}.",
        f"conditioned_pairs must be label pairs in [0, {n_labels * n_labels}).",
        "conditioned_pairs must be strictly increasing within an attribute.",
    )
    check_finite(weights, "conditioned_weights holds non-finite values (NaN or infinity).")


def _as_int_array(value, name):
    array = np.asarray(value)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise ValueError(
            f"model.{name} must be a 1-D integer array; got {array.dtype} of shape {array.shape}."
        )
    if array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
        raise ValueError(f"model.{name} holds values beyond int64.")
    return np.ascontiguousarray(array, dtype=np.int64)


def _as_float_array(value, name):
    array = np.asarray(value)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "fiu"):
        raise ValueError(
            f"model.{name} must be a 1-D float array; got {array.dtype} of shape {array.shape}."
        )
    return np.ascontiguousarray(array, dtype=np.float64)


# -- saving ----------------------------------------------------------------


def _encode_log(log, what):
    if log is None:
        return None
    if not isinstance(log, TrainingLog):
        raise TypeError(f"{what} must be a TrainingLog or None; got {type(log).__name__}.")
    iterations = []
    for k, entry in enumerate(log.iterations):
        encoded = {}
        for key, value in entry.items():
            if type(key) is not str:
                raise TypeError(f"{what}.iterations[{k}] has a non-str key {key!r:.100}.")
            where = f"{what}.iterations[{k}][{key!r:.100}]"
            if key == "scores" and type(value) is dict:
                encoded[key] = _encode_label_scores(value, where)
                continue
            if type(value) is Fraction:
                encoded[key] = {"type": "fraction", "value": [value.numerator, value.denominator]}
                continue
            if type(value) in (tuple, list, dict):
                raise TypeError(
                    f"{where} is a {type(value).__name__}; log values must be scalars."
                )
            encoded[key] = encode_value(value, f"{where} =")
        iterations.append(encoded)
    return {
        "iterations": iterations,
        "status": _encode_status(log.status, f"{what}.status"),
        "message": str(log.message),
        "verbose": encode_value(log.verbose, f"{what}.verbose ="),
    }


def _encode_label_scores(scores, what):
    """A ``{label: LabelScore}`` log entry as a tagged list of 7-tuples."""
    rows = []
    for label, score in scores.items():
        if not isinstance(score, LabelScore):
            raise TypeError(f"{what}[{label!r:.100}] must be a LabelScore; got {score!r:.100}.")
        rows.append((label, *score))
    return {"type": "label_scores", "value": encode_value(rows, f"{what} =")}


def _decode_label_scores(value, what):
    rows = decode_value(value, what)
    if type(rows) is not list:
        raise ValueError(f"{what}: expected a list of label scores.")
    scores = {}
    for row in rows:
        if type(row) is not tuple or len(row) != 7:
            raise ValueError(f"{what}: a label score must be a 7-tuple; got {row!r:.100}.")
        label, *counts, precision, recall, f1 = row
        if not is_hashable(label) or label in scores:
            raise ValueError(f"{what}: invalid or repeated label {label!r:.100}.")
        if any(type(c) is not int or c < 0 for c in counts) or any(
            x is not None and type(x) is not float for x in (precision, recall, f1)
        ):
            raise ValueError(f"{what}: invalid figures for label {label!r:.100}.")
        scores[label] = LabelScore(*counts, precision, recall, f1)
    return scores


def _decode_fraction(value, what):
    if (
        type(value) is not list
        or len(value) != 2
        or any(type(v) is not int for v in value)
        or value[1] <= 0
    ):
        raise ValueError(f"{what}: invalid fraction {value!r:.100}.")
    return Fraction(*value)


def _encode_status(status, what):
    if status is None:
        return None
    if isinstance(status, OnlineStatus):
        return f"{_ONLINE_PREFIX}{status.name}"
    if not isinstance(status, LBFGSStatus):
        raise TypeError(
            f"{what} must be an LBFGSStatus, an OnlineStatus or None; got {status!r:.100}."
        )
    return status.name


def _narrowest(values, limit):
    """``values`` (non-negative, below ``limit``) in the narrowest unsigned type."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if limit <= np.iinfo(dtype).max + 1:
            return values.astype(dtype)
    return values


def _prediction_arrays(arrays, attributes, weights_dtype, narrow=False):
    """Format 5's (and 6's) arrays of checked model arrays, and the attributes kept.

    Only the features whose weight is nonzero once stored in
    ``weights_dtype`` (as CRFsuite's trainer writes its files), and the
    attributes that keep one (in order, renumbered); every label and every
    transition attribute stays. ``narrow``: ``state_ptr`` and
    ``state_labels`` in the narrowest unsigned type that holds them (format
    6 in float32, whose loading converts anyway).
    """
    dtype = np.dtype(weights_dtype)

    def stored(name):
        weights = arrays[name].astype(dtype)
        if not np.isfinite(weights).all():
            raise ValueError(
                f"The model cannot be saved with {weights_dtype} weights: {name} holds "
                f"weights beyond {weights_dtype}'s range (save them as float64)."
            )
        return weights

    weights = stored("state_weights")
    keep = weights != 0
    counts = np.diff(kept_state_ptr(arrays["state_ptr"], keep))
    active = np.flatnonzero(counts)
    state_ptr = np.zeros(len(active) + 1, dtype=np.int64)
    np.cumsum(counts[active], out=state_ptr[1:])
    state_labels = arrays["state_labels"][keep]
    if narrow:
        state_ptr = _narrowest(state_ptr, int(state_ptr[-1]) + 1)
        state_labels = _narrowest(state_labels, int(state_labels.max(initial=0)) + 1)
    out = {
        "state_ptr": state_ptr,
        "state_labels": state_labels,
        "state_weights": weights[keep],
    }
    weights = stored("transition_weights")
    keep = weights != 0
    out["transition_index"] = arrays["transition_index"][keep]
    out["transition_weights"] = weights[keep]
    if "conditioned_ptr" in arrays:
        weights = stored("conditioned_weights")
        keep = weights != 0
        out["conditioned_ptr"] = kept_state_ptr(arrays["conditioned_ptr"], keep)
        out["conditioned_pairs"] = arrays["conditioned_pairs"][keep]
        out["conditioned_weights"] = weights[keep]
    else:  # no conditioned transitions: empty arrays (the metadata's names are null)
        out["conditioned_ptr"] = np.zeros(1, dtype=np.int64)
        out["conditioned_pairs"] = np.zeros(0, dtype=np.int32)
        out["conditioned_weights"] = np.zeros(0, dtype=dtype)
    return out, [attributes[a] for a in active.tolist()]


def _name_arrays(version, attributes):
    """The arrays of format ``version`` (3 to 6) holding the attribute names.

    Raises ValueError for names the format cannot hold (a lone surrogate;
    for the CQDB chunk of formats 3 to 5, a NUL too).
    """
    if version == 6:
        return dict(zip(_NAME_ARRAYS, pack_names(attributes)))
    keys = encode_strings(attributes, "attribute")
    return {"attributes": np.frombuffer(cqdb_bytes(*keys), dtype=np.uint8)}


def _state_document(state, estimator, format_version=None, weights_dtype="float64"):
    """The format version and arrays (metadata included) of a fitted state, validated."""
    if format_version not in (None, 2, 3, 4, 5, 6):
        raise ValueError(
            f"format_version must be None, 2, 3, 4, 5 or 6; got {format_version!r:.100} (this "
            "skcrf writes formats 2 to 6)."
        )
    if weights_dtype not in WEIGHTS_DTYPES:
        raise ValueError(f"dtype must be 'float64' or 'float32'; got {weights_dtype!r:.100}.")
    if weights_dtype != "float64" and format_version not in (None, *_ALIGNED_VERSIONS):
        raise ValueError(
            f"{weights_dtype} weights are stored in formats 5 and 6 only; got format_version="
            f"{format_version}."
        )
    if not isinstance(state, FittedState):
        raise TypeError(f"state must be a FittedState; got {type(state).__name__}.")
    model = state.model
    if not isinstance(model, CRFModel):
        raise TypeError(f"state.model must be a CRFModel; got {type(model).__name__}.")

    classes = model.classes
    if isinstance(classes, np.ndarray) and classes.ndim != 1:
        raise ValueError(f"model.classes must be 1-D; got shape {classes.shape}.")
    classes = list(classes)
    if not classes:
        raise ValueError("model.classes is empty: a model has at least one label.")
    labels = []
    for k, label in enumerate(classes):
        encoded = encode_value(label, f"Label {k}")
        if not is_hashable(label):
            raise TypeError(f"Label {k} {label!r:.100} is unhashable; labels must be hashable.")
        labels.append(encoded)
    if len(set(classes)) != len(classes):
        raise ValueError("model.classes holds the same label twice.")
    n_labels = len(classes)

    attributes = model.attribute_names()
    for k, name in enumerate(attributes):
        if type(name) is not str:
            raise TypeError(
                f"Attribute {k} ({name!r:.100}) is a {type(name).__name__}; skcrf model "
                "files store str attribute names only."
            )
    if len(set(attributes)) != len(attributes):
        raise ValueError("model.attributes holds the same name twice.")
    separator = model.value_separator
    if type(separator) is not str or not separator:
        raise TypeError(f"model.value_separator must be a non-empty str; got {separator!r:.100}.")

    arrays = {
        "state_ptr": _as_int_array(model.state_ptr, "state_ptr"),
        "state_labels": _as_int_array(model.state_labels, "state_labels"),
        "state_weights": _as_float_array(model.state_weights, "state_weights"),
        "transition_index": _as_int_array(model.transition_index, "transition_index"),
        "transition_weights": _as_float_array(model.transition_weights, "transition_weights"),
    }
    for index, weights in (
        ("state_labels", "state_weights"),
        ("transition_index", "transition_weights"),
    ):
        if len(arrays[index]) != len(arrays[weights]):
            raise ValueError(
                f"model.{index} and model.{weights} have different lengths "
                f"({len(arrays[index])} and {len(arrays[weights])})."
            )
    if not len(arrays["state_ptr"]):
        raise ValueError("model.state_ptr is empty; it has n_attributes + 1 entries.")
    try:
        check_model_arrays(len(attributes), n_labels, arrays)
    except ValueError as exc:
        raise ValueError(f"The model cannot be saved: {exc}") from exc
    arrays["state_labels"] = arrays["state_labels"].astype(np.int32)

    params = _require_type(state.params, dict, "state.params", TypeError)
    for name in params:
        if not _valid_param_name(name):
            raise TypeError(f"Parameter name {name!r:.100} is not a valid parameter name.")
    extra = _require_type(state.extra, dict, "state.extra", TypeError)
    for name in extra:
        if type(name) is not str:
            raise TypeError(f"state.extra key {name!r:.100} is not a str.")
    try:
        n_iter = operator.index(state.n_iter)
    except TypeError:
        raise TypeError(f"state.n_iter must be an int; got {state.n_iter!r:.100}.") from None
    if n_iter < 0:
        raise ValueError(f"state.n_iter {n_iter} is negative.")
    if estimator is not None and type(estimator) is not str:
        raise TypeError(f"estimator must be a str or None; got {estimator!r:.100}.")

    conditioned = model.conditioned
    if format_version in (2, 3, 4) and (conditioned is not None) != (format_version == 4):
        raise ValueError(
            "format_version=4 is the format of models with input-conditioned "
            "transitions, and only theirs (formats 5 and 6 store both kinds)"
        )
    if conditioned is not None:
        for k, name in enumerate(conditioned.attributes):
            if type(name) is not str:
                raise TypeError(f"Transition attribute {k} ({name!r:.100}) is not a str.")
        conditioned_arrays = {
            "conditioned_ptr": _as_int_array(conditioned.ptr, "conditioned_ptr"),
            "conditioned_pairs": _as_int_array(conditioned.pairs, "conditioned_pairs"),
            "conditioned_weights": _as_float_array(conditioned.weights, "conditioned_weights"),
        }
        try:
            check_conditioned_arrays(
                len(conditioned.attributes), n_labels, *conditioned_arrays.values()
            )
        except ValueError as exc:
            raise ValueError(f"The model cannot be saved: {exc}") from exc
        conditioned_arrays["conditioned_pairs"] = conditioned_arrays["conditioned_pairs"].astype(
            np.int32
        )
        arrays.update(conditioned_arrays)

    # Formats 3 to 6 keep the names in UTF-8 (3 to 5 in a CQDB chunk, which
    # holds no NUL); names they cannot hold are written in format 2 (JSON).
    version = 2
    if format_version != 2:
        target = format_version or FORMAT_VERSION
        kept, kept_attributes = arrays, attributes
        if target in _ALIGNED_VERSIONS:
            narrow = target == 6 and weights_dtype != "float64"
            kept, kept_attributes = _prediction_arrays(arrays, attributes, weights_dtype, narrow)
        try:
            names = _name_arrays(target, kept_attributes)
        except ValueError as exc:
            if format_version is not None or conditioned is not None:
                raise ValueError(
                    f"The model cannot be saved in format {target}: {exc}"
                    + (" (format_version=2 can store it)." if conditioned is None else ".")
                ) from None
        else:
            version, arrays, attributes = target, {**kept, **names}, kept_attributes
    document = {
        "format": FORMAT_NAME,
        "format_version": version,
        "skcrf_version": __version__,
        "estimator": estimator,
        "params": {
            name: encode_value(value, f"Parameter {name!r} =") for name, value in params.items()
        },
        "labels": labels,
        **({"n_attributes": len(attributes)} if version >= 3 else {"attributes": attributes}),
        **(
            {"conditioned_attributes": list(conditioned.attributes)}
            if conditioned is not None
            else {"conditioned_attributes": None}
            if version in _ALIGNED_VERSIONS
            else {}
        ),
        **({"weights_dtype": weights_dtype} if version in _ALIGNED_VERSIONS else {}),
        "value_separator": separator,
        "n_iter": int(n_iter),
        "status": _encode_status(state.status, "state.status"),
        "training_log": _encode_log(state.training_log, "training_log"),
        "extra": {
            name: encode_value(value, f"Extra value {name!r} =") for name, value in extra.items()
        },
    }
    text = json.dumps(document, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    arrays["metadata"] = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return version, {name: arrays[name] for name in _ARRAY_NAMES[version]}


def save_state(
    state: FittedState,
    path: str | os.PathLike[str],
    *,
    estimator: Any = None,
    format_version: int | None = None,
    dtype: str = "float64",
) -> None:
    """Save a fitted state to ``path`` in the skcrf model format (no pickle).

    Everything is checked before anything is written (the model arrays by
    the same rules the loader applies; see the module docstring). The write
    is atomic: the file is written to a temporary file in the same
    directory, flushed to disk, then renamed to ``path``. If anything fails,
    the temporary file is removed and a file already at ``path`` is left as
    it was.

    Parameters
    ----------
    state : FittedState
        The fitted state (what ``CRFTagger._get_fitted_state()`` returns).
    path : str or os.PathLike
        Where to write the model; the file is exactly at ``path`` (no
        extension is added). The name is up to you (``.npz`` or, for
        instance, ``.skcrf``).
    estimator : str, optional
        The estimator class, ``"module.QualName"``, recorded for information.
    format_version : {None, 2, 3, 4, 5, 6}, default=None
        None: the newest format (6), or 2 when an attribute name cannot be
        encoded in UTF-8 (a str that is not valid Unicode, such as a lone
        surrogate). Formats 6 and 5 keep only what prediction needs (the
        features with a nonzero weight and the attributes that keep one):
        a warm start from the file starts from those features; 5 keeps the
        names in a CQDB chunk (no NUL in a name), 6 in a packed table
        about half its size. 3 (4 for a model with
        input-conditioned transitions): every feature, zero weights
        included, as earlier skcrf versions write and read it. 2: the
        format that skcrf 0.2 reads (the names in the JSON document,
        compressed).
    dtype : {"float64", "float32"}, default="float64"
        The weights' type in the file (formats 5 and 6). ``"float32"``
        halves their size (format 6 then stores the state offsets and
        labels in the narrowest unsigned type too); each weight is rounded to the nearest float32
        (a relative change below 6e-8), which moves the scores of a
        sequence by about that much: labels stay the same except for exact
        ties, marginals change by about 1e-7 (see :mod:`skcrf.io`).

    Raises
    ------
    TypeError
        If a label, a parameter, an extra value or a log value has a type the
        format cannot store safely (see the module docstring), or ``state``
        is not a FittedState.
    ValueError
        If the model is inconsistent (for instance non-finite weights, or
        labels out of range), ``dtype`` is not one of the two, float32 is
        asked for another format than 5 or a weight is beyond float32's
        range; nothing is written.

    See Also
    --------
    load_state : Read the file back.
    save_model : Save an estimator.
    """
    version, arrays = _state_document(state, estimator, format_version, dtype)
    if version in _ALIGNED_VERSIONS:  # aligned, stored: loading uses the arrays where they lie
        data = aligned_npz_bytes(arrays)
        write_atomically(path, lambda file: file.write(data))
        return
    # format 3 is stored, not deflated: loading reads the arrays as they lie
    write = np.savez if "attributes" in arrays else np.savez_compressed
    write_atomically(path, lambda file: write(file, **arrays))


def save_model(estimator: Any, path: str | os.PathLike[str], *, dtype: str = "float64") -> None:
    """Save a fitted estimator to ``path`` in the skcrf model format (no pickle).

    ``save_state(estimator._get_fitted_state(), path)``, recording the
    estimator's class name: any object with a ``_get_fitted_state()`` method
    returning a fitted state can be saved (this module
    does not import the estimator).

    Parameters
    ----------
    estimator : CRFTagger
        A fitted estimator.
    path : str or os.PathLike
        Where to write the model (exactly there; see :func:`save_state`).
    dtype : {"float64", "float32"}, default="float64"
        The weights' type in the file (see :func:`save_state`).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If the estimator is not fitted (raised by ``_get_fitted_state``);
        nothing is written.
    TypeError, ValueError
        As :func:`save_state`.

    See Also
    --------
    load_model : Read the file back into an estimator.
    """
    state = estimator._get_fitted_state()
    kind = type(estimator)
    save_state(state, path, estimator=f"{kind.__module__}.{kind.__qualname__}", dtype=dtype)


# -- loading ---------------------------------------------------------------


def _bad_zip_file():
    """:class:`zipfile.BadZipFile`, named only once an exception is being matched.

    A format 5 or 6 file is read without :mod:`zipfile` (importing it costs a
    millisecond, as much as opening a small model).
    """
    import zipfile

    return zipfile.BadZipFile


def _member_set_message(names):
    """Why a set of archive members is no format's (the closest one's diff)."""
    got = set(names)
    best = min(
        sorted(_ARRAY_NAMES, reverse=True),
        key=lambda v: len(got.symmetric_difference(f"{n}.npy" for n in _ARRAY_NAMES[v])),
    )
    expected = {f"{name}.npy" for name in _ARRAY_NAMES[best]}
    missing = sorted(expected - got)
    extra = sorted(got - expected)
    return (
        f"the archive must hold exactly the arrays {list(_ARRAY_NAMES[best])} "
        f"(format version {best})"
        + (f"; missing {missing}" if missing else "")
        + (f"; unexpected {extra[:10]!r:.300}" if extra else "")
        + ("; duplicate members" if len(names) != len(got) else "")
    )


def _check_members(file):
    """Check the zip directory and every array's .npy header before reading.

    Returns the (shape, dtype) of each array, refusing anything unexpected
    (members of no format version, object dtypes, sizes that do not match
    the headers, suspicious compression ratios) without reading any array
    data.
    """
    import zipfile  # (formats 1 to 4 only: a millisecond of every open otherwise)

    file.seek(0)
    if file.read(4) != b"PK\x03\x04" or not zipfile.is_zipfile(file):
        raise ValueError("not an skcrf model file (not a zip/npz archive).")
    file.seek(0)
    headers = {}
    with zipfile.ZipFile(file) as archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        if len(names) != len(set(names)) or not any(
            set(names) == {f"{name}.npy" for name in arrays} for arrays in _ARRAY_NAMES.values()
        ):
            raise ValueError(f"not an skcrf model file: {_member_set_message(names)}.")
        for info in infos:
            name = info.filename[: -len(".npy")]
            if info.flag_bits & 0x1:
                raise ValueError(f"array {name!r} is encrypted.")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ValueError(f"array {name!r} uses an unsupported compression method.")
            if name not in _RATIO_EXEMPT and info.file_size > max(
                _FREE_UNCOMPRESSED_BYTES, _MAX_COMPRESSION_RATIO * info.compress_size
            ):
                raise ValueError(
                    f"array {name!r} claims {info.file_size} bytes from "
                    f"{info.compress_size} compressed bytes; refusing a suspicious size."
                )
            with archive.open(info) as member:
                header, header_size = _read_npy_header(member, name)
            shape, _, dtype = header
            if any(dim < 0 for dim in shape):
                raise ValueError(f"array {name!r} has a negative dimension in {shape!r:.100}.")
            if dtype.hasobject or dtype.kind not in "biuf" or dtype.fields is not None:
                raise ValueError(
                    f"array {name!r} has dtype {dtype!s:.100}; skcrf model files hold only "
                    "numeric arrays (object arrays and pickles are refused)."
                )
            n_bytes = math.prod(shape) * dtype.itemsize
            if info.file_size != header_size + n_bytes:
                raise ValueError(
                    f"array {name!r}: its header claims shape {shape!r:.100} of {dtype}, "
                    f"which does not match its stored size ({info.file_size} bytes)."
                )
            headers[name] = (shape, dtype)
    return headers


def _read_npy_header(member, name):
    """``(shape, fortran_order, dtype)`` and size of a member's .npy header.

    numpy parses the header with :func:`ast.literal_eval` (no code runs);
    whatever it raises on a damaged header becomes a ValueError.
    """
    try:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            header = np.lib.format.read_array_header_1_0(member, max_header_size=_MAX_HEADER_SIZE)
        elif version == (2, 0):
            header = np.lib.format.read_array_header_2_0(member, max_header_size=_MAX_HEADER_SIZE)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except _bad_zip_file() as exc:
        # a small member is read whole with its header: its CRC is checked
        if "CRC" not in str(exc):
            raise
        raise ValueError(f"array {name!r} is corrupted (CRC mismatch).") from None
    except Exception as exc:  # tokenize.TokenError, SyntaxError, ...
        raise ValueError(
            f"array {name!r} has an invalid .npy header ({type(exc).__name__}: {exc})."
        ) from exc
    return header, member.tell()


def _check_header(headers, name, kind, itemsize, shape, why="the metadata"):
    """Check one array's header; ``shape`` entries may be None (any size)."""
    got_shape, dtype = headers[name]
    if (
        dtype.kind != kind
        or dtype.itemsize != itemsize
        or len(got_shape) != len(shape)
        or any(want is not None and got != want for got, want in zip(got_shape, shape))
    ):
        want = {"f": "float", "i": "int", "u": "uint"}[kind] + str(8 * itemsize)
        raise ValueError(
            f"array {name!r} must be {want} of shape "
            f"{tuple('n' if s is None else s for s in shape)}; the file has {dtype} "
            f"of shape {tuple(got_shape)} (inconsistent with {why})."
        )
    return got_shape


def _check_header_among(headers, name, *kinds, shape, why="the metadata"):
    """:func:`_check_header` accepting any of ``kinds`` ((kind, itemsize) pairs)."""
    _, dtype = headers[name]
    kind, itemsize = next(
        (k for k in kinds if (dtype.kind, dtype.itemsize) == k), kinds[0]
    )  # (none: the first one's error)
    return _check_header(headers, name, kind, itemsize, shape, why)


def _require_keys(obj, keys, what):
    if type(obj) is not dict:
        raise ValueError(f"{what} must be a JSON object; got {type(obj).__name__}.")
    missing = sorted(keys - set(obj))
    extra = sorted(set(obj) - keys)
    if missing or extra:
        raise ValueError(
            f"{what}: "
            + (f"missing keys {missing}" if missing else "")
            + ("; " if missing and extra else "")
            + (f"unexpected keys {extra[:10]!r:.300}" if extra else "")
            + "."
        )


def _require_type(value, kind, what, error=ValueError):
    if type(value) is not kind:
        raise error(f"{what} must be a {kind.__name__}; got {type(value).__name__}.")
    return value


def _parse_document(raw):
    """Parse the metadata JSON; check its format name and version.

    Returns the document and its format version (one this skcrf reads); its
    keys are checked by :func:`_check_document_keys`.
    """
    document = json.loads(
        raw.tobytes().decode("utf-8"),
        object_pairs_hook=no_duplicate_keys,
        parse_constant=reject_constant,
    )
    if type(document) is not dict or document.get("format") != FORMAT_NAME:
        raise ValueError(f"not an skcrf model file (its metadata has no format {FORMAT_NAME!r}).")
    version = document.get("format_version")
    if type(version) is not int or version < 1:
        raise ValueError(f"invalid format version {version!r:.100}.")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"the file has skcrf model format version {version} (written by skcrf "
            f"{document.get('skcrf_version')!s:.50}); this skcrf ({__version__}) reads "
            f"format version {FORMAT_VERSION} and older: upgrade skcrf to load it."
        )
    return document, version


def _check_document_keys(document, version):
    _require_keys(document, _JSON_KEYS[version], f"model metadata (format version {version})")
    _require_type(document["skcrf_version"], str, "skcrf_version")
    if version == 1 or document["estimator"] is not None:
        _require_type(document["estimator"], str, "estimator")


def _decode_status(name, what, nullable=True):
    if name is None and nullable:
        return None
    if type(name) is str and name.startswith(_ONLINE_PREFIX):
        member = name[len(_ONLINE_PREFIX) :]
        if member in OnlineStatus.__members__:
            return OnlineStatus[member]
    elif type(name) is str and name in LBFGSStatus.__members__:
        return LBFGSStatus[name]
    raise ValueError(f"{what}: unknown training status {name!r:.100}.")


def _decode_log(log_json, nullable=True):
    if log_json is None and nullable:
        return None
    _require_keys(log_json, _LOG_KEYS, "training_log")
    log = TrainingLog(verbose=decode_value(log_json["verbose"], "training_log verbose"))
    iterations = _require_type(log_json["iterations"], list, "training_log iterations")
    for k, entry in enumerate(iterations):
        _require_type(entry, dict, f"training_log iteration {k}")
        decoded = {}
        for key, value in entry.items():
            where = f"training_log iteration {k} {key!r:.100}"
            kind = value.get("type") if type(value) is dict else None
            if kind in ("label_scores", "fraction") and set(value) == {"type", "value"}:
                decode = _decode_label_scores if kind == "label_scores" else _decode_fraction
                decoded[key] = decode(value["value"], where)
                continue
            value = decode_value(value, where)
            if type(value) in (tuple, list, dict):
                raise ValueError(
                    f"training_log iteration {k} {key!r:.100}: a {type(value).__name__}, "
                    "not a scalar."
                )
            decoded[key] = value
        log.iterations.append(decoded)
    log.status = _decode_status(log_json["status"], "training_log status")
    log.message = _require_type(log_json["message"], str, "training_log message")
    return log


def _decode_common(document, version):
    """The parts of the document both format versions share."""
    params_json = _require_type(document["params"], dict, "params")
    params = {}
    for name, value in params_json.items():
        if not _valid_param_name(name):
            raise ValueError(f"invalid parameter name {name!r:.100}.")
        decoded = plain_value(value)  # (the message worded only for the others)
        params[name] = (
            decode_value(value, f"parameter {name!r}") if decoded is NOT_PLAIN else decoded
        )

    labels_json = _require_type(document["labels"], list, "labels")
    if not labels_json:
        raise ValueError("labels: the model has no labels.")
    labels = [plain_value(item) for item in labels_json]
    for k, label in enumerate(labels):
        if label is NOT_PLAIN:
            label = labels[k] = decode_value(labels_json[k], f"label {k}")
            if not is_hashable(label):
                raise ValueError(
                    f"label {k} is a {type(label).__name__}; labels must be hashable."
                )
    if len(set(labels)) != len(labels):
        raise ValueError("labels: the same label appears twice.")
    classes = np.empty(len(labels), dtype=object)
    for k, label in enumerate(labels):
        classes[k] = label

    if version == 3:
        attributes = None  # a CQDB chunk: see _read_v3
    else:
        name = "vocabulary" if version == 1 else "attributes"
        attributes = _require_type(document[name], list, name)
        if not all(type(attribute) is str for attribute in attributes):
            raise ValueError(f"{name}: every attribute name must be a str.")
        if len(set(attributes)) != len(attributes):
            raise ValueError(f"{name}: the same attribute name appears twice.")

    n_iter = _require_type(document["n_iter"], int, "n_iter")
    if n_iter < 0:
        raise ValueError(f"n_iter {n_iter} is negative.")
    return {
        "params": params,
        "classes": classes,
        "attributes": attributes,
        "n_iter": n_iter,
        "status": _decode_status(document["status"], "status", nullable=version > 1),
        "training_log": _decode_log(document["training_log"], nullable=version > 1),
    }


def _read_v3(document, headers, npz, where, lazy=False, weight_size=8, packed=False):
    """A format 3 file: format 2 with the attribute names in a CQDB chunk.

    ``packed``: format 6's packed name table instead.
    """
    n_attributes = _require_type(document["n_attributes"], int, "n_attributes")
    if n_attributes < 0:
        raise ValueError(f"n_attributes {n_attributes} is negative.")
    if packed:
        (size,) = _check_header(headers, "attribute_text", "u", 1, (None,))
        _check_header_among(
            headers, "attribute_starts", ("u", 4), ("u", 8), shape=(n_attributes + 1,)
        )
        slots, wide, _ = table_layout(n_attributes)
        _check_header(headers, "attribute_table", "u", 8 if wide else 4, (slots,), "n_attributes")
    else:
        (size,) = _check_header(headers, "attributes", "u", 1, (None,))
        # at least its records, as in CRFsuite files (before anything is read)
        if size < 2072 + 9 * n_attributes:
            raise ValueError(
                f"the attributes array ({size} bytes) cannot hold {n_attributes} attribute names."
            )
    return _read_v2(
        document,
        headers,
        npz,
        where,
        lazy,
        3,
        n_attributes=n_attributes,
        weight_size=weight_size,
        packed=packed,
    )


def _read_v4(document, headers, npz, where, lazy=False, weight_size=8, packed=False):
    """A format 4 file: format 3 with input-conditioned transitions."""
    names = _require_type(document["conditioned_attributes"], list, "conditioned_attributes")
    if not all(type(name) is str for name in names):
        raise ValueError("conditioned_attributes: every name must be a str.")
    if len(set(names)) != len(names):
        raise ValueError("conditioned_attributes: the same name appears twice.")
    _check_header(headers, "conditioned_ptr", "i", 8, (len(names) + 1,), "conditioned_attributes")
    (n,) = _check_header(headers, "conditioned_pairs", "i", 4, (None,))
    _check_header(headers, "conditioned_weights", "f", weight_size, (n,), "conditioned_pairs")
    state = _read_v3(document, headers, npz, where, lazy, weight_size, packed)
    n_labels = state.model.n_labels
    if n > len(names) * n_labels * n_labels:
        raise ValueError(
            f"{n} conditioned transition features for {len(names)} transition attributes "
            f"and {n_labels} labels (inconsistent)."
        )
    ptr = _array(npz, "conditioned_ptr", np.int64)
    pairs = _array(npz, "conditioned_pairs", np.int32)
    weights = _array(npz, "conditioned_weights", np.float64)
    check_conditioned_arrays(len(names), n_labels, ptr, pairs, weights)
    state.model.conditioned = ConditionedTransitions(names, ptr, pairs, weights)
    return state


def _attributes(chunk, n_attributes, where, lazy):
    """The names of the ``attributes`` array (a CQDB chunk): a list, or lazy.

    Lazy: a :class:`~skcrf._utils._cqdb_index.LazyNames` looking names up in
    place, the chunk's structure checked now, its tables and records by the
    first lookup, the whole chunk when the names are first listed.
    """
    if len(chunk) < 8 or int(chunk[4:8].view("<u4")[0]) != len(chunk):
        raise ValueError("the attributes array is not one CQDB chunk (its size differs).")
    if not lazy:
        return read_cqdb(chunk, 0, n_attributes, "attributes", 0)[0]
    index = CQDBIndex(chunk, 0, n_attributes, "attributes")
    index.source = f"Cannot load skcrf model {where}"  # (a lookup's error names it)

    def read_all():
        try:
            return read_cqdb(chunk, 0, n_attributes, "attributes", 0)[0]
        except ValueError as exc:
            raise ValueError(f"Cannot load skcrf model {where}: {exc}") from None

    return LazyNames(index, read_all)


def _packed_attributes(npz, n_attributes, where, lazy):
    """The names of format 6's packed table: a list, or lazy (looked up in place)."""
    index = PackedNameIndex(
        npz["attribute_text"], npz["attribute_starts"], npz["attribute_table"], n_attributes
    )
    names = LazyNames.of_packed(index, source=f"Cannot load skcrf model {where}")
    return names if lazy else names.tolist()


def _read_v5(document, headers, npz, where, lazy=False, version=5):
    """A format 5 or 6 file: format 4's arrays, conditioned transitions optional.

    ``npz`` maps the names to the arrays where they lie (a mapped file's
    pages, or the file read into memory); float32 weights become float64
    (the kernels' type), format 6's narrow offsets and labels the kernels'
    types.
    """
    weights_dtype = document["weights_dtype"]
    if type(weights_dtype) is not str or weights_dtype not in WEIGHTS_DTYPES:
        raise ValueError(
            f"weights_dtype must be one of {WEIGHTS_DTYPES}; got {weights_dtype!r:.100}."
        )
    size = np.dtype(weights_dtype).itemsize
    packed = version == 6
    if document["conditioned_attributes"] is not None:
        state = _read_v4(document, headers, npz, where, lazy, size, packed)
    else:
        why = "conditioned_attributes null"
        _check_header(headers, "conditioned_ptr", "i", 8, (1,), why)
        _check_header(headers, "conditioned_pairs", "i", 4, (0,), why)
        _check_header(headers, "conditioned_weights", "f", size, (0,), why)
        if npz["conditioned_ptr"][0] != 0:
            raise ValueError(
                "conditioned_ptr must be [0] for a model without conditioned transitions."
            )
        state = _read_v3(document, headers, npz, where, lazy, size, packed)
    if lazy and not packed:  # its CRC-32 was checked: the first lookup need not read it all
        state.model.attributes.string_index.vouch()
    return state


def _read_v2(
    document,
    headers,
    npz,
    where,
    lazy=False,
    version=2,
    n_attributes=None,
    weight_size=8,
    packed=False,
):
    common = _decode_common(document, version)
    separator = _require_type(document["value_separator"], str, "value_separator")
    if not separator:
        raise ValueError("value_separator is empty.")
    extra_json = _require_type(document["extra"], dict, "extra")
    extra = {key: decode_value(v, f"extra {key!r:.100}") for key, v in extra_json.items()}

    if n_attributes is None:
        n_attributes = len(common["attributes"])
    n_labels = len(common["classes"])
    # format 6 (packed) may store them in a narrower unsigned type
    narrow = (("u", 1), ("u", 2), ("u", 4)) if packed else ()
    _check_header_among(
        headers, "state_ptr", ("i", 8), *narrow, shape=(n_attributes + 1,), why="the attributes"
    )
    (n_states,) = _check_header_among(headers, "state_labels", ("i", 4), *narrow, shape=(None,))
    _check_header(headers, "state_weights", "f", weight_size, (n_states,), "state_labels")
    (n_transitions,) = _check_header(headers, "transition_index", "i", 8, (None,))
    _check_header(
        headers, "transition_weights", "f", weight_size, (n_transitions,), "transition_index"
    )
    if n_states > n_attributes * n_labels:
        raise ValueError(
            f"{n_states} state features for {n_attributes} attributes and {n_labels} "
            "labels (inconsistent with the attributes and labels)."
        )
    if n_transitions > n_labels * n_labels:
        raise ValueError(
            f"{n_transitions} transition features for {n_labels} labels (inconsistent "
            "with the labels)."
        )
    arrays = {
        "state_ptr": _array(npz, "state_ptr", np.int64),
        "state_labels": _array(npz, "state_labels", np.int32),
        "state_weights": _array(npz, "state_weights", np.float64),
        "transition_index": _array(npz, "transition_index", np.int64),
        "transition_weights": _array(npz, "transition_weights", np.float64),
    }
    if packed:
        common["attributes"] = _packed_attributes(npz, n_attributes, where, lazy)
    elif version == 3:
        chunk = _array(npz, "attributes", np.uint8)
        common["attributes"] = _attributes(chunk, n_attributes, where, lazy)
    return _fitted_state(common, separator, n_attributes, n_labels, arrays, extra)


def _read_v1(document, headers, npz, where, lazy=False):
    """A format 1 file (skcrf 0.1) as a FittedState (see the module docstring)."""
    common = _decode_common(document, 1)
    vec = document["vectorizer"]
    _require_keys(vec, _V1_VECTORIZER_KEYS, "vectorizer")
    if type(vec["dtype"]) is not str or vec["dtype"] not in _V1_VECTORIZER_DTYPES:
        raise ValueError(f"vectorizer: unsupported dtype {vec['dtype']!r:.100}.")
    separator = _require_type(vec["separator"], str, "vectorizer separator")
    if not separator:
        raise ValueError("vectorizer separator is empty.")
    _require_type(vec["sparse"], bool, "vectorizer sparse")
    _require_type(vec["sort"], bool, "vectorizer sort")

    n_attributes, n_labels = len(common["attributes"]), len(common["classes"])
    size = n_attributes * n_labels
    n_features = _require_type(document["n_features"], int, "n_features")
    if not 0 <= n_features <= size + n_labels * n_labels:
        raise ValueError(f"n_features {n_features} is out of range.")

    (nnz,) = _check_header(headers, "coef_indices", "i", 8, (None,))
    _check_header(headers, "coef_values", "f", 8, (nnz,), "coef_indices")
    _check_header(headers, "transition", "f", 8, (n_labels, n_labels), "the labels")
    if nnz > size:
        raise ValueError(
            f"coef: {nnz} nonzeros for a ({n_attributes}, {n_labels}) matrix "
            "(inconsistent with the vocabulary and labels)."
        )
    coef_indices = _array(npz, "coef_indices", np.int64)
    coef_values = _array(npz, "coef_values", np.float64)
    transition = _array(npz, "transition", np.float64)
    if nnz and (
        coef_indices[0] < 0 or coef_indices[-1] >= size or (np.diff(coef_indices) <= 0).any()
    ):
        raise ValueError(
            "coef_indices must be strictly increasing indices below "
            f"n_attributes * n_classes = {size}."
        )
    # Flat C-order indices, increasing: already by attribute, then label.
    state_ptr = np.zeros(n_attributes + 1, dtype=np.int64)
    np.cumsum(np.bincount(coef_indices // n_labels, minlength=n_attributes), out=state_ptr[1:])
    flat = transition.ravel()
    transition_index = np.flatnonzero(flat).astype(np.int64)
    arrays = {
        "state_ptr": state_ptr,
        "state_labels": (coef_indices % n_labels).astype(np.int32),
        "state_weights": coef_values,
        "transition_index": transition_index,
        "transition_weights": np.ascontiguousarray(flat[transition_index]),
    }
    if not (np.isfinite(coef_values).all() and np.isfinite(transition).all()):
        raise ValueError("the weights hold non-finite values (NaN or infinity).")
    return _fitted_state(common, separator, n_attributes, n_labels, arrays, {})


def _fitted_state(common, separator, n_attributes, n_labels, arrays, extra):
    """The FittedState of checked metadata (``common``) and model arrays."""
    check_model_arrays(n_attributes, n_labels, arrays)
    model = CRFModel(
        classes=common["classes"],
        attributes=common["attributes"],
        value_separator=separator,
        **arrays,
    )
    return FittedState(
        params=common["params"],
        model=model,
        n_iter=common["n_iter"],
        status=common["status"],
        training_log=common["training_log"],
        extra=extra,
    )


def _array(npz, name, dtype):
    """Array ``name`` of the archive, read whole: zipfile checks its CRC-32.

    So every member's CRC is checked once, as it is read (their sizes are
    known to be sane by then): a corrupted byte anywhere is refused.
    """
    try:
        return np.ascontiguousarray(npz[name], dtype=dtype)
    except _bad_zip_file() as exc:
        if "CRC" not in str(exc):
            raise
        raise ValueError(f"array {name!r} is corrupted (CRC mismatch).") from None


def _load(file, where, lazy):
    headers = _check_members(file)
    file.seek(0)
    with np.load(file, allow_pickle=False) as npz:
        _check_header(headers, "metadata", "u", 1, (None,))
        document, version = _parse_document(_array(npz, "metadata", np.uint8))
        if set(headers) != set(_ARRAY_NAMES[version]):
            raise ValueError(
                f"the metadata says format version {version}, whose arrays are "
                f"{list(_ARRAY_NAMES[version])}; the archive has {sorted(headers)}."
            )
        if version in _ALIGNED_VERSIONS:
            raise ValueError(
                f"the metadata says format version {version}, but the archive is not laid out "
                f"as format {version} lays it out (its first member aligned by a padding field)."
            )
        _check_document_keys(document, version)
        reader = {1: _read_v1, 2: _read_v2, 3: _read_v3, 4: _read_v4}[version]
        return reader(document, headers, npz, where, lazy)


def _load_aligned(file, size, where, lazy, use_mmap):
    """A format 5 or 6 file read from ``file`` (open, ``size`` bytes), or None.

    None if it is not one (an older format: the caller reads it as before).

    The arrays lie in a read-only map of the file (``use_mmap``) or in one
    bytearray holding it (writable arrays); either way they are not copied,
    and the whole archive is checked first: its layout, every member inside
    the file and its CRC-32 (so a file truncated or damaged before it is
    opened is a ValueError, never a read outside the file).
    """
    file.seek(0)
    if not is_aligned_archive(file.read(HEAD_SIZE)):
        return None
    if use_mmap:
        buffer = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ)
        # cut between the size read at open and the map: refused (reading past
        # the end of a mapped file raises SIGBUS)
        if os.fstat(file.fileno()).st_size < size:
            raise ValueError("the file was truncated while it was opened.")
    else:
        file.seek(0)
        buffer = bytearray(size)
        if file.readinto(buffer) != size:
            raise ValueError("the file was truncated while it was read.")
    members = read_aligned_members(buffer, *(_ARRAY_NAMES[v] for v in _ALIGNED_VERSIONS))
    for name, member in members.items():
        problem = member_crc_problem(buffer, member)
        if problem is not None:
            raise ValueError(f"array {name!r} {problem}.")
    headers = {name: ((member[1],), member[0]) for name, member in members.items()}
    arrays = {
        name: np.frombuffer(buffer, dtype=dtype, count=length, offset=offset)
        for name, (dtype, length, offset, *_) in members.items()
    }
    _check_header(headers, "metadata", "u", 1, (None,))
    document, version = _parse_document(arrays["metadata"])
    if version not in _ALIGNED_VERSIONS or list(members) != list(_ARRAY_NAMES[version]):
        layout = next(v for v in _ALIGNED_VERSIONS if list(members) == list(_ARRAY_NAMES[v]))
        raise ValueError(
            f"the metadata says format version {version}, but the archive is laid out as "
            f"format {layout} lays it out."
        )
    _check_document_keys(document, version)
    return _read_v5(document, headers, arrays, where, lazy, version)


def load_state(
    path: str | os.PathLike[str], *, lazy_attributes: bool = False, mmap: bool = False
) -> FittedState:
    """Load the fitted state saved in ``path``; never unpickles.

    Reads every format version up to :data:`FORMAT_VERSION` (format 1, of
    skcrf 0.1, included; see the module docstring). Everything in the file
    is checked (archive layout, format name and version, array dtypes and
    shapes against the metadata, the consistency of the arrays, finite
    weights, value encodings) before the state is returned.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.
    lazy_attributes : bool, default=False
        For the estimators' ``load``: the attribute names of a format 3 file
        as a lazy sequence (``len``, ``in`` and lookups where the names lie:
        the chunk's tables verified by the first lookup, the whole chunk
        when the names are first listed) instead of a list.
    mmap : bool, default=False
        For a format 5 or 6 file: the arrays are read-only views of a map of the
        file (:class:`mmap.mmap`), not copies; processes that map one file
        share its pages. The whole file is checked first (as without it).
        Other formats are read into memory as without it. See
        :mod:`skcrf.io` ("Mapped files") for what remains: a file truncated
        in place while it is mapped.

    Returns
    -------
    state : FittedState
        Equal to the one saved. ``params`` is the dict read: this function
        does not know the estimator's parameters.

    Raises
    ------
    ValueError
        If the file is not a valid skcrf model file (not a zip archive,
        truncated or corrupted, a newer or invalid format version,
        inconsistent or unexpected content), or ``path`` is not a regular
        file (a device, a FIFO: checked before anything is read); the
        message says what is wrong.
    OSError
        If the file cannot be opened (for instance FileNotFoundError).

    See Also
    --------
    save_state : Write a model file.
    load_model : Load an estimator.
    """
    path = os.fsdecode(path)
    # not a device or a FIFO, which would never end (or block)
    file, size = open_regular_file(path, "skcrf model")
    with file:
        try:
            state = _load_aligned(file, size, repr(path), lazy_attributes, mmap)
            return _load(file, repr(path), lazy_attributes) if state is None else state
        except (
            ValueError,
            KeyError,
            TypeError,
            IndexError,
            EOFError,
            OSError,
            OverflowError,
            RecursionError,
            MemoryError,
            NotImplementedError,
            RuntimeError,
            _bad_zip_file(),
            zlib.error,
        ) as exc:
            message = str(exc) or type(exc).__name__
            if not isinstance(exc, ValueError) or isinstance(
                exc, (json.JSONDecodeError, UnicodeDecodeError)
            ):
                message = f"corrupted or invalid file ({type(exc).__name__}: {message})"
            raise ValueError(f"Cannot load skcrf model {path!r}: {message}") from exc
