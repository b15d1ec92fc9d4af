"""CQDB, the string database of CRFsuite model files (string <-> id), read and written.

A CRFsuite model file holds two CQDB chunks, its labels' strings and its
attributes' (:mod:`skcrf._persist._crfsuite_file` reads and writes the rest
of the file). The chunk, as this module understands it (every integer an
unsigned 32-bit little-endian number; offsets count from the start of the
chunk):

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

Strings are handled as *keys*: a uint8 array of the UTF-8 strings one after
the other, each with its NUL, and an int64 array of their sizes (NUL
included). :func:`hash_keys` hashes all the keys of a chunk at once, with
numpy.
"""

import struct

import numpy as np

__all__ = [
    "cqdb_bytes",
    "encode_strings",
    "exclusive_cumsum",
    "first_repeat",
    "hash_keys",
    "is_increasing",
    "read_cqdb",
]

_MAGIC = b"CQDB"
_HEADER = struct.Struct("<4sIIIII")  # 24 bytes
_BYTEORDER = 0x62445371
_TABLES = 256
_DATA = _HEADER.size + 8 * _TABLES  # the first record: 2072

_U32 = 0xFFFFFFFF


# -- helpers (the CRFsuite file module uses them too) ------------------------


def exclusive_cumsum(counts):
    """The start of each of consecutive runs of ``counts`` items (int64)."""
    out = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def is_increasing(keys):
    """Whether the 1-D array ``keys`` is strictly increasing."""
    return len(keys) < 2 or bool((keys[1:] > keys[:-1]).all())


def first_repeat(items):
    """``(i, k)``: item ``k`` is the first equal to an earlier one, item ``i``.

    None if the items are distinct (hashable items; a set of them is
    quicker to tell whether any repeats).
    """
    seen = {}
    for k, item in enumerate(items):
        i = seen.setdefault(item, k)
        if i != k:
            return i, k
    return None


# -- lookup3 hashlittle, vectorized over keys ---------------------------------

# A key's running hash is the state v = [a, b, c]. lookup3's mix is six steps
# "a -= c; a ^= rot(c, 4); c += b", ...: (x, y, z, k) for the step
# v[x] -= v[z]; v[x] ^= rot(v[z], k); v[z] += v[y]. Its final is seven steps
# "c ^= b; c -= rot(b, 14)", ...: (x, y, k) for v[x] ^= v[y]; v[x] -= rot(v[y], k).
# Each k is kept as the (left, right) uint32 shifts of the 32-bit rotation.
_MIX = tuple(
    (x, y, z, np.uint32(k), np.uint32(32 - k))
    for x, y, z, k in (
        (0, 1, 2, 4),
        (1, 2, 0, 6),
        (2, 0, 1, 8),
        (0, 1, 2, 16),
        (1, 2, 0, 19),
        (2, 0, 1, 4),
    )
)
_FINAL = tuple(
    (x, y, np.uint32(k), np.uint32(32 - k))
    for x, y, k in (
        (2, 1, 14),
        (0, 2, 11),
        (1, 0, 25),
        (2, 1, 16),
        (0, 2, 4),
        (1, 0, 14),
        (2, 1, 24),
    )
)

# Hash the keys as arrays while more than this many are still being hashed;
# the few long keys left are finished one by one, on numpy scalars (cheaper
# per block than arrays of a few elements).
_FEW_KEYS = 8


def _mix(v):
    """lookup3's mix of the states ``v``: a list of three uint32 arrays.

    The arrays (views, often) are changed in place; numpy uint32 scalars
    work too (they are replaced in ``v``).
    """
    for x, y, z, left, right in _MIX:
        v[x] -= v[z]
        v[x] ^= (v[z] << left) | (v[z] >> right)
        v[z] += v[y]


def _final(v):
    """lookup3's final of the states ``v``, as :func:`_mix`; the hash is ``v[2]``."""
    for x, y, left, right in _FINAL:
        v[x] ^= v[y]
        v[x] -= (v[y] << left) | (v[y] >> right)


def hash_keys(keys, key_sizes):
    """lookup3 ``hashlittle`` (seed 0) of many keys, a uint32 array.

    ``keys`` is a uint8 array of the keys one after the other; ``key_sizes``
    (int64) their sizes (CQDB's keys end with their NUL, which is hashed).
    Vectorized over keys: every key is laid out padded with zeros to a
    multiple of 12 bytes (what the C code's masks amount to), keys are sorted
    by their number of 12-byte blocks, and block ``j`` of every key that has
    one is processed at once (the keys whose last block it is get ``final``,
    the others ``mix``). Cost: one pass over the bytes plus ~40 numpy calls
    per block, until only a few long keys are left, which are finished one
    by one (~40 operations on numpy scalars per block).
    """
    n = len(key_sizes)
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out
    blocks = (key_sizes + 11) // 12
    first_row = exclusive_cumsum(blocks)
    padded = np.zeros(12 * int(blocks.sum()), dtype=np.uint8)
    shift = 12 * first_row - exclusive_cumsum(key_sizes)
    padded[np.repeat(shift, key_sizes) + np.arange(len(keys))] = keys
    words = padded.view("<u4").reshape(-1, 3)

    # Keys by decreasing number of blocks: those with a block j come first,
    # active[j] of them (an empty key has none: its hash is the initial c).
    order = np.argsort(-blocks, kind="stable")
    rows = first_row[order]
    ends = rows + blocks[order]
    active = (n - np.cumsum(np.bincount(blocks))).tolist()
    init = ((key_sizes[order] + 0xDEADBEEF) & _U32).astype(np.uint32)
    v = [init.copy(), init.copy(), init.copy()]
    for j in range(len(active) - 1):
        m, m_next = active[j], active[j + 1]
        if m <= _FEW_KEYS and m_next:
            break
        block = words[rows[:m] + j]
        for i in range(3):
            v[i][:m] += block[:, i]
        if m_next:
            _mix([w[:m_next] for w in v])
        if m_next < m:
            _final([w[m_next:m] for w in v])
    else:
        out[order] = v[2]
        return out

    # A few keys have more than one block left: each on its own, block j on.
    with np.errstate(over="ignore"):  # numpy scalars warn where arrays wrap around
        for k in range(m):
            state = [w[k] for w in v]
            *mixed, last = words[rows[k] + j : ends[k]]
            for block in mixed:
                for i in range(3):
                    state[i] += block[i]
                _mix(state)
            for i in range(3):
                state[i] += last[i]
            _final(state)
            v[2][k] = state[2]
    out[order] = v[2]
    return out


# -- reading -----------------------------------------------------------------


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
        i, k = first_repeat(strings)
        raise ValueError(f"{where}: ids {i} and {k} have the same string {strings[k]!r:.100}.")
    return strings


def read_cqdb(data, offset, n_ids, what, min_offset):
    """The ``n_ids`` strings of the CQDB chunk at ``offset``, by id; all checked.

    ``data`` is the content of the whole file, where no chunk starts before
    ``min_offset``; ``what`` names the chunk in the messages (``"labels"``).
    Returns the strings and the offset of the chunk's end.
    """
    n_bytes = len(data)
    if offset < min_offset or offset > n_bytes - _DATA:
        raise ValueError(
            f"the {what} CQDB chunk offset {offset} is out of range (the file has "
            f"{n_bytes} bytes; truncated or corrupted)."
        )
    magic, size, _flag, byteorder, bwd_size, bwd_offset = _HEADER.unpack_from(data, offset)
    where = f"the {what} CQDB chunk at offset {offset}"
    if magic != _MAGIC:
        raise ValueError(f"{where} has the id {magic!r}, not {_MAGIC!r}.")
    if byteorder != _BYTEORDER:
        raise ValueError(
            f"{where} has the byte-order mark {byteorder:#x}, not {_BYTEORDER:#x} "
            "(corrupted, or written on a big-endian machine)."
        )
    if size < _DATA:
        raise ValueError(f"{where} has an invalid size {size} (at least {_DATA}).")
    if size > n_bytes - offset:
        raise ValueError(
            f"the {what} CQDB chunk at offset {offset} with size {size} lies outside the file "
            f"({n_bytes} bytes; truncated or corrupted)."
        )
    chunk = np.frombuffer(data, dtype=np.uint8, count=size, offset=offset)

    # The backward array: the record offset of every id.
    if n_ids:
        if bwd_offset == 0:
            raise ValueError(f"{where} has no backward array (id -> string).")
        if n_ids > bwd_size:
            raise ValueError(
                f"{where}: its backward array holds {bwd_size} ids; {n_ids} are needed."
            )
        if bwd_offset < _DATA or bwd_offset > size or 4 * n_ids > size - bwd_offset:
            raise ValueError(
                f"{where}: the backward array at offset {bwd_offset} ({n_ids} entries) "
                f"runs outside the chunk ({size} bytes)."
            )
        records = np.frombuffer(data, dtype="<u4", count=n_ids, offset=offset + bwd_offset)
        records = records.astype(np.int64)
    else:
        records = np.zeros(0, dtype=np.int64)
    bad = np.flatnonzero((records < _DATA) | (records > size - 8))
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
    by_offset = np.arange(n_ids) if is_increasing(records) else np.argsort(records)
    ends = records + 8 + key_sizes
    overlap = np.flatnonzero(records[by_offset[1:]] < ends[by_offset[:-1]])
    if overlap.size:
        i, k = by_offset[overlap[0]], by_offset[overlap[0] + 1]
        raise ValueError(f"{where}: the records of ids {i} and {k} overlap.")
    bad = np.flatnonzero(chunk[ends - 1] != 0)
    if bad.size:
        raise ValueError(f"{where}: the string of id {int(bad[0])} is not NUL-terminated.")
    shift = records + 8 - exclusive_cumsum(key_sizes)
    keys = chunk[np.repeat(shift, key_sizes) + np.arange(int(key_sizes.sum()))]
    strings = _decode_keys(keys, key_sizes, where)
    hashes = hash_keys(keys, key_sizes)
    _check_hash_tables(data, offset, size, records, by_offset, hashes, where)
    return strings, offset + size


def _check_hash_tables(data, offset, size, records, by_offset, hashes, where):
    """Check that CRFsuite's lookup of every string finds its id.

    Requires the buckets in use to be exactly one per record (so that, the
    strings being distinct, the only bucket that can answer a lookup is the
    string's own), each in the table of its hash, with the right hash, and
    reachable by linear probing from its start bucket without crossing an
    empty bucket; and every table to have twice as many buckets as strings
    (as CRFsuite writes them; python-crfsuite's reader trusts those counts).
    """
    n_ids = len(records)
    refs = np.frombuffer(data, dtype="<u4", count=2 * _TABLES, offset=offset + 24)
    refs = refs.astype(np.int64).reshape(_TABLES, 2)
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
        if table_offset < _DATA or table_offset > size or 8 * m > size - table_offset:
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
    base = exclusive_cumsum(sizes)
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
    # The id of every filled bucket's record (record offsets are distinct;
    # ``by_offset`` sorts them).
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


# -- writing -----------------------------------------------------------------


def encode_strings(strings, what):
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
        i, k = first_repeat(strings)
        raise ValueError(
            f"{what}s {i} and {k} are both written as {strings[k]!r:.100}; "
            "CRFsuite needs distinct strings."
        )
    keys = np.frombuffer(encoded, dtype=np.uint8)
    nuls = np.flatnonzero(keys == 0)
    key_sizes = np.diff(nuls, prepend=-1)
    return keys, key_sizes


def cqdb_bytes(keys, key_sizes):
    """A CQDB chunk of the joined ``keys`` (ids 0, 1, ...), as CRFsuite writes it."""
    n = len(key_sizes)
    records = _DATA + exclusive_cumsum(8 + key_sizes)
    data_end = _DATA + 8 * n + len(keys)

    # The records: id, key size, key and NUL, packed (unaligned). The bytes
    # that are not record headers are the keys, in order.
    body = np.empty(data_end - _DATA, dtype=np.uint8)
    heads = np.empty((n, 2), dtype="<u4")
    heads[:, 0] = np.arange(n)
    heads[:, 1] = key_sizes
    in_head = np.zeros(len(body), dtype=bool)
    head_at = ((records - _DATA)[:, None] + np.arange(8)).ravel()
    in_head[head_at] = True
    body[head_at] = heads.view(np.uint8).ravel()
    body[~in_head] = keys

    # The hash tables: 2 * m buckets for m keys, filled in id order by linear
    # probing. Keys of different tables never collide, so the r-th key of
    # every table is placed at once.
    hashes = hash_keys(keys, key_sizes).astype(np.int64)
    tables = hashes % _TABLES
    per_table = np.bincount(tables, minlength=_TABLES)
    n_buckets = 2 * per_table
    base = np.zeros(_TABLES + 1, dtype=np.int64)
    np.cumsum(n_buckets, out=base[1:])
    slots = np.full(int(base[-1]), -1, dtype=np.int64)
    by_table = np.argsort(tables, kind="stable")
    first_of_table = exclusive_cumsum(per_table)
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

    refs = np.zeros((_TABLES, 2), dtype="<u4")
    refs[:, 0] = np.where(per_table > 0, data_end + 8 * base[:-1], 0)
    refs[:, 1] = n_buckets
    bwd_offset = data_end + 8 * len(slots) if n else 0
    size = data_end + 8 * len(slots) + 4 * n
    header = _HEADER.pack(_MAGIC, size, 0, _BYTEORDER, n, bwd_offset)
    return b"".join(
        [
            header,
            refs.tobytes(),
            body.tobytes(),
            buckets.tobytes(),
            records.astype("<u4").tobytes(),
        ]
    )
