from libc.stdint cimport uint8_t, uint32_t

from skcrf._utils._name_index cimport NameIndex


cdef class CQDBIndex(NameIndex):
    cdef object _owner                # the buffer's owner (bytes, mmap...): kept alive
    cdef const uint8_t[::1] _view     # the chunk
    cdef const uint8_t *_data
    cdef Py_ssize_t _size             # chunk bytes
    cdef Py_ssize_t _backward         # offset of the backward array (id -> record)
    cdef uint32_t _table_offset[256]
    cdef uint32_t _table_size[256]
    # the first lookup's verification: unchecked, sound or damaged (read and
    # written atomically)
    cdef uint8_t _verdict
    cdef str _where                   # names the chunk in messages
    cdef str _problem                 # what the verification found wrong, in words

    cdef bint _sound(self) noexcept nogil
    cdef int _verified(self) except -1
    cdef Py_ssize_t find(self, const char *key, Py_ssize_t length) noexcept nogil
    cdef Py_ssize_t find_str(self, str name) except -3
