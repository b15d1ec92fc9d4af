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

Safety, in two steps, so that opening stays close to CRFsuite's open (which
checks nothing) while no lookup answers from a damaged chunk:

- At open (:func:`_open_problem`, reading the header, the tables and the
  backward array in order, no record): the header, the 256 table
  references, the backward array's place; every table exactly half empty
  (so no probe chain is endless: a full table, on which CRFsuite probes
  forever, is refused), every filled bucket holding a hash of its table
  and an offset inside the records' range; every backward link inside that
  range, no two alike. A chunk that fails is an error naming the chunk, at
  open.
- At the first lookup, once (:func:`_verify_code`, O(chunk), amortized on
  that first use; the GIL released meanwhile): every filled bucket
  reachable by CRFsuite's linear probing, pointing to a record whose key is
  one NUL-terminated string inside the chunk with the bucket's hash, whose
  id is in range, in no other bucket, and has this record as its backward
  link. An answer "absent" rests on every table (a string missing from the
  table of its hash, where CRFsuite looks, may sit in another), so the
  first lookup verifies them all. A chunk that fails makes that
  lookup, and every later one, a ValueError naming the model
  (:attr:`CQDBIndex.source`), the chunk and the problem: never an id, never
  "absent". Threads may verify at once (the same answer); the verdict is a
  byte stored after the work and read before any answer.

A chunk vouched for by a checksum (:meth:`CQDBIndex.vouch`: skcrf's model
format 5, whose CRC-32 is checked at open) skips the verification.

A chunk that passes answers every lookup as CRFsuite does. A lookup still
checks every bucket and record it reads (a last guard), so nothing can read
outside the chunk, loop forever or answer with another string's id.
"""

from collections.abc import Sequence

from cpython.mem cimport PyMem_Calloc, PyMem_Free
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
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

cdef extern from *:
    """
    /* a byte other threads read: stored after the work it reports, read
       before what depends on it */
    #if defined(__GNUC__) || defined(__clang__)
    #define SKCRF_LOAD_ACQUIRE(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
    #define SKCRF_STORE_RELEASE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
    #elif defined(_MSC_VER)
    #include <intrin.h>
    #if defined(_M_ARM64) || defined(_M_ARM)
    #define SKCRF_FENCE() __dmb(0xB)
    #else
    #define SKCRF_FENCE() _ReadWriteBarrier()
    #endif
    static __inline unsigned char SKCRF_LOAD_ACQUIRE(const unsigned char *p) {
        unsigned char v = *(volatile const unsigned char *) p;
        SKCRF_FENCE();
        return v;
    }
    #define SKCRF_STORE_RELEASE(p, v) \\
        do { SKCRF_FENCE(); *(volatile unsigned char *) (p) = (v); } while (0)
    #else
    #define SKCRF_LOAD_ACQUIRE(p) (*(volatile const unsigned char *) (p))
    #define SKCRF_STORE_RELEASE(p, v) (*(volatile unsigned char *) (p) = (v))
    #endif
    """
    uint8_t _load_acquire "SKCRF_LOAD_ACQUIRE"(const uint8_t *p) noexcept nogil
    void _store_release "SKCRF_STORE_RELEASE"(uint8_t *p, uint8_t v) noexcept nogil

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t *size) except NULL

__all__ = ["CQDBIndex", "LazyNames", "hashlittle"]

cdef enum:
    _HEADER = 24
    _TABLES = 256
    _FIRST_RECORD = _HEADER + 8 * _TABLES   # 2072
    _CORRUPT = -2
    _AHEAD = 16     # buckets: how far ahead the verification prefetches records
    # the verification's verdict (CQDBIndex._verdict)
    _UNCHECKED = 0
    _SOUND = 1
    _DAMAGED = 2

# what _verify_code finds wrong with a bucket (0: nothing; -1: out of memory)
cdef enum:
    _WRONG_TABLE = 1
    _OUTSIDE = 2
    _BAD_KEY = 3
    _BAD_HASH = 4
    _BAD_ID = 5
    _TWICE = 6
    _BAD_LINK = 7
    _UNREACHABLE = 8

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


cdef inline uint32_t _hash_in(const uint8_t *key, Py_ssize_t length,
                              const uint8_t *end) noexcept nogil:
    """:func:`_hashlittle` of the ``length`` bytes at ``key``, which lie in a
    buffer ending at ``end``: when the last block's 12 bytes lie inside it,
    they are read whole and the bytes past the key masked (no copy)."""
    cdef uint32_t a, b, c, last
    cdef Py_ssize_t rest
    if length == 0 or end - key < ((length + 11) // 12) * 12:
        return _hashlittle(key, length)
    a = b = c = <uint32_t> 0xDEADBEEF + <uint32_t> length
    while length > 12:
        a += _u32(key)
        b += _u32(key + 4)
        c += _u32(key + 8)
        _mix(&a, &b, &c)
        length -= 12
        key += 12
    # 1 .. 12 bytes left: whole words, then the last word's bytes
    rest = length & 3
    last = _u32(key + (length & ~3)) & ((<uint32_t> 1 << (8 * rest)) - 1) if rest else 0
    if length <= 4:
        a += last if rest else _u32(key)
    elif length <= 8:
        a += _u32(key)
        b += last if rest else _u32(key + 4)
    else:
        a += _u32(key)
        b += _u32(key + 4)
        c += last if rest else _u32(key + 8)
    _final(&a, &b, &c)
    return c


def hashlittle(const uint8_t[::1] key):
    """lookup3 ``hashlittle`` of ``key`` (bytes), seed 0 (CQDB's key hash).

    >>> hashlittle(b"") == 0xDEADBEEF
    True
    """
    return _hashlittle(&key[0] if key.shape[0] else NULL, key.shape[0])


cdef class CQDBIndex(NameIndex):
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

    Attributes
    ----------
    source : str or None
        Names the model at the start of the errors of lookups that find the
        chunk damaged (``"Cannot read CRFsuite model 'tagger.crfsuite'"``);
        the reader that makes the index sets it.

    Raises
    ------
    ValueError
        If the chunk's header, table references, backward array or table
        sizes are not what a lookup can use (see the module's docstring).
        What the first lookup verifies is a ValueError of that lookup (or
        of :meth:`check`).

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
        self._where = where
        self._verdict = _UNCHECKED
        self._problem = None
        self.source = None
        problem = _open_problem(self)
        if problem is not None:
            raise ValueError(f"{where}: {problem}.")

    cdef bint _sound(self) noexcept nogil:
        """Whether the chunk passed the verification (run now if it has not
        run: out of memory, it answers False and runs again next time)."""
        cdef uint8_t verdict = _load_acquire(&self._verdict)
        cdef Py_ssize_t table, bucket
        cdef int code
        if verdict == _UNCHECKED:
            code = _verify_code(self, &table, &bucket)
            if code < 0:
                return False
            verdict = _DAMAGED if code else _SOUND
            _store_release(&self._verdict, verdict)
        return verdict == _SOUND

    cdef Py_ssize_t find(self, const char *key, Py_ssize_t length) noexcept nogil:
        """The id of the ``length`` bytes at ``key`` (``key[length]`` is their
        NUL); -1 if absent, -2 if the chunk is found corrupted (by the
        verification, which the first call runs, or on the way)."""
        cdef uint32_t h, bucket_hash, record, t, m, slot
        cdef const uint8_t *bucket
        cdef int32_t stored
        if not self._sound():
            return _CORRUPT
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

    cdef int _verified(self) except -1:
        """Run the verification if it has not run (the GIL released: other
        threads run meanwhile); MemoryError if it cannot."""
        if _load_acquire(&self._verdict) == _UNCHECKED:
            with nogil:
                self._sound()
            if _load_acquire(&self._verdict) == _UNCHECKED:
                raise MemoryError("no memory to verify the CQDB chunk's hash tables.")
        return 0

    cdef Py_ssize_t find_str(self, str name) except -3:
        """The id of ``name``, -1 if absent (raises if the chunk is corrupted)."""
        cdef Py_ssize_t length
        cdef const char *key = PyUnicode_AsUTF8AndSize(name, &length)
        cdef Py_ssize_t found
        self._verified()  # (the first lookup)
        found = self.find(key, length)
        if found == _CORRUPT:
            raise ValueError(self._damage(f"looking up {name!r:.100}"))
        return found

    def _damage(self, str doing):
        """The message of the error of a lookup (``doing``) that found the
        chunk damaged (what is wrong found once, then remembered)."""
        problem = self._problem
        if problem is None:
            problem = _problem_words(self)
            if problem is None:  # a guard failing on a verified chunk: should not happen
                problem = "a bucket or record a lookup reads is damaged"
            self._problem = problem
        prefix = "" if self.source is None else f"{self.source}: "
        return f"{prefix}{self._where} is corrupted ({doing}): {problem}."

    def check(self):
        """Verify the chunk now (what the first lookup does otherwise).

        Raises
        ------
        ValueError
            If the chunk is damaged: the message names ``source``, the chunk
            and what is wrong.
        """
        self._verified()
        if _load_acquire(&self._verdict) != _SOUND:
            raise ValueError(self._damage("checking it"))

    def vouch(self):
        """Take the chunk as verified without reading it (before any lookup).

        For a chunk whose bytes a checksum vouches for, as skcrf's own
        writer made them (model format 5: its CRC-32 is checked at open),
        so that the first lookup does not read the whole chunk. A lookup
        still checks every bucket and record it reads: a crafted chunk with
        a matching checksum can make a lookup answer "absent", never read
        outside the chunk, loop, or answer the id of another string.
        """
        if _load_acquire(&self._verdict) == _UNCHECKED:
            _store_release(&self._verdict, _SOUND)

    def _verifications(self):
        """(for tests) the fast verification's verdict (1 sound, 0 maybe not)
        and the slow one's code (0 sound), computed now."""
        cdef Py_ssize_t t = 0, s = 0
        return _verify_fast(self), _locate_code(self, &t, &s)

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


# -- at open ------------------------------------------------------------------------


cdef str _open_problem(CQDBIndex self):
    """What is wrong with the table sizes or backward links of ``self``, or None.

    At open, O(chunk), reading the tables' record fields and the backward
    array in order (no record is read): per table of ``m`` buckets exactly
    ``m / 2`` empty (then every probe chain ends at an empty bucket, and
    CRFsuite's count of records, half the buckets, is the number of ids),
    every filled one holding a hash of that table and an offset inside the
    records' range [2072, size - 8]; every backward link inside that range
    and no two alike (increasing, as CRFsuite writes them; else compared
    through a bitmap of the offsets).
    """
    cdef Py_ssize_t t, s, k, m, n_empty, first
    cdef uint32_t h, record, previous, rel, empty, unordered = 0, stray = 0
    cdef const uint8_t *table
    cdef const uint8_t *backward = self._data + self._backward
    cdef uint8_t *marks = NULL
    # offsets a record can have: _FIRST_RECORD + [0, span)
    cdef uint32_t span = <uint32_t> (self._size - 8 - _FIRST_RECORD + 1)
    for t in range(_TABLES):
        m = self._table_size[t]
        table = self._data + self._table_offset[t]
        n_empty = 0
        for s in range(m):  # (no branch: half the buckets are empty, at random)
            h = _u32(table + 8 * s)
            record = _u32(table + 8 * s + 4)
            empty = record == 0
            n_empty += empty
            stray |= (empty ^ 1) & (((h % _TABLES) != <uint32_t> t)
                                    | (record - _FIRST_RECORD >= span))
        if 2 * n_empty != m:
            return (
                f"hash table {t} has {m} buckets for {m - n_empty} strings "
                f"({2 * (m - n_empty)} expected; a full table would make CRFsuite "
                "search forever)"
            )
        if stray:
            for s in range(m):
                h = _u32(table + 8 * s)
                record = _u32(table + 8 * s + 4)
                if record and h % _TABLES != <uint32_t> t:
                    return (f"bucket {s} of hash table {t} holds the hash {h:#x} "
                            f"of table {h % _TABLES}")
                if record and record - _FIRST_RECORD >= span:
                    return (f"bucket {s} of hash table {t} points to offset {record}, "
                            "outside the records")
    if self._n == 0:
        return None
    previous = _u32(backward) - 1  # (the first link is checked against the range)
    for k in range(self._n):
        record = _u32(backward + 4 * k)
        unordered |= (record <= previous) | (record - _FIRST_RECORD >= span)
        previous = record
    if not unordered:
        return None
    marks = <uint8_t *> PyMem_Calloc(span // 8 + 1, 1)
    if marks == NULL:
        raise MemoryError()
    try:
        for k in range(self._n):
            record = _u32(backward + 4 * k)
            rel = record - _FIRST_RECORD  # (wraps if below)
            if rel >= span:
                return f"the backward link of id {k} is {record}, outside the records"
            if marks[rel >> 3] & (1 << (rel & 7)):
                first = 0
                while _u32(backward + 4 * first) != record:
                    first += 1
                return f"the backward links of ids {first} and {k} are both {record}"
            marks[rel >> 3] |= 1 << (rel & 7)
    finally:
        PyMem_Free(marks)
    return None


# -- at the first lookup ---------------------------------------------------------------


cdef inline uint32_t _start_bucket(uint32_t h, uint64_t multiplier, int shift,
                                   uint32_t m) noexcept nogil:
    """``(h >> 8) % m``, CRFsuite's first bucket for the hash ``h`` in a table
    of ``m`` buckets, by a multiplication: with ``l`` the bits of ``m - 1``,
    ``shift = 24 + l`` and ``multiplier = ceil(2**shift / m)``, the quotient
    of any 24-bit number by ``m`` is ``(x * multiplier) >> shift`` (Granlund
    and Montgomery 1994, theorem 4.2: ``multiplier * m`` lies within ``2**l``
    above ``2**shift``)."""
    cdef uint32_t x = h >> 8
    return x - <uint32_t> ((x * multiplier) >> shift) * m


def _first_bucket(uint32_t h, uint32_t m):
    """(for tests) :func:`_start_bucket` of ``h`` in a table of ``m > 0``
    buckets, as the verification computes it."""
    cdef int shift = 24
    if m == 0:
        raise ValueError("m must be positive")
    while (<uint64_t> 1 << (shift - 24)) < <uint64_t> m:
        shift += 1
    return _start_bucket(h, ((<uint64_t> 1 << shift) + m - 1) // m, shift, m)


cdef int _verify_code(CQDBIndex self, Py_ssize_t *where_table,
                      Py_ssize_t *where_bucket) noexcept nogil:
    """0 if every filled bucket of ``self`` is sound, else what is wrong with
    the first that is not (``_WRONG_TABLE`` .. ``_UNREACHABLE``, its table
    and bucket in ``where_*``); -1 out of memory.

    :func:`_verify_fast` answers for a sound chunk written as CRFsuite
    writes it; otherwise :func:`_locate_code` decides and finds the bucket.
    """
    cdef int fast = _verify_fast(self)
    if fast == 1:
        return 0
    if fast < 0:
        return -1
    return _locate_code(self, where_table, where_bucket)


cdef inline uint32_t _has_zero(uint32_t v) noexcept nogil:
    """Nonzero if a byte of ``v`` is zero."""
    return (v - 0x01010101u) & ~v & 0x80808080u


cdef inline uint32_t _key_hash(const uint8_t *key, uint32_t length, const uint8_t *end,
                               bint *ok) noexcept nogil:
    """:func:`_hashlittle` of the ``length`` bytes at ``key`` (a record's key:
    inside a buffer that ends at ``end``), and ``ok[0]`` whether they are one
    NUL-terminated string (a NUL last, none before).

    When the last 12-byte block lies inside the buffer, the words are read
    whole (bytes past the key masked) and scanned for NULs as they are
    hashed: no copy, no call.
    """
    cdef uint32_t a, b, c, w0, w1, w2, keep0, keep1, keep2, nul = 0
    cdef uint32_t rest = length
    cdef const uint8_t *p = key
    if length == 0 or end - key < ((<Py_ssize_t> length + 11) // 12) * 12:
        ok[0] = length > 0 and <const uint8_t *> memchr(key, 0, length) == key + length - 1
        return _hashlittle(key, length)
    a = b = c = <uint32_t> 0xDEADBEEF + length
    while rest > 12:
        w0 = _u32(p)
        w1 = _u32(p + 4)
        w2 = _u32(p + 8)
        nul |= _has_zero(w0) | _has_zero(w1) | _has_zero(w2)
        a += w0
        b += w1
        c += w2
        _mix(&a, &b, &c)
        rest -= 12
        p += 12
    # the last 1 .. 12 bytes: keep the first ``rest`` bytes for the hash;
    # the first ``rest - 1`` must hold no NUL, the last must be one
    keep0 = _bytes_mask(rest)
    keep1 = _bytes_mask(rest - 4) if rest > 4 else 0
    keep2 = _bytes_mask(rest - 8) if rest > 8 else 0
    w0 = _u32(p) & keep0
    w1 = _u32(p + 4) & keep1
    w2 = _u32(p + 8) & keep2
    # (NUL scan: the bytes past ``rest - 1`` made 0xFF)
    nul |= (_has_zero(w0 | ~_bytes_mask(rest - 1))
            | _has_zero(w1 | ~(_bytes_mask(rest - 5) if rest > 5 else 0))
            | _has_zero(w2 | ~(_bytes_mask(rest - 9) if rest > 9 else 0)))
    ok[0] = nul == 0 and p[rest - 1] == 0
    a += w0
    b += w1
    c += w2
    _final(&a, &b, &c)
    return c


def _key_hash_at(const uint8_t[::1] data, Py_ssize_t offset, uint32_t length):
    """(for tests) ``(hash, one NUL-terminated string)`` of the ``length``
    bytes at ``offset`` of ``data`` (which must hold them), as the
    verification computes them."""
    cdef bint ok = False
    if offset < 0 or length > data.shape[0] - offset:
        raise ValueError("outside the data")
    h = _key_hash(&data[0] + offset, length, &data[0] + data.shape[0], &ok)
    return h, bool(ok)


cdef inline uint32_t _bytes_mask(uint32_t n) noexcept nogil:
    """The mask of the first ``n`` bytes of a little-endian word (n <= 4: all
    four from 4 on)."""
    return 0xFFFFFFFFu if n >= 4 else ((<uint32_t> 1 << (8 * n)) - 1)


cdef int _verify_fast(CQDBIndex self) noexcept nogil:
    """1 if ``self`` passes :func:`_locate_code`'s checks, 0 if it may not
    (then that one decides), -1 out of memory.

    The same checks in the order of the memory, for chunks laid out as
    CRFsuite writes them (records in id order):

    1. the records in id order (the backward links increasing; else 0):
       each holds its id and a NUL-terminated key, hashed; the pair
       (offset, hash) goes to a map of the records' offsets, an array of
       slots indexed by ``(offset - first) >> shift`` with ``2**shift`` at
       most the smallest distance between two records, so one record per
       slot;
    2. each table in order: its filled buckets (gathered without branches)
       in the table of their hash (checked at open), reachable from their
       start bucket; then each finds (offset, hash) in its slot and empties
       the slot, so a record in two buckets, or a bucket on no record or
       with another hash, is caught.

    With as many filled buckets as ids (the open's count), every record is
    then in exactly one bucket, with its hash.
    """
    cdef Py_ssize_t n = self._n, k, t, s, m, m_max = 0, n_slots, n_filled
    cdef uint32_t h, record, key_size, previous, low, high, gap, start, filled, in_range
    cdef uint32_t idx, bad = 0
    cdef uint64_t multiplier, entry
    cdef int shift, slot_shift
    cdef bint key_ok
    cdef const uint8_t *backward = self._data + self._backward
    cdef const uint8_t *end = self._data + self._size
    cdef const uint8_t *table
    cdef uint64_t *slots = NULL
    cdef uint32_t *empty_before = NULL
    cdef uint64_t *gathered = NULL
    cdef int verdict = 1
    if n == 0:
        return 1
    # the records' order and smallest distance
    low = _u32(backward)
    high = _u32(backward + 4 * (n - 1))
    gap = 0xFFFFFFFFu
    previous = low
    for k in range(1, n):
        record = _u32(backward + 4 * k)
        if record <= previous:
            return 0
        gap = record - previous if record - previous < gap else gap
        previous = record
    if gap < 9:  # overlapping records
        return 0
    slot_shift = 3
    while (<uint32_t> 1 << (slot_shift + 1)) <= gap and slot_shift < 30:
        slot_shift += 1
    for t in range(_TABLES):
        if self._table_size[t] > m_max:
            m_max = self._table_size[t]
    n_slots = ((high - low) >> slot_shift) + 1
    slots = <uint64_t *> malloc(n_slots * sizeof(uint64_t))
    empty_before = <uint32_t *> malloc((m_max + 1) * sizeof(uint32_t))
    gathered = <uint64_t *> malloc((m_max + 1) * sizeof(uint64_t))
    if slots == NULL or empty_before == NULL or gathered == NULL:
        verdict = -1
    else:
        # 1. the records, in id order
        memset(slots, 0, n_slots * sizeof(uint64_t))
        for k in range(n):
            record = _u32(backward + 4 * k)  # (inside [2072, size - 8]: the open)
            key_size = _u32(self._data + record + 4)
            if key_size - 1 >= <uint32_t> (self._size - 8) - record:  # (0, or too long)
                bad = 1
                break
            h = _key_hash(self._data + record + 8, key_size, end, &key_ok)
            bad |= (_u32(self._data + record) != <uint32_t> k) | (not key_ok)
            slots[(record - low) >> slot_shift] = (<uint64_t> record << 32) | h
        if bad:
            verdict = 0
    if verdict == 1:
        # 2. the tables, in order
        for t in range(_TABLES):
            m = self._table_size[t]
            if m == 0:
                continue
            table = self._data + self._table_offset[t]
            empty_before[0] = 0
            for s in range(m):
                empty_before[s + 1] = empty_before[s] + (_u32(table + 8 * s + 4) == 0)
            shift = 24
            while (<uint64_t> 1 << (shift - 24)) < <uint64_t> m:
                shift += 1
            multiplier = ((<uint64_t> 1 << shift) + m - 1) // m
            n_filled = 0
            for s in range(m):  # (no branch: half the buckets are empty, at random)
                h = _u32(table + 8 * s)
                record = _u32(table + 8 * s + 4)
                filled = record != 0
                start = _start_bucket(h, multiplier, shift, <uint32_t> m)
                bad |= filled & (empty_before[s] - empty_before[start]
                                 + (start > s) * empty_before[m] != 0)
                gathered[n_filled] = (<uint64_t> record << 32) | h
                n_filled += filled
            for s in range(n_filled):
                entry = gathered[s]
                record = <uint32_t> (entry >> 32)
                in_range = (record - low) <= high - low
                idx = ((record - low) >> slot_shift) if in_range else 0
                bad |= (in_range ^ 1) | (slots[idx] != entry)
                slots[idx] = 0 if in_range else slots[idx]
            if bad:
                verdict = 0
                break
    free(slots)
    free(empty_before)
    free(gathered)
    return verdict


cdef int _locate_code(CQDBIndex self, Py_ssize_t *where_table,
                      Py_ssize_t *where_bucket) noexcept nogil:
    """What :func:`_verify_code` answers, bucket by bucket.

    Every bucket is read once, in order, and the record it points to
    (prefetched a few buckets ahead); O(chunk). Per filled bucket: the
    table of its hash; a record inside the chunk whose key (its size, one
    NUL, its last byte) hashes to the bucket's hash, whose id is in range,
    in no other bucket, and has this record as its backward link; the
    bucket reachable by linear probing from its start bucket without
    crossing an empty one. With the open's checks (half of each table empty,
    so as many filled buckets as ids), every id then has one bucket, every
    lookup of its string finds it as CRFsuite's does (equal strings aside:
    both lookups find the first), and a string absent from its table is
    absent from the chunk.
    """
    cdef Py_ssize_t t, s, m, m_max = 0
    cdef uint32_t h, record, key_size, start, stored
    cdef const uint8_t *table
    cdef const uint8_t *key
    cdef uint32_t *empty_before = NULL
    cdef uint8_t *seen = NULL
    cdef int code = 0
    for t in range(_TABLES):
        if self._table_size[t] > m_max:
            m_max = self._table_size[t]
    empty_before = <uint32_t *> malloc((m_max + 1) * sizeof(uint32_t))
    seen = <uint8_t *> calloc(self._n // 8 + 1, 1)
    if empty_before == NULL or seen == NULL:
        free(empty_before)
        free(seen)
        return -1
    for t in range(_TABLES):
        m = self._table_size[t]
        if m == 0:
            continue
        table = self._data + self._table_offset[t]
        empty_before[0] = 0
        for s in range(m):
            empty_before[s + 1] = empty_before[s] + (_u32(table + 8 * s + 4) == 0)
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
                code = _WRONG_TABLE
            elif record < _FIRST_RECORD or record > self._size - 8:
                code = _OUTSIDE
            else:
                key = self._data + record + 8
                key_size = _u32(self._data + record + 4)
                stored = _u32(self._data + record)
                start = (h >> 8) % <uint32_t> m
                if (key_size < 1 or key_size > self._size - 8 - record
                        or <const uint8_t *> memchr(key, 0, key_size) != key + key_size - 1):
                    code = _BAD_KEY
                elif _hashlittle(key, key_size) != h:
                    code = _BAD_HASH
                elif stored >= <uint32_t> self._n:
                    code = _BAD_ID
                elif seen[stored >> 3] & (1 << (stored & 7)):
                    code = _TWICE
                elif _u32(self._data + self._backward + 4 * <Py_ssize_t> stored) != record:
                    code = _BAD_LINK
                elif (empty_before[s] - empty_before[start] if start <= s
                        else empty_before[m] - empty_before[start] + empty_before[s]):
                    code = _UNREACHABLE
                else:
                    seen[stored >> 3] |= 1 << (stored & 7)
            if code:
                where_table[0] = t
                where_bucket[0] = s
                free(empty_before)
                free(seen)
                return code
    free(empty_before)
    free(seen)
    return 0


cdef str _problem_words(CQDBIndex self):
    """What :func:`_verify_code` finds wrong with ``self``, in words (the
    first bucket :func:`_locate_code` finds wrong), or None; MemoryError if
    it cannot run."""
    cdef Py_ssize_t t = 0, s = 0
    cdef int code
    with nogil:
        code = _locate_code(self, &t, &s)
    if code < 0:
        raise MemoryError()
    if code == 0:
        return None
    cdef const uint8_t *bucket = self._data + self._table_offset[t] + 8 * s
    cdef uint32_t h = _u32(bucket), record = _u32(bucket + 4)
    cdef int32_t stored = 0
    if code > _OUTSIDE:
        stored = <int32_t> _u32(self._data + record)
    here = f"bucket {s} of hash table {t}"
    if code == _WRONG_TABLE:
        return f"{here} holds the hash {h:#x} of table {h % _TABLES}"
    if code == _OUTSIDE:
        return f"{here} points to offset {record}, outside the records"
    if code == _BAD_KEY:
        return (f"the record at offset {record} ({here}) has a string that runs outside "
                "the chunk or is not one NUL-terminated string")
    if code == _BAD_HASH:
        return f"{here} holds the hash {h:#x}, not its string's"
    if code == _BAD_ID:
        return f"the record at offset {record} ({here}) holds the id {stored}, out of range"
    if code == _TWICE:
        return f"the id {stored} is in more than one bucket ({here} among them)"
    if code == _BAD_LINK:
        return (f"the backward link of id {stored} is "
                f"{_u32(self._data + self._backward + 4 * stored)}, not its record {record} "
                f"({here})")
    return (f"CRFsuite's lookup of the string of id {stored} stops at an empty bucket of "
            f"hash table {t} before reaching it ({here})")


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

    @classmethod
    def of_packed(cls, index, *, source=None, distinct_known=False):
        """The names of a :class:`~skcrf._utils._name_index.PackedNameIndex`.

        Parameters
        ----------
        index : PackedNameIndex
        source : str, optional
            Prefixes the errors of a damaged table (a file's name); becomes
            ``index.source``.
        distinct_known : bool, default=False
            The table was packed from distinct names (a vocabulary's): listing
            them skips the check for equal names (a set of every name).
        """
        index.source = source

        def read_all():
            try:
                return index.names(distinct_known=distinct_known)
            except ValueError as exc:
                if source is None:
                    raise
                raise ValueError(f"{source}: {exc}") from None

        return cls(index, read_all)

    def tolist(self):
        """The names as a list (read once, then the same list)."""
        names = self._names
        if names is None:
            names = self._names = list(self._read_all())
        return names

    def id_of(self, name):
        """The id of ``name``, or -1."""
        return self.string_index.lookup(name)

    def check(self):
        """Verify the index now (:meth:`CQDBIndex.check`): what the first
        lookup does otherwise; ValueError naming the model if it is damaged."""
        self.string_index.check()

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
