"""Names as UTF-8 bytes to ids, in C: one arena of bytes and an open-addressing table.

:class:`ByteIndex` numbers byte strings in order of first addition (as
CRFsuite numbers attributes) and finds them again with no Python object per
name or per lookup: the compiled template expander builds each attribute's
bytes in a buffer and looks them up here with the GIL released.

- The names lie one after another in one arena; ``_starts[k]`` is where name
  ``k`` begins (``_starts[n]`` is the end).
- The table holds (hash, id, length, first 16 bytes) per 32-byte slot,
  linear probing, at most half full: a lookup of a name of at most 16 bytes
  reads one slot and never the arena (one cache miss, which
  ``prefetch_slot`` can start early).
- ``find`` only reads: any number of threads may look up at once while no
  thread adds. ``add`` is for one thread (a fit's encoding).
"""

from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from cpython.unicode cimport PyUnicode_Check
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcmp, memcpy, memset

from skcrf._utils._byte_index cimport hash_bytes

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t *size) except NULL

cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    /* The table: 64-byte aligned; from 2 MiB on, aligned to 2 MiB and marked
       for transparent huge pages (its lookups are random: TLB misses). */
    static void *skcrf_table_alloc(size_t size) {
        void *p = NULL;
        size_t align = size >= (2u << 20) ? (2u << 20) : 64;
    #if defined(_WIN32)
        p = _aligned_malloc(size, align);
    #else
        if (posix_memalign(&p, align, size) != 0) return NULL;
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (align == (2u << 20)) madvise(p, size, MADV_HUGEPAGE);
    #endif
    #endif
        return p;
    }
    static void skcrf_table_free(void *p) {
    #if defined(_WIN32)
        _aligned_free(p);
    #else
        free(p);
    #endif
    }
    """
    void *skcrf_table_alloc(size_t size) noexcept nogil
    void skcrf_table_free(void *p) noexcept nogil

cdef enum:
    _FIRST_CAPACITY = 64
    _HEAD = 16


cdef inline bint _holds(_Slot *slot, const char *arena, const int64_t *starts,
                        const char *data, Py_ssize_t length) noexcept nogil:
    """Whether the (hash-matching) slot holds these bytes."""
    if slot.length != length:
        return False
    if length <= _HEAD:
        return memcmp(slot.head, data, length) == 0
    return (memcmp(slot.head, data, _HEAD) == 0
            and memcmp(arena + starts[slot.id] + _HEAD, data + _HEAD, length - _HEAD) == 0)


cdef class ByteIndex:
    """Byte strings numbered 0, 1, ... in order of first addition.

    Parameters
    ----------
    names : iterable of str, optional
        Added in order (UTF-8); a repeated name keeps its first id.

    Examples
    --------
    >>> from skcrf._utils._byte_index import ByteIndex
    >>> index = ByteIndex(["w:the", "w:cat"])
    >>> index.lookup("w:cat"), index.lookup("w:dog"), len(index)
    (1, -1, 2)
    >>> index.names()
    ['w:the', 'w:cat']
    """

    def __cinit__(self, *args, **kwargs):
        self._table = <_Slot *> skcrf_table_alloc(_FIRST_CAPACITY * sizeof(_Slot))
        self._starts = <int64_t *> PyMem_RawMalloc(_FIRST_CAPACITY * sizeof(int64_t))
        self._arena = <char *> PyMem_RawMalloc(_FIRST_CAPACITY * 16)
        if self._table == NULL or self._starts == NULL or self._arena == NULL:
            raise MemoryError()
        cdef Py_ssize_t k
        for k in range(_FIRST_CAPACITY):
            self._table[k].id = -1
        self._mask = _FIRST_CAPACITY - 1
        self._starts_capacity = _FIRST_CAPACITY
        self._arena_capacity = _FIRST_CAPACITY * 16
        self._starts[0] = 0

    def __dealloc__(self):
        skcrf_table_free(self._table)
        PyMem_RawFree(self._starts)
        PyMem_RawFree(self._arena)

    def __init__(self, names=()):
        for name in names:
            self.add_str(name)

    def __len__(self):
        return self._n

    def __reduce__(self):
        return (ByteIndex, (self.names(),))

    cdef Py_ssize_t find(self, const char *data, Py_ssize_t length) noexcept nogil:
        """The id of the bytes, or -1."""
        cdef uint64_t h = hash_bytes(data, length)
        cdef Py_ssize_t k = <Py_ssize_t> (h & <uint64_t> self._mask)
        cdef _Slot *slot
        while True:
            slot = &self._table[k]
            if slot.id < 0:
                return -1
            if slot.hash == h and _holds(slot, self._arena, self._starts, data, length):
                return slot.id
            k = (k + 1) & self._mask

    cdef Py_ssize_t add(self, const char *data, Py_ssize_t length) noexcept nogil:
        """The id of the bytes, added if new; -2 when memory runs out."""
        cdef uint64_t h = hash_bytes(data, length)
        cdef Py_ssize_t k = <Py_ssize_t> (h & <uint64_t> self._mask)
        cdef _Slot *slot
        cdef int64_t need
        cdef void *grown
        while True:
            slot = &self._table[k]
            if slot.id < 0:
                break
            if slot.hash == h and _holds(slot, self._arena, self._starts, data, length):
                return slot.id
            k = (k + 1) & self._mask
        if length > 0x7FFFFFFF or self._n >= 0x7FFFFFFE:
            return -2
        need = self._arena_size + length
        if need > self._arena_capacity:
            while self._arena_capacity < need:
                self._arena_capacity *= 2
            grown = PyMem_RawRealloc(self._arena, <size_t> self._arena_capacity)
            if grown == NULL:
                return -2
            self._arena = <char *> grown
        if self._n + 2 > self._starts_capacity:
            grown = PyMem_RawRealloc(self._starts, 2 * self._starts_capacity * sizeof(int64_t))
            if grown == NULL:
                return -2
            self._starts = <int64_t *> grown
            self._starts_capacity *= 2
        memcpy(self._arena + self._arena_size, data, length)
        self._arena_size = need
        slot.hash = h
        slot.id = <int32_t> self._n
        slot.length = <int32_t> length
        memset(slot.head, 0, _HEAD)
        memcpy(slot.head, data, length if length < _HEAD else _HEAD)
        self._n += 1
        self._starts[self._n] = need
        if 2 * self._n > self._mask and self._grow_table() < 0:
            return -2
        return self._n - 1

    cdef int _reserve(self, Py_ssize_t n, int64_t arena_size) noexcept nogil:
        """Room for ``n`` names of ``arena_size`` bytes in all (no growth while adding)."""
        cdef void *grown
        if arena_size > self._arena_capacity:
            grown = PyMem_RawRealloc(self._arena, <size_t> arena_size)
            if grown == NULL:
                return -1
            self._arena = <char *> grown
            self._arena_capacity = arena_size
        if n + 2 > self._starts_capacity:
            grown = PyMem_RawRealloc(self._starts, (n + 2) * sizeof(int64_t))
            if grown == NULL:
                return -1
            self._starts = <int64_t *> grown
            self._starts_capacity = n + 2
        while 2 * n > self._mask:
            if self._grow_table() < 0:
                return -1
        return 0

    cdef int _grow_table(self) noexcept nogil:
        cdef Py_ssize_t capacity = 2 * (self._mask + 1), k, j
        cdef _Slot *table = <_Slot *> skcrf_table_alloc(capacity * sizeof(_Slot))
        if table == NULL:
            return -1
        for k in range(capacity):
            table[k].id = -1
        for k in range(self._mask + 1):
            if self._table[k].id >= 0:
                j = <Py_ssize_t> (self._table[k].hash & <uint64_t> (capacity - 1))
                while table[j].id >= 0:
                    j = (j + 1) & (capacity - 1)
                table[j] = self._table[k]
        skcrf_table_free(self._table)
        self._table = table
        self._mask = capacity - 1
        return 0

    def truncate(self, Py_ssize_t n):
        """Forget the names from id ``n`` on (a failed fit's additions)."""
        cdef Py_ssize_t k
        if n < 0 or n >= self._n:
            return
        for k in range(self._mask + 1):
            self._table[k].id = -1
        self._n = 0
        self._arena_size = 0
        for k in range(n):
            self._reinsert(k)
        self._n = n
        self._arena_size = self._starts[n]

    cdef void _reinsert(self, Py_ssize_t k) noexcept:
        cdef Py_ssize_t length = self._starts[k + 1] - self._starts[k]
        cdef const char *data = self._arena + self._starts[k]
        cdef uint64_t h = hash_bytes(data, length)
        cdef Py_ssize_t j = <Py_ssize_t> (h & <uint64_t> self._mask)
        while self._table[j].id >= 0:
            j = (j + 1) & self._mask
        self._table[j].hash = h
        self._table[j].id = <int32_t> k
        self._table[j].length = <int32_t> length
        memset(self._table[j].head, 0, _HEAD)
        memcpy(self._table[j].head, data, length if length < _HEAD else _HEAD)

    def add_str(self, name):
        """Add a name (str, as UTF-8); return its id."""
        cdef Py_ssize_t length
        if not PyUnicode_Check(name):
            raise TypeError(f"names must be str, got {type(name).__name__}")
        cdef const char *data = PyUnicode_AsUTF8AndSize(name, &length)
        cdef Py_ssize_t k = self.add(data, length)
        if k == -2:
            raise MemoryError()
        return k

    def add_packed(self, const unsigned char[::1] text, const int64_t[::1] starts):
        """Add distinct names given as bytes: name ``k`` is ``text[starts[k]:starts[k + 1]]``.

        For a model file's packed names (no ``str`` per name). The caller
        has checked that the offsets rise within ``text``; a name equal to
        an earlier one (which would shift every later id) is a ValueError.
        """
        cdef Py_ssize_t k = 0, n = starts.shape[0] - 1, first = self._n, got = 0
        cdef const char *data = b""
        if text.shape[0]:
            data = <const char *> &text[0]
        if self._reserve(first + n, self._arena_size + text.shape[0]) < 0:
            raise MemoryError()
        with nogil:
            for k in range(n):
                got = self.add(data + starts[k], starts[k + 1] - starts[k])
                if got != first + k:
                    break
        if got == -2:
            raise MemoryError()
        if n and got != first + n - 1:
            self.truncate(first)
            raise ValueError(
                f"name {k} is the same as name {got - first}: names must be distinct."
            )

    def lookup(self, name):
        """The id of a name (str), or -1."""
        cdef Py_ssize_t length
        cdef const char *data = PyUnicode_AsUTF8AndSize(name, &length)
        return self.find(data, length)

    def names(self, Py_ssize_t start=0):
        """The names from id ``start`` on, in id order, as str."""
        cdef Py_ssize_t k
        return [
            self._arena[self._starts[k]:self._starts[k + 1]].decode("utf-8", "surrogateescape")
            for k in range(start, self._n)
        ]

    @property
    def nbytes(self):
        """Memory held: arena, starts and table."""
        return (self._arena_capacity + self._starts_capacity * sizeof(int64_t)
                + (self._mask + 1) * sizeof(_Slot))
