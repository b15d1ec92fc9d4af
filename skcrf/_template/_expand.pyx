"""The compiled expander: raw token sequences to attribute ids, no Python object per feature.

A :class:`CompiledPlan` is a plan (:mod:`skcrf._template._plan`) laid out in C
arrays once; :func:`expand` runs it over sequences of tokens and writes CSR
rows (:class:`~skcrf._featurize._encoded.Encoded`) of the ids a
:class:`~skcrf._utils._byte_index.ByteIndex` gives each attribute's bytes.

Per call, two phases:

1. *Reading* (GIL held): each token's columns that the plan reads are
   checked (a ``str``, or a tuple of ``str``; errors name ``X[i][j]``) and
   their UTF-8 bytes located (``PyUnicode_AsUTF8AndSize``: no copy for an
   ASCII string). A *slot* is a distinct (column, steps) pair of the plan;
   the few slot values C does not compute exactly (a step with Unicode
   semantics on a non-ASCII string, a lookup, a user function) are computed
   here by the reference expander's own functions, once per token.
2. *Expanding* (GIL released): for each token each feature's name is
   written into a buffer (literals, slot values at their positions,
   boundary text) and looked up (``find``) or numbered (``add``, fit) in
   the index; the other slot values are computed in C when first read,
   into one arena sized beforehand. A *local* feature (one that reads one
   token) has, inside the sequence, an id that depends on that token's
   text only: the call numbers its distinct tokens and looks each local
   feature up once per distinct token (the memo), so text repeated across
   a batch (words follow Zipf's law) costs one lookup a feature. The rows
   are written straight into numpy arrays of their exact bound (a feature
   gives a token at most one entry).

Slot steps in C follow Python's ``str`` methods exactly on ASCII text
(``lower``, ``is_title``, ``shape``...), and on any text for the steps that
only cut or compare bytes (``slice`` counts code points in UTF-8,
``contains``, ``length``, ``ascii_lower``, ``not``).
"""

import numpy as np

cimport numpy as cnp
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc, PyMem_RawRealloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT32_MIN, INT32_MAX
from libc.string cimport memcmp, memcpy

from skcrf._template._regex_c cimport CompiledRegex, RegexProgram, regex_search, regex_test
from skcrf._utils._byte_index cimport (
    ByteIndex, find_padded, hash_bytes, hash_padded, prefetch_slot,
)

from .._featurize._encoded import Encoded
from ._plan import Ref, TemplateError, check_plan
from ._reference import apply_steps, read_column

cnp.import_array()

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object unicode, Py_ssize_t *size) except NULL
    bint PyUnicode_IS_ASCII(object unicode)
    bint PyUnicode_CheckExact(object obj)
    bint PyTuple_CheckExact(object obj)

# step codes (C)
cdef enum:
    S_LOWER = 1
    S_UPPER
    S_SLICE
    S_SHAPE
    S_SHAPE_COLLAPSED
    S_ASCII_LOWER
    S_CONTAINS
    S_IS_TITLE
    S_IS_UPPER
    S_IS_LOWER
    S_IS_DIGIT
    S_IS_ALPHA
    S_HAS_DIGIT
    S_EQUALS_UPPER
    S_EQUALS_LOWER
    S_NOT
    S_LENGTH
    S_MIN_LENGTH
    S_CHAR_SHAPE
    S_REPLACE
    S_REGEX_TEST
    S_REGEX_MATCH

# the columns of CompiledPlan._features
cdef enum:
    F_FIRST_PART = 0
    F_N_PARTS
    F_WEIGHT_SLOT       # -1: no ref (the constant weight, 1.0 by default)
    F_WEIGHT_OFFSET
    F_WEIGHT_ABSOLUTE
    F_WHEN_OUTSIDE      # _NO_BOUND: none
    F_STATE
    F_TRANSITION
    F_BOUNDARY          # 0: a ref outside drops the feature; 1: boundary text
    F_BEFORE
    F_BEFORE_LENGTH
    F_AFTER
    F_AFTER_LENGTH
    F_NUMBERED
    F_WHEN_INSIDE       # _NO_BOUND: none
    F_LIMIT             # 0: none; else a distance above it is written '#'
    F_COLUMNS

# the columns of CompiledPlan._parts
cdef enum:
    PART_TYPE = 0
    PART_A              # literal offset | slot
    PART_B              # literal length | offset
    PART_ABSOLUTE
    PART_PADDING        # -1, or the first row of its padding texts (through_steps)
    PART_COLUMNS

# part types
cdef enum:
    P_LITERAL = 0
    P_REF = 1

# slot value states
cdef enum:
    V_NONE = 0      # not computed yet (phase 2 computes it)
    V_DROP = 1
    V_TEXT = 2
    V_NUMBER = 3
    V_FAILED = 4    # out of memory in a step

cdef int32_t _NO_BOUND = INT32_MIN
# From this many tokens on, a call memoizes its local features per distinct token.
cdef Py_ssize_t _MEMO_MIN_TOKENS = 2
# A call reads and expands its sequences in chunks of about this many tokens.
cdef Py_ssize_t _CHUNK_TOKENS = 16384

_C_STEPS = {
    "lower": S_LOWER, "upper": S_UPPER, "slice": S_SLICE, "shape": S_SHAPE,
    "shape_collapsed": S_SHAPE_COLLAPSED, "ascii_lower": S_ASCII_LOWER,
    "contains": S_CONTAINS, "is_title": S_IS_TITLE, "is_upper": S_IS_UPPER,
    "is_lower": S_IS_LOWER, "is_digit": S_IS_DIGIT, "is_alpha": S_IS_ALPHA,
    "has_digit": S_HAS_DIGIT, "equals_upper": S_EQUALS_UPPER,
    "equals_lower": S_EQUALS_LOWER, "not": S_NOT, "length": S_LENGTH,
    "min_length": S_MIN_LENGTH, "char_shape": S_CHAR_SHAPE, "replace": S_REPLACE,
    "regex_test": S_REGEX_TEST, "regex_match": S_REGEX_MATCH,
}
# exact in C on ASCII text only (Unicode case, digits and letters otherwise)
_ASCII_ONLY = {
    "lower", "upper", "shape", "shape_collapsed", "is_title", "is_upper", "is_lower",
    "is_digit", "is_alpha", "has_digit", "equals_upper", "equals_lower", "char_shape",
}
# steps that write new text (the arena holds their output; replace's bound is its own)
_WRITES = {"lower", "upper", "shape", "shape_collapsed", "ascii_lower", "char_shape"}


cdef struct _Value:
    const char *data
    Py_ssize_t length
    double number
    int state


cdef struct _Buffer:
    char *data
    Py_ssize_t size
    Py_ssize_t capacity


cdef inline int _reserve(_Buffer *b, Py_ssize_t extra) noexcept nogil:
    cdef Py_ssize_t capacity = b.capacity
    cdef void *grown
    if b.size + extra <= capacity:
        return 0
    if capacity < 64:
        capacity = 64
    while capacity < b.size + extra:
        capacity *= 2
    grown = PyMem_RawRealloc(b.data, capacity)
    if grown == NULL:
        return -1
    b.data = <char *> grown
    b.capacity = capacity
    return 0


cdef inline int _append(_Buffer *b, const char *data, Py_ssize_t length) noexcept nogil:
    # 16 bytes of slack: find_padded reads whole words past a name's end
    cdef Py_ssize_t k
    if _reserve(b, length + 16) < 0:
        return -1
    if length <= 16:
        for k in range(length):
            b.data[b.size + k] = data[k]
    else:
        memcpy(b.data + b.size, data, length)
    b.size += length
    return 0


cdef inline bint _is_upper(char c) noexcept nogil:
    return b'A' <= c <= b'Z'


cdef inline bint _is_lower(char c) noexcept nogil:
    return b'a' <= c <= b'z'


cdef inline bint _is_digit(char c) noexcept nogil:
    return b'0' <= c <= b'9'


cdef inline Py_ssize_t _code_points(const char *s, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t k, count = 0
    for k in range(n):
        if ((<uint8_t> s[k]) & 0xC0) != 0x80:
            count += 1
    return count


cdef inline Py_ssize_t _byte_at(const char *s, Py_ssize_t n, Py_ssize_t point) noexcept nogil:
    """The byte offset of code point ``point`` (0 <= point <= count) of UTF-8 text."""
    cdef Py_ssize_t k = 0, seen = 0
    if point <= 0:
        return 0
    while k < n:
        if ((<uint8_t> s[k]) & 0xC0) != 0x80:
            if seen == point:
                return k
            seen += 1
        k += 1
    return n


cdef inline void _slice(const char *s, Py_ssize_t n, int32_t start, int32_t stop, bint ascii,
                        const char **out, Py_ssize_t *out_length) noexcept nogil:
    """Python's ``s[start:stop]`` (code points) of UTF-8 text."""
    cdef Py_ssize_t count = n if ascii else _code_points(s, n)
    cdef Py_ssize_t a = 0 if start == _NO_BOUND else start
    cdef Py_ssize_t b = count if stop == _NO_BOUND else stop
    if a < 0:
        a = a + count if a + count > 0 else 0
    elif a > count:
        a = count
    if b < 0:
        b = b + count if b + count > 0 else 0
    elif b > count:
        b = count
    if b <= a:
        out[0] = s
        out_length[0] = 0
        return
    if count == n:  # ASCII: a code point is a byte
        out[0] = s + a
        out_length[0] = b - a
        return
    cdef Py_ssize_t first = _byte_at(s, n, a)
    out[0] = s + first
    out_length[0] = _byte_at(s, n, b) - first


cdef inline Py_ssize_t _shape(const char *s, Py_ssize_t n, char *out, int max_run) noexcept nogil:
    cdef Py_ssize_t k, size = 0
    cdef int run = 0
    cdef char last = 0, c, mark
    for k in range(n):
        c = s[k]
        if _is_digit(c):
            mark = b'd'
        elif _is_upper(c):
            mark = b'X'
        elif _is_lower(c):
            mark = b'x'
        else:
            mark = c
        if k > 0 and mark == last:
            run += 1
        else:
            last = mark
            run = 1
        if run <= max_run:
            out[size] = mark
            size += 1
    return size


cdef inline bint _contains(const char *s, Py_ssize_t n, const char *sub,
                           Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t k
    if m == 0:
        return True
    for k in range(n - m + 1):
        if s[k] == sub[0] and (m == 1 or _same_bytes(s + k, sub, m)):
            return True
    return False


cdef inline bint _same_bytes(const char *a, const char *b, Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(m):
        if a[k] != b[k]:
            return False
    return True


cdef inline double _predicate(int code, const char *s, Py_ssize_t n) noexcept nogil:
    """A str -> bool or int step on ASCII text (Python's str methods)."""
    cdef Py_ssize_t k
    cdef bint cased = False, previous_cased = False
    cdef char c
    if code == S_IS_DIGIT or code == S_IS_ALPHA:
        if n == 0:
            return 0.0
        for k in range(n):
            c = s[k]
            if code == S_IS_DIGIT and not _is_digit(c):
                return 0.0
            if code == S_IS_ALPHA and not (_is_upper(c) or _is_lower(c)):
                return 0.0
        return 1.0
    if code == S_HAS_DIGIT:
        for k in range(n):
            if _is_digit(s[k]):
                return 1.0
        return 0.0
    if code == S_IS_UPPER or code == S_IS_LOWER:
        for k in range(n):
            c = s[k]
            if _is_upper(c):
                if code == S_IS_LOWER:
                    return 0.0
                cased = True
            elif _is_lower(c):
                if code == S_IS_UPPER:
                    return 0.0
                cased = True
        return 1.0 if cased else 0.0
    if code == S_EQUALS_UPPER:
        for k in range(n):
            if _is_lower(s[k]):
                return 0.0
        return 1.0
    if code == S_EQUALS_LOWER:
        for k in range(n):
            if _is_upper(s[k]):
                return 0.0
        return 1.0
    if code == S_IS_TITLE:
        for k in range(n):
            c = s[k]
            if _is_upper(c):
                if previous_cased:
                    return 0.0
                previous_cased = True
                cased = True
            elif _is_lower(c):
                if not previous_cased:
                    return 0.0
                previous_cased = True
                cased = True
            else:
                previous_cased = False
        return 1.0 if cased else 0.0
    if code == S_LENGTH:
        return <double> _code_points(s, n)
    return 0.0


cdef class CompiledPlan:
    """A plan laid out for :func:`expand` (read-only once built: shared by threads).

    Parameters
    ----------
    plan : Plan
    """

    cdef readonly object plan
    cdef readonly Py_ssize_t n_slots, n_features, n_columns
    cdef bytes _literals            # every literal's UTF-8 bytes
    cdef const char *_literal_data
    # Row-major int32 tables read through raw pointers (a memoryview taken in
    # a function costs two atomic operations per call, which threads share):
    cdef const int32_t *_slots       # per slot (5): column, first step, n steps, growth, flags
    cdef const int32_t *_steps       # per step (5): code, arguments a, b, c, d
    cdef const int32_t *_features    # per feature (F_COLUMNS): the F_* columns
    cdef const double *_weights      # per feature: its constant weight
    cdef const int32_t *_parts       # per part (PART_COLUMNS): the PART_* columns
    cdef const int32_t *_padding     # through_steps texts (3): dropped, offset, length
    cdef list _arrays                # the numpy arrays the pointers point into
    cdef list _python_steps          # per slot: the steps (for the Python-computed values)
    cdef list _regex_objects         # the CompiledRegex objects _regexes points into
    cdef const RegexProgram **_regexes
    cdef readonly bint has_transitions
    cdef const int32_t *_columns     # the columns read
    cdef readonly object columns
    # features a token's state (transition) row can hold: the rows' capacity
    cdef readonly Py_ssize_t n_state_features, n_transition_features
    # per feature: its place among the features memoized per token type (-1:
    # not one), and per such feature the offset of the token it reads
    cdef const int32_t *_local
    cdef const int32_t *_local_offset
    cdef readonly Py_ssize_t n_local
    cdef bint _any_python            # a slot with a Python-computed step

    def __dealloc__(self):
        PyMem_RawFree(self._regexes)

    def __init__(self, plan):
        check_plan(plan)
        self.plan = plan
        literals = bytearray()
        literal_at = {}

        def literal(text):
            data = text.encode("utf-8", "surrogateescape")
            if data not in literal_at:
                literal_at[data] = len(literals)
                literals.extend(data)
            return literal_at[data], len(data)

        slot_of = {}
        slots, steps, python_steps, regexes = [], [], [], []

        def slot(ref):
            key = (ref.column, _steps_key(ref.steps))
            if key in slot_of:
                return slot_of[key]
            first = len(steps)
            c_steps = True
            ascii_only = False
            growth = 0
            scale = 1
            for step in ref.steps:
                name = step[0]
                if name not in _C_STEPS:
                    c_steps = False
                    continue
                a = b = c = d = 0
                if name == "slice":
                    a = _NO_BOUND if step[1] is None else _clamp(step[1])
                    b = _NO_BOUND if step[2] is None else _clamp(step[2])
                elif name == "contains":
                    a, b = literal(step[1])
                elif name == "min_length":
                    a = _clamp(step[1])
                elif name == "replace":
                    a, b = literal(step[1])
                    c, d = literal(step[2])
                    # each output is at most scale x the column's length
                    scale *= max(1, -(-d // b))
                    growth += scale
                elif name in ("regex_test", "regex_match"):
                    a = len(regexes)
                    regexes.append(CompiledRegex(step[1]))
                    b, _ = literal("true")
                    c, _ = literal("false")
                steps.append((_C_STEPS[name], a, b, c, d))
                ascii_only |= name in _ASCII_ONLY
                growth += scale if name in _WRITES else 0
            kind = _kind(ref.steps)
            flags = (1 if c_steps else 0) | (2 if ascii_only else 0)
            flags |= 4 if kind == "number" else 0
            slot_of[key] = len(slots)
            slots.append((ref.column, first, len(steps) - first, growth, flags))
            python_steps.append(ref.steps)
            return slot_of[key]

        parts, features, weights, padding = [], [], [], []
        separator = plan.separator
        for feature in plan.features:
            first = len(parts)
            boundary = feature.outside
            texts = [feature.key]
            if feature.value is not None:
                texts.append((separator,) + tuple(feature.value))
            for text in texts:
                for part in text:
                    if isinstance(part, Ref):
                        rows = -1
                        if boundary is not None and boundary.through_steps:
                            rows = len(padding)
                            padding.extend(_padding_rows(part, boundary, feature, literal))
                        parts.append((P_REF, slot(part), part.offset, int(part.absolute), rows))
                    elif part:
                        offset, length = literal(part)
                        parts.append((P_LITERAL, offset, length, 0, -1))
            weight_slot, weight_offset, weight_absolute, weight = -1, 0, 0, 1.0
            if isinstance(feature.weight, Ref):
                weight_slot = slot(feature.weight)
                weight_offset = feature.weight.offset
                weight_absolute = int(feature.weight.absolute)
            elif feature.weight is not None:
                weight = float(feature.weight)
            before = literal(boundary.before) if boundary is not None else (0, 0)
            after = literal(boundary.after) if boundary is not None else (0, 0)
            limit = 0 if boundary is None or boundary.limit is None else boundary.limit
            features.append((
                first, len(parts) - first, weight_slot, weight_offset, weight_absolute,
                _NO_BOUND if feature.when_outside is None else feature.when_outside,
                int(feature.kind != "transition"), int(feature.kind != "state"),
                int(boundary is not None), before[0], before[1], after[0], after[1],
                int(boundary is not None and boundary.numbered),
                _NO_BOUND if feature.when_inside is None else feature.when_inside,
                limit,
            ))
            weights.append(weight)
        self._literals = bytes(literals) + b"\0"
        self._literal_data = self._literals
        self.n_slots = len(slots)
        self.n_features = len(features)
        columns = sorted({s[0] for s in slots})
        place = {c: k for k, c in enumerate(columns)}
        # a slot's column -> its place among the columns read
        slots = [(place[s[0]], *s[1:]) for s in slots]
        self._arrays = [
            _table(slots, 5), _table(steps, 5), _table(parts, PART_COLUMNS),
            _table(features, F_COLUMNS), _table(padding, 3),
            np.array(weights or [0.0], dtype=np.float64),
            np.array(columns or [0], dtype=np.int32),
            *_local_places(plan.features),
        ]
        self._slots = _int32_data(self._arrays[0])
        self._steps = _int32_data(self._arrays[1])
        self._parts = _int32_data(self._arrays[2])
        self._features = _int32_data(self._arrays[3])
        self._padding = _int32_data(self._arrays[4])
        cdef double[::1] weights_view = self._arrays[5]
        self._weights = &weights_view[0]
        self._columns = _int32_data(self._arrays[6])
        self._local = _int32_data(self._arrays[7])
        self._local_offset = _int32_data(self._arrays[8])
        self.n_local = int((self._arrays[7] >= 0).sum())
        self._python_steps = python_steps
        self._regex_objects = regexes
        self._regexes = <const RegexProgram **> PyMem_RawMalloc(
            max(1, len(regexes)) * sizeof(RegexProgram *))
        if self._regexes == NULL:
            raise MemoryError()
        cdef Py_ssize_t k
        cdef CompiledRegex regex
        for k in range(len(regexes)):
            regex = regexes[k]
            self._regexes[k] = &regex.program
        self._any_python = any(not (s[4] & 1) for s in slots)
        self.has_transitions = any(f.kind != "state" for f in plan.features)
        self.n_state_features = sum(f.kind != "transition" for f in plan.features)
        self.n_transition_features = sum(f.kind != "state" for f in plan.features)
        self.columns = tuple(columns)
        self.n_columns = len(columns)

    def __reduce__(self):
        return (CompiledPlan, (self.plan,))

    def constant_ids(self, ByteIndex index):
        """Per feature, the id in ``index`` of a state feature whose name is
        constant (no ref: ``bias``, ``BOS``...; -1 when absent), else -2."""
        out = np.full(max(self.n_features, 1), -2, dtype=np.int32)
        separator = self.plan.separator
        for f, feature in enumerate(self.plan.features):
            texts = list(feature.key) + (
                [] if feature.value is None else [separator, *feature.value])
            if feature.kind != "state" or isinstance(feature.weight, Ref) or any(
                    isinstance(part, Ref) for part in texts):
                continue
            out[f] = index.lookup("".join(texts))
        return out[:self.n_features]


def _local_places(features):
    """Per feature, its place among the *local* features, -1 for the others;
    per local feature, the offset of the token it reads.

    A local feature is a state feature whose name is read from one token
    (every ref relative, at the same offset): inside the sequence its id
    depends on that token's text only, so one call finds it once per
    distinct token (:func:`expand`'s memo).
    """
    places = np.full(len(features) + 1, -1, dtype=np.int32)
    offsets = [0]
    n = 0
    for f, feature in enumerate(features):
        refs = [part for part in feature.key if isinstance(part, Ref)]
        if feature.value is not None:
            refs += [part for part in feature.value if isinstance(part, Ref)]
        if (feature.kind == "state" and refs and not any(ref.absolute for ref in refs)
                and len({ref.offset for ref in refs}) == 1):
            places[f] = n
            offsets.insert(n, refs[0].offset)
            n += 1
    return places, np.array(offsets, dtype=np.int32)


def _table(rows, width):
    # one row more than needed: never empty, so its data pointer is valid
    table = np.zeros((len(rows) + 1, width), dtype=np.int32)
    if rows:
        table[:-1] = rows
    return table


cdef const int32_t *_int32_data(object array):
    cdef int32_t[:, ::1] table
    cdef int32_t[::1] flat
    if array.ndim == 2:
        table = array
        return &table[0, 0]
    flat = array
    return &flat[0]


def _padding_rows(ref, boundary, feature, literal):
    """The texts of a ``through_steps`` boundary, through the ref's steps.

    Rows: before the start at distances 1 .. limit + 1 (the last: '#'), then
    after the end; each (dropped, literal offset, length).
    """
    if boundary.limit is None and boundary.numbered:
        raise TemplateError(
            f"{feature.source or 'a feature'}: a boundary whose text goes through the "
            "steps needs a limit (the compiled expander computes its texts once)"
        )
    limit = boundary.limit if boundary.numbered else 0
    rows = []
    for side in (-1, 1):
        for distance in range(1, limit + 2):
            position = -distance if side < 0 else distance - 1  # for n == 0
            text = apply_steps(boundary.text(position, 0), ref.steps)
            if text is None:
                rows.append((1, 0, 0))
            elif isinstance(text, str):
                offset, length = literal(text)
                rows.append((0, offset, length))
            else:
                raise TemplateError(
                    f"{feature.source or 'a feature'}: a boundary text through the steps "
                    f"gave {type(text).__name__}, not text"
                )
    return rows


def _clamp(value):
    return max(-(2**31) + 1, min(2**31 - 1, value))


def _kind(steps):
    from ._plan import step_kind

    kind = step_kind(steps)
    return "number" if kind in ("bool", "int") else ("any" if kind == "any" else "text")


def _steps_key(steps):
    return tuple((s[0], *(a if _hashable(a) else ("id", id(a)) for a in s[1:])) for s in steps)


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


cdef class _Call:
    """One call's buffers (phase 1 fills the columns and the Python-computed values)."""

    cdef Py_ssize_t n_tokens, n_columns, n_slots
    cdef const char **column_data
    cdef Py_ssize_t *column_length
    cdef uint8_t *column_ascii
    cdef _Value *values             # n_tokens x n_slots
    cdef char *arena                # phase 2's step outputs
    cdef Py_ssize_t arena_size
    cdef list keep                  # the bytes of Python-computed values

    def __cinit__(self, Py_ssize_t n_tokens, Py_ssize_t n_columns, Py_ssize_t n_slots):
        self.n_tokens, self.n_columns, self.n_slots = n_tokens, n_columns, n_slots
        cdef Py_ssize_t cells = max(1, n_tokens * n_columns)
        self.column_data = <const char **> PyMem_RawMalloc(cells * sizeof(char *))
        self.column_length = <Py_ssize_t *> PyMem_RawMalloc(cells * sizeof(Py_ssize_t))
        self.column_ascii = <uint8_t *> PyMem_RawMalloc(cells)
        self.values = <_Value *> PyMem_RawMalloc(max(1, n_tokens * n_slots) * sizeof(_Value))
        if (self.column_data == NULL or self.column_length == NULL
                or self.column_ascii == NULL or self.values == NULL):
            raise MemoryError()
        # the values' states are set by _read (Python-computed) and _prepare
        self.keep = []

    def __dealloc__(self):
        PyMem_RawFree(self.column_data)
        PyMem_RawFree(self.column_length)
        PyMem_RawFree(self.column_ascii)
        PyMem_RawFree(self.values)
        PyMem_RawFree(self.arena)


cdef inline bint _native(const int32_t *slot, const uint8_t *column_ascii) noexcept nogil:
    """Whether a token's slot value is computed in C (phase 2), not in Python (phase 1).

    ``slot``: the slot's row of the plan; ``column_ascii``: the token's columns.
    """
    cdef int32_t flags = slot[4]
    return (flags & 1) and not ((flags & 2) and not column_ascii[slot[0]])


cdef int _read(CompiledPlan plan, _Call call, list sequences, str name,
               Py_ssize_t first) except -1:
    """Phase 1: locate every column the plan reads; Python-computed slot values.

    Only what needs Python objects: the rest of the call's set-up is
    :func:`_prepare`'s, without the GIL (threads expanding shards of a batch
    wait for each other's phase 1 only).
    """
    cdef Py_ssize_t i, j, t = 0, c, k, n_columns = plan.n_columns, length
    cdef bint ascii
    cdef object token, text
    cdef const char *data
    for i in range(len(sequences)):
        seq = sequences[i]
        for j in range(len(seq)):
            token = seq[j]
            ascii = True
            for c in range(n_columns):
                column = plan._columns[c]
                if PyUnicode_CheckExact(token) and column == 0:
                    text = token
                elif PyTuple_CheckExact(token) and column < len(token) and PyUnicode_CheckExact(
                        token[column]):
                    text = token[column]
                else:
                    # raises, or gives a str subclass
                    text = read_column(token, column, i + first, j, name)
                    text = str(text)
                try:
                    data = PyUnicode_AsUTF8AndSize(text, &length)
                except UnicodeEncodeError as exc:
                    raise ValueError(
                        f"{name}[{i + first}][{j}]: column {column} is not valid text ({exc})"
                    ) from None
                k = t * n_columns + c
                call.column_data[k] = data
                call.column_length[k] = length
                call.column_ascii[k] = PyUnicode_IS_ASCII(text)
                if not call.column_ascii[k]:
                    # keep the str (its UTF-8 buffer) alive for the call
                    call.keep.append(text)
                    ascii = False
            if plan._any_python or not ascii:  # (an ASCII token's slots are all C-computed)
                for k in range(plan.n_slots):
                    if _native(plan._slots + k * 5, call.column_ascii + t * n_columns):
                        continue
                    c = plan._slots[k * 5]
                    _python_value(plan, call, k,
                                  read_column(seq[j], plan._columns[c], i + first, j, name),
                                  &call.values[t * plan.n_slots + k], i + first, j, name)
            t += 1
    return 0


cdef int _prepare(CompiledPlan plan, _Call call) noexcept nogil:
    """The rest of phase 1: the C-computed values marked to compute, the arena.

    Returns -1 when out of memory.
    """
    cdef Py_ssize_t t, k, arena = 0
    cdef const int32_t *slot
    cdef const uint8_t *ascii
    for t in range(call.n_tokens):
        ascii = call.column_ascii + t * call.n_columns
        for k in range(plan.n_slots):
            slot = plan._slots + k * 5
            if _native(slot, ascii):
                arena += slot[3] * call.column_length[t * call.n_columns + slot[0]]
                call.values[t * plan.n_slots + k].state = V_NONE
    call.arena = <char *> PyMem_RawMalloc(max(1, arena))
    return -1 if call.arena == NULL else 0


cdef int _python_value(CompiledPlan plan, _Call call, Py_ssize_t k, object text, _Value *value,
                       Py_ssize_t i, Py_ssize_t j, str name) except -1:
    out = apply_steps(str(text), plan._python_steps[k])
    if out is None:
        value.state = V_DROP
    elif isinstance(out, str):
        data = out.encode("utf-8", "surrogateescape")
        call.keep.append(data)
        value.data = data
        value.length = len(data)
        value.state = V_TEXT
    elif isinstance(out, (bool, int, float)):
        value.number = float(out)
        value.state = V_NUMBER
    else:
        raise TypeError(f"{name}[{i}][{j}]: a template step gave {type(out).__name__}")
    return 0


cdef inline Py_ssize_t _char_shape(const char *s, Py_ssize_t n, char *out) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(n):
        out[k] = (b'X' if _is_upper(s[k]) else b'x' if _is_lower(s[k])
                  else b'd' if _is_digit(s[k]) else s[k])
    return n


cdef inline Py_ssize_t _replace(const char *s, Py_ssize_t n, const char *old, Py_ssize_t m,
                                const char *new, Py_ssize_t r, char *out) noexcept nogil:
    """``s.replace(old, new)`` on UTF-8 bytes (the same as on code points: UTF-8 is
    self-synchronizing); ``out`` holds the result."""
    cdef Py_ssize_t k = 0, size = 0
    while k < n:
        if k + m <= n and _same_bytes(s + k, old, m):
            memcpy(out + size, new, r)
            size += r
            k += m
        else:
            out[size] = s[k]
            size += 1
            k += 1
    return size


cdef void _compute(CompiledPlan plan, _Call call, Py_ssize_t t, Py_ssize_t k) noexcept nogil:
    """Phase 2: slot ``k`` of token ``t`` by the C steps."""
    cdef const int32_t *slot = plan._slots + k * 5
    cdef const int32_t *step
    cdef Py_ssize_t cell = t * plan.n_columns + slot[0]
    cdef const char *s = call.column_data[cell]
    cdef Py_ssize_t n = call.column_length[cell], q, m, start = 0, end
    cdef _Value *value = &call.values[t * plan.n_slots + k]
    cdef bint ascii = call.column_ascii[cell]
    cdef double number = 0.0
    cdef bint is_number = False
    cdef int code
    cdef char *out
    for q in range(slot[1], slot[1] + slot[2]):
        step = plan._steps + q * 5
        code = step[0]
        if code == S_SLICE:
            _slice(s, n, step[1], step[2], ascii, &s, &n)
        elif code == S_LOWER or code == S_UPPER or code == S_ASCII_LOWER:
            out = call.arena + call.arena_size
            for m in range(n):
                if code == S_UPPER:
                    out[m] = s[m] - 32 if _is_lower(s[m]) else s[m]
                else:
                    out[m] = s[m] + 32 if _is_upper(s[m]) else s[m]
            call.arena_size += n
            s = out
        elif code == S_SHAPE or code == S_SHAPE_COLLAPSED or code == S_CHAR_SHAPE:
            out = call.arena + call.arena_size
            if code == S_CHAR_SHAPE:
                n = _char_shape(s, n, out)
            else:
                n = _shape(s, n, out, 1 if code == S_SHAPE_COLLAPSED else 4)
            call.arena_size += n
            s = out
        elif code == S_REPLACE:
            out = call.arena + call.arena_size
            n = _replace(s, n, plan._literal_data + step[1], step[2],
                         plan._literal_data + step[3], step[4], out)
            call.arena_size += n
            s = out
        elif code == S_MIN_LENGTH:
            if (n if ascii else _code_points(s, n)) < step[1]:
                value.state = V_DROP
                return
        elif code == S_REGEX_MATCH:
            end = regex_search(plan._regexes[step[1]], <const unsigned char *> s, n, &start)
            if end == -2:
                value.state = V_FAILED
                return
            if end < 0:
                n = 0
            else:
                s = s + start
                n = end - start
        elif code == S_REGEX_TEST:
            end = regex_test(plan._regexes[step[1]], <const unsigned char *> s, n)
            if end < 0:
                value.state = V_FAILED
                return
            s = plan._literal_data + (step[2] if end else step[3])
            n = 4 if end else 5
        elif code == S_CONTAINS:
            number = 1.0 if _contains(s, n, plan._literal_data + step[1], step[2]) else 0.0
            is_number = True
        elif code == S_NOT:
            number = 0.0 if number != 0.0 else 1.0
        else:
            number = _predicate(code, s, n)
            is_number = True
    if is_number:
        value.number = number
        value.state = V_NUMBER
    else:
        value.data = s
        value.length = n
        value.state = V_TEXT


cdef inline int _write_number(_Buffer *name, Py_ssize_t number) noexcept nogil:
    cdef char digits[24]
    cdef int size = 0, k
    while True:
        digits[size] = <char> (48 + number % 10)
        size += 1
        number //= 10
        if number == 0:
            break
    if _reserve(name, size + 16) < 0:
        return -1
    for k in range(size):
        name.data[name.size + k] = digits[size - 1 - k]
    name.size += size
    return 0


cdef inline int _push(Rows *rows, Py_ssize_t attribute, double value) noexcept nogil:
    # the capacity is exact: a feature gives a token at most one entry
    if rows.size == rows.capacity:
        return -1
    rows.ids[rows.size] = <int32_t> attribute
    rows.values[rows.size] = value
    rows.size += 1
    return 0


cdef tuple _rows_arrays(Rows *rows, Py_ssize_t n_tokens, Py_ssize_t capacity):
    """The arrays the rows are written into (numpy's: no copy at the end)."""
    indptr = np.empty(n_tokens + 1, dtype=np.int64)
    ids = np.empty(capacity, dtype=np.int32)
    values = np.empty(capacity, dtype=np.float64)
    rows.indptr = <int64_t *> cnp.PyArray_DATA(<cnp.ndarray> indptr)
    rows.ids = <int32_t *> cnp.PyArray_DATA(<cnp.ndarray> ids)
    rows.values = <double *> cnp.PyArray_DATA(<cnp.ndarray> values)
    rows.size = 0
    rows.capacity = capacity
    return indptr, ids, values


cdef struct _Pending:
    Py_ssize_t start     # of the name in the token's name buffer
    Py_ssize_t length
    uint64_t hash
    double weight
    int32_t feature
    int32_t id           # -2: look the name up; else its id, known (-1: absent)
    int32_t *memo        # where the id found is memoized, or NULL


cdef int _boundary(CompiledPlan plan, Py_ssize_t f, Py_ssize_t k, Py_ssize_t q, Py_ssize_t n,
                   _Buffer *name) noexcept nogil:
    """Write the boundary text of part ``k`` (feature ``f``) at position ``q``, outside.

    Returns 0, 1 when the feature drops there, -1 out of memory.
    """
    cdef const int32_t *frow = plan._features + f * F_COLUMNS
    cdef const int32_t *padding = plan._padding
    cdef Py_ssize_t distance = -q if q < 0 else q - n + 1, row, limit
    cdef bint before = q < 0
    if not frow[F_BOUNDARY]:
        return 1
    row = plan._parts[k * PART_COLUMNS + PART_PADDING]
    if row >= 0:  # the texts through the ref's steps, computed once
        limit = frow[F_LIMIT] if frow[F_NUMBERED] else 0
        if distance > limit + 1:
            distance = limit + 1
        row += (0 if before else limit + 1) + distance - 1
        if padding[(row) * 3 + 0]:
            return 1
        return _append(name, plan._literal_data + padding[(row) * 3 + 1], padding[(row) * 3 + 2])
    if _append(name, plan._literal_data + frow[F_BEFORE if before else F_AFTER],
               frow[F_BEFORE_LENGTH if before else F_AFTER_LENGTH]) < 0:
        return -1
    if not frow[F_NUMBERED]:
        return 0
    if frow[F_LIMIT] and distance > frow[F_LIMIT]:
        return _append(name, b"#", 1)
    return _write_number(name, distance)


# a memo cell that holds no id
cdef enum:
    MEMO_UNKNOWN = -3   # not looked up yet
    MEMO_DROPPED = -4   # the feature drops at this token


cdef inline bint _same_token(_Call call, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    cdef Py_ssize_t c, x = a * call.n_columns, y = b * call.n_columns
    for c in range(call.n_columns):
        if (call.column_length[x + c] != call.column_length[y + c]
                or memcmp(call.column_data[x + c], call.column_data[y + c],
                          call.column_length[x + c]) != 0):
            return False
    return True


cdef Py_ssize_t _token_types(_Call call, int32_t *type_of) noexcept nogil:
    """Number the distinct tokens (the bytes of the columns read) in order of
    first appearance into ``type_of``; returns their count (-1: out of memory)."""
    cdef Py_ssize_t capacity = 16, t, c, k, n_types = 0
    cdef uint64_t h
    cdef int32_t r
    while capacity < 2 * call.n_tokens:
        capacity *= 2
    cdef int32_t *first = <int32_t *> PyMem_RawMalloc(capacity * sizeof(int32_t))
    cdef uint32_t *tags = <uint32_t *> PyMem_RawMalloc(capacity * sizeof(uint32_t))
    if first == NULL or tags == NULL:
        PyMem_RawFree(first)
        PyMem_RawFree(tags)
        return -1
    for k in range(capacity):
        first[k] = -1
    for t in range(call.n_tokens):
        h = 0
        for c in range(call.n_columns):
            h = (h ^ hash_bytes(call.column_data[t * call.n_columns + c],
                                call.column_length[t * call.n_columns + c]))
            h *= 0x9E3779B97F4A7C15ULL
        k = <Py_ssize_t> (h & <uint64_t> (capacity - 1))
        while True:
            r = first[k]
            if r < 0:
                first[k] = <int32_t> t
                tags[k] = <uint32_t> (h >> 32)
                type_of[t] = <int32_t> n_types
                n_types += 1
                break
            if tags[k] == <uint32_t> (h >> 32) and _same_token(call, r, t):
                type_of[t] = type_of[r]
                break
            k = (k + 1) & (capacity - 1)
    PyMem_RawFree(first)
    PyMem_RawFree(tags)
    return n_types


cdef int _expand(CompiledPlan plan, _Call call, const Py_ssize_t *lengths, Py_ssize_t n_seq,
                 ByteIndex index, ByteIndex transitions, bint grow,
                 Rows *state, Rows *transition, _Buffer *name, _Pending *pending,
                 const int32_t *known, int32_t *type_of, int32_t *memo,
                 Py_ssize_t *failed) noexcept nogil:
    """Phase 2; returns -1 (memory) or -2 (a ref is not text: ``failed`` = token, feature).

    Each token's names are all written first and their table slots
    prefetched, then looked up: the cache misses of a token overlap. With a
    ``memo`` (distinct token ``type_of[t]`` x local feature), a local
    feature's id is looked up once per distinct token it reads; slot values
    are computed when first read.
    """
    cdef Py_ssize_t i, t, k, f, q, n, start = 0, position, found, n_pending
    cdef int code
    cdef const int32_t *features = plan._features
    cdef const int32_t *frow
    cdef const int32_t *prow
    cdef _Value *value
    cdef _Pending *p
    cdef double weight
    cdef bint dropped
    cdef int32_t when, local
    cdef int32_t *cell
    t = 0
    for i in range(n_seq):
        n = lengths[i]
        for position in range(n):
            state.indptr[t] = state.size
            if transition != NULL:
                transition.indptr[t] = transition.size
            name.size = 0
            n_pending = 0
            for f in range(plan.n_features):
                frow = features + f * F_COLUMNS
                when = frow[F_WHEN_OUTSIDE]
                if when != _NO_BOUND and 0 <= position + when < n:
                    continue
                when = frow[F_WHEN_INSIDE]
                if when != _NO_BOUND and not 0 <= position + when < n:
                    continue
                weight = plan._weights[f]
                if frow[F_WEIGHT_SLOT] >= 0:
                    q = _position(position, frow[F_WEIGHT_OFFSET],
                                  frow[F_WEIGHT_ABSOLUTE], n)
                    if q < 0 or q >= n:
                        continue
                    value = &call.values[(start + q) * plan.n_slots + frow[F_WEIGHT_SLOT]]
                    if value.state == V_NONE:
                        _compute(plan, call, start + q, frow[F_WEIGHT_SLOT])
                    if value.state == V_DROP:
                        continue
                    if value.state == V_FAILED:
                        return -1
                    if value.state != V_NUMBER:
                        failed[0] = start + position
                        failed[1] = f
                        return -2
                    weight = value.number
                p = &pending[n_pending]
                p.start = name.size
                p.id = -2
                p.memo = NULL
                if known != NULL and known[f] != -2:
                    # a constant name, looked up once per index (no text to build)
                    p.length = 0
                    p.weight = weight
                    p.feature = <int32_t> f
                    p.id = known[f]
                    n_pending += 1
                    continue
                local = plan._local[f]
                if memo != NULL and local >= 0:
                    q = position + plan._local_offset[local]
                    if 0 <= q < n:
                        cell = memo + <Py_ssize_t> type_of[start + q] * plan.n_local + local
                        if cell[0] == MEMO_DROPPED:
                            continue
                        if cell[0] != MEMO_UNKNOWN:
                            p.length = 0
                            p.weight = weight
                            p.feature = <int32_t> f
                            p.id = cell[0]
                            n_pending += 1
                            continue
                        p.memo = cell
                dropped = False
                for k in range(frow[F_FIRST_PART], frow[F_FIRST_PART] + frow[F_N_PARTS]):
                    prow = plan._parts + k * PART_COLUMNS
                    if prow[PART_TYPE] == P_LITERAL:
                        if _append(name, plan._literal_data + prow[PART_A],
                                   prow[PART_B]) < 0:
                            return -1
                        continue
                    q = _position(position, prow[PART_B], prow[PART_ABSOLUTE], n)
                    if q < 0 or q >= n:
                        code = _boundary(plan, f, k, q, n, name)
                        if code == -1:
                            return -1
                        if code == 1:
                            dropped = True
                            break
                        continue
                    value = &call.values[(start + q) * plan.n_slots + prow[PART_A]]
                    if value.state == V_NONE:
                        _compute(plan, call, start + q, prow[PART_A])
                    if value.state == V_DROP:
                        dropped = True
                        break
                    if value.state == V_FAILED:
                        return -1
                    if value.state != V_TEXT:
                        failed[0] = start + position
                        failed[1] = f
                        return -2
                    if _append(name, value.data, value.length) < 0:
                        return -1
                if dropped:
                    name.size = p.start
                    if p.memo != NULL:
                        p.memo[0] = MEMO_DROPPED
                    continue
                p.length = name.size - p.start
                p.weight = weight
                p.feature = <int32_t> f
                n_pending += 1
            if not grow:
                # hashed once all are written (a word read right after its
                # bytes were stored one by one would wait for the stores)
                for k in range(n_pending):
                    p = &pending[k]
                    if p.id != -2:
                        continue
                    p.hash = hash_padded(name.data + p.start, p.length)
                    if features[p.feature * F_COLUMNS + F_STATE]:
                        prefetch_slot(index, p.hash)
            for k in range(n_pending):
                p = &pending[k]
                f = p.feature
                frow = features + f * F_COLUMNS
                if frow[F_STATE]:
                    if p.id != -2:
                        found = p.id
                    elif grow:
                        found = index.add(name.data + p.start, p.length)
                    else:
                        found = find_padded(index, name.data + p.start, p.length, p.hash)
                    if found == -2:
                        return -1
                    if p.memo != NULL:
                        p.memo[0] = <int32_t> found
                    if found >= 0 and _push(state, found, p.weight) < 0:
                        return -1
                if frow[F_TRANSITION] and transition != NULL and position > 0:
                    if grow:
                        found = transitions.add(name.data + p.start, p.length)
                    else:
                        found = find_padded(transitions, name.data + p.start, p.length,
                                            p.hash)
                    if found == -2:
                        return -1
                    if found >= 0 and _push(transition, found, p.weight) < 0:
                        return -1
            t += 1
        start += n
    state.indptr[t] = state.size
    if transition != NULL:
        transition.indptr[t] = transition.size
    return 0


cdef inline Py_ssize_t _position(Py_ssize_t t, int32_t offset, int32_t absolute,
                                 Py_ssize_t n) noexcept nogil:
    if absolute:
        return offset if offset >= 0 else n + offset
    return t + offset


cdef object _finish(Rows *rows, tuple arrays, object lengths):
    indptr, ids, values = arrays
    if rows.size < rows.capacity:
        ids = ids[:rows.size]
        values = values[:rows.size]
    return Encoded(indptr, ids, values, lengths)


def expand(CompiledPlan plan, list sequences, ByteIndex index, ByteIndex transitions=None, *,
           bint grow=False, str name="X", Py_ssize_t first_sequence=0, constant_ids=None):
    """Encode raw token sequences: the plan's attributes' ids in ``index``.

    Parameters
    ----------
    plan : CompiledPlan
    sequences : list of sequences of tokens
        Each token a ``str`` or a tuple of ``str`` columns.
    index : ByteIndex
        The state attributes (``add`` to it when ``grow``, else ``find``:
        attributes it does not hold are skipped).
    transitions : ByteIndex or None
        The transition attributes (None: the plan's transition features are
        not encoded).
    grow : bool
    name : str
        How errors call the data (``X[i][j]``).
    first_sequence : int
        The index of ``sequences[0]`` in the data (errors name ``i`` from it).
    constant_ids : ndarray of int32, optional
        :meth:`CompiledPlan.constant_ids` of ``index`` (predict only): the
        features whose name is constant are not looked up per token.

    Returns
    -------
    Encoded
        With ``transitions`` set when ``transitions`` is given.
    """
    cdef Py_ssize_t n_seq = len(sequences), i, n_tokens = 0
    lengths = np.empty(n_seq, dtype=np.intp)
    cdef Py_ssize_t *lengths_data = <Py_ssize_t *> cnp.PyArray_DATA(<cnp.ndarray> lengths)
    for i in range(n_seq):
        lengths_data[i] = len(sequences[i])
        n_tokens += lengths_data[i]
    cdef Rows state, transition
    state_arrays = _rows_arrays(&state, n_tokens, n_tokens * plan.n_state_features)
    transition_arrays = None
    if transitions is not None:
        transition_arrays = _rows_arrays(&transition, n_tokens,
                                         n_tokens * plan.n_transition_features)
    expand_rows(plan, sequences, lengths_data, n_seq, n_tokens, index, transitions, grow, name,
                first_sequence, constant_ids, &state,
                &transition if transitions is not None else NULL)
    encoded = _finish(&state, state_arrays, lengths)
    if transitions is not None:
        encoded = encoded._replace(transitions=_finish(&transition, transition_arrays, lengths))
    return encoded


cdef Py_ssize_t state_row_capacity(object plan, Py_ssize_t n_tokens) except -1:
    return n_tokens * (<CompiledPlan?> plan).n_state_features


cdef int expand_rows(object compiled, list sequences, const Py_ssize_t *lengths,
                     Py_ssize_t n_seq, Py_ssize_t n_tokens, ByteIndex index,
                     ByteIndex transitions, bint grow, str name, Py_ssize_t first_sequence,
                     object constant_ids, Rows *state, Rows *transition) except -1:
    """:func:`expand` into rows the caller made.

    ``n_seq`` sequences of ``lengths``, ``n_tokens`` in all; the rows'
    capacities ``n_tokens`` x the plan's state (transition) features;
    ``transition`` is NULL when ``transitions`` is None. The sequences are
    read and expanded in chunks of about ``_CHUNK_TOKENS`` tokens, so that a
    call's buffers (the columns' places, the slot values, the memo) stay
    small whatever the data's size; the rows are written one after another.
    """
    cdef CompiledPlan plan = compiled
    cdef Py_ssize_t i, first = 0, stop, chunk_tokens, done = 0
    cdef const int32_t *known = NULL
    if constant_ids is not None and not grow:
        known = _constant_ids_data(plan, constant_ids)
    for i in range(n_seq):
        if len(sequences[i]) != lengths[i]:
            raise ValueError(f"{name}[{i + first_sequence}] changed length while it was read")
    cdef _Buffer buffer
    cdef _Pending *pending = <_Pending *> PyMem_RawMalloc(
        max(1, plan.n_features) * sizeof(_Pending))
    buffer.data = NULL
    buffer.size = buffer.capacity = 0
    cdef Rows state_chunk, transition_chunk
    try:
        if pending == NULL or _reserve(&buffer, 64) < 0:
            raise MemoryError()
        if n_seq == 0:
            state.indptr[0] = state.size
            if transition != NULL:
                transition.indptr[0] = transition.size
        while first < n_seq:
            stop, chunk_tokens = first + 1, lengths[first]
            while stop < n_seq and chunk_tokens + lengths[stop] <= _CHUNK_TOKENS:
                chunk_tokens += lengths[stop]
                stop += 1
            # the chunk's rows continue the others' (indptr from its first token)
            state_chunk = state[0]
            state_chunk.indptr = state.indptr + done
            if transition != NULL:
                transition_chunk = transition[0]
                transition_chunk.indptr = transition.indptr + done
            _expand_chunk(plan, sequences[first:stop], lengths + first, stop - first,
                          chunk_tokens, index, transitions, grow, name, first_sequence + first,
                          known, &state_chunk,
                          &transition_chunk if transition != NULL else NULL, &buffer, pending)
            state.size = state_chunk.size
            if transition != NULL:
                transition.size = transition_chunk.size
            done += chunk_tokens
            first = stop
        return 0
    finally:
        PyMem_RawFree(buffer.data)
        PyMem_RawFree(pending)


cdef int _expand_chunk(CompiledPlan plan, list sequences, const Py_ssize_t *lengths,
                       Py_ssize_t n_seq, Py_ssize_t n_tokens, ByteIndex index,
                       ByteIndex transitions, bint grow, str name, Py_ssize_t first_sequence,
                       const int32_t *known, Rows *state, Rows *transition, _Buffer *buffer,
                       _Pending *pending) except -1:
    """Phases 1 and 2 of one chunk of sequences."""
    cdef Py_ssize_t i, j, code, n_types = 0, k
    cdef Py_ssize_t failed[2]
    cdef _Call call = _Call(n_tokens, plan.n_columns, plan.n_slots)
    _read(plan, call, sequences, name, first_sequence)
    cdef bint memoize = plan.n_local > 0 and _MEMO_MIN_TOKENS <= n_tokens < INT32_MAX
    cdef int32_t *type_of = NULL
    cdef int32_t *memo = NULL
    try:
        with nogil:
            if memoize:
                type_of = <int32_t *> PyMem_RawMalloc(n_tokens * sizeof(int32_t))
                n_types = -1 if type_of == NULL else _token_types(call, type_of)
                if n_types >= 0:
                    memo = <int32_t *> PyMem_RawMalloc(
                        max(1, n_types * plan.n_local) * sizeof(int32_t))
                    if memo != NULL:
                        for k in range(n_types * plan.n_local):
                            memo[k] = MEMO_UNKNOWN
            if (memoize and memo == NULL) or _prepare(plan, call) < 0:
                code = -1
            else:
                code = _expand(plan, call, lengths, n_seq, index, transitions, grow, state,
                               transition, buffer, pending, known, type_of, memo, failed)
        if code == -1:
            raise MemoryError()
        if code == -2:
            i, j = 0, failed[0]
            while j >= lengths[i]:
                j -= lengths[i]
                i += 1
            source = plan.plan.features[failed[1]].source or f"feature {failed[1]}"
            raise ValueError(
                f"{source}: a template ref gave a number where text is needed (or text "
                f"where a number is), at {name}[{i + first_sequence}][{j}]"
            )
        return 0
    finally:
        PyMem_RawFree(type_of)
        PyMem_RawFree(memo)


cdef const int32_t *_constant_ids_data(CompiledPlan plan, object constant_ids) except NULL:
    """The data of :meth:`CompiledPlan.constant_ids`' array (checked)."""
    cdef cnp.ndarray array = constant_ids
    if (cnp.PyArray_NDIM(array) != 1 or cnp.PyArray_DIM(array, 0) != plan.n_features
            or not cnp.PyArray_EquivTypenums(cnp.PyArray_TYPE(array), cnp.NPY_INT32)
            or not cnp.PyArray_ISCARRAY_RO(array) or not cnp.PyArray_ISNOTSWAPPED(array)):
        raise ValueError("constant_ids must hold one int32 id per feature")
    return <const int32_t *> cnp.PyArray_DATA(array)
