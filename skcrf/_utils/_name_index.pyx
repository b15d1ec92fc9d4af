"""Name -> id lookups where the names lie: the base class, and the packed table of model format 6.

A model opened for tagging needs the ids of the attributes its tokens hold,
not a Python object per attribute. :class:`NameIndex` is what a vocabulary
looks names up in (:class:`~skcrf._utils._cqdb_index.CQDBIndex` over a
CRFsuite file's CQDB chunk, :class:`PackedNameIndex` over format 6's three
arrays), always read in place, never copied.

The packed table (model format 6, specified in :mod:`skcrf.io`) spends about
12 bytes per name beside the name's own UTF-8 bytes, where a CQDB chunk
spends about 30:

- ``text`` (uint8): the names' UTF-8 bytes, one after another, in id order;
- ``starts`` (uint32, or uint64 when ``text`` reaches 4 GiB): ``n + 1``
  offsets, name ``k`` being ``text[starts[k]:starts[k + 1]]``;
- ``table``: open addressing with linear probing, ``n + n // 2 + 1`` slots
  (at most two thirds full: a probe always meets an empty slot). With
  ``b = max(1, n.bit_length())``, a slot is uint32 when ``b <= 24``, else
  uint64; 0 is empty, else ``(tag << b) | (id + 1)``. A name of hash ``h``
  (:func:`name_hash`) is looked for from slot ``((h >> 32) * size) >> 32``
  on, and its ``tag`` is the low ``slot bits - b`` bits of ``h``: a probe
  compares names only when the tags agree.

Safety: the constructor checks the arrays' sizes, that the offsets rise
from 0 to the text's end, and that the table holds every id exactly once
(O(n), no name read). A lookup then cannot read outside the arrays or loop
forever, and answers an id only for a name whose bytes it compared. What
it does not check is that each name sits where its hash sends it (a
damaged table makes a lookup answer "absent"): :meth:`PackedNameIndex.check`
verifies that, and the model reader checks the file's CRC-32 instead.
"""

import numpy as np

from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcmp, memcpy

from skcrf._utils._byte_index cimport SKCRF_LITTLE_ENDIAN, _mix, hash_bytes

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t *size) except NULL

__all__ = ["NameIndex", "PackedNameIndex", "name_hash", "pack_names", "table_layout"]

# The largest count of names (a slot index must fit in 32 bits).
cdef Py_ssize_t _MAX_NAMES = 2**31 - 1


cdef inline uint64_t _hash_portable(const uint8_t *data, Py_ssize_t length) noexcept nogil:
    """:func:`~skcrf._utils._byte_index.hash_bytes`'s value, words read little-endian."""
    cdef uint64_t h = 0x4CF5AD432745937FULL ^ (<uint64_t> length * 0xC2B2AE3D27D4EB4FULL)
    cdef uint64_t word
    cdef Py_ssize_t i, m
    while length > 0:
        m = 8 if length >= 8 else length
        word = 0
        for i in range(m):
            word |= (<uint64_t> data[i]) << (8 * i)
        h = _mix(h, word)
        data += m
        length -= m
    h ^= h >> 32
    h *= 0xD6E8FEB86659FD93ULL
    h ^= h >> 29
    return h


cdef inline uint64_t _name_hash(const uint8_t *data, Py_ssize_t length) noexcept nogil:
    """The hash of format 6's table: part of the file format, never to change."""
    if SKCRF_LITTLE_ENDIAN:
        return hash_bytes(<const char *> data, length)
    return _hash_portable(data, length)


def name_hash(const uint8_t[::1] data):
    """The 64-bit hash that places a name's UTF-8 bytes in format 6's table.

    >>> name_hash(b"bias") == name_hash(bytearray(b"bias"))
    True
    """
    if data.shape[0] == 0:
        return _name_hash(NULL, 0)
    return _name_hash(&data[0], data.shape[0])


def table_layout(Py_ssize_t n):
    """``(slots, wide, id_bits)`` of the table of ``n`` names (see the module docstring)."""
    if n < 0 or n > _MAX_NAMES:
        raise ValueError(f"a name table holds 0 to {_MAX_NAMES} names; got {n}.")
    id_bits = max(1, int(n).bit_length())
    return n + n // 2 + 1, id_bits > 24, id_bits


cdef inline Py_ssize_t _home(uint64_t h, Py_ssize_t size) noexcept nogil:
    return <Py_ssize_t> (((h >> 32) * <uint64_t> size) >> 32)


cdef inline uint64_t _tag(uint64_t h, bint wide, int id_bits) noexcept nogil:
    cdef int bits = (64 if wide else 32) - id_bits
    return h & ((<uint64_t> 1 << bits) - 1)


cdef const char *_utf8(object name, Py_ssize_t k, Py_ssize_t *length) except NULL:
    """``name``'s UTF-8 bytes (ValueError naming attribute ``k`` when it has none).

    No object is made: an ASCII str's bytes are its own; another str keeps a
    UTF-8 copy (CPython's cache, freed with it).
    """
    if type(name) is not str:
        raise ValueError(f"attribute {k} ({name!r:.100}) is not a str.")
    try:
        return PyUnicode_AsUTF8AndSize(name, length)
    except UnicodeEncodeError:
        raise ValueError(f"attribute {k} ({name!r:.100}) cannot be encoded in UTF-8.") from None


cdef void _fill_table(const uint8_t *text, const uint64_t *offsets, Py_ssize_t n,
                      uint8_t *table, Py_ssize_t size, bint wide, int id_bits) noexcept nogil:
    """Place ids 0 .. n - 1 (name k: text[offsets[k]:offsets[k + 1]]) in an empty table."""
    cdef Py_ssize_t k, slot
    cdef uint64_t h, value, wide_value
    cdef uint32_t narrow_value
    for k in range(n):
        h = _name_hash(text + offsets[k], <Py_ssize_t> (offsets[k + 1] - offsets[k]))
        value = (_tag(h, wide, id_bits) << id_bits) | <uint64_t> (k + 1)
        slot = _home(h, size)
        while True:
            if wide:
                memcpy(&wide_value, table + 8 * slot, 8)
                if wide_value == 0:
                    memcpy(table + 8 * slot, &value, 8)
                    break
            else:
                memcpy(&narrow_value, table + 4 * slot, 4)
                if narrow_value == 0:
                    narrow_value = <uint32_t> value
                    memcpy(table + 4 * slot, &narrow_value, 4)
                    break
            slot += 1
            if slot == size:
                slot = 0


def pack_names(names):
    """Format 6's ``(text, starts, table)`` arrays of distinct names (str).

    Raises
    ------
    ValueError
        If a name is not a str encodable in UTF-8 (a lone surrogate), or
        there are more than 2**31 - 1 of them.

    Examples
    --------
    >>> text, starts, table = pack_names(["w:the", "bias"])
    >>> bytes(text), starts.tolist(), len(table)
    (b'w:thebias', [0, 5, 9], 4)
    >>> PackedNameIndex(text, starts, table, 2).lookup("bias")
    1
    """
    names = names if type(names) is list else list(names)
    cdef Py_ssize_t n = len(names), k, length
    cdef uint64_t total = 0
    size, wide, id_bits = table_layout(n)
    offsets = np.zeros(n + 1, dtype=np.uint64)
    cdef uint64_t[::1] offsets_view = offsets
    for k in range(n):  # (two passes, no bytes object per name)
        _utf8(names[k], k, &length)
        total += <uint64_t> length
        offsets_view[k + 1] = total
    text = np.empty(total, dtype=np.uint8)
    cdef uint8_t[::1] text_view = text if total else np.zeros(1, np.uint8)
    for k in range(n):
        memcpy(&text_view[0] + offsets_view[k], _utf8(names[k], k, &length), length)
    table = np.zeros(size, dtype=np.uint64 if wide else np.uint32)
    cdef uint8_t[::1] table_view = table.view(np.uint8)
    cdef Py_ssize_t count = n, slots = size
    cdef bint is_wide = wide
    cdef int bits = id_bits
    with nogil:
        _fill_table(&text_view[0], &offsets_view[0], count, &table_view[0], slots, is_wide, bits)
    starts = offsets if offsets[n] > np.iinfo(np.uint32).max else offsets.astype(np.uint32)
    return text, starts, table


cdef inline uint64_t _slot(PackedNameIndex index, Py_ssize_t k) noexcept nogil:
    """Slot ``k`` of the table."""
    cdef uint32_t narrow
    cdef uint64_t wide
    if index._wide_table:
        memcpy(&wide, index._table + 8 * k, 8)
        return wide
    memcpy(&narrow, index._table + 4 * k, 4)
    return narrow


cdef enum:
    _OUT_OF_RANGE = 1
    _TWICE = 2
    _MISSING = 3


cdef Py_ssize_t _first_fall(PackedNameIndex index) noexcept nogil:
    """The first k whose offset is below offset k - 1, or 0."""
    cdef Py_ssize_t k
    for k in range(1, index._n + 1):
        if name_start(index, k) < name_start(index, k - 1):
            return k
    return 0


cdef int _table_problem(PackedNameIndex index, uint8_t *seen, Py_ssize_t *where) noexcept nogil:
    """Whether every id is in the table once; ``where``: the slot (or count) concerned."""
    cdef Py_ssize_t k, filled = 0
    cdef uint64_t value, mask = (<uint64_t> 1 << index._id_bits) - 1
    cdef uint64_t n = <uint64_t> index._n
    for k in range(index._size):
        value = _slot(index, k)
        if value == 0:
            continue
        value &= mask
        where[0] = k
        if value == 0 or value > n:
            return _OUT_OF_RANGE
        if seen[value]:
            return _TWICE
        seen[value] = 1
        filled += 1
    where[0] = filled
    return _MISSING if filled != index._n else 0


cdef class NameIndex:
    """Name -> id lookups (``0 .. n - 1``) of a model's names, where they lie.

    The base of :class:`PackedNameIndex` and
    :class:`~skcrf._utils._cqdb_index.CQDBIndex`: a vocabulary looks names
    up through :meth:`find_str` (its compiled code through ``find``).

    Attributes
    ----------
    source : str or None
        Names the model at the start of the errors of lookups that find the
        index damaged; the reader that makes the index sets it.
    """

    def __len__(self):
        return self._n

    cdef Py_ssize_t find(self, const char *key, Py_ssize_t length) noexcept nogil:
        """The id of the ``length`` bytes at ``key``, -1 if absent (-2: damaged)."""
        return -1

    cdef Py_ssize_t find_str(self, str name) except -3:
        """The id of ``name``, -1 if absent."""
        cdef Py_ssize_t length
        cdef const char *key = PyUnicode_AsUTF8AndSize(name, &length)
        return self.find(key, length)

    def lookup(self, name):
        """The id of the string ``name``, or -1."""
        if type(name) is not str:
            return -1
        return self.find_str(name)


cdef class PackedNameIndex(NameIndex):
    """The lookups of format 6's name table (see the module docstring).

    Parameters
    ----------
    text, starts, table : ndarray
        The three arrays (uint8; uint32 or uint64; the slot type of
        :func:`table_layout`), used where they lie (a map of the file).
    n_names : int
        The number of names (the model's ``n_attributes``).
    what : str, default="attribute"
        Names the table in error messages.

    Raises
    ------
    ValueError
        If the arrays' types or sizes are not those of ``n_names`` names, the
        offsets do not rise from 0 to the text's end, or the table does not
        hold every id exactly once.
    """

    def __init__(self, text, starts, table, Py_ssize_t n_names, str what="attribute"):
        where = f"the {what} name table"
        size, wide, id_bits = table_layout(n_names)
        text = np.asarray(text)
        starts = np.asarray(starts)
        table = np.asarray(table)
        if text.dtype != np.uint8 or text.ndim != 1:
            raise ValueError(f"{where}: the text must be a 1-D uint8 array.")
        if starts.dtype not in (np.uint32, np.uint64) or starts.shape != (n_names + 1,):
            raise ValueError(
                f"{where}: the offsets must be {n_names + 1} uint32 or uint64; got "
                f"{starts.shape} of {starts.dtype}."
            )
        want = np.uint64 if wide else np.uint32
        if table.dtype != want or table.shape != (size,):
            raise ValueError(
                f"{where}: {n_names} names need {size} slots of {np.dtype(want)}; got "
                f"{table.shape} of {table.dtype}."
            )
        self._n = n_names
        self._size = size
        self._wide_starts = starts.dtype == np.uint64
        self._wide_table = wide
        self._id_bits = id_bits
        self.source = None
        # native byte order (format 6 is little-endian, as are the hosts that map it)
        starts = np.ascontiguousarray(starts, dtype=starts.dtype.newbyteorder("="))
        table = np.ascontiguousarray(table, dtype=table.dtype.newbyteorder("="))
        self._arrays = (text, starts, table)
        self._bytes = np.ascontiguousarray(text) if len(text) else np.zeros(1, np.uint8)
        cdef const uint8_t[::1] starts_bytes = starts.view(np.uint8)
        cdef const uint8_t[::1] table_bytes = table.view(np.uint8)
        self._text = &self._bytes[0]
        self._starts = &starts_bytes[0]
        self._table = &table_bytes[0]
        problem = self._open_problem(len(text))
        if problem is not None:
            raise ValueError(f"{where}: {problem}.")

    def _open_problem(self, Py_ssize_t text_size):
        """What is wrong with the offsets or the table's ids, or None (O(n))."""
        cdef Py_ssize_t n = self._n, where = 0, value = 0
        cdef uint64_t mask = (<uint64_t> 1 << self._id_bits) - 1
        cdef int code
        cdef uint8_t *seen
        if name_start(self, 0) != 0 or name_start(self, n) != text_size:
            return (f"the offsets run from {name_start(self, 0)} to {name_start(self, n)}, "
                    f"not from 0 to the text's end ({text_size})")
        with nogil:
            where = _first_fall(self)
        if where:
            return (f"offset {where} ({name_start(self, where)}) is below offset {where - 1} "
                    f"({name_start(self, where - 1)})")
        seen = <uint8_t *> calloc(n + 1, 1)
        if seen == NULL:
            raise MemoryError()
        with nogil:
            code = _table_problem(self, seen, &where)
        free(seen)
        if code == _OUT_OF_RANGE or code == _TWICE:
            value = <Py_ssize_t> (_slot(self, where) & mask) - 1
        if code == _OUT_OF_RANGE:
            return f"slot {where} holds the id {value}, out of range"
        if code == _TWICE:
            return f"the id {value} is in more than one slot (slot {where} among them)"
        if code == _MISSING:
            return f"the table holds {where} ids, not {n}"
        return None

    cdef Py_ssize_t find(self, const char *key, Py_ssize_t length) noexcept nogil:
        cdef uint64_t h = _name_hash(<const uint8_t *> key, length)
        cdef uint64_t tag = _tag(h, self._wide_table, self._id_bits)
        cdef uint64_t mask = (<uint64_t> 1 << self._id_bits) - 1
        cdef uint64_t value
        cdef Py_ssize_t slot = _home(h, self._size), k, start
        while True:
            value = _slot(self, slot)
            if value == 0:
                return -1
            if value >> self._id_bits == tag:
                k = <Py_ssize_t> (value & mask) - 1
                start = name_start(self, k)
                if (name_start(self, k + 1) - start == length
                        and memcmp(self._text + start, key, length) == 0):
                    return k
            slot += 1
            if slot == self._size:
                slot = 0

    @property
    def packed(self):
        """``(text, starts)``: the names' bytes and their ``n + 1`` offsets (int64)."""
        text, starts, _ = self._arrays
        return text, np.asarray(starts, dtype=np.int64)

    def name(self, Py_ssize_t k):
        """The name of id ``k`` (ValueError if its bytes are not UTF-8)."""
        if k < 0 or k >= self._n:
            raise IndexError(f"id {k} out of range ({self._n} ids).")
        cdef Py_ssize_t start = name_start(self, k)
        try:
            return PyUnicode_DecodeUTF8(<const char *> self._text + start,
                                        name_start(self, k + 1) - start, "strict")
        except UnicodeDecodeError:
            raise ValueError(f"the name of id {k} is not valid UTF-8.") from None

    def names(self, *, distinct_known=False):
        """Every name, in id order (ValueError if one is not UTF-8 or two are equal).

        ``distinct_known=True`` skips the check for equal names (a set of
        every name), for a table packed from names known to be distinct.
        """
        names = [self.name(k) for k in range(self._n)]
        if not distinct_known and len(set(names)) != len(names):
            raise ValueError("the name table holds the same name twice.")
        return names

    def check(self):
        """Verify that every name is found at its id (what the file's CRC-32 vouches for).

        Raises
        ------
        ValueError
            If a name is not where its hash sends it, or two names are equal;
            the message names ``source``.
        """
        cdef Py_ssize_t k, start
        for k in range(self._n):
            start = name_start(self, k)
            if self.find(<const char *> self._text + start, name_start(self, k + 1) - start) != k:
                prefix = "" if self.source is None else f"{self.source}: "
                raise ValueError(
                    f"{prefix}the name table is corrupted: the name of id {k} is not found "
                    "at its id (a misplaced slot, or the same name twice)."
                )
