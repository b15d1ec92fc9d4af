"""String -> id lookups in a CQDB chunk, where it lies (nothing decoded up front).

CQDB is the string database of CRFsuite model files (its layout:
:mod:`skcrf._persist._crfsuite_file` and :mod:`skcrf._persist._cqdb`). A
model opened for tagging needs the ids of the attributes its tokens hold,
not the list of every name: :class:`CQDBIndex` answers those lookups from
the chunk's own hash tables, as CRFsuite's tagger does, so that opening a
model with hundreds of thousands of attributes costs no Python object per
attribute. :class:`LazyNames` is the model's attribute list over such an
index: its length and lookups come from the index, the list itself is
read (and checked whole) on first use.

Safety: the constructor checks what every lookup relies on (the header,
the 256 table references, the backward array's place) and then every bucket
once (O(chunk), see ``_table_problem``): every table exactly half empty (so
no probe chain is endless: a full table, on which CRFsuite probes forever,
is refused), every filled bucket in the table of its hash, pointing to a
record inside the chunk whose key is one NUL-terminated string with that
very hash, whose id is in range, in no other bucket, and has this record as
its backward link, and reachable by CRFsuite's linear probing. A chunk that
passes answers every lookup as CRFsuite does; one that does not is an error
naming the chunk, at open. A lookup still checks every bucket and record it
reads (a last guard), so nothing can read outside the chunk, loop forever
or answer with another string's id.
"""

from collections.abc import Sequence

from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, uint8_t, uint32_t
from libc.string cimport memchr, memcmp, memcpy, memset

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SKCRF_PREFETCH(p) __builtin_prefetch(p)
    #else
    #define SKCRF_PREFETCH(p) ((void) 0)
    #endif
    """
    void SKCRF_PREFETCH(const void *p) noexcept nogil

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t *size) except NULL

__all__ = ["CQDBIndex", "LazyNames", "hashlittle"]

cdef enum:
    _HEADER = 24
    _TABLES = 256
    _FIRST_RECORD = _HEADER + 8 * _TABLES   # 2072
    _CORRUPT = -2
    _AHEAD = 16     # buckets: how far ahead the table check prefetches records

cdef uint32_t _BYTEORDER = 0x62445371


cdef inline uint32_t _u32(const uint8_t *p) noexcept nogil:
    """A little-endian uint32 at ``p`` (any alignment)."""
    return (<uint32_t> p[0]) | (<uint32_t> p[1] << 8) | (<uint32_t> p[2] << 16) | (
        <uint32_t> p[3] << 24)


cdef inline uint32_t _rot(uint32_t x, int k) noexcept nogil:
    return (x << k) | (x >> (32 - k))


cdef inline void _mix(uint32_t *a, uint32_t *b, uint32_t *c) noexcept nogil:
    a[0] -= c[0]
    a[0] ^= _rot(c[0], 4)
    c[0] += b[0]
    b[0] -= a[0]
    b[0] ^= _rot(a[0], 6)
    a[0] += c[0]
    c[0] -= b[0]
    c[0] ^= _rot(b[0], 8)
    b[0] += a[0]
    a[0] -= c[0]
    a[0] ^= _rot(c[0], 16)
    c[0] += b[0]
    b[0] -= a[0]
    b[0] ^= _rot(a[0], 19)
    a[0] += c[0]
    c[0] -= b[0]
    c[0] ^= _rot(b[0], 4)
    b[0] += a[0]


cdef inline void _final(uint32_t *a, uint32_t *b, uint32_t *c) noexcept nogil:
    c[0] ^= b[0]
    c[0] -= _rot(b[0], 14)
    a[0] ^= c[0]
    a[0] -= _rot(c[0], 11)
    b[0] ^= a[0]
    b[0] -= _rot(a[0], 25)
    c[0] ^= b[0]
    c[0] -= _rot(b[0], 16)
    a[0] ^= c[0]
    a[0] -= _rot(c[0], 4)
    b[0] ^= a[0]
    b[0] -= _rot(a[0], 14)
    c[0] ^= b[0]
    c[0] -= _rot(b[0], 24)


cdef uint32_t _hashlittle(const uint8_t *key, Py_ssize_t length) noexcept nogil:
    """Bob Jenkins' lookup3 ``hashlittle`` of ``length`` bytes, seed 0.

    The last block is zero-padded (what the reference code's masked reads
    amount to); a key of a multiple of 12 bytes ends with a full block, which
    gets ``final`` (not ``mix``), as in the reference.
    """
    cdef uint32_t a, b, c
    cdef uint8_t tail[12]
    a = b = c = <uint32_t> 0xDEADBEEF + <uint32_t> length
    while length > 12:
        a += _u32(key)
        b += _u32(key + 4)
        c += _u32(key + 8)
        _mix(&a, &b, &c)
        length -= 12
        key += 12
    if length == 0:
        return c
    memset(tail, 0, 12)
    memcpy(tail, key, length)
    a += _u32(tail)
    b += _u32(tail + 4)
    c += _u32(tail + 8)
    _final(&a, &b, &c)
    return c


def hashlittle(const uint8_t[::1] key):
    """lookup3 ``hashlittle`` of ``key`` (bytes), seed 0 (CQDB's key hash).

    >>> hashlittle(b"") == 0xDEADBEEF
    True
    """
    return _hashlittle(&key[0] if key.shape[0] else NULL, key.shape[0])


cdef class CQDBIndex:
    """The string -> id lookups of one CQDB chunk, read in place.

    Parameters
    ----------
    data : bytes-like
        A buffer holding the chunk (for instance a whole model file); kept
        alive by the index, never copied.
    offset : int
        Where the chunk starts in ``data``.
    n_ids : int
        The number of ids (the model file's count of labels or attributes).
    what : str
        Names the chunk in error messages (``"attributes"``).

    Raises
    ------
    ValueError
        If the chunk's header, table references or backward array are not
        where a lookup can use them.

    Examples
    --------
    >>> from skcrf._persist._cqdb import cqdb_bytes, encode_strings
    >>> chunk = cqdb_bytes(*encode_strings(["w:the", "bias"], "attribute"))
    >>> index = CQDBIndex(chunk, 0, 2, "attributes")
    >>> index.lookup("bias"), index.lookup("w:a"), len(index), index.name(0)
    (1, -1, 2, 'w:the')
    """

    def __init__(self, data, Py_ssize_t offset, Py_ssize_t n_ids, str what="strings"):
        cdef const uint8_t[::1] whole = memoryview(data).cast("B")
        cdef const uint8_t *p
        cdef Py_ssize_t size, t, buckets = 0
        cdef uint32_t table_offset, table_size, backward_size
        where = f"the {what} CQDB chunk at offset {offset}"
        if offset < 0 or offset > whole.shape[0] - _FIRST_RECORD:
            raise ValueError(f"{where} lies outside the data ({whole.shape[0]} bytes).")
        p = &whole[offset]
        if memcmp(p, b"CQDB", 4) != 0:
            raise ValueError(f"{where} does not start with b'CQDB'.")
        size = _u32(p + 4)
        if size < _FIRST_RECORD or size > whole.shape[0] - offset:
            raise ValueError(
                f"{where} has the size {size}, outside [{_FIRST_RECORD}, "
                f"{whole.shape[0] - offset}] (truncated or corrupted)."
            )
        if _u32(p + 12) != _BYTEORDER:
            raise ValueError(f"{where} has the byte-order mark {_u32(p + 12):#x}.")
        backward_size = _u32(p + 16)
        self._backward = _u32(p + 20)
        if n_ids < 0 or n_ids > backward_size or (
            n_ids and (self._backward < _FIRST_RECORD
                       or 4 * n_ids > size - self._backward)):
            raise ValueError(
                f"{where}: its backward array (offset {self._backward}, {backward_size} "
                f"entries) cannot hold the {n_ids} ids."
            )
        for t in range(_TABLES):
            table_offset = _u32(p + _HEADER + 8 * t)
            table_size = _u32(p + _HEADER + 8 * t + 4)
            if (table_offset == 0) != (table_size == 0) or table_size and (
                table_offset < _FIRST_RECORD or table_offset > size
                or 8 * <Py_ssize_t> table_size > size - table_offset
            ):
                raise ValueError(
                    f"{where}: hash table {t} (offset {table_offset}, {table_size} "
                    "buckets) lies outside the chunk."
                )
            self._table_offset[t] = table_offset
            self._table_size[t] = table_size
            buckets += table_size
        # CRFsuite writes two buckets per string (so a table is never full)
        if buckets != 2 * n_ids:
            raise ValueError(
                f"{where}: its hash tables have {buckets} buckets for {n_ids} strings "
                f"({2 * n_ids} expected)."
            )
        self._owner = data
        self._view = whole[offset:offset + size]
        self._data = &self._view[0]
        self._size = size
        self._n = n_ids
        problem = _table_problem(self)
        if problem is not None:
            raise ValueError(f"{where}: {problem}.")

    def __len__(self):
        return self._n

    cdef Py_ssize_t find(self, const char *key, Py_ssize_t length) noexcept nogil:
        """The id of the ``length`` bytes at ``key`` (``key[length]`` is their
        NUL); -1 if absent, -2 if the chunk is found corrupted on the way."""
        cdef uint32_t h, bucket_hash, record, t, m, slot
        cdef const uint8_t *bucket
        cdef int32_t stored
        if memchr(key, 0, length) != NULL:
            return -1  # a CRFsuite string holds no NUL
        h = _hashlittle(<const uint8_t *> key, length + 1)
        t = h % _TABLES
        m = self._table_size[t]
        if m == 0:
            return -1
        slot = (h >> 8) % m
        for _ in range(m):
            bucket = self._data + self._table_offset[t] + 8 * <Py_ssize_t> slot
            record = _u32(bucket + 4)
            if record == 0:
                return -1
            bucket_hash = _u32(bucket)
            if bucket_hash == h:
                if record < _FIRST_RECORD or record > self._size - 8:
                    return _CORRUPT
                if (_u32(self._data + record + 4) == <uint32_t> (length + 1)
                        and length + 1 <= self._size - 8 - record
                        and memcmp(self._data + record + 8, key, length + 1) == 0):
                    stored = <int32_t> _u32(self._data + record)
                    # the id's own record (the backward array agrees): else
                    # a damaged id would answer for another string
                    if (stored < 0 or stored >= self._n
                            or _u32(self._data + self._backward + 4 * stored) != record):
                        return _CORRUPT
                    return stored
            slot += 1
            if slot == m:
                slot = 0
        return -1

    cdef Py_ssize_t find_str(self, str name) except -3:
        """The id of ``name``, -1 if absent (raises if the chunk is corrupted)."""
        cdef Py_ssize_t length
        cdef const char *key = PyUnicode_AsUTF8AndSize(name, &length)
        cdef Py_ssize_t found = self.find(key, length)
        if found == _CORRUPT:
            raise ValueError(
                f"the model's string database is corrupted (looking up {name!r:.100})."
            )
        return found

    def lookup(self, name):
        """The id of the string ``name``, or -1."""
        if type(name) is not str:
            return -1
        return self.find_str(name)

    def name(self, Py_ssize_t k):
        """The string of id ``k``, read from its record (checked)."""
        cdef uint32_t record, key_size
        if k < 0 or k >= self._n:
            raise IndexError(f"id {k} out of range ({self._n} ids).")
        record = _u32(self._data + self._backward + 4 * k)
        if record < _FIRST_RECORD or record > self._size - 8:
            raise ValueError(f"the record of id {k} has an invalid offset {record}.")
        key_size = _u32(self._data + record + 4)
        if (<int32_t> _u32(self._data + record) != k or key_size < 1
                or key_size > self._size - 8 - record
                or <const uint8_t *> memchr(self._data + record + 8, 0, key_size)
                != self._data + record + 8 + key_size - 1):
            raise ValueError(f"the record of id {k} is corrupted.")
        return PyUnicode_DecodeUTF8(<const char *> self._data + record + 8, key_size - 1,
                                    "strict")


cdef str _table_problem(CQDBIndex self):
    """What is wrong with the hash tables of ``self``, or None.

    Every bucket is read once (O(chunk), at open): what CRFsuite's lookups meet.

    Per table of ``m`` buckets: exactly ``m / 2`` empty (then every probe
    chain ends at an empty bucket, and CRFsuite's count of records, half
    the buckets, is the number of ids); per filled bucket: the table of
    its hash, a record inside the chunk whose key (its size, one NUL, its
    last byte) hashes to the bucket's hash, an id in range that no other
    bucket holds and whose backward link is this record, and the bucket
    reachable by linear probing from its start bucket without crossing an
    empty one. Then every id has one bucket, every lookup of its string
    finds it as CRFsuite's does (equal strings aside: both lookups find
    the first), and no lookup can probe forever or read outside.
    """
    cdef Py_ssize_t t, s, m, m_max = 0, n_filled
    cdef uint32_t h, record, key_size, start
    cdef int32_t stored
    cdef const uint8_t *table
    cdef const uint8_t *key
    cdef uint32_t *empty_before = NULL
    cdef uint8_t *seen = NULL
    cdef str problem = None
    for t in range(_TABLES):
        if self._table_size[t] > m_max:
            m_max = self._table_size[t]
    empty_before = <uint32_t *> PyMem_Malloc((m_max + 1) * sizeof(uint32_t))
    seen = <uint8_t *> PyMem_Calloc(self._n + 1, 1)
    if empty_before == NULL or seen == NULL:
        PyMem_Free(empty_before)
        PyMem_Free(seen)
        raise MemoryError()
    try:
        for t in range(_TABLES):
            m = self._table_size[t]
            if m == 0:
                continue
            table = self._data + self._table_offset[t]
            empty_before[0] = 0
            for s in range(m):
                empty_before[s + 1] = empty_before[s] + (_u32(table + 8 * s + 4) == 0)
            n_filled = m - empty_before[m]
            if 2 * n_filled != m:
                problem = (
                    f"hash table {t} has {m} buckets for {n_filled} strings "
                    f"({2 * n_filled} expected; a full table would make CRFsuite "
                    "search forever)"
                )
                break
            for s in range(m):
                if s + _AHEAD < m:  # the record a few buckets on, from memory meanwhile
                    record = _u32(table + 8 * (s + _AHEAD) + 4)
                    if record < self._size - 8:
                        SKCRF_PREFETCH(self._data + record)
                record = _u32(table + 8 * s + 4)
                if record == 0:
                    continue
                h = _u32(table + 8 * s)
                if h % _TABLES != <uint32_t> t:
                    problem = (f"bucket {s} of hash table {t} holds the hash {h:#x} "
                               f"of table {h % _TABLES}")
                    break
                if record < _FIRST_RECORD or record > self._size - 8:
                    problem = (f"bucket {s} of hash table {t} points to offset {record}, "
                               "outside the records")
                    break
                key = self._data + record + 8
                key_size = _u32(self._data + record + 4)
                if (key_size < 1 or key_size > self._size - 8 - record
                        or <const uint8_t *> memchr(key, 0, key_size) != key + key_size - 1):
                    problem = (
                        f"the record at offset {record} (bucket {s} of hash table {t}) "
                        "has a string that runs outside the chunk or is not one "
                        "NUL-terminated string"
                    )
                    break
                if _hashlittle(key, key_size) != h:
                    problem = (
                        f"bucket {s} of hash table {t} holds the hash {h:#x}, not its "
                        "string's"
                    )
                    break
                stored = <int32_t> _u32(self._data + record)
                if stored < 0 or stored >= self._n:
                    problem = f"the record at offset {record} holds the id {stored}, out of range"
                    break
                if seen[stored]:
                    problem = f"the id {stored} is in more than one bucket"
                    break
                seen[stored] = 1
                if _u32(self._data + self._backward + 4 * stored) != record:
                    problem = (
                        f"the backward link of id {stored} is "
                        f"{_u32(self._data + self._backward + 4 * stored)}, not its record "
                        f"{record}"
                    )
                    break
                start = (h >> 8) % <uint32_t> m
                if (empty_before[s] - empty_before[start] if start <= s
                        else empty_before[m] - empty_before[start] + empty_before[s]):
                    problem = (
                        f"CRFsuite's lookup of the string of id {stored} stops at an "
                        f"empty bucket of hash table {t} before reaching it"
                    )
                    break
            if problem is not None:
                break
    finally:
        PyMem_Free(empty_before)
        PyMem_Free(seen)
    return problem


class LazyNames(Sequence):
    """The names of ids ``0 .. n - 1`` over a :class:`CQDBIndex`, listed on first use.

    ``len``, ``in`` and :meth:`id_of` answer from the index; indexing,
    iteration, comparison and pickling use the list, which ``read_all()``
    (checking the whole chunk) makes once. Pickled, it is that list.

    Parameters
    ----------
    index : CQDBIndex
    read_all : callable
        ``read_all()`` returns every name, in id order.
    """

    def __init__(self, index, read_all):
        self.string_index = index
        self._read_all = read_all
        self._names = None

    def tolist(self):
        """The names as a list (read once, then the same list)."""
        names = self._names
        if names is None:
            names = self._names = list(self._read_all())
        return names

    def id_of(self, name):
        """The id of ``name``, or -1."""
        return self.string_index.lookup(name)

    def __len__(self):
        return len(self.string_index)

    def __getitem__(self, k):
        return self.tolist()[k]

    def __iter__(self):
        return iter(self.tolist())

    def __contains__(self, name):
        return self.id_of(name) >= 0

    def __eq__(self, other):
        if isinstance(other, LazyNames):
            other = other.tolist()
        return isinstance(other, list) and self.tolist() == other

    __hash__ = None

    def __reduce__(self):
        return (list, (self.tolist(),))

    def __repr__(self):
        return f"<{len(self)} names of a CRFsuite string database>"
