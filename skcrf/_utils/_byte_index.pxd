from libc.stdint cimport int32_t, int64_t, uint64_t


cdef struct _Slot:
    uint64_t hash
    int32_t id        # -1: empty
    int32_t length


cdef class ByteIndex:
    cdef char *_arena           # the names' bytes, one after another
    cdef int64_t _arena_size
    cdef int64_t _arena_capacity
    cdef int64_t *_starts       # id -> start of its name in the arena (n + 1 of them)
    cdef Py_ssize_t _n
    cdef Py_ssize_t _starts_capacity
    cdef _Slot *_table
    cdef Py_ssize_t _mask       # table capacity - 1

    cdef Py_ssize_t find(self, const char *data, Py_ssize_t length) noexcept nogil
    cdef Py_ssize_t add(self, const char *data, Py_ssize_t length) noexcept nogil
    cdef int _grow_table(self) noexcept nogil


cdef uint64_t hash_bytes(const char *data, Py_ssize_t length) noexcept nogil
