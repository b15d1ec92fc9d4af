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

CQDB chunk (constant quark database: string <-> id)
    A 24-byte header: ``b"CQDB"``, the chunk size, a flag (0), the byte-order
    mark 0x62445371, the size of the backward array and its offset; then 256
    table references (offset, number of buckets; offset 0 for an empty
    table); then the records, in id order from offset 2072: a signed 32-bit
    id, the key size and the key, a UTF-8 string with its terminating NUL;
    then the 256 hash tables, then the backward array (the record offset of
    every id, 0 to ``n - 1``). The header's backward-array size is ``n`` in
    the files of python-crfsuite 0.9 (older CRFsuite sources store the
    capacity they had allocated, which may exceed ``n``; only ``n`` entries
    are written either way, and a lookup by id checks the id against it).

    A key's hash is Bob Jenkins' lookup3 ``hashlittle`` of its bytes with the
    NUL, seed 0. The key goes to table ``hash % 256``; a table of ``m`` keys
    has ``2 * m`` buckets of (hash, record offset), empty buckets being (0,
    0), filled in id order by linear probing from bucket ``(hash >> 8) %
    (2 * m)``. A lookup probes from that bucket until it meets a bucket with
    its hash and its string (found) or an empty bucket (not found).

    python-crfsuite's reader trusts these numbers: it copies every table's
    buckets, counts the records as half the buckets of all 256 references
    and copies that many backward links, none of it checked against the
    chunk; a corrupted count crashes it. Hence the strict checks here.

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

from .._model import CRFModel, FittedState
from .._utils._atomic import write_atomically
from ._json import NUMPY_NAMES, decode_value, encode_value, no_duplicate_keys, reject_constant
from ._npz import check_model_arrays

__all__ = ["read_crfsuite", "write_crfsuite", "crfsuite_bytes"]

_MAGIC = b"lCRF"
_MODEL_TYPE = b"FOMC"
_VERSION = 100
_HEADER = struct.Struct("<4sI4sIIIIIIIII")  # 48 bytes
_CHUNK = struct.Struct("<4sII")  # chunk id, chunk size, number of items
_FEATURE_DTYPE = np.dtype([("type", "<u4"), ("src", "<u4"), ("dst", "<u4"), ("weight", "<f8")])
_STATE, _TRANSITION = 0, 1

_CQDB_MAGIC = b"CQDB"
_CQDB_HEADER = struct.Struct("<4sIIIII")  # 24 bytes
_CQDB_BYTEORDER = 0x62445371
_CQDB_TABLES = 256
_CQDB_DATA = _CQDB_HEADER.size + 8 * _CQDB_TABLES  # the first record: 2072

_LABELS_MAGIC = b"SKLB"
_LABELS_FORMAT = "skcrf-labels"
_LABELS_VERSION = 1
_LABEL_TYPES = (str, int, float, bool, type(None))

_U32 = 0xFFFFFFFF
_MAX_FILE_SIZE = _U32  # offsets are 32-bit
#: Labels of a model that can be read: decoding needs a dense L x L matrix
#: of transitions (128 MB at this limit).
MAX_LABELS = 4096

# Hash keys with numpy while more than this many keys are still being hashed;
# the few long keys left are finished in Python (per-call overhead wins).
_VECTOR_MIN_KEYS = 8


# -- lookup3 hashlittle ------------------------------------------------------


def _rot_py(x, k):
    return ((x << k) | (x >> (32 - k))) & _U32


def _mix_py(a, b, c):
    a = (a - c) & _U32
    a ^= _rot_py(c, 4)
    c = (c + b) & _U32  # noqa: E702
    b = (b - a) & _U32
    b ^= _rot_py(a, 6)
    a = (a + c) & _U32  # noqa: E702
    c = (c - b) & _U32
    c ^= _rot_py(b, 8)
    b = (b + a) & _U32  # noqa: E702
    a = (a - c) & _U32
    a ^= _rot_py(c, 16)
    c = (c + b) & _U32  # noqa: E702
    b = (b - a) & _U32
    b ^= _rot_py(a, 19)
    a = (a + c) & _U32  # noqa: E702
    c = (c - b) & _U32
    c ^= _rot_py(b, 4)
    b = (b + a) & _U32  # noqa: E702
    return a, b, c


def _final_py(a, b, c):
    c ^= b
    c = (c - _rot_py(b, 14)) & _U32  # noqa: E702
    a ^= c
    a = (a - _rot_py(c, 11)) & _U32  # noqa: E702
    b ^= a
    b = (b - _rot_py(a, 25)) & _U32  # noqa: E702
    c ^= b
    c = (c - _rot_py(b, 16)) & _U32  # noqa: E702
    a ^= c
    a = (a - _rot_py(c, 4)) & _U32  # noqa: E702
    b ^= a
    b = (b - _rot_py(a, 14)) & _U32  # noqa: E702
    c ^= b
    c = (c - _rot_py(b, 24)) & _U32  # noqa: E702
    return a, b, c


def _finish_py(a, b, c, words):
    """Run the remaining 12-byte blocks ``words`` (3 ints each) through the hash."""
    last = len(words) - 3
    for i in range(0, last, 3):
        a, b, c = _mix_py(
            (a + words[i]) & _U32, (b + words[i + 1]) & _U32, (c + words[i + 2]) & _U32
        )
    a, b, c = _final_py(
        (a + words[last]) & _U32, (b + words[last + 1]) & _U32, (c + words[last + 2]) & _U32
    )
    return c


def hashlittle(key, initval=0):
    """Bob Jenkins' lookup3 ``hashlittle`` of the bytes ``key`` (a 32-bit int).

    The key is read as little-endian 32-bit words, 12 bytes (3 words) per
    round; the last, partial block is padded with zero bytes (this is what
    the C code's masks amount to). CQDB hashes a string's UTF-8 bytes *with*
    the terminating NUL, seed 0.
    """
    key = bytes(key)
    n = len(key)
    a = b = c = (0xDEADBEEF + n + initval) & _U32
    if n == 0:
        return c
    padded = key.ljust(-(-n // 12) * 12, b"\0")
    words = list(struct.unpack(f"<{len(padded) // 4}I", padded))
    return _finish_py(a, b, c, words)


def _rot(x, k):
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


def _mix(a, b, c):
    """lookup3's mix on uint32 arrays, in place (they may be views)."""
    a -= c
    a ^= _rot(c, 4)
    c += b  # noqa: E702
    b -= a
    b ^= _rot(a, 6)
    a += c  # noqa: E702
    c -= b
    c ^= _rot(b, 8)
    b += a  # noqa: E702
    a -= c
    a ^= _rot(c, 16)
    c += b  # noqa: E702
    b -= a
    b ^= _rot(a, 19)
    a += c  # noqa: E702
    c -= b
    c ^= _rot(b, 4)
    b += a  # noqa: E702


def _final(a, b, c):
    """lookup3's final on uint32 arrays, in place."""
    c ^= b
    c -= _rot(b, 14)  # noqa: E702
    a ^= c
    a -= _rot(c, 11)  # noqa: E702
    b ^= a
    b -= _rot(a, 25)  # noqa: E702
    c ^= b
    c -= _rot(b, 16)  # noqa: E702
    a ^= c
    a -= _rot(c, 4)  # noqa: E702
    b ^= a
    b -= _rot(a, 14)  # noqa: E702
    c ^= b
    c -= _rot(b, 24)  # noqa: E702


def _exclusive_cumsum(counts):
    out = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def _hash_keys(keys, key_sizes):
    """CQDB hashes of many keys, a uint32 array.

    ``keys`` is a uint8 array of the keys one after the other, each with its
    NUL; ``key_sizes`` (int64, each >= 1) their sizes, NUL included.
    Vectorized over keys: every key is laid out padded with zeros to a
    multiple of 12 bytes, keys are sorted by their number of 12-byte blocks,
    and block ``j`` of every key that has one is processed at once (the keys
    whose last block it is get ``final``, the others ``mix``). Cost: one pass
    over the bytes plus ~40 numpy calls per block of the longest keys; the
    few longest keys are finished in Python.
    """
    n = len(key_sizes)
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out
    blocks = (key_sizes + 11) // 12
    first_row = _exclusive_cumsum(blocks)
    padded = np.zeros(12 * int(blocks.sum()), dtype=np.uint8)
    shift = 12 * first_row - _exclusive_cumsum(key_sizes)
    padded[np.repeat(shift, key_sizes) + np.arange(len(keys))] = keys
    words = padded.view("<u4").reshape(-1, 3)

    order = np.argsort(-blocks, kind="stable")
    blocks_sorted = blocks[order]
    rows = first_row[order]
    ascending = blocks_sorted[::-1]
    init = ((key_sizes[order] + 0xDEADBEEF) & _U32).astype(np.uint32)
    a, b, c = init.copy(), init.copy(), init.copy()

    m = n
    j = 0
    while m:
        if m <= _VECTOR_MIN_KEYS and blocks_sorted[0] - j > 1:
            # A few long keys: finish them one by one in Python.
            for i in range(m):
                rest = words[rows[i] + j : rows[i] + blocks_sorted[i]].ravel().tolist()
                c[i] = _finish_py(int(a[i]), int(b[i]), int(c[i]), rest)
            break
        block = words[rows[:m] + j]
        a[:m] += block[:, 0]
        b[:m] += block[:, 1]
        c[:m] += block[:, 2]
        m_next = n - int(np.searchsorted(ascending, j + 1, side="right"))
        if m_next:
            _mix(a[:m_next], b[:m_next], c[:m_next])
        if m_next < m:
            _final(a[m_next:m], b[m_next:m], c[m_next:m])
        m = m_next
        j += 1
    out[order] = c
    return out


# -- reading -----------------------------------------------------------------


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


def _read_features(data, offset, n_features):
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
        offset + size,
    )


def _first_duplicate(strings, what):
    seen = {}
    for k, string in enumerate(strings):
        if string in seen:
            raise ValueError(
                f"{what}: ids {seen[string]} and {k} have the same string {string!r:.100}."
            )
        seen[string] = k


def _decode_keys(keys, key_sizes, where):
    """The strings of the NUL-terminated ``keys`` (uint8 array), checked.

    All keys are decoded in one call and split at the NULs: a key is valid
    UTF-8 with its NUL if and only if the joined bytes are (a NUL cannot be
    part of a multi-byte sequence), and each key holds exactly one NUL, its
    last byte (checked), if and only if there are as many NULs as keys.
    """
    n = len(key_sizes)
    ends = np.cumsum(key_sizes)  # one past each key's NUL
    nuls = np.flatnonzero(keys == 0)
    if len(nuls) != n:
        # Some key has a NUL before its end: CRFsuite would see it cut short.
        owner = np.searchsorted(ends, nuls, side="right")
        k = int(owner[np.flatnonzero(np.diff(owner) == 0)[0]])
        raise ValueError(f"{where}: the string of id {k} holds a NUL character.")
    try:
        text = keys.tobytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        k = int(np.searchsorted(ends, exc.start, side="right"))
        raise ValueError(
            f"{where}: the string of id {k} is not valid UTF-8 ({exc.reason})."
        ) from None
    strings = text.split("\0")
    strings.pop()  # after the last NUL
    if len(set(strings)) != n:
        _first_duplicate(strings, where)
    return strings


def _read_cqdb(data, offset, n_ids, what):
    """The ``n_ids`` strings of the CQDB chunk at ``offset``, by id; all checked."""
    n_bytes = len(data)
    if offset < _HEADER.size or offset > n_bytes - _CQDB_DATA:
        raise ValueError(
            f"the {what} CQDB chunk offset {offset} is out of range (the file has "
            f"{n_bytes} bytes; truncated or corrupted)."
        )
    magic, size, _flag, byteorder, bwd_size, bwd_offset = _CQDB_HEADER.unpack_from(data, offset)
    where = f"the {what} CQDB chunk at offset {offset}"
    if magic != _CQDB_MAGIC:
        raise ValueError(f"{where} has the id {magic!r}, not {_CQDB_MAGIC!r}.")
    if byteorder != _CQDB_BYTEORDER:
        raise ValueError(
            f"{where} has the byte-order mark {byteorder:#x}, not {_CQDB_BYTEORDER:#x} "
            "(corrupted, or written on a big-endian machine)."
        )
    if size < _CQDB_DATA:
        raise ValueError(f"{where} has an invalid size {size} (at least {_CQDB_DATA}).")
    _chunk_bounds(n_bytes, offset, size, f"{what} CQDB chunk")
    chunk = np.frombuffer(data, dtype=np.uint8, count=size, offset=offset)

    # The backward array: the record offset of every id.
    if n_ids:
        if bwd_offset == 0:
            raise ValueError(f"{where} has no backward array (id -> string).")
        if n_ids > bwd_size:
            raise ValueError(
                f"{where}: its backward array holds {bwd_size} ids; {n_ids} are needed."
            )
        if bwd_offset < _CQDB_DATA or bwd_offset > size or 4 * n_ids > size - bwd_offset:
            raise ValueError(
                f"{where}: the backward array at offset {bwd_offset} ({n_ids} entries) "
                f"runs outside the chunk ({size} bytes)."
            )
        records = np.frombuffer(data, dtype="<u4", count=n_ids, offset=offset + bwd_offset)
        records = records.astype(np.int64)
    else:
        records = np.zeros(0, dtype=np.int64)
    bad = np.flatnonzero((records < _CQDB_DATA) | (records > size - 8))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"{where}: the record of id {k} has an invalid offset {records[k]}.")
    # Record header: the id (int32) and the key size (with its NUL), unaligned.
    head = chunk[records[:, None] + np.arange(8)].copy().view("<u4").reshape(n_ids, 2)
    stored = head[:, 0].astype(np.int64)
    stored[stored >= 2**31] -= 2**32  # a signed id
    bad = np.flatnonzero(stored != np.arange(n_ids))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"{where}: the record of id {k} holds the id {stored[k]}.")
    key_sizes = head[:, 1].astype(np.int64)
    bad = np.flatnonzero((key_sizes < 1) | (key_sizes > size - 8 - records))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"{where}: the string of id {k} (size {key_sizes[k]}) runs outside the chunk."
        )
    # Records must not overlap: then the keys add up to at most the chunk size.
    by_offset = np.arange(n_ids) if _is_increasing(records) else np.argsort(records)
    ends = records + 8 + key_sizes
    overlap = np.flatnonzero(records[by_offset[1:]] < ends[by_offset[:-1]])
    if overlap.size:
        i, k = by_offset[overlap[0]], by_offset[overlap[0] + 1]
        raise ValueError(f"{where}: the records of ids {i} and {k} overlap.")
    bad = np.flatnonzero(chunk[ends - 1] != 0)
    if bad.size:
        raise ValueError(f"{where}: the string of id {int(bad[0])} is not NUL-terminated.")
    shift = records + 8 - _exclusive_cumsum(key_sizes)
    keys = chunk[np.repeat(shift, key_sizes) + np.arange(int(key_sizes.sum()))]
    strings = _decode_keys(keys, key_sizes, where)
    _check_hash_tables(data, offset, size, records, _hash_keys(keys, key_sizes), where)
    return strings, offset + size


def _check_hash_tables(data, offset, size, records, hashes, where):
    """Check that CRFsuite's lookup of every string finds its id.

    Requires the buckets in use to be exactly one per record (so that, the
    strings being distinct, the only bucket that can answer a lookup is the
    string's own), each in the table of its hash, with the right hash, and
    reachable by linear probing from its start bucket without crossing an
    empty bucket; and every table to have twice as many buckets as strings
    (as CRFsuite writes them; python-crfsuite's reader trusts those counts).
    """
    n_ids = len(records)
    refs = np.frombuffer(data, dtype="<u4", count=2 * _CQDB_TABLES, offset=offset + 24)
    refs = refs.astype(np.int64).reshape(_CQDB_TABLES, 2)
    # CRFsuite counts the records as half the buckets of all 256 references
    # (an empty table's too) and reads that many backward links: the
    # references must be exact, not merely harmless.
    odd = np.flatnonzero((refs[:, 0] == 0) != (refs[:, 1] == 0))
    if odd.size:
        t = int(odd[0])
        raise ValueError(
            f"{where}: hash table {t} has the offset {refs[t, 0]} and {refs[t, 1]} "
            "buckets (an empty table has neither)."
        )
    used = np.flatnonzero(refs[:, 0] != 0)
    sizes = refs[used, 1]
    if int(sizes.sum()) * 8 > size:
        raise ValueError(
            f"{where}: its hash tables have {int(sizes.sum())} buckets in all, more than "
            f"the chunk ({size} bytes) can hold."
        )
    tables = []
    for t, table_offset, m in zip(used.tolist(), refs[used, 0].tolist(), sizes.tolist()):
        if table_offset < _CQDB_DATA or table_offset > size or 8 * m > size - table_offset:
            raise ValueError(
                f"{where}: hash table {t} at offset {table_offset} ({m} buckets) runs "
                "outside the chunk."
            )
        tables.append(np.frombuffer(data, dtype="<u4", count=2 * m, offset=offset + table_offset))
    # All buckets in one array: table t's are base[t] + [0, m_t).
    buckets = (
        np.concatenate(tables).astype(np.int64).reshape(-1, 2)
        if tables
        else (np.zeros((0, 2), dtype=np.int64))
    )
    base = _exclusive_cumsum(sizes)
    table_of = np.repeat(used, sizes)
    empty = buckets[:, 1] == 0
    empty_before = np.zeros(len(buckets) + 1, dtype=np.int64)
    np.cumsum(empty, out=empty_before[1:])
    # Twice as many buckets as strings, as CRFsuite writes them: then CRFsuite's
    # count of records is right, and every table has an empty bucket, where
    # the lookup of an unknown string stops (in a full table it never would).
    n_empty = empty_before[base + sizes] - empty_before[base]
    wrong = np.flatnonzero(2 * n_empty != sizes)
    if wrong.size:
        i = int(wrong[0])
        raise ValueError(
            f"{where}: hash table {used[i]} has {sizes[i]} buckets for "
            f"{sizes[i] - n_empty[i]} strings ({2 * (sizes[i] - n_empty[i])} expected; "
            "a full table would make CRFsuite search forever)."
        )
    filled = np.flatnonzero(~empty)
    if len(filled) != n_ids:
        raise ValueError(f"{where}: its hash tables hold {len(filled)} strings; {n_ids} expected.")
    if n_ids == 0:
        return
    # The id of every filled bucket's record (record offsets are distinct).
    by_offset = np.arange(n_ids) if _is_increasing(records) else np.argsort(records)
    sorted_records = records[by_offset]
    targets = buckets[filled, 1]
    pos = np.minimum(np.searchsorted(sorted_records, targets), n_ids - 1)
    miss = np.flatnonzero(sorted_records[pos] != targets)
    if miss.size:
        g = filled[miss[0]]
        raise ValueError(
            f"{where}: a bucket of hash table {table_of[g]} points to offset "
            f"{buckets[g, 1]}, which is no record."
        )
    ids = by_offset[pos]
    if np.bincount(ids, minlength=n_ids).max() > 1:
        k = int(np.flatnonzero(np.bincount(ids, minlength=n_ids) > 1)[0])
        raise ValueError(f"{where}: the string of id {k} is in more than one bucket.")
    hashes = hashes.astype(np.int64)
    t = table_of[filled]
    wrong = np.flatnonzero((hashes[ids] != buckets[filled, 0]) | (hashes[ids] % 256 != t))
    if wrong.size:
        k = int(ids[wrong[0]])
        raise ValueError(
            f"{where}: the bucket of the string of id {k} (hash table {t[wrong[0]]}) does "
            "not match its hash."
        )
    # Linear probing from (hash >> 8) % m must reach the bucket before an empty
    # one: count the empty buckets in the cyclic range [start, bucket).
    table_index = np.searchsorted(used, t)
    first, m = base[table_index], sizes[table_index]
    start = first + (hashes[ids] >> 8) % m
    blocked = np.where(
        start <= filled,
        empty_before[filled] - empty_before[start],
        empty_before[first + m] - empty_before[start] + empty_before[filled] - empty_before[first],
    )
    blocked = np.flatnonzero(blocked > 0)
    if blocked.size:
        k = int(ids[blocked[0]])
        raise ValueError(
            f"{where}: CRFsuite's lookup of the string of id {k} stops at an empty "
            f"bucket of hash table {t[blocked[0]]} before reaching it."
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
    list_start = np.zeros(n_owners, dtype=np.int64)
    np.cumsum(counts[:-1], out=list_start[1:])
    index = np.repeat(at + 1 - list_start, counts) + np.arange(total)
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


def _storable_label(label):
    return type(label) in _LABEL_TYPES or type(label) in NUMPY_NAMES


def _is_increasing(keys):
    return len(keys) < 2 or bool((keys[1:] > keys[:-1]).all())


def _sorted_by(items, keys):
    """``items`` and ``keys`` sorted by ``keys`` (CRFsuite's files already are)."""
    if _is_increasing(keys):
        return items, keys
    order = np.argsort(keys, kind="stable")
    return items[order], keys[order]


def _check_duplicates(keys, what, name):
    """Reject repeated keys in a sorted int array; ``name(key)`` describes one."""
    if len(keys) > 1:
        same = np.flatnonzero(keys[1:] == keys[:-1])
        if same.size:
            raise ValueError(f"the {what} {name(int(keys[same[0]]))} appears twice.")


def _parse(data):
    """The FittedState of the model file content ``data`` (bytes); see read_crfsuite."""
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
    if n_labels == 0:
        raise ValueError("the model has no labels.")
    if n_labels > MAX_LABELS:
        # Decoding holds a dense labels x labels transition matrix (CRFsuite
        # too): a crafted count must not become a huge allocation.
        raise ValueError(
            f"the header gives {n_labels} labels; skcrf reads models with at most "
            f"{MAX_LABELS} (decoding needs a {n_labels} x {n_labels} transition matrix)."
        )

    types, src, dst, weights, end = _read_features(data, off_features, n_features)
    chunk_ends = [end]
    label_names, end = _read_cqdb(data, off_labels, n_labels, "labels")
    chunk_ends.append(end)
    attributes, end = _read_cqdb(data, off_attributes, n_attributes, "attributes")
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

    end = max(chunk_ends)
    if end < n_bytes:
        labels = _read_labels_chunk(data, end, n_labels)
    else:
        labels = label_names
    classes = np.empty(n_labels, dtype=object)
    classes[:] = labels

    arrays = {
        "state_ptr": state_ptr,
        "state_labels": dst[state].astype(np.int32),
        "state_weights": np.ascontiguousarray(weights[state]),
        "transition_index": np.ascontiguousarray(flat),
        "transition_weights": np.ascontiguousarray(weights[transition]),
    }
    check_model_arrays(n_attributes, n_labels, arrays)  # cannot fail: a last guard
    model = CRFModel(classes=classes, attributes=attributes, value_separator=":", **arrays)
    return FittedState(params={}, model=model, n_iter=0, status=None, training_log=None)


def read_crfsuite(source):
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
        truncated, corrupted, inconsistent); the message says what is wrong
        and where.
    OSError
        If the file cannot be read (for instance FileNotFoundError).
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        name = "(bytes)"
    else:
        path = os.fsdecode(source)
        with open(path, "rb") as file:
            data = file.read()
        name = repr(path)
    try:
        return _parse(data)
    except ValueError as exc:
        raise ValueError(f"Cannot read CRFsuite model {name}: {exc}") from None
    except (IndexError, KeyError, TypeError, OverflowError, struct.error, RecursionError) as exc:
        # A safety net: the checks above should leave nothing for it.
        raise ValueError(
            f"Cannot read CRFsuite model {name}: corrupted or invalid file "
            f"({type(exc).__name__}: {exc})"
        ) from exc


# -- writing -----------------------------------------------------------------


def _encode_strings(strings, what):
    """CRFsuite strings (str, no NUL, distinct) as joined UTF-8 keys.

    Returns the keys one after the other, each with its NUL (uint8 array), and
    their sizes (NUL included).
    """
    strings = list(strings)
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64)
    for k, string in enumerate(strings):
        if not isinstance(string, str):
            raise TypeError(f"{what} {k} is a {type(string).__name__}, not a str.")
    joined = "\0".join(strings) + "\0"
    if joined.count("\0") != n:
        k = next(k for k, string in enumerate(strings) if "\0" in string)
        raise ValueError(
            f"{what} {k} {strings[k]!r:.100} holds a NUL character, which CRFsuite cannot store."
        )
    try:
        encoded = joined.encode("utf-8")
    except UnicodeEncodeError as exc:
        ends = np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=n) + 1)
        k = int(np.searchsorted(ends, exc.start, side="right"))
        raise ValueError(
            f"{what} {k} {strings[k]!r:.100} cannot be encoded as UTF-8 ({exc.reason})."
        ) from None
    if len(set(strings)) != n:
        seen = {}
        for k, string in enumerate(strings):
            if string in seen:
                raise ValueError(
                    f"{what}s {seen[string]} and {k} are both written as {string!r:.100}; "
                    "CRFsuite needs distinct strings."
                )
            seen[string] = k
    keys = np.frombuffer(encoded, dtype=np.uint8)
    nuls = np.flatnonzero(keys == 0)
    key_sizes = np.diff(nuls, prepend=-1)
    return keys, key_sizes


def _cqdb_bytes(keys, key_sizes):
    """A CQDB chunk of the joined ``keys`` (ids 0, 1, ...), as CRFsuite writes it."""
    n = len(key_sizes)
    records = _CQDB_DATA + _exclusive_cumsum(8 + key_sizes)
    data_end = _CQDB_DATA + 8 * n + len(keys)

    # The records: id, key size, key and NUL, packed (unaligned). The bytes
    # that are not record headers are the keys, in order.
    body = np.empty(data_end - _CQDB_DATA, dtype=np.uint8)
    heads = np.empty((n, 2), dtype="<u4")
    heads[:, 0] = np.arange(n)
    heads[:, 1] = key_sizes
    in_head = np.zeros(len(body), dtype=bool)
    head_at = ((records - _CQDB_DATA)[:, None] + np.arange(8)).ravel()
    in_head[head_at] = True
    body[head_at] = heads.view(np.uint8).ravel()
    body[~in_head] = keys

    # The hash tables: 2 * m buckets for m keys, filled in id order by linear
    # probing. Keys of different tables never collide, so the r-th key of
    # every table is placed at once.
    hashes = _hash_keys(keys, key_sizes).astype(np.int64)
    tables = hashes % _CQDB_TABLES
    per_table = np.bincount(tables, minlength=_CQDB_TABLES)
    n_buckets = 2 * per_table
    base = np.zeros(_CQDB_TABLES + 1, dtype=np.int64)
    np.cumsum(n_buckets, out=base[1:])
    slots = np.full(int(base[-1]), -1, dtype=np.int64)
    by_table = np.argsort(tables, kind="stable")
    first_of_table = np.zeros(_CQDB_TABLES, dtype=np.int64)
    np.cumsum(per_table[:-1], out=first_of_table[1:])
    rank = np.empty(n, dtype=np.int64)
    rank[by_table] = np.arange(n) - first_of_table[tables[by_table]]
    by_rank = np.argsort(rank, kind="stable")
    rank_start = np.zeros(int(per_table.max(initial=0)) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rank, minlength=len(rank_start) - 1), out=rank_start[1:])
    for r in range(len(rank_start) - 1):
        ids = by_rank[rank_start[r] : rank_start[r + 1]]
        size = n_buckets[tables[ids]]
        pos = (hashes[ids] >> 8) % size
        table_base = base[tables[ids]]
        while ids.size:
            where = table_base + pos
            free = slots[where] < 0
            slots[where[free]] = ids[free]
            keep = ~free
            ids, size, table_base = ids[keep], size[keep], table_base[keep]
            pos = (pos[keep] + 1) % size
    buckets = np.zeros((len(slots), 2), dtype="<u4")
    filled = slots >= 0
    buckets[filled, 0] = hashes[slots[filled]]
    buckets[filled, 1] = records[slots[filled]]

    refs = np.zeros((_CQDB_TABLES, 2), dtype="<u4")
    refs[:, 0] = np.where(per_table > 0, data_end + 8 * base[:-1], 0)
    refs[:, 1] = n_buckets
    bwd_offset = data_end + 8 * len(slots) if n else 0
    size = data_end + 8 * len(slots) + 4 * n
    header = _CQDB_HEADER.pack(_CQDB_MAGIC, size, 0, _CQDB_BYTEORDER, n, bwd_offset)
    return b"".join(
        [
            header,
            refs.tobytes(),
            body.tobytes(),
            buckets.tobytes(),
            records.astype("<u4").tobytes(),
        ]
    )


def _refs_bytes(magic, chunk_offset, n_entries, counts, fids):
    """A reference chunk at ``chunk_offset``: offsets, then per owner its list."""
    n_owners = len(counts)
    n_words = 3 + n_entries + n_owners + len(fids)
    words = np.zeros(n_words, dtype="<u4")
    words[0] = int.from_bytes(magic, "little")
    words[1] = 4 * n_words
    words[2] = n_entries
    before = np.zeros(n_owners, dtype=np.int64)
    np.cumsum(counts[:-1] + 1, out=before[1:])
    at = 3 + n_entries + before  # word index of each owner's count
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
        seen = {}
        for k, label in enumerate(classes):
            if label in seen:
                raise ValueError(
                    f"labels {seen[label]} and {k} ({classes[seen[label]]!r:.50} and "
                    f"{label!r:.50}) are equal: they cannot be told apart when read back."
                )
            seen[label] = k
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
    if n_labels == 0:
        raise ValueError("the model has no labels.")
    if n_labels > MAX_LABELS:
        # Decoding holds a dense labels x labels transition matrix (CRFsuite
        # too): a crafted count must not become a huge allocation.
        raise ValueError(
            f"the header gives {n_labels} labels; skcrf reads models with at most "
            f"{MAX_LABELS} (decoding needs a {n_labels} x {n_labels} transition matrix)."
        )
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
    label_keys = _encode_strings(strings, "label")
    attribute_keys = _encode_strings(model.attributes, "attribute")
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
    off_labels = put(_cqdb_bytes(*label_keys))
    off_attributes = put(_cqdb_bytes(*attribute_keys))
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
