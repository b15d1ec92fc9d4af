from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcmp, memcpy


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SKCRF_PREFETCH(p) __builtin_prefetch((p), 0, 1)
    #else
    #define SKCRF_PREFETCH(p) ((void)(p))
    #endif
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #define SKCRF_LITTLE_ENDIAN 1
    #else
    #define SKCRF_LITTLE_ENDIAN 0
    #endif
    """
    void SKCRF_PREFETCH(const void *p) noexcept nogil
    const bint SKCRF_LITTLE_ENDIAN


cdef struct _Slot:
    uint64_t hash
    int32_t id        # -1: empty
    int32_t length
    char head[16]     # the name's first 16 bytes (zero-padded): most names end here


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
    cdef int _reserve(self, Py_ssize_t n, int64_t arena_size) noexcept nogil
    cdef int _grow_table(self) noexcept nogil
    cdef void _reinsert(self, Py_ssize_t k) noexcept


# Inline here so that the modules looking names up compile them into their loops.

cdef inline uint64_t _mix(uint64_t h, uint64_t word) noexcept nogil:
    h ^= word * 0x87C37B91114253D5ULL
    h = (h << 27) | (h >> 37)
    return h * 0x9E3779B97F4A7C15ULL + 0x52DCE729ULL


cdef inline uint64_t hash_bytes(const char *data, Py_ssize_t length) noexcept nogil:
    """A 64-bit hash of ``length`` bytes, eight at a time."""
    cdef uint64_t h = 0x4CF5AD432745937FULL ^ (<uint64_t> length * 0xC2B2AE3D27D4EB4FULL)
    cdef uint64_t word
    while length >= 8:
        memcpy(&word, data, 8)
        h = _mix(h, word)
        data += 8
        length -= 8
    if length > 0:
        word = 0
        memcpy(&word, data, length)
        h = _mix(h, word)
    h ^= h >> 32
    h *= 0xD6E8FEB86659FD93ULL
    h ^= h >> 29
    return h


cdef inline uint64_t hash_padded(const char *data, Py_ssize_t length) noexcept nogil:
    """:func:`hash_bytes`, reading the tail as a whole word: 8 bytes past ``data`` readable.

    A tail copied byte by byte and read back as a word stalls the load (no
    store forwarding); masking a whole word gives the same value.
    """
    if not SKCRF_LITTLE_ENDIAN:
        return hash_bytes(data, length)
    cdef uint64_t h = 0x4CF5AD432745937FULL ^ (<uint64_t> length * 0xC2B2AE3D27D4EB4FULL)
    cdef uint64_t word
    while length >= 8:
        memcpy(&word, data, 8)
        h = _mix(h, word)
        data += 8
        length -= 8
    if length > 0:
        memcpy(&word, data, 8)
        h = _mix(h, word & ((<uint64_t> 1 << (8 * length)) - 1))
    h ^= h >> 32
    h *= 0xD6E8FEB86659FD93ULL
    h ^= h >> 29
    return h


cdef inline void prefetch_slot(ByteIndex index, uint64_t h) noexcept nogil:
    """Start reading the slot where the bytes hashed to ``h`` are looked for."""
    SKCRF_PREFETCH(&index._table[h & <uint64_t> index._mask])


cdef inline bint _same_head(const _Slot *slot, const char *data, Py_ssize_t length) noexcept nogil:
    """The slot's first bytes equal ``data``'s; 16 bytes past ``data`` are readable."""
    cdef uint64_t a, b, c, d, mask
    if not SKCRF_LITTLE_ENDIAN:
        return memcmp(slot.head, data, length if length < 16 else 16) == 0
    memcpy(&a, data, 8)
    memcpy(&b, data + 8, 8)
    memcpy(&c, slot.head, 8)
    memcpy(&d, slot.head + 8, 8)
    if length >= 16:
        return a == c and b == d
    if length >= 8:
        mask = (<uint64_t> 1 << (8 * (length - 8))) - 1 if length > 8 else 0
        return a == c and ((b ^ d) & mask) == 0
    mask = (<uint64_t> 1 << (8 * length)) - 1
    return ((a ^ c) & mask) == 0


cdef inline Py_ssize_t find_padded(ByteIndex index, const char *data, Py_ssize_t length,
                                   uint64_t h) noexcept nogil:
    """``index.find`` of bytes hashed to ``h``, 16 bytes past ``data`` readable."""
    cdef Py_ssize_t k = <Py_ssize_t> (h & <uint64_t> index._mask)
    cdef _Slot *slot
    while True:
        slot = &index._table[k]
        if slot.id < 0:
            return -1
        if (slot.hash == h and slot.length == length and _same_head(slot, data, length)
                and (length <= 16 or memcmp(index._arena + index._starts[slot.id] + 16,
                                            data + 16, length - 16) == 0)):
            return slot.id
        k = (k + 1) & index._mask
