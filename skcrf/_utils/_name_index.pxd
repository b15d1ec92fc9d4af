from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef class NameIndex:
    cdef Py_ssize_t _n                # ids 0 .. n - 1
    cdef public str source            # names the model in lookup errors

    cdef Py_ssize_t find(self, const char *key, Py_ssize_t length) noexcept nogil
    cdef Py_ssize_t find_str(self, str name) except -3


cdef class PackedNameIndex(NameIndex):
    cdef object _owner                # what holds the arrays' memory (an mmap...)
    cdef const uint8_t[::1] _bytes
    cdef const uint8_t *_text         # the names, one after another
    cdef const uint8_t *_starts       # n + 1 offsets into _text (uint32 or uint64)
    cdef const uint8_t *_table        # slots (uint32 or uint64)
    cdef object _arrays               # keeps the starts' and table's views alive
    cdef Py_ssize_t _size             # slots
    cdef bint _wide_starts
    cdef bint _wide_table
    cdef int _id_bits


cdef inline Py_ssize_t name_start(PackedNameIndex index, Py_ssize_t k) noexcept nogil:
    """Offset ``k`` (where name ``k`` starts in the text; ``k = n``: its end)."""
    cdef uint32_t narrow
    cdef uint64_t wide
    if index._wide_starts:
        memcpy(&wide, index._starts + 8 * k, 8)
        return <Py_ssize_t> wide
    memcpy(&narrow, index._starts + 4 * k, 4)
    return narrow
