"""CRFsuite's binary model files, read and written with Python and numpy.

:func:`read_crfsuite` turns a model file written by CRFsuite (python-crfsuite,
sklearn-crfsuite, the ``crfsuite`` command) into a
:class:`~skcrf._model.FittedState`; :func:`write_crfsuite` (and
:func:`crfsuite_bytes`) write a :class:`~skcrf._model.CRFModel` as such a
file, which CRFsuite's tagger opens and decodes exactly as skcrf does.
Nothing here calls CRFsuite: the format is implemented from its description
below, and the tests check it against python-crfsuite.

The format, as this module understands it
------------------------------------------
Every integer is an unsigned 32-bit little-endian number unless said
otherwise; weights are IEEE doubles, little-endian. Offsets in the file
header and in the reference chunks count from the start of the file; offsets
inside a CQDB chunk count from the start of that chunk.

File header (48 bytes)
    The magic ``b"lCRF"``; the file size; the model type ``b"FOMC"``; the
    version (100); the numbers of features, labels and attributes; the
    offsets of the features chunk, the labels CQDB, the attributes CQDB, the
    label references and the attribute references.

Features chunk
    ``b"FEAT"``, the chunk size (12 + 20 per feature), the number of
    features, then per feature its type (0: a state feature, attribute
    ``src`` and label ``dst``; 1: a transition feature, label ``src``
    followed by label ``dst``), ``src``, ``dst`` and its weight (20 bytes).
    CRFsuite writes the state features first, by attribute then label, then
    the transitions by (from, to) label; it drops zero-weight features and
    the attributes left without features.

Reference chunks (``b"LFRF"`` for labels, ``b"AFRF"`` for attributes)
    The chunk id, the chunk size, the number of entries ``n``, ``n`` offsets,
    then per label (or attribute) a list: a count and that many feature ids.
    The list of label ``i`` holds the transition features from ``i``; the
    list of attribute ``a`` its state features. Each chunk starts on a 4-byte
    boundary (zero padding before it). CRFsuite's label references have
    ``n_labels + 2`` entries, the last two unused (zero).

    CRFsuite's tagger scores through these lists, not through the features'
    ``src``: for each attribute of a token it adds ``weight * value`` of
    every feature in the attribute's list to the score of the feature's
    ``dst`` label, and for each label ``i`` it sets the transition score
    ``(i, dst)`` of every feature in the label's list to its weight.

CQDB chunks (the labels' strings, the attributes')
    CRFsuite's string database, string <-> id, with lookup3 hash tables:
    described, read and written in :mod:`skcrf._persist._cqdb`.

Conventions
-----------
- :func:`read_crfsuite` returns the labels in CRFsuite's label-id order and
  the attributes in attribute-id order; the state features in CSR order (by
  attribute, then label) and the transitions as flat indices ``i * L + j``
  in increasing order, each with the weight read (bit-exact; zero weights
  included: every feature of the file is a feature of the model);
  ``value_separator`` is ``":"``, CRFsuite's.
- :func:`write_crfsuite` writes every feature of the model (zero weights
  included, unlike CRFsuite) and every attribute (those without features
  too), in CRFsuite's order, so that a file written by CRFsuite and read
  here is written back byte for byte.
- Labels: CRFsuite's labels are strings. A label that is not a ``str`` is
  written as ``str(label)`` (or as the string given in ``labels=``). Then,
  so that the original labels come back, the file ends with one more chunk
  after the CRFsuite chunks, which CRFsuite does not read: ``b"SKLB"``, the
  chunk size, the number of labels, then an ASCII JSON document
  ``{"format": "skcrf-labels", "format_version": 1, "labels": [...]}``, each
  label in the tagged encoding of :mod:`skcrf.io` (``{"type": "int",
  "value": 3}``; types ``str``, ``int``, ``float``, ``bool``, ``none`` and
  numpy's bool, integer, float and ``str_`` scalars). No pickle, ever.
  Files whose labels are all strings have no such chunk.
- Reading checks everything before using it: magic strings, chunk ids and
  sizes, every offset and count against the file size (before anything of
  that size is allocated), ids in range, feature types, finite weights,
  strings (NUL-terminated, no inner NUL, UTF-8, distinct, records not
  overlapping), that every feature is referenced exactly once by the list of
  its ``src``, that no feature is repeated, that CRFsuite's hash lookups find
  every string's id, and that every hash table has exactly twice as many
  buckets as strings (so none is full, on which CRFsuite would probe forever
  for an unknown string, and python-crfsuite's record count is right). Files
  that pass can be given to CRFsuite safely and decode as it does. Any
  failure is a :class:`ValueError` that says what is wrong and where.
"""

import json
import os
import struct

import numpy as np

from .._model import CRFModel, FittedState, check_model_arrays
from .._utils._atomic import write_atomically
from .._utils._cqdb_index import CQDBIndex, LazyNames
from ._cqdb import (
    cqdb_bytes,
    encode_strings,
    exclusive_cumsum,
    first_repeat,
    is_increasing,
    read_cqdb,
)
from ._feature_scan import check_references, scan_features
from ._files import read_regular_file
from ._json import NUMPY_NAMES, decode_value, encode_value, no_duplicate_keys, reject_constant

__all__ = [
    "crfsuite_bytes",
    "header_fields",
    "read_crfsuite",
    "read_crfsuite_file",
    "write_crfsuite",
]

_MAGIC = b"lCRF"
_MODEL_TYPE = b"FOMC"
_VERSION = 100
_HEADER = struct.Struct("<4sI4sIIIIIIIII")  # 48 bytes
#: The file header's fields in order, named as CRFsuite's dump names them.
HEADER_FIELDS = (
    "magic",
    "size",
    "type",
    "version",
    "num_features",
    "num_labels",
    "num_attrs",
    "off_features",
    "off_labels",
    "off_attrs",
    "off_labelrefs",
    "off_attrrefs",
)
_CHUNK = struct.Struct("<4sII")  # chunk id, chunk size, number of items
_FEATURE_DTYPE = np.dtype([("type", "<u4"), ("src", "<u4"), ("dst", "<u4"), ("weight", "<f8")])
_STATE, _TRANSITION = 0, 1

_LABELS_MAGIC = b"SKLB"
_LABELS_FORMAT = "skcrf-labels"
_LABELS_VERSION = 1
_LABEL_TYPES = (str, int, float, bool, type(None))

_U32 = 0xFFFFFFFF
_MAX_FILE_SIZE = _U32  # offsets are 32-bit
#: The least bytes each label and each attribute takes in a valid file: its
#: CQDB record (id, string size, and at least the string's NUL), records
#: never overlapping. The header's counts are checked against the file size
#: with it before anything of their size is allocated.
_MIN_RECORD_BYTES = 9

# -- reading -----------------------------------------------------------------


def header_fields(data):
    """The file header of a CRFsuite model file, unchecked: ``{field: value}``.

    Parameters
    ----------
    data : bytes
        The file's content (its first 48 bytes at least).

    Returns
    -------
    dict
        The fields of :data:`HEADER_FIELDS` in file order: ``magic`` and
        ``type`` as bytes, the others as ints. Nothing is checked
        (:func:`read_crfsuite` checks them all).
    """
    return dict(zip(HEADER_FIELDS, _HEADER.unpack_from(data, 0)))


def _chunk_bounds(n_bytes, offset, size, what):
    if offset < _HEADER.size or offset > n_bytes or size > n_bytes - offset:
        raise ValueError(
            f"the {what} at offset {offset} with size {size} lies outside the file "
            f"({n_bytes} bytes; truncated or corrupted)."
        )


def _read_chunk_header(data, offset, magic, what):
    n_bytes = len(data)
    if offset < _HEADER.size or offset > n_bytes - _CHUNK.size:
        raise ValueError(
            f"the {what} chunk offset {offset} is out of range (the file has {n_bytes} "
            "bytes; truncated or corrupted)."
        )
    chunk_id, size, num = _CHUNK.unpack_from(data, offset)
    if chunk_id != magic:
        raise ValueError(
            f"the {what} chunk at offset {offset} has the id {chunk_id!r}, not {magic!r}."
        )
    if size < _CHUNK.size:
        raise ValueError(f"the {what} chunk at offset {offset} has an invalid size {size}.")
    _chunk_bounds(n_bytes, offset, size, f"{what} chunk")
    return size, num


def _features_chunk(data, offset, n_features):
    """The number of features of the features chunk (checked) and its end."""
    size, num = _read_chunk_header(data, offset, b"FEAT", "features")
    # CRFsuite leaves the header's count at 0; another count must match.
    if n_features not in (0, num):
        raise ValueError(
            f"the features chunk holds {num} features; the file header says {n_features}."
        )
    if size != _CHUNK.size + _FEATURE_DTYPE.itemsize * num:
        raise ValueError(
            f"the features chunk has size {size}; {num} features need "
            f"{_CHUNK.size + _FEATURE_DTYPE.itemsize * num} bytes."
        )
    return num, offset + size


def _read_features(data, offset, n_features):
    num, end = _features_chunk(data, offset, n_features)
    features = np.frombuffer(data, dtype=_FEATURE_DTYPE, count=num, offset=offset + _CHUNK.size)
    types = features["type"].astype(np.int64)
    bad = np.flatnonzero(types > _TRANSITION)
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"feature {k} has type {types[k]}; only 0 (state) and 1 (transition) exist."
        )
    weights = features["weight"].astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(weights))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"feature {k} has a non-finite weight {weights[k]!r}.")
    return (
        types,
        features["src"].astype(np.int64),
        features["dst"].astype(np.int64),
        weights,
        end,
    )


def _read_refs(data, offset, magic, what, n_owners, kind, types, src, n_kind):
    """Check the reference chunk at ``offset`` against the features.

    The lists of the ``n_owners`` labels (or attributes) must together name
    every feature of type ``kind`` exactly once, each in the list of its
    ``src``: then CRFsuite's tagger, which scores through the lists, sees the
    features of the features chunk, no more, no fewer.
    """
    size, num = _read_chunk_header(data, offset, magic, what)
    if num < n_owners:
        raise ValueError(
            f"the {what} chunk has {num} entries; the model has {n_owners} {what.split()[0]}s."
        )
    if num > (size - _CHUNK.size) // 4:
        raise ValueError(f"the {what} chunk's {num} offsets do not fit in its {size} bytes.")
    if offset % 4:
        raise ValueError(f"the {what} chunk at offset {offset} is not 4-byte aligned.")
    words = np.frombuffer(data, dtype="<u4", count=size // 4, offset=offset)
    lists = np.asarray(words[3 : 3 + n_owners], dtype=np.int64)  # absolute offsets
    first = offset + _CHUNK.size + 4 * num
    bad = np.flatnonzero(
        (lists < first) | (lists > offset + size - 4) | ((lists - offset) % 4 != 0)
    )
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"the {what} chunk: the list of {what.split()[0]} {k} has an invalid offset "
            f"{lists[k]} (the lists lie in [{first}, {offset + size}), 4-byte aligned)."
        )
    at = (lists - offset) // 4
    counts = words[at].astype(np.int64)
    total = int(counts.sum())
    if total != n_kind:
        raise ValueError(
            f"the {what} chunk names {total} features; the features chunk has {n_kind} "
            f"{'state' if kind == _STATE else 'transition'} features."
        )
    bad = np.flatnonzero(counts > len(words) - 1 - at)
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"the {what} chunk: the list of {what.split()[0]} {k} ({counts[k]} features) "
            "runs past the end of the chunk."
        )
    index = np.repeat(at + 1 - exclusive_cumsum(counts), counts) + np.arange(total)
    fids = words[index].astype(np.int64)
    owners = np.repeat(np.arange(n_owners, dtype=np.int64), counts)
    n_features = len(types)
    bad = np.flatnonzero(fids >= n_features)
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"the {what} chunk: {what.split()[0]} {owners[k]} refers to feature {fids[k]}, "
            f"beyond the {n_features} features."
        )
    bad = np.flatnonzero((types[fids] != kind) | (src[fids] != owners))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"the {what} chunk: {what.split()[0]} {owners[k]} refers to feature {fids[k]}, "
            f"whose type is {types[fids[k]]} and source {src[fids[k]]}."
        )
    if np.bincount(fids, minlength=n_features).max(initial=0) > 1:
        raise ValueError(f"the {what} chunk refers to a feature twice.")
    return offset + size


def _read_labels_chunk(data, offset, n_labels):
    """The original labels kept by :func:`write_crfsuite` (the SKLB chunk)."""
    n_bytes = len(data)
    if n_bytes - offset < _CHUNK.size:
        raise ValueError(
            f"{n_bytes - offset} unexpected bytes after the CRFsuite chunks, at offset {offset}."
        )
    chunk_id, size, num = _CHUNK.unpack_from(data, offset)
    if chunk_id != _LABELS_MAGIC:
        raise ValueError(
            f"unexpected bytes after the CRFsuite chunks, at offset {offset} (a chunk "
            f"{chunk_id!r}; only skcrf's {_LABELS_MAGIC!r} is known)."
        )
    if size != n_bytes - offset:
        raise ValueError(
            f"the labels chunk at offset {offset} has size {size}; {n_bytes - offset} bytes "
            "remain in the file."
        )
    if num != n_labels:
        raise ValueError(f"the labels chunk holds {num} labels; the model has {n_labels}.")
    try:
        document = json.loads(
            data[offset + _CHUNK.size : n_bytes].decode("ascii"),
            object_pairs_hook=no_duplicate_keys,
            parse_constant=reject_constant,
        )
    except (UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"the labels chunk is not ASCII JSON ({type(exc).__name__}).") from None
    except ValueError as exc:
        raise ValueError(f"the labels chunk is not valid JSON ({exc}).") from None
    if type(document) is not dict or set(document) != {"format", "format_version", "labels"}:
        raise ValueError(
            "the labels chunk must be a JSON object with the keys format, format_version "
            "and labels."
        )
    if document["format"] != _LABELS_FORMAT:
        raise ValueError(f"the labels chunk has the format {document['format']!r:.100}.")
    version = document["format_version"]
    if type(version) is not int or version < 1:
        raise ValueError(f"the labels chunk has an invalid format version {version!r:.100}.")
    if version > _LABELS_VERSION:
        raise ValueError(
            f"the labels chunk has format version {version}; this skcrf reads version "
            f"{_LABELS_VERSION}: upgrade skcrf to read it."
        )
    items = document["labels"]
    if type(items) is not list or len(items) != n_labels:
        raise ValueError(f"the labels chunk must list {n_labels} labels.")
    labels = []
    for k, item in enumerate(items):
        label = decode_value(item, f"label {k}")
        if not _storable_label(label):
            raise ValueError(f"label {k}: a {type(label).__name__} is not a supported label.")
        labels.append(label)
    if len(set(labels)) != len(labels):
        raise ValueError("the labels chunk holds the same label twice.")
    return labels


def _check_n_labels(n_labels):
    """Refuse a model without labels."""
    if n_labels == 0:
        raise ValueError("the model has no labels.")


def _check_counts(n_labels, n_attributes, n_bytes):
    """Refuse header counts that a file of ``n_bytes`` bytes cannot hold.

    Every label and attribute has a record of at least
    :data:`_MIN_RECORD_BYTES` in its CQDB chunk: a crafted count must not
    become a huge allocation. (Decoding then holds a dense labels x labels
    transition matrix, as CRFsuite does.)
    """
    _check_n_labels(n_labels)
    for count, what in ((n_labels, "labels"), (n_attributes, "attributes")):
        if count * _MIN_RECORD_BYTES > n_bytes:
            raise ValueError(
                f"the header gives {count} {what}, but a file of {n_bytes} bytes holds at "
                f"most {n_bytes // _MIN_RECORD_BYTES} (each needs a record of at least "
                f"{_MIN_RECORD_BYTES} bytes in the {what} CQDB chunk; corrupted or truncated)."
            )


def _storable_label(label):
    return type(label) in _LABEL_TYPES or type(label) in NUMPY_NAMES


def _sorted_by(items, keys):
    """``items`` and ``keys`` sorted by ``keys`` (CRFsuite's files already are)."""
    if is_increasing(keys):
        return items, keys
    order = np.argsort(keys, kind="stable")
    return items[order], keys[order]


def _check_duplicates(keys, what, name):
    """Reject repeated keys in a sorted int array; ``name(key)`` describes one."""
    if len(keys) > 1:
        same = np.flatnonzero(keys[1:] == keys[:-1])
        if same.size:
            raise ValueError(f"the {what} {name(int(keys[same[0]]))} appears twice.")


def _header(data):
    """The checked header fields of a model file's content, as a tuple."""
    n_bytes = len(data)
    if data[:4] != _MAGIC:
        raise ValueError("not a CRFsuite model file (it does not start with b'lCRF').")
    if n_bytes < _HEADER.size:
        raise ValueError(
            f"truncated: {n_bytes} bytes, fewer than the {_HEADER.size}-byte file header."
        )
    (
        _,
        size,
        model_type,
        version,
        n_features,
        n_labels,
        n_attributes,
        off_features,
        off_labels,
        off_attributes,
        off_label_refs,
        off_attribute_refs,
    ) = _HEADER.unpack_from(data, 0)
    if size != n_bytes:
        raise ValueError(
            f"the header gives the file size {size}, but there are {n_bytes} bytes "
            "(truncated or corrupted)."
        )
    if model_type != _MODEL_TYPE:
        raise ValueError(
            f"unknown model type {model_type!r}; only {_MODEL_TYPE!r} (first-order "
            "linear-chain CRF) is known."
        )
    if version != _VERSION:
        raise ValueError(f"unsupported model file version {version} (only {_VERSION}).")
    _check_counts(n_labels, n_attributes, n_bytes)
    return (
        n_features,
        n_labels,
        n_attributes,
        off_features,
        off_labels,
        off_attributes,
        off_label_refs,
        off_attribute_refs,
    )


def _classes(data, end, label_names):
    """The labels: the SKLB chunk's when the file goes on after ``end``."""
    labels = _read_labels_chunk(data, end, len(label_names)) if end < len(data) else label_names
    classes = np.empty(len(labels), dtype=object)
    classes[:] = labels
    return classes


# the most labels _labels_in_place reads (more: read_cqdb, vectorized)
_FEW_LABELS = 1024


def _labels_in_place(data, offset, n_labels):
    """The labels' strings and chunk end as :func:`read_cqdb` reads them, or None.

    Read through the compiled index (no numpy: read_cqdb's first call costs
    most of a millisecond); None if the chunk fails any of read_cqdb's
    checks, or holds more than ``_FEW_LABELS`` strings. read_cqdb's checks:
    the index's at open and in full (``CQDBIndex.check``: the header, the
    tables, every bucket, record, hash and backward link), each string
    valid UTF-8 (decoded strictly), and here the strings distinct, the
    tables' buckets no more than the chunk holds and no two records
    overlapping.
    """
    if offset < _HEADER.size or n_labels > _FEW_LABELS:
        return None
    try:
        index = CQDBIndex(data, offset, n_labels, "labels")
        index.check()
        names = [index.name(k) for k in range(n_labels)]
    except (ValueError, UnicodeDecodeError):
        return None
    (size,) = struct.unpack_from("<I", data, offset + 4)
    (backward,) = struct.unpack_from("<I", data, offset + 20)
    refs = struct.unpack_from("<512I", data, offset + 24)
    records = sorted(
        struct.unpack_from("<I", data, offset + backward + 4 * k)[0] for k in range(n_labels)
    )
    ends = [r + 8 + struct.unpack_from("<I", data, offset + r + 4)[0] for r in records]
    if (
        len(set(names)) != n_labels
        or 8 * sum(refs[1::2]) > size
        or any(later < end for later, end in zip(records[1:], ends))
    ):
        return None
    return names, offset + size


def _parse_in_order(data, fields, name):
    """The model of a file in CRFsuite's order, its attributes lazy; None if not.

    The fast route (:mod:`skcrf._persist._feature_scan`): one compiled pass
    builds the arrays and checks the reference chunks; the labels are read
    and checked as by :func:`_parse`; the attributes' CQDB chunk is not read
    but looked up in place (:class:`~skcrf._utils._cqdb_index.LazyNames`):
    its structure and its tables' shape are checked now (one compiled pass
    over the tables and the backward array), every bucket and the record it
    points to by the first lookup (a ValueError naming the file then), the
    strings' UTF-8 and distinctness when the names are first listed. None
    when the file is in another order or anything fails a check: then
    :func:`_parse` reads it (or names what is wrong).
    """
    (
        n_features,
        n_labels,
        n_attributes,
        off_features,
        off_labels,
        off_attributes,
        off_label_refs,
        off_attribute_refs,
    ) = fields
    num, features_end = _features_chunk(data, off_features, n_features)
    first = off_features + _CHUNK.size
    scanned = scan_features(data, first, num, n_labels, n_attributes)
    if scanned is None:
        return None
    arrays, first_state = scanned
    n_states = len(arrays["state_labels"])
    label_refs_end = check_references(
        data, off_label_refs, b"LFRF", n_labels, _TRANSITION, first, num, num - n_states
    )
    attribute_refs_end = check_references(
        data,
        off_attribute_refs,
        b"AFRF",
        n_attributes,
        _STATE,
        first,
        num,
        n_states,
        arrays["state_ptr"],
        first_state,
    )
    if label_refs_end < 0 or attribute_refs_end < 0 or off_attributes < _HEADER.size:
        return None
    try:
        index = CQDBIndex(data, off_attributes, n_attributes, "attributes")
    except ValueError:
        return None
    index.source = f"Cannot read CRFsuite model {name}"  # (a lookup's error names it)
    labels = _labels_in_place(data, off_labels, n_labels)
    if labels is None:  # (read_cqdb reads them, or names what is wrong)
        labels = read_cqdb(data, off_labels, n_labels, "labels", _HEADER.size)
    label_names, labels_end = labels
    attributes_end = off_attributes + struct.unpack_from("<I", data, off_attributes + 4)[0]
    end = max(features_end, labels_end, attributes_end, label_refs_end, attribute_refs_end)

    def read_all():
        try:
            return read_cqdb(data, off_attributes, n_attributes, "attributes", _HEADER.size)[0]
        except ValueError as exc:
            raise ValueError(f"Cannot read CRFsuite model {name}: {exc}") from None

    return CRFModel(
        classes=_classes(data, end, label_names),
        attributes=LazyNames(index, read_all),
        value_separator=":",
        **arrays,
    )


def _parse(data, fields):
    """The FittedState of the model file content ``data`` (bytes); see read_crfsuite."""
    (
        n_features,
        n_labels,
        n_attributes,
        off_features,
        off_labels,
        off_attributes,
        off_label_refs,
        off_attribute_refs,
    ) = fields
    types, src, dst, weights, end = _read_features(data, off_features, n_features)
    chunk_ends = [end]
    label_names, end = read_cqdb(data, off_labels, n_labels, "labels", _HEADER.size)
    chunk_ends.append(end)
    attributes, end = read_cqdb(data, off_attributes, n_attributes, "attributes", _HEADER.size)
    chunk_ends.append(end)

    is_state = types == _STATE
    state = np.flatnonzero(is_state)
    transition = np.flatnonzero(~is_state)
    for ids, what, n_sources in (
        (state, "state", n_attributes),
        (transition, "transition", n_labels),
    ):
        bad = np.flatnonzero((src[ids] >= n_sources) | (dst[ids] >= n_labels))
        if bad.size:
            k = int(ids[bad[0]])
            raise ValueError(
                f"{what} feature {k} goes from {src[k]} to {dst[k]}; the model has "
                f"{n_attributes} attributes and {n_labels} labels."
            )
    chunk_ends.append(
        _read_refs(
            data,
            off_label_refs,
            b"LFRF",
            "label references",
            n_labels,
            _TRANSITION,
            types,
            src,
            len(transition),
        )
    )
    chunk_ends.append(
        _read_refs(
            data,
            off_attribute_refs,
            b"AFRF",
            "attribute references",
            n_attributes,
            _STATE,
            types,
            src,
            len(state),
        )
    )

    # State features in CSR order, transitions by flat index; no repeats.
    state, state_key = _sorted_by(state, src[state] * n_labels + dst[state])
    _check_duplicates(
        state_key,
        "state feature",
        lambda key: (
            f"(attribute {attributes[key // n_labels]!r:.100}, "
            f"label {label_names[key % n_labels]!r:.100})"
        ),
    )
    transition, flat = _sorted_by(transition, src[transition] * n_labels + dst[transition])
    _check_duplicates(
        flat,
        "transition feature",
        lambda key: (
            f"({label_names[key // n_labels]!r:.100} -> {label_names[key % n_labels]!r:.100})"
        ),
    )
    state_ptr = np.zeros(n_attributes + 1, dtype=np.int64)
    np.cumsum(np.bincount(src[state], minlength=n_attributes), out=state_ptr[1:])

    classes = _classes(data, max(chunk_ends), label_names)
    arrays = {
        "state_ptr": state_ptr,
        "state_labels": dst[state].astype(np.int32),
        "state_weights": np.ascontiguousarray(weights[state]),
        "transition_index": np.ascontiguousarray(flat),
        "transition_weights": np.ascontiguousarray(weights[transition]),
    }
    check_model_arrays(n_attributes, n_labels, arrays)  # cannot fail: a last guard
    return CRFModel(classes=classes, attributes=attributes, value_separator=":", **arrays)


def read_crfsuite_file(path):
    """The content (bytes) of the CRFsuite model file ``path``, unchecked.

    A regular file only (a device or a FIFO would never end: refused before
    anything is read), of at most the 4 GiB that CRFsuite's 32-bit offsets
    address; ValueError otherwise, OSError if it cannot be read.
    """
    return read_regular_file(path, "CRFsuite model", _MAX_FILE_SIZE)


def read_crfsuite(source, *, lazy_attributes=False):
    """Read a CRFsuite model file.

    Parameters
    ----------
    source : str, os.PathLike or bytes
        The model file, or its content (``bytes``, ``bytearray`` or
        ``memoryview``).

    Returns
    -------
    state : FittedState
        ``params`` is empty (the caller fills it), ``n_iter`` 0, ``status``
        and ``training_log`` None. ``state.model`` holds the labels in
        CRFsuite's label-id order (the original labels when the file was
        written by :func:`write_crfsuite` with labels that are not strings),
        the attributes in attribute-id order and every feature of the file
        (zero weights included), and decodes exactly as CRFsuite does.

    Raises
    ------
    ValueError
        If the content is not a valid CRFsuite model file (not one at all,
        truncated, corrupted, inconsistent), or the path is not a regular
        file (a device, a FIFO: checked before anything is read) or is larger
        than CRFsuite's 32-bit offsets allow; the message says what is wrong
        and where.
    OSError
        If the file cannot be read (for instance FileNotFoundError).

    Other Parameters
    ----------------
    lazy_attributes : bool, default=False
        Serve the attributes from the file's own hash tables
        (``state.model.attributes`` a
        :class:`~skcrf._utils._cqdb_index.LazyNames`) when the file is in
        CRFsuite's order: opening then costs no Python object per
        attribute. The shape of the attributes' hash tables (each half
        empty, its buckets' hashes its own, their offsets inside the
        records) and the backward links (distinct) are checked before this
        returns (a ValueError here, as without it); every bucket and the
        record it points to (its key's hash, its id, its backward link,
        CRFsuite's probe reaching it) are verified by the first lookup,
        once, in one compiled pass (a ValueError of that lookup and every
        later one, naming the file: never an id or "unseen" from a damaged
        table); the strings' UTF-8 and distinctness when the names are
        first listed (a ValueError then). Everything else is checked before
        this returns, as without it.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        name = "(bytes)"
    else:
        path = os.fsdecode(source)
        data = read_crfsuite_file(path)
        name = repr(path)
    try:
        fields = _header(data)
        model = _parse_in_order(data, fields, name) if lazy_attributes else None
        if model is None:
            model = _parse(data, fields)
        return FittedState(params={}, model=model, n_iter=0, status=None, training_log=None)
    except ValueError as exc:
        raise ValueError(f"Cannot read CRFsuite model {name}: {exc}") from None
    except (IndexError, KeyError, TypeError, OverflowError, struct.error, RecursionError) as exc:
        # A safety net: the checks above should leave nothing for it.
        raise ValueError(
            f"Cannot read CRFsuite model {name}: corrupted or invalid file "
            f"({type(exc).__name__}: {exc})"
        ) from exc


# -- writing -----------------------------------------------------------------


def _refs_bytes(magic, chunk_offset, n_entries, counts, fids):
    """A reference chunk at ``chunk_offset``: offsets, then per owner its list."""
    n_owners = len(counts)
    n_words = 3 + n_entries + n_owners + len(fids)
    words = np.zeros(n_words, dtype="<u4")
    words[0] = int.from_bytes(magic, "little")
    words[1] = 4 * n_words
    words[2] = n_entries
    at = 3 + n_entries + exclusive_cumsum(counts + 1)  # word index of each owner's count
    words[3 : 3 + n_owners] = chunk_offset + 4 * at
    words[at] = counts
    is_fid = np.ones(n_words, dtype=bool)
    is_fid[: 3 + n_entries] = False
    is_fid[at] = False
    words[is_fid] = fids
    return words.tobytes()


def _label_strings(classes, labels):
    if labels is None:
        return [label if type(label) is str else str(label) for label in classes]
    labels = list(labels)
    if len(labels) != len(classes):
        raise ValueError(f"labels has {len(labels)} strings; the model has {len(classes)} labels.")
    for k, label in enumerate(labels):
        if type(label) is not str:
            raise TypeError(f"labels[{k}] is a {type(label).__name__}, not a str.")
    return labels


def _labels_chunk(classes):
    if len(set(classes)) != len(classes):
        i, k = first_repeat(classes)
        raise ValueError(
            f"labels {i} and {k} ({classes[i]!r:.50} and {classes[k]!r:.50}) are equal: "
            "they cannot be told apart when read back."
        )
    items = []
    for k, label in enumerate(classes):
        if not _storable_label(label):
            raise TypeError(
                f"label {k} {label!r:.100} is a {type(label).__module__}."
                f"{type(label).__qualname__}; a CRFsuite model file can map back only "
                "str, int, float, bool and None labels (and numpy bool, integer, float "
                "and str_ scalars)."
            )
        items.append(encode_value(label, f"label {k}"))
    document = {"format": _LABELS_FORMAT, "format_version": _LABELS_VERSION, "labels": items}
    text = json.dumps(document, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    payload = text.encode("ascii")
    return _CHUNK.pack(_LABELS_MAGIC, _CHUNK.size + len(payload), len(classes)) + payload


def crfsuite_bytes(model, *, labels=None):
    """The content of the CRFsuite model file of ``model`` (see write_crfsuite).

    Parameters
    ----------
    model : CRFModel
    labels : sequence of str, optional
        The strings CRFsuite gives the labels, in label order. Default: each
        label if it is a ``str``, else ``str(label)``.

    Returns
    -------
    bytes
    """
    classes = list(model.classes)
    n_labels = len(classes)
    if n_labels:  # no labels: the file CRFsuite's trainer writes without data
        _check_n_labels(n_labels)
    n_attributes = len(model.attributes)
    arrays = {
        "state_ptr": np.asarray(model.state_ptr, dtype=np.int64),
        "state_labels": np.asarray(model.state_labels, dtype=np.int64),
        "state_weights": np.asarray(model.state_weights, dtype=np.float64),
        "transition_index": np.asarray(model.transition_index, dtype=np.int64),
        "transition_weights": np.asarray(model.transition_weights, dtype=np.float64),
    }
    if len(arrays["state_labels"]) != len(arrays["state_weights"]) or len(
        arrays["transition_index"]
    ) != len(arrays["transition_weights"]):
        raise ValueError("the model's feature and weight arrays have different lengths.")
    check_model_arrays(n_attributes, n_labels, arrays)

    strings = _label_strings(classes, labels)
    label_keys = encode_strings(strings, "label")
    attribute_keys = encode_strings(model.attributes, "attribute")
    # The originals are kept iff some label is not exactly its string.
    keep_labels = any(type(c) is not str or c != s for c, s in zip(classes, strings))

    n_states = len(arrays["state_labels"])
    index = arrays["transition_index"]
    n_features = n_states + len(index)
    features = np.zeros(n_features, dtype=_FEATURE_DTYPE)
    features["type"][n_states:] = _TRANSITION
    state_counts = np.diff(arrays["state_ptr"])
    features["src"][:n_states] = np.repeat(np.arange(n_attributes), state_counts)
    features["dst"][:n_states] = arrays["state_labels"]
    features["src"][n_states:] = index // n_labels
    features["dst"][n_states:] = index % n_labels
    features["weight"][:n_states] = arrays["state_weights"]
    features["weight"][n_states:] = arrays["transition_weights"]

    parts = [b"\0" * _HEADER.size]
    offset = _HEADER.size

    def put(chunk):
        nonlocal offset
        start = offset
        parts.append(chunk)
        offset += len(chunk)
        return start

    def align():
        put(b"\0" * (-offset % 4))

    off_features = put(
        _CHUNK.pack(b"FEAT", _CHUNK.size + _FEATURE_DTYPE.itemsize * n_features, n_features)
        + features.tobytes()
    )
    off_labels = put(cqdb_bytes(*label_keys))
    off_attributes = put(cqdb_bytes(*attribute_keys))
    align()
    transition_counts = np.bincount(index // n_labels, minlength=n_labels)
    off_label_refs = put(
        _refs_bytes(
            b"LFRF",
            offset,
            n_labels + 2,
            transition_counts,
            np.arange(n_states, n_features),
        )
    )
    align()
    off_attribute_refs = put(
        _refs_bytes(b"AFRF", offset, n_attributes, state_counts, np.arange(n_states))
    )
    if keep_labels:
        put(_labels_chunk(classes))
    if offset > _MAX_FILE_SIZE:
        raise ValueError(
            f"the model needs a {offset}-byte file; CRFsuite's 32-bit offsets allow "
            f"{_MAX_FILE_SIZE} bytes at most."
        )
    parts[0] = _HEADER.pack(
        _MAGIC,
        offset,
        _MODEL_TYPE,
        _VERSION,
        0,
        n_labels,
        n_attributes,
        off_features,
        off_labels,
        off_attributes,
        off_label_refs,
        off_attribute_refs,
    )
    return b"".join(parts)


def write_crfsuite(model, path, *, labels=None):
    """Write ``model`` as a CRFsuite model file (atomically).

    ``pycrfsuite.Tagger().open(path)`` loads the file and predicts exactly
    what the model predicts; :func:`read_crfsuite` reads the model back
    (the same features, bit-exact weights, the original labels).

    Parameters
    ----------
    model : CRFModel
    path : str or os.PathLike
        The file to write; it is replaced atomically (a temporary file in the
        same directory, renamed), with the permissions a new file gets under
        the process umask.
    labels : sequence of str, optional
        The strings CRFsuite gives the labels, in label order. Default: each
        label if it is a ``str``, else ``str(label)``. When some label is
        not exactly its string, the original labels are kept in an extra
        chunk that CRFsuite ignores (see the module docstring).

    Raises
    ------
    ValueError
        If two labels (or two attributes) have the same string, a string
        holds a NUL character or is not encodable, the model is inconsistent,
        or the file would exceed CRFsuite's 4 GiB limit.
    TypeError
        If a label cannot be kept (see the module docstring) or ``labels``
        holds something other than strings.
    """
    content = crfsuite_bytes(model, labels=labels)
    write_atomically(path, lambda file: file.write(content))
