"""Saving and loading fitted :class:`~skcrf.CRFTagger` models without pickle.

A model file is one numpy ``.npz`` archive (a zip file, written with
:func:`numpy.savez_compressed`) and is read back with
``numpy.load(..., allow_pickle=False)``: loading never unpickles and never
executes anything from the file, so a model file from an untrusted source can
at worst be refused with a :class:`ValueError`.

File layout (format version 1)
------------------------------
The archive holds exactly four arrays:

``metadata`` : uint8, shape (n_bytes,)
    One UTF-8 (in fact ASCII) JSON document, described below.
``coef_indices`` : int64, shape (nnz,)
    Flat (C order) indices into ``coef_`` (shape ``(n_attributes,
    n_classes)``) of its nonzero entries, strictly increasing.
``coef_values`` : float64, shape (nnz,)
    ``coef_.ravel()[coef_indices]``; every other entry of ``coef_`` is 0.
    (``coef_`` is mostly zeros: a state feature exists only for the
    attribute/label pairs seen in training. On a model of 500 Treebank
    sentences, 13,506 attributes x 42 labels, 4% nonzero, the dense array
    is 4.5 MB raw and 230 kB compressed; the sparse pair is 204 kB
    compressed. Storing only nonzeros also keeps every array poorly
    compressible, which lets the loader refuse "zip bombs".)
``transition`` : float64, shape (n_classes, n_classes)
    ``transition_``, dense.

The JSON document is an object with exactly these keys:

``format``
    ``"skcrf-model"``.
``format_version``
    The integer format version (:data:`FORMAT_VERSION`).
``skcrf_version``
    The skcrf version that wrote the file (informational only).
``estimator``
    The class that was saved, ``"module.QualName"`` (informational only).
``params``
    ``{name: value}``: the estimator's ``get_params(deep=False)``, each value
    in the tagged encoding below.
``labels``
    ``classes_`` in order, each in the tagged encoding.
``vocabulary``
    The attribute names (``vectorizer_.feature_names_``), in column order.
``vectorizer``
    ``{"dtype": "float64", "separator": "=", "sparse": true, "sort": true}``:
    the DictVectorizer's parameters (``dtype`` by numpy name).
``n_features``, ``n_iter``
    ``n_features_`` and ``n_iter_``.
``status``
    The :class:`~skcrf._lbfgs.LBFGSStatus` member name of ``status_``.
``training_log``
    ``{"iterations": [{key: value, ...}, ...], "status": name or null,
    "message": str, "verbose": value}``, values in the tagged encoding.

Tagged values
~~~~~~~~~~~~~
Labels (and parameter and log values) are stored as
``{"type": T, "value": V}`` so that they come back as the same Python type:

==================  ==========================================================
``T``               ``V``
==================  ==========================================================
``"str"``           the string
``"int"``           a JSON integer
``"float"``         ``repr`` of the float as a string (exact; ``"nan"``,
                    ``"inf"``, ``"-0.0"`` included)
``"bool"``          ``true`` / ``false``
``"none"``          no ``value``
``"bytes"``         the bytes as a hex string
``"tuple"``         a list of tagged values (nested at most 32 deep)
``"numpy:<dtype>"`` a numpy scalar, ``<dtype>`` one of ``bool``,
                    ``int8`` ... ``int64``, ``uint8`` ... ``uint64``,
                    ``float16``, ``float32``, ``float64`` (``V`` as for bool,
                    int and float) or ``str_`` (``V`` a string)
==================  ==========================================================

Types are matched exactly: numpy scalar labels come back as the same numpy
scalar type (``np.int64(3)`` stays ``np.int64(3)``, not ``3``), so the loaded
model predicts exactly the labels the saved one did. Any other label type
(subclasses of ``str`` or ``int`` such as enums, complex numbers, frozensets,
arbitrary objects, ...) cannot be stored safely: :func:`save_model` refuses it
with a :class:`TypeError`.

Versioning policy
-----------------
``format_version`` is incremented by every change to the layout or the
meaning of any key or array; the set of keys and arrays of a version is
fixed, and a file with unknown or missing keys or arrays is refused.
:func:`load_model` reads every format version up to its own
(:data:`FORMAT_VERSION`); a file of a newer version is refused with an error
that names both versions (upgrade skcrf to read it), never guessed at. The
estimator parameters are not part of the format: parameters missing from a
file (written before a parameter existed) take their default value, and
unknown parameter names are refused.

Examples
--------
>>> import os, tempfile
>>> from skcrf import CRFTagger
>>> from skcrf.io import load_model, save_model
>>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
>>> y = [["D", "N"], ["D", "N"]]
>>> tagger = CRFTagger(c2=0.1).fit(X, y)
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = os.path.join(tmp, "tagger.skcrf")
...     save_model(tagger, path)
...     loaded = load_model(path)
>>> loaded.predict(X) == tagger.predict(X)
True
"""

import binascii
import json
import math
import os
import tempfile
import zipfile
import zlib

import numpy as np
from sklearn.feature_extraction import DictVectorizer
from sklearn.utils.validation import check_is_fitted

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "load_model", "save_model"]

#: The ``format`` value of every skcrf model file.
FORMAT_NAME = "skcrf-model"
#: The format version this skcrf writes, and the newest it reads.
FORMAT_VERSION = 1

_ARRAY_NAMES = ("metadata", "coef_indices", "coef_values", "transition")
_JSON_KEYS = frozenset(
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
)
_VECTORIZER_KEYS = frozenset({"dtype", "separator", "sparse", "sort"})
_LOG_KEYS = frozenset({"iterations", "status", "message", "verbose"})

# numpy scalar types a label (or parameter) may have, by dtype name.
_NUMPY_TYPES = {
    np.dtype(t).name: t
    for t in (
        np.bool_,
        np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64,
    )
}
_NUMPY_TYPES["str_"] = np.str_
_NUMPY_NAMES = {t: name for name, t in _NUMPY_TYPES.items()}
# DictVectorizer output dtypes a file may name.
_VECTORIZER_DTYPES = {
    name: t for name, t in _NUMPY_TYPES.items() if name not in ("bool", "str_")
}
_MAX_TUPLE_DEPTH = 32

# Guards against "zip bombs": an array member larger than this must not be
# more than _MAX_COMPRESSION_RATIO times larger than its compressed size. The
# arrays skcrf writes hold nonzero floats and are barely compressible.
_FREE_UNCOMPRESSED_BYTES = 64 * 2**20
_MAX_COMPRESSION_RATIO = 100
_MAX_HEADER_SIZE = 10_000  # numpy's own default limit for .npy headers


# -- tagged encoding of values ---------------------------------------------


def _encode_value(value, what, depth=0):
    """Tagged JSON encoding of ``value`` (see the module docstring)."""
    kind = type(value)
    if kind is str:
        return {"type": "str", "value": value}
    if kind is bool:
        return {"type": "bool", "value": value}
    if kind is int:
        return {"type": "int", "value": value}
    if kind is float:
        return {"type": "float", "value": repr(value)}
    if value is None:
        return {"type": "none"}
    if kind is bytes:
        return {"type": "bytes", "value": value.hex()}
    if kind is tuple:
        if depth >= _MAX_TUPLE_DEPTH:
            raise TypeError(
                f"{what} {value!r} is nested more than {_MAX_TUPLE_DEPTH} tuples deep; "
                "it cannot be saved."
            )
        return {
            "type": "tuple",
            "value": [_encode_value(item, what, depth + 1) for item in value],
        }
    name = _NUMPY_NAMES.get(kind)
    if name is not None:
        if name == "str_":
            encoded = str(value)
        elif name == "bool":
            encoded = bool(value)
        elif np.dtype(kind).kind in "iu":
            encoded = int(value)
        else:
            encoded = repr(float(value))
        return {"type": f"numpy:{name}", "value": encoded}
    raise TypeError(
        f"{what} {value!r} has type {kind.__module__}.{kind.__qualname__}, which "
        "skcrf model files cannot store safely. Supported types: str, int, float, "
        "bool, None, bytes, tuples of these, and numpy bool, integer, float16/32/64 "
        "and str_ scalars."
    )


def _decode_float(value, what):
    if type(value) is int or type(value) is float:
        return float(value)
    if type(value) is str and value == value.strip() and "_" not in value:
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"{what}: invalid float value {value!r}.")


def _decode_int(value, what):
    if type(value) is not int:
        raise ValueError(f"{what}: invalid int value {value!r}.")
    return value


def _decode_value(item, what, depth=0):
    """Inverse of :func:`_encode_value`; ValueError on anything unexpected."""
    if type(item) is not dict or type(item.get("type")) is not str:
        raise ValueError(
            f"{what}: expected a tagged value {{'type': ..., 'value': ...}}, "
            f"got {item!r:.200}."
        )
    kind = item["type"]
    expected_keys = {"type"} if kind == "none" else {"type", "value"}
    if set(item) != expected_keys:
        raise ValueError(
            f"{what}: a tagged value of type {kind!r:.50} must have exactly the keys "
            f"{sorted(expected_keys)}; got {sorted(item)!r:.200}."
        )
    value = item.get("value")
    if kind == "str":
        if type(value) is str:
            return value
    elif kind == "int":
        return _decode_int(value, what)
    elif kind == "float":
        return _decode_float(value, what)
    elif kind == "bool":
        if type(value) is bool:
            return value
    elif kind == "none":
        return None
    elif kind == "bytes":
        if type(value) is str:
            try:
                return bytes.fromhex(value)
            except ValueError:
                pass
    elif kind == "tuple":
        if type(value) is list:
            if depth >= _MAX_TUPLE_DEPTH:
                raise ValueError(f"{what}: tuples nested more than {_MAX_TUPLE_DEPTH} deep.")
            return tuple(_decode_value(v, what, depth + 1) for v in value)
    elif kind.startswith("numpy:") and kind[6:] in _NUMPY_TYPES:
        name = kind[6:]
        scalar_type = _NUMPY_TYPES[name]
        if name == "str_":
            if type(value) is str:
                return np.str_(value)
        elif name == "bool":
            if type(value) is bool:
                return np.bool_(value)
        elif np.dtype(scalar_type).kind in "iu":
            number = _decode_int(value, what)
            info = np.iinfo(scalar_type)
            if not info.min <= number <= info.max:
                raise ValueError(f"{what}: {number} is out of the range of {name}.")
            return scalar_type(number)
        else:
            number = _decode_float(value, what)
            converted = scalar_type(number)
            if math.isfinite(number) and float(converted) != number:
                raise ValueError(f"{what}: {value!r} is not exactly a {name}.")
            return converted
    else:
        raise ValueError(f"{what}: unknown value type {kind!r:.60}.")
    raise ValueError(f"{what}: invalid value {value!r:.200} for type {kind!r}.")


# -- saving ----------------------------------------------------------------


def _model_document(tagger):
    """The JSON document and arrays of a fitted tagger (validated)."""
    from . import __version__
    from ._training_log import TrainingLog

    classes = list(np.asarray(tagger.classes_, dtype=object).ravel())
    labels = [_encode_value(label, f"Label {k}") for k, label in enumerate(classes)]
    n_classes = len(classes)

    vectorizer = tagger.vectorizer_
    vocabulary = list(vectorizer.feature_names_)
    for k, name in enumerate(vocabulary):
        if type(name) is not str:
            raise TypeError(
                f"Feature name {k} ({name!r}) is a {type(name).__name__}; skcrf model "
                "files store str feature names only."
            )
    if dict(vectorizer.vocabulary_) != {name: k for k, name in enumerate(vocabulary)}:
        raise ValueError("vectorizer_.vocabulary_ does not match vectorizer_.feature_names_.")
    try:
        dtype_name = np.dtype(vectorizer.dtype).name
    except TypeError:
        dtype_name = None
    if dtype_name not in _VECTORIZER_DTYPES:
        raise TypeError(f"vectorizer_.dtype {vectorizer.dtype!r} cannot be saved.")
    if type(vectorizer.separator) is not str:
        raise TypeError(f"vectorizer_.separator {vectorizer.separator!r} must be a str.")
    vectorizer_params = {
        "dtype": dtype_name,
        "separator": vectorizer.separator,
        "sparse": bool(vectorizer.sparse),
        "sort": bool(vectorizer.sort),
    }

    coef = np.asarray(tagger.coef_)
    transition = np.asarray(tagger.transition_)
    for name, array, shape in (
        ("coef_", coef, (len(vocabulary), n_classes)),
        ("transition_", transition, (n_classes, n_classes)),
    ):
        if array.dtype != np.float64 or array.shape != shape:
            raise ValueError(
                f"{name} must be a float64 array of shape {shape}; got {array.dtype} "
                f"{array.shape}."
            )
        if not np.isfinite(array).all():
            raise ValueError(f"{name} has non-finite values; the model cannot be saved.")
    flat = coef.ravel()
    # Nonzeros, and negative zeros too, so that the round trip is bit-exact.
    coef_indices = np.flatnonzero((flat != 0) | np.signbit(flat)).astype(np.int64)

    params = {
        name: _encode_value(value, f"Parameter {name!r} =")
        for name, value in tagger.get_params(deep=False).items()
    }
    log = tagger.training_log_
    if not isinstance(log, TrainingLog):
        raise TypeError(f"training_log_ must be a TrainingLog; got {type(log).__name__}.")
    iterations = []
    for k, entry in enumerate(log.iterations):
        encoded = {}
        for key, value in entry.items():
            if type(key) is not str:
                raise TypeError(f"training_log_.iterations[{k}] has a non-str key {key!r}.")
            encoded[key] = _encode_value(value, f"training_log_.iterations[{k}][{key!r}] =")
        iterations.append(encoded)

    n_features, n_iter = int(tagger.n_features_), int(tagger.n_iter_)
    document = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "skcrf_version": __version__,
        "estimator": f"{type(tagger).__module__}.{type(tagger).__qualname__}",
        "params": params,
        "labels": labels,
        "vocabulary": vocabulary,
        "vectorizer": vectorizer_params,
        "n_features": n_features,
        "n_iter": n_iter,
        "status": tagger.status_.name,
        "training_log": {
            "iterations": iterations,
            "status": None if log.status is None else log.status.name,
            "message": str(log.message),
            "verbose": _encode_value(log.verbose, "training_log_.verbose ="),
        },
    }
    text = json.dumps(document, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    arrays = {
        "metadata": np.frombuffer(text.encode("ascii"), dtype=np.uint8),
        "coef_indices": coef_indices,
        "coef_values": np.ascontiguousarray(flat[coef_indices], dtype=np.float64),
        "transition": np.ascontiguousarray(transition, dtype=np.float64),
    }
    return arrays


def _umask():
    """The process umask, read without changing it where possible."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - not Linux
    os.umask(mask)  # pragma: no cover
    return mask  # pragma: no cover


def save_model(tagger, path):
    """Save a fitted tagger to ``path`` in the skcrf model format (no pickle).

    The write is atomic: the model is written to a temporary file in the same
    directory, flushed to disk, then renamed to ``path``. If anything fails,
    the temporary file is removed and a file already at ``path`` is left as
    it was.

    Parameters
    ----------
    tagger : CRFTagger
        A fitted tagger.
    path : str or os.PathLike
        Where to write the model; the file is exactly at ``path`` (no
        extension is added). The name is up to you (``.npz`` or, for
        instance, ``.skcrf``).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``tagger`` is not fitted.
    TypeError
        If a label, a parameter or a log value has a type the format cannot
        store safely (see the module docstring).

    See Also
    --------
    load_model : Read the file back.

    Examples
    --------
    >>> import os, tempfile
    >>> from skcrf import CRFTagger
    >>> tagger = CRFTagger().fit([[{"w": "a"}, {"w": "b"}]], [[1, 2]])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "model")
    ...     save_model(tagger, path)
    ...     load_model(path).classes_.tolist()
    [1, 2]
    """
    check_is_fitted(tagger)
    arrays = _model_document(tagger)
    path = os.fsdecode(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)[:100]}.", suffix=".tmp", dir=directory
    )
    try:
        with os.fdopen(fd, "wb") as file:
            if hasattr(os, "fchmod"):
                os.fchmod(file.fileno(), 0o666 & ~_umask())
            np.savez_compressed(file, **arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    # Make the rename itself durable (best effort; POSIX only).
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:  # pragma: no cover - file systems without directory fsync
        pass
    finally:
        os.close(dir_fd)


# -- loading ---------------------------------------------------------------


def _check_members(file):
    """Check the zip directory and every array's .npy header before reading.

    Returns the (shape, dtype) of each array, refusing anything unexpected
    (other members, object dtypes, sizes that do not match the headers,
    suspicious compression ratios) without reading any array data.
    """
    file.seek(0)
    if file.read(4) != b"PK\x03\x04" or not zipfile.is_zipfile(file):
        raise ValueError("not an skcrf model file (not a zip/npz archive).")
    file.seek(0)
    headers = {}
    with zipfile.ZipFile(file) as archive:
        infos = archive.infolist()
        names = [info.filename for info in infos]
        expected = {f"{name}.npy" for name in _ARRAY_NAMES}
        if len(names) != len(set(names)) or set(names) != expected:
            missing = sorted(expected - set(names))
            extra = sorted(set(names) - expected)
            raise ValueError(
                "not an skcrf model file: the archive must hold exactly the arrays "
                f"{list(_ARRAY_NAMES)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unexpected {extra[:10]!r:.300}" if extra else "")
                + ("; duplicate members" if len(names) != len(set(names)) else "")
                + "."
            )
        for info in infos:
            name = info.filename[: -len(".npy")]
            if info.flag_bits & 0x1:
                raise ValueError(f"array {name!r} is encrypted.")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ValueError(f"array {name!r} uses an unsupported compression method.")
            if info.file_size > max(
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
        # Sizes are now known to be sane: check every member's CRC-32, so a
        # corrupted byte anywhere in the data is refused, not loaded.
        corrupted = archive.testzip()
        if corrupted is not None:
            raise ValueError(f"array {corrupted[:-4]!r} is corrupted (CRC mismatch).")
    return headers


def _read_npy_header(member, name):
    """``(shape, fortran_order, dtype)`` and size of a member's .npy header.

    numpy parses the header with :func:`ast.literal_eval` (no code runs);
    whatever it raises on a damaged header becomes a ValueError.
    """
    try:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            header = np.lib.format.read_array_header_1_0(
                member, max_header_size=_MAX_HEADER_SIZE
            )
        elif version == (2, 0):
            header = np.lib.format.read_array_header_2_0(
                member, max_header_size=_MAX_HEADER_SIZE
            )
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except Exception as exc:  # tokenize.TokenError, SyntaxError, ...
        raise ValueError(
            f"array {name!r} has an invalid .npy header ({type(exc).__name__}: {exc})."
        ) from exc
    return header, member.tell()


def _check_header(headers, name, kind, itemsize, shape):
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
            f"of shape {tuple(got_shape)} (inconsistent with the vocabulary and labels)."
        )


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


def _require_type(value, kind, what):
    if type(value) is not kind:
        raise ValueError(f"{what} must be a {kind.__name__}; got {type(value).__name__}.")
    return value


def _no_duplicate_keys(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate JSON key {key!r:.100}.")
        result[key] = value
    return result


def _reject_constant(name):
    raise ValueError(f"invalid JSON constant {name}.")


def _parse_document(raw):
    """Parse and check the format name and version of the metadata JSON."""
    document = json.loads(
        raw.tobytes().decode("utf-8"),
        object_pairs_hook=_no_duplicate_keys,
        parse_constant=_reject_constant,
    )
    if type(document) is not dict or document.get("format") != FORMAT_NAME:
        raise ValueError(f"not an skcrf model file (its metadata has no format {FORMAT_NAME!r}).")
    version = document.get("format_version")
    if type(version) is not int:
        raise ValueError(f"invalid format version {version!r:.100}.")
    if version != FORMAT_VERSION:
        from . import __version__

        newer = version > FORMAT_VERSION
        raise ValueError(
            f"the file has skcrf model format version {version}"
            + (
                f" (written by skcrf {document.get('skcrf_version')!s:.50})"
                if newer
                else ""
            )
            + f"; this skcrf ({__version__}) reads format version {FORMAT_VERSION}"
            + ("." if not newer else " and older: upgrade skcrf to load it.")
        )
    _require_keys(document, _JSON_KEYS, "model metadata")
    _require_type(document["skcrf_version"], str, "skcrf_version")
    _require_type(document["estimator"], str, "estimator")
    return document


def _build_model(document, read_arrays, cls):
    """Check the document, then the arrays it describes; rebuild the estimator.

    ``read_arrays(n_attributes, n_classes)`` checks and reads the arrays.
    """
    from ._lbfgs import LBFGSStatus
    from ._training_log import TrainingLog

    def status_member(name, what):
        if type(name) is not str or name not in LBFGSStatus.__members__:
            raise ValueError(f"{what}: unknown optimizer status {name!r:.100}.")
        return LBFGSStatus[name]

    # parameters
    params_json = _require_type(document["params"], dict, "params")
    known = set(cls._get_param_names())
    unknown = sorted(set(params_json) - known)
    if unknown:
        raise ValueError(
            f"unknown parameters {unknown[:10]!r:.300} for {cls.__name__} "
            f"(known: {sorted(known)})."
        )
    params = {name: _decode_value(v, f"parameter {name!r}") for name, v in params_json.items()}
    for name, value in params.items():
        if type(value) is tuple:
            raise ValueError(f"parameter {name!r}: invalid value {value!r:.100}.")
    try:
        estimator = cls(**params)
        validate = getattr(estimator, "_validate_params", None)
        if validate is not None:
            validate()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid parameters: {exc}") from exc

    # labels
    labels_json = _require_type(document["labels"], list, "labels")
    if not labels_json:
        raise ValueError("labels: the model has no labels.")
    labels = [_decode_value(item, f"label {k}") for k, item in enumerate(labels_json)]
    try:
        unique = len(set(labels)) == len(labels)
    except TypeError as exc:  # pragma: no cover - decoded values are hashable
        raise ValueError("labels must be hashable.") from exc
    if not unique:
        raise ValueError("labels: the same label appears twice.")
    classes = np.empty(len(labels), dtype=object)
    for k, label in enumerate(labels):
        classes[k] = label
    n_classes = len(labels)

    # vectorizer
    vocabulary = _require_type(document["vocabulary"], list, "vocabulary")
    if not all(type(name) is str for name in vocabulary):
        raise ValueError("vocabulary: every feature name must be a str.")
    index = {name: k for k, name in enumerate(vocabulary)}
    if len(index) != len(vocabulary):
        raise ValueError("vocabulary: the same feature name appears twice.")
    vec = document["vectorizer"]
    _require_keys(vec, _VECTORIZER_KEYS, "vectorizer")
    if type(vec["dtype"]) is not str or vec["dtype"] not in _VECTORIZER_DTYPES:
        raise ValueError(f"vectorizer: unsupported dtype {vec['dtype']!r:.100}.")
    vectorizer = DictVectorizer(
        dtype=_VECTORIZER_DTYPES[vec["dtype"]],
        separator=_require_type(vec["separator"], str, "vectorizer separator"),
        sparse=_require_type(vec["sparse"], bool, "vectorizer sparse"),
        sort=_require_type(vec["sort"], bool, "vectorizer sort"),
    )
    vectorizer.feature_names_ = list(vocabulary)
    vectorizer.vocabulary_ = index
    n_attributes = len(vocabulary)

    size = n_attributes * n_classes

    # scalars and training log
    n_features = _require_type(document["n_features"], int, "n_features")
    if not 0 <= n_features <= size + n_classes * n_classes:
        raise ValueError(f"n_features {n_features} is out of range.")
    n_iter = _require_type(document["n_iter"], int, "n_iter")
    if n_iter < 0:
        raise ValueError(f"n_iter {n_iter} is negative.")
    status = status_member(document["status"], "status")
    log_json = document["training_log"]
    _require_keys(log_json, _LOG_KEYS, "training_log")
    log = TrainingLog(verbose=_decode_value(log_json["verbose"], "training_log verbose"))
    iterations = _require_type(log_json["iterations"], list, "training_log iterations")
    for k, entry in enumerate(iterations):
        _require_type(entry, dict, f"training_log iteration {k}")
        decoded = {}
        for key, value in entry.items():
            value = _decode_value(value, f"training_log iteration {k} {key!r:.100}")
            if type(value) is tuple:
                raise ValueError(f"training_log iteration {k} {key!r:.100}: a tuple.")
            decoded[key] = value
        log.iterations.append(decoded)
    if log_json["status"] is not None:
        log.status = status_member(log_json["status"], "training_log status")
    log.message = _require_type(log_json["message"], str, "training_log message")

    # arrays, read only now that their expected shapes are known
    arrays = read_arrays(n_attributes, n_classes)
    coef_indices = arrays["coef_indices"]
    coef_values = arrays["coef_values"]
    transition = arrays["transition"]
    if coef_indices.size > size:
        raise ValueError(f"coef: {coef_indices.size} nonzeros for {size} entries.")
    if coef_indices.size and (
        coef_indices[0] < 0
        or coef_indices[-1] >= size
        or not (np.diff(coef_indices) > 0).all()
    ):
        raise ValueError(
            "coef_indices must be strictly increasing indices below "
            f"n_attributes * n_classes = {size}."
        )
    if not (np.isfinite(coef_values).all() and np.isfinite(transition).all()):
        raise ValueError("the weights hold non-finite values (NaN or infinity).")
    coef = np.zeros(size, dtype=np.float64)
    coef[coef_indices] = coef_values
    coef = coef.reshape(n_attributes, n_classes)

    estimator.classes_ = classes
    estimator.vectorizer_ = vectorizer
    estimator.coef_ = coef
    estimator.transition_ = transition
    estimator.n_features_ = n_features
    estimator.n_iter_ = n_iter
    estimator.status_ = status
    estimator.training_log_ = log
    return estimator


def _load(file, cls):
    headers = _check_members(file)
    file.seek(0)
    with np.load(file, allow_pickle=False) as npz:
        _check_header(headers, "metadata", "u", 1, (None,))
        document = _parse_document(npz["metadata"])

        def read_arrays(n_attributes, n_classes):
            _check_header(headers, "coef_indices", "i", 8, (None,))
            nnz = headers["coef_indices"][0][0]
            _check_header(headers, "coef_values", "f", 8, (nnz,))
            _check_header(headers, "transition", "f", 8, (n_classes, n_classes))
            if nnz > n_attributes * n_classes:
                raise ValueError(
                    f"coef: {nnz} nonzeros for a ({n_attributes}, {n_classes}) matrix "
                    "(inconsistent with the vocabulary and labels)."
                )
            return {
                "coef_indices": np.asarray(npz["coef_indices"], dtype=np.int64),
                "coef_values": np.asarray(npz["coef_values"], dtype=np.float64),
                "transition": np.ascontiguousarray(npz["transition"], dtype=np.float64),
            }

        return _build_model(document, read_arrays, cls)


def load_model(path, cls=None):
    """Load a model saved by :func:`save_model`; never unpickles.

    Everything in the file is checked (archive layout, format name and
    version, array dtypes and shapes against the vocabulary and labels,
    finite weights, label encodings, parameter names and values) before the
    estimator is built.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.
    cls : type, optional
        The estimator class to build, called with the saved parameters;
        default :class:`~skcrf.CRFTagger`. Parameters it does not know are
        refused.

    Returns
    -------
    estimator : cls
        A fitted estimator equal to the one saved.

    Raises
    ------
    ValueError
        If the file is not a valid skcrf model file (not a zip archive,
        truncated or corrupted, another format version, inconsistent or
        unexpected content); the message says what is wrong.
    OSError
        If the file cannot be opened (for instance FileNotFoundError).

    See Also
    --------
    save_model : Write a model file.
    """
    if cls is None:
        from ._tagger import CRFTagger as cls
    path = os.fsdecode(path)
    with open(path, "rb") as file:
        try:
            return _load(file, cls)
        except (
            ValueError,
            KeyError,
            TypeError,
            EOFError,
            OSError,
            OverflowError,
            RecursionError,
            MemoryError,
            NotImplementedError,
            RuntimeError,
            zipfile.BadZipFile,
            zlib.error,
            binascii.Error,
        ) as exc:
            message = str(exc) or type(exc).__name__
            if not isinstance(exc, ValueError) or isinstance(
                exc, (json.JSONDecodeError, UnicodeDecodeError)
            ):
                message = f"corrupted or invalid file ({type(exc).__name__}: {message})"
            raise ValueError(f"Cannot load skcrf model {path!r}: {message}") from exc
