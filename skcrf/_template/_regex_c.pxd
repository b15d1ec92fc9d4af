# The compiled matcher of Wapiti's regex subset (see _regex_c.pyx).

ctypedef struct RegexProgram:
    Py_ssize_t n_items                 # items 0 .. n_items - 1; state n_items: a match
    int anchored_start                 # a leading '^'
    int anchored_end                   # a trailing '$'
    const unsigned char *quantifiers   # per item: 0 one, 1 '?', 2 '*'
    const unsigned char *sets          # per item: 32 bytes, bit b of byte b >> 3: byte b


cdef class CompiledRegex:
    cdef RegexProgram program          # points into the two bytes objects below
    cdef bytes _quantifiers
    cdef bytes _sets
    cdef readonly str pattern


cdef Py_ssize_t regex_search(
    const RegexProgram *p, const unsigned char *data, Py_ssize_t n, Py_ssize_t *start
) noexcept nogil
cdef int regex_test(const RegexProgram *p, const unsigned char *data, Py_ssize_t n) noexcept nogil
