"""Wapiti's regex subset, compiled: the same answers as :mod:`skcrf._template._regex`.

The pattern is compiled in Python (:func:`~skcrf._template._regex.compile_regex`,
which also reports bad patterns) and packed into a :c:type:`RegexProgram`:
one 256-bit byte set and one quantifier per item. :c:func:`regex_search`
runs it as a Pike VM over the data's bytes without the GIL: the threads of
the NFA kept in Wapiti's backtracking priority (``?`` greedy, ``*`` lazy,
leftmost start), so it gives the match Wapiti's ``%m`` takes in
O(items x bytes), with no allocation for patterns of up to ``_STACK_ITEMS``
items (a heap block beyond). The compiled expander cimports it.
"""

from libc.stdlib cimport free, malloc

from ._regex import compile_regex

cdef enum:
    # patterns of up to this many items run on stack scratch space
    _STACK_ITEMS = 64


cdef class CompiledRegex:
    """A pattern packed for :c:func:`regex_search`.

    Parameters
    ----------
    pattern : str
        A pattern of Wapiti's subset; a bad one raises
        :class:`~skcrf._template._plan.TemplateError`.
    """

    def __cinit__(self, str pattern):
        regex = compile_regex(pattern)
        cdef bytearray sets = bytearray(32 * len(regex.items))
        cdef bytearray quantifiers = bytearray(len(regex.items))
        cdef Py_ssize_t i
        cdef int b
        for i, (members, quantifier) in enumerate(regex.items):
            quantifiers[i] = quantifier
            for b in members:
                sets[32 * i + (b >> 3)] |= 1 << (b & 7)
        self.pattern = pattern
        self._sets = bytes(sets)
        self._quantifiers = bytes(quantifiers)
        self.program.n_items = len(regex.items)
        self.program.anchored_start = regex.anchored_start
        self.program.anchored_end = regex.anchored_end
        self.program.sets = <const unsigned char *> self._sets
        self.program.quantifiers = <const unsigned char *> self._quantifiers

    def __repr__(self):
        return f"CompiledRegex({self.pattern!r})"

    def search(self, const unsigned char[::1] data not None):
        """The leftmost match in ``data`` as ``(start, end)``, or None."""
        cdef Py_ssize_t start = 0
        cdef Py_ssize_t end = regex_search(&self.program, &data[0] if data.shape[0] else NULL,
                                           data.shape[0], &start)
        if end == -2:
            raise MemoryError()
        return None if end < 0 else (start, end)

    def test(self, const unsigned char[::1] data not None):
        """Whether the pattern matches somewhere in ``data``."""
        cdef int found = regex_test(&self.program, &data[0] if data.shape[0] else NULL,
                                    data.shape[0])
        if found < 0:
            raise MemoryError()
        return bool(found)


cdef inline Py_ssize_t _closure(
    const RegexProgram *p, Py_ssize_t *states, Py_ssize_t *starts, Py_ssize_t count,
    Py_ssize_t *seen, Py_ssize_t stamp, Py_ssize_t *deferred,
    Py_ssize_t state, Py_ssize_t start, bint at_end,
) noexcept nogil:
    # Append the threads ``state`` stands for, highest priority first: a '?'
    # consumes before it skips, a '*' skips before it consumes; a state already
    # stamped for this list keeps its earlier (higher-priority) thread.
    cdef Py_ssize_t n_deferred = 0
    cdef Py_ssize_t m = p.n_items
    cdef unsigned char quantifier
    while seen[state] != stamp:
        seen[state] = stamp
        if state == m:
            if at_end or not p.anchored_end:
                states[count] = m
                starts[count] = start
                count += 1
            break
        quantifier = p.quantifiers[state]
        if quantifier == 2:
            deferred[n_deferred] = state
            n_deferred += 1
        else:
            states[count] = state
            starts[count] = start
            count += 1
            if quantifier == 0:
                break
        state += 1
    while n_deferred > 0:
        n_deferred -= 1
        states[count] = deferred[n_deferred]
        starts[count] = start
        count += 1
    return count


cdef Py_ssize_t _run(
    const RegexProgram *p, const unsigned char *data, Py_ssize_t n, Py_ssize_t *start,
    bint first, Py_ssize_t *scratch,
) noexcept nogil:
    # scratch: 6 arrays of m + 1: two thread lists (states, starts), seen, deferred
    cdef Py_ssize_t m = p.n_items
    cdef Py_ssize_t width = m + 1
    cdef Py_ssize_t *cur_states = scratch
    cdef Py_ssize_t *cur_starts = scratch + width
    cdef Py_ssize_t *next_states = scratch + 2 * width
    cdef Py_ssize_t *next_starts = scratch + 3 * width
    cdef Py_ssize_t *seen = scratch + 4 * width
    cdef Py_ssize_t *deferred = scratch + 5 * width
    cdef Py_ssize_t *swap
    cdef Py_ssize_t pos, k, state, following, n_current = 0, n_next
    cdef Py_ssize_t found = -1
    cdef const unsigned char *members
    cdef unsigned char byte
    for k in range(width):
        seen[k] = 0
    for pos in range(n + 1):
        # the lists of position pos are stamped pos + 1
        if found < 0 and (pos == 0 or not p.anchored_start):
            # a new start has the lowest priority: every earlier start is leftmost
            n_current = _closure(p, cur_states, cur_starts, n_current, seen, pos + 1,
                                 deferred, 0, pos, pos == n)
        if n_current == 0:
            if found >= 0 or p.anchored_start:
                break
            continue
        n_next = 0
        byte = data[pos] if pos < n else 0
        for k in range(n_current):
            state = cur_states[k]
            if state == m:
                found = pos
                start[0] = cur_starts[k]
                if first:
                    return found
                break  # the threads after it have lower priority
            if pos == n:
                continue
            members = p.sets + 32 * state
            if (members[byte >> 3] >> (byte & 7)) & 1:
                following = state if p.quantifiers[state] == 2 else state + 1
                n_next = _closure(p, next_states, next_starts, n_next, seen, pos + 2,
                                  deferred, following, cur_starts[k], pos + 1 == n)
        swap = cur_states
        cur_states = next_states
        next_states = swap
        swap = cur_starts
        cur_starts = next_starts
        next_starts = swap
        n_current = n_next
    return found


cdef Py_ssize_t _with_scratch(
    const RegexProgram *p, const unsigned char *data, Py_ssize_t n, Py_ssize_t *start,
    bint first,
) noexcept nogil:
    cdef Py_ssize_t stack[6 * (_STACK_ITEMS + 1)]
    cdef Py_ssize_t *heap
    cdef Py_ssize_t end
    if p.n_items <= _STACK_ITEMS:
        return _run(p, data, n, start, first, stack)
    heap = <Py_ssize_t *> malloc(6 * (p.n_items + 1) * sizeof(Py_ssize_t))
    if heap == NULL:
        return -2
    end = _run(p, data, n, start, first, heap)
    free(heap)
    return end


cdef Py_ssize_t regex_search(
    const RegexProgram *p, const unsigned char *data, Py_ssize_t n, Py_ssize_t *start
) noexcept nogil:
    """The end of the leftmost match (its start in ``*start``), -1 if none, -2 out of memory."""
    return _with_scratch(p, data, n, start, False)


cdef int regex_test(const RegexProgram *p, const unsigned char *data, Py_ssize_t n) noexcept nogil:
    """1 if the pattern matches somewhere in the data, 0 if not, -1 out of memory."""
    cdef Py_ssize_t start = 0
    cdef Py_ssize_t end = _with_scratch(p, data, n, &start, True)
    return -1 if end == -2 else (1 if end >= 0 else 0)
