"""Compiled featurization: token dicts to attribute ids and values.

A :class:`Vocabulary` numbers attributes with CRFsuite's names (``w:Hello``
for ``{'w': 'Hello'}``, ``n:a`` for ``{'n': {'a': 1}}``; see
:mod:`skcrf._featurize._validation`) and encodes sequences of tokens into CSR arrays,
one row per token in flat order (:class:`~skcrf._featurize._encoded.Encoded`).

Design
------
- ``_names`` lists the names (exact ``str``) in id order; ``_ids`` finds
  them: a C table (open addressing, linear probing, at most 2/3 full) of
  each name's str hash and id, the name itself read from ``_names`` to
  compare. No dict and no int object per attribute (on a task of 461k
  attributes those were ~70 MB of a fit's peak). Ids are given in order of
  first appearance, as CRFsuite does.
- Fast path, in C, for plain ``dict`` tokens with ``str`` keys and ``str``,
  ``bool``, ``int`` or finite ``float`` values: the token is walked with
  ``PyDict_Next``. A numeric value's attribute is its key, found directly in
  ``_ids`` (no separate cache: it would be the same lookup). A string value
  is found in a cache ``(key number, value) -> id`` (``_key_numbers`` numbers
  the keys), so no ``key:value`` string is built for a known attribute; on a
  cache miss the name is built once and looked up in ``_ids`` (so
  ``{'a:b': 1}`` and ``{'a': 'b'}`` are the same attribute ``a:b``, as in
  CRFsuite), and the answer is cached.
- A vocabulary made from :class:`~skcrf._utils._cqdb_index.LazyNames` (a
  model opened from a CRFsuite file) starts with no names: ``_found`` is then
  a cache of the names looked up so far, and a name missing from it is
  looked up in the file's own hash tables (``_index``). The names are listed
  (``_names`` and ``_ids`` complete, ``_index`` dropped) only when needed:
  on growing, or when ``attributes`` is read.
- The cache is a C hash table (open addressing, linear probing) of 32-byte
  entries holding the value's hash, the key number, the id as a C int and
  the value's characters when it is a 1-byte string of at most 15 of them
  (else a reference to the value, kept alive in ``_long_values``). Such a
  short value is hashed by the table itself (its 16 packed bytes, with a seed
  taken from a str hash, so as random per process), not with the str's
  SipHash, which the values built anew for each token would pay: a hit
  reads one entry, with no dict probe, no key object to compare and no int
  object to convert (on large vocabularies those are cache misses, which
  dominated the time). No pointer into the table is held across a call that
  may run Python code (building a name may run the garbage collector):
  a miss looks the slot up again to store its answer. Each token is walked
  twice: first checking values, hashing them and prefetching their slots
  (so the cache misses of a token overlap), then finding the ids in order.
- ``_complete``: while every name in ``_ids`` that holds the (one-character)
  separator was added through the cache (no names given to the constructor,
  none from the general path, no rollback), a predict-time cache miss of a
  key and a value without the separator is an unseen attribute: the name
  ``key:value`` holds the separator once, so no other (key, value) or
  numeric key names it, and it would be cached. No name is built then.
- Tokens made by one feature function hold the same key objects in the same
  order, so during one ``encode`` call a small memo per position in the
  token (``_Memo``) remembers the last key seen there, with its key number
  or its id: comparing with the previous token's key (the same object, or an
  equal string that is still in the CPU cache when keys are built per token,
  e.g. with f-strings) replaces a dict lookup. The memo borrows key pointers
  that stay valid for the call (the input holds the keys) and is dropped
  after it; key numbers are never reused.
- A token that is a ``list`` or ``tuple`` of plain ``str`` (or UTF-8
  ``bytes``) names is encoded in C too (each name looked up, value 1.0), as
  the general path would.
- The other values of a plain dict that python-crfsuite takes are encoded in
  C as well (:meth:`Vocabulary._encode_item`), each after the items before
  it: ``bytes`` keys and values (read as UTF-8), ``list`` and ``set`` values
  of names, and, when the separator is ``':'``, nested ``dict`` values,
  through the same cache and with no name built for a known attribute. A
  nested key ``a:b`` (``{'a': {'b': ...}}``) has a key number of its own,
  remembered per parent key (``_children``: ``a`` -> ``{'b': number}``), so
  ``a:b:v`` is the cache's ``(a:b, v)``; a number under it is the
  attribute ``a:b``, the cache's ``(a, b)`` (``a`` + ``':'`` + ``b``).
- Any other token (names or values that are str subclasses, numpy scalars,
  lists of numbers (vectors), invalid values) goes to the general path,
  :func:`skcrf._featurize._validation.token_attributes`, which checks it and raises the
  errors that name ``X[i][j]`` and the key. When the fast path meets such a
  value halfway through a token, it drops what it wrote for that token and
  the general path redoes the token (same order, so the same ids).
- Predict (``grow=False``) skips unseen attributes. It also caches "unseen"
  answers (id -1) so a frequent unknown word does not rebuild its name each
  time, but only up to ``_MISS_CACHE_LIMIT`` of them per vocabulary: the
  cache cannot grow without bound on a stream of new words. ``grow=True``
  treats a cached -1 as a miss and adds the attribute.
- A failed ``encode(grow=True)`` (invalid token) leaves the vocabulary as it
  was: the attributes it added are removed again.
- :meth:`Vocabulary.rest` gives back the lookup tables' memory while nothing
  is looked up (a fit's optimizer runs, when the vocabulary's tables are the
  largest thing besides the optimizer's vectors): ``_ids`` is dropped (the
  names stay), and of the cache only each known entry's (id, tag) is kept:
  its value is the end of the name (``key + separator + value``, or the
  whole name under ``_NAMES_TAG``), packed and hashed again on waking.
  :meth:`Vocabulary.wake`, or the first use of any method, rebuilds both:
  the same answers, minus the remembered "unseen" ones; a first use from
  several threads at once wakes it once (under a lock). ``rest(pack=True)``
  (a fit's) also packs the names into one UTF-8 text with format 6's name
  table (:class:`~skcrf._utils._name_index.PackedNameIndex`) and drops
  their str objects: the vocabulary then serves them as lazy names, as a
  model file's; waking packs an ASCII name's value straight from its bytes.
- Output goes to numpy buffers written through raw pointers, grown by
  doubling (``ndarray.resize``), trimmed at the end.
- :meth:`Vocabulary.encode_items` encodes one sequence in python-crfsuite's
  item formats for ``skcrf.pycrfsuite`` (its rules: ``:`` joins names, an
  attribute repeated in an item counts once with its values summed), on the
  same fast paths; any item they do not take (an invalid one among them)
  makes it answer None, and the caller converts the sequence in Python
  (which raises the errors).
"""

import threading

import numpy as np

cimport numpy as cnp
from cpython.dict cimport PyDict_Check, PyDict_GetItem, PyDict_Next
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.list cimport PyList_GET_ITEM
from cpython.long cimport PyLong_AsLong
from cpython.mem cimport PyMem_Calloc, PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject, PyObject_Hash, PyTypeObject, Py_TYPE
from cpython.sequence cimport PySequence_Fast_GET_SIZE, PySequence_Fast_ITEMS
from cpython.unicode cimport (
    PyUnicode_1BYTE_KIND, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND,
)
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t, INT32_MAX
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset

cdef extern from "Python.h":
    # declared here without an exception clause: an overflow is cleared and
    # handed to the general path, which names the value
    double _long_as_double "PyLong_AsDouble"(object number)
    bint PyUnicode_IS_READY(object o)

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define SKCRF_PREFETCH(address) __builtin_prefetch(address)
    #else
    #define SKCRF_PREFETCH(address) ((void) 0)
    #endif
    """
    void _prefetch "SKCRF_PREFETCH"(const void *address)

from skcrf._utils._name_index cimport NameIndex, PackedNameIndex, name_start

from skcrf._utils._cqdb_index import LazyNames
from skcrf._utils._name_index import pack_names

from ._encoded import DenseFeatures, Encoded
from ._transitions import TRANSITION_KEY
from ._validation import check_nonempty, token_attributes

cnp.import_array()

__all__ = ["Encoded", "StreamEncoder", "Vocabulary", "item_pairs", "summed_items"]

# The reserved key of transition attributes, looked up in C (no global lookup).
cdef object _TRANSITION_KEY = TRANSITION_KEY

# Serializes waking rested vocabularies (rare: once after a fit, on first use).
cdef object _WAKE_LOCK = threading.Lock()

# How many unseen (key, value) pairs a vocabulary remembers at predict time.
cdef Py_ssize_t _MISS_CACHE_LIMIT = 1 << 16

# Positions in a token that get a memo (later positions are looked up).
cdef enum:
    _MEMO_SIZE = 64

# Nested dicts walked by the fast path (deeper ones: the general path).
cdef enum:
    _MAX_DEPTH = 32

# Slots of the table that merges a token's repeated ids kept on the stack
# (tokens of up to half as many entries); larger tokens allocate one.
cdef enum:
    _MERGE_STACK = 256


# The string-value cache (see the module's notes).
cdef enum:
    _INLINE = 15             # characters of a 1-byte string kept in an entry
    _FIRST_CAPACITY = 1024   # entries (a power of 2)

# ``_Value.w1`` of a value too long to be kept in an entry (``w0``: a
# PyObject * to it); a packed short value has its length (< 0xFF) in byte 15.
cdef uint64_t _LONG = 0xFFFFFFFFFFFFFFFFULL

# The cache's tag of whole attribute names (lists of names): key numbers stop
# below INT32_MAX - 1 (see _key_number), so no key's tag (number + 1) is this.
cdef int32_t _NAMES_TAG = INT32_MAX

# Seeds of the hash of short values (as random as str hashes: derived from one).
cdef uint64_t _SEED0 = <uint64_t> hash("skcrf._featurize") | 1
cdef uint64_t _SEED1 = (_SEED0 * 0x9E3779B97F4A7C15ULL) ^ (_SEED0 >> 29)


cdef struct _Value:
    # a string value as the cache compares it: its characters (and length),
    # packed into 16 zero-padded bytes when short, else (w0, _LONG)
    uint64_t w0
    uint64_t w1
    Py_hash_t hash          # of the packed bytes, or the str's own hash


cdef struct _Entry:
    Py_hash_t hash          # the value's hash (_Value.hash)
    int32_t id              # the attribute's id; -1: unseen (predict time)
    int32_t tag             # key number + 1; 0: an empty slot
    uint64_t w0             # the value (_Value.w0, w1)
    uint64_t w1


cdef struct _IdSlot:
    Py_hash_t hash          # the name's str hash
    Py_ssize_t id1          # its id + 1; 0: an empty slot


cdef _IdSlot *_id_table(list names, Py_ssize_t room, Py_ssize_t *mask) except NULL:
    """A new name -> id table of ``names`` (exact str, in id order), at most
    2/3 full with ``room`` names; its capacity - 1 in ``mask``."""
    cdef Py_ssize_t n = len(names), capacity = _FIRST_CAPACITY, i
    while 3 * max(n + 1, room) > 2 * capacity:
        capacity *= 2
    cdef _IdSlot *table = <_IdSlot *> PyMem_Calloc(capacity, sizeof(_IdSlot))
    if table == NULL:
        raise MemoryError()
    for i in range(n):
        _put_id(table, capacity - 1, PyObject_Hash(<object> PyList_GET_ITEM(names, i)), i)
    mask[0] = capacity - 1
    return table


cdef void _reinsert_ids(_IdSlot *table, Py_ssize_t mask):
    """Close the gaps that emptied slots left in the probe runs of the others."""
    cdef Py_ssize_t k, j, start = 0
    cdef _IdSlot moved
    while start <= mask and table[start].id1 != 0:
        start += 1  # an empty slot: no run wraps around past it
    if start > mask:
        return
    for j in range(1, mask + 2):
        k = (start + j) & mask
        if table[k].id1 != 0:
            moved = table[k]
            table[k].id1 = 0
            _put_id(table, mask, moved.hash, moved.id1 - 1)


cdef inline void _put_id(_IdSlot *table, Py_ssize_t mask, Py_hash_t h, Py_ssize_t id):
    cdef Py_ssize_t k = <Py_ssize_t> (<size_t> h & <size_t> mask)
    while table[k].id1 != 0:
        k = (k + 1) & mask
    table[k].hash = h
    table[k].id1 = id + 1


cdef struct _Memo:
    # the last key seen at one position of a token, during one encode call
    PyObject *string_key
    Py_ssize_t key_number   # its number in the cache (-1: not cached)
    PyObject *number_key
    Py_ssize_t number_id    # its id when the value is a number


cdef inline uint64_t _slot_hash(Py_hash_t value_hash, int32_t tag):
    cdef uint64_t x = (<uint64_t> value_hash) ^ (<uint64_t> tag * 0x9E3779B97F4A7C15ULL)
    x ^= x >> 32
    x *= 0xD6E8FEB86659FD93ULL
    x ^= x >> 32
    return x


cdef inline void _pack(str value, _Value *packed):
    """``packed`` describes ``value``: its bytes when short, else the str."""
    cdef PyObject *pointer
    if _pack_tail(value, 0, packed):
        return
    pointer = <PyObject *> value
    packed.w0 = <uint64_t> pointer
    packed.w1 = _LONG
    packed.hash = PyObject_Hash(value)  # (cannot fail for a str)


cdef inline bint _pack_tail(str name, Py_ssize_t skip, _Value *packed):
    """``_pack(name[skip:])`` without making that str, when it is short and of
    1-byte characters (returns True); False (``packed`` untouched) otherwise.
    (A part of a 1-byte str is a 1-byte str.)"""
    if not (PyUnicode_IS_READY(name) and PyUnicode_KIND(name) == PyUnicode_1BYTE_KIND):
        return False
    return _pack_chars(<const uint8_t *> PyUnicode_DATA(name) + skip,
                       PyUnicode_GET_LENGTH(name) - skip, packed)


cdef inline bint _pack_chars(const uint8_t *chars, Py_ssize_t length, _Value *packed):
    """:func:`_pack_tail` of the 1-byte characters ``chars[:length]``."""
    cdef uint64_t words[2]
    cdef uint64_t x
    if not 0 <= length <= _INLINE:
        return False
    words[0] = 0
    words[1] = 0
    memcpy(words, chars, length)
    (<uint8_t *> words)[15] = <uint8_t> length
    packed.w0 = words[0]
    packed.w1 = words[1]
    x = (words[0] ^ _SEED0) * 0x9E3779B97F4A7C15ULL
    x ^= ((words[1] ^ _SEED1) * 0xC2B2AE3D27D4EB4FULL)
    x ^= x >> 31
    x *= 0xBF58476D1CE4E5B9ULL
    x ^= x >> 29
    packed.hash = <Py_hash_t> x
    return True


cdef inline bint _is_ascii(const uint8_t *data, Py_ssize_t length) noexcept:
    cdef Py_ssize_t k
    for k in range(length):
        if data[k] >= 0x80:
            return False
    return True


cdef inline bint _entry_holds(_Entry *entry, _Value *packed, int32_t tag, str value):
    """Whether a (non-empty) entry is the one of ``value`` (``packed``) under
    key ``tag``."""
    if entry.hash != packed.hash or entry.tag != tag or entry.w1 != packed.w1:
        return False
    if entry.w0 == packed.w0:
        return True  # the same bytes, or the same long str
    return packed.w1 == _LONG and _str_equal(<PyObject *> <uintptr_t> entry.w0, value)


cdef inline str _exact_str(object name):
    """A str or str subclass as an exact str: the tables compare exact strs in C."""
    return name if type(name) is str else str.__str__(name)


cdef inline bint _str_equal(PyObject *a, str b):
    """``<str> a == b``, without Cython's general comparison."""
    cdef Py_ssize_t length
    cdef unsigned int kind
    if a == <PyObject *> b:
        return True
    if not (PyUnicode_IS_READY(<str> a) and PyUnicode_IS_READY(b)):
        return <str> a == b
    length = PyUnicode_GET_LENGTH(b)
    kind = PyUnicode_KIND(b)
    if PyUnicode_GET_LENGTH(<str> a) != length or PyUnicode_KIND(<str> a) != kind:
        return False
    return memcmp(PyUnicode_DATA(<str> a), PyUnicode_DATA(b), length * kind) == 0


cdef inline bint _same_key(PyObject *remembered, PyObject *key):
    """Whether a memo's key (possibly NULL) is the str ``key``."""
    if remembered == key:
        return True
    # an equal key built anew for each token (f-string keys)
    return remembered != NULL and _str_equal(remembered, <str> key)


cdef inline int _number_value(object value, double *number):
    """1: ``value`` is a bool, int or finite float (``number`` set to it); 0:
    of another type; -1: a number the fast path leaves to the general path
    (not finite, too large for a float)."""
    cdef PyTypeObject *value_type = Py_TYPE(value)
    if value_type == <PyTypeObject *> bool:
        number[0] = 1.0 if value is True else 0.0
    elif value_type == <PyTypeObject *> float:
        number[0] = PyFloat_AS_DOUBLE(value)
        if not isfinite(number[0]):
            return -1
    elif value_type == <PyTypeObject *> int:
        number[0] = _long_as_double(value)
        if number[0] == -1.0 and PyErr_Occurred() != NULL:
            PyErr_Clear()
            return -1
    else:
        return 0
    return 1


cdef object _decoded(bytes data):
    """``data`` read as UTF-8 (python-crfsuite's rule), None if it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


cdef list _decoded_names(object names):
    """A list or tuple of str and UTF-8 bytes names as a list of str; None
    if it holds anything else."""
    cdef list decoded = []
    for name in names:
        if Py_TYPE(name) == <PyTypeObject *> bytes:
            name = _decoded(<bytes> name)
            if name is None:
                return None
        elif Py_TYPE(name) != <PyTypeObject *> str:
            return None
        decoded.append(name)
    return decoded


cdef class _Output:
    """Growing id and value buffers (numpy arrays written through pointers)."""

    cdef object ids_array, values_array
    cdef int32_t *ids
    cdef double *values
    cdef Py_ssize_t size, capacity

    def __cinit__(self, Py_ssize_t capacity):
        cdef cnp.npy_intp size
        self.capacity = max(capacity, 16)
        self.size = 0
        # (numpy's C API: a call per sentence at predict time, so it counts)
        size = self.capacity
        self.ids_array = cnp.PyArray_EMPTY(1, &size, cnp.NPY_INT32, 0)
        self.values_array = cnp.PyArray_EMPTY(1, &size, cnp.NPY_FLOAT64, 0)
        self._take_pointers()

    cdef void _take_pointers(self):
        self.ids = <int32_t *> cnp.PyArray_DATA(self.ids_array)
        self.values = <double *> cnp.PyArray_DATA(self.values_array)

    cdef int _resize(self, Py_ssize_t capacity) except -1:
        # no view of these arrays exists yet, so they can be resized in place
        # (ndarray.resize(capacity, refcheck=False), through the C API)
        cdef cnp.npy_intp size = capacity
        cdef cnp.PyArray_Dims shape
        shape.ptr = &size
        shape.len = 1
        cnp.PyArray_Resize(self.ids_array, &shape, 0, cnp.NPY_CORDER)
        cnp.PyArray_Resize(self.values_array, &shape, 0, cnp.NPY_CORDER)
        self.capacity = capacity
        self._take_pointers()
        return 0

    cdef inline int push(self, Py_ssize_t attribute, double value) except -1:
        if self.size == self.capacity:
            self._resize(2 * self.capacity)
        self.ids[self.size] = <int32_t> attribute
        self.values[self.size] = value
        self.size += 1
        return 0

    cdef tuple finish(self):
        """The ids and values written, trimmed to size."""
        self._resize(self.size)
        return self.ids_array, self.values_array


cdef class Vocabulary:
    """Attribute names and their ids; encodes token dicts into CSR arrays.

    Parameters
    ----------
    attributes : iterable of str, default=()
        Attribute names in id order (a fitted model's, when loading one).
    value_separator : str, default=':'
        Joins a key and its string value into an attribute name (CRFsuite's
        ``:``; ``'='`` reads models written with DictVectorizer's names).

    Examples
    --------
    >>> vocabulary = Vocabulary()
    >>> encoded = vocabulary.encode([[{"w": "Hi", "cap": True}, ["bias"]]], grow=True)
    >>> vocabulary.attributes
    ['w:Hi', 'cap', 'bias']
    >>> encoded.indptr.tolist(), encoded.ids.tolist(), encoded.values.tolist()
    ([0, 2, 3], [0, 1, 2], [1.0, 1.0, 1.0])
    """

    cdef list _names          # id -> name
    cdef _IdSlot *_ids        # name -> id: hashes and ids of _names (NULL while resting)
    cdef Py_ssize_t _ids_mask  # its capacity - 1
    cdef dict _found          # lazy names: the file's answers looked up so far
    cdef dict _key_numbers    # key -> its number in the string-value cache
    cdef list _key_names      # number -> key (nested keys: the whole ``a:b``)
    cdef list _children       # number -> None or {inner key: number of ``key:inner``}
    cdef _Entry *_table       # the string-value cache (see the module's notes)
    cdef Py_ssize_t _mask     # its capacity - 1
    cdef Py_ssize_t _used     # its entries
    cdef list _long_values    # the values the table references
    cdef str _separator
    cdef Py_ssize_t _cached_misses
    cdef bint _complete       # every name holding the separator is cached
    cdef dict _vector_ids     # vector key -> int32 ids of key[0], key[1]... (all known)
    cdef NameIndex _index     # lazy names: where names are looked up
    cdef object _lazy         # lazy names: the LazyNames (None once listed)
    cdef bint _resting        # rest(): _ids and _table NULL, the entries in _rested
    cdef int32_t *_rested     # resting: (id, tag) of each known entry of the cache
    cdef Py_ssize_t _n_rested
    cdef Py_ssize_t _rested_capacity  # resting: the capacity of the table to rebuild

    def __cinit__(self, *args, **kwargs):
        self._resting = False
        self._rested = NULL
        self._ids = NULL
        self._table = <_Entry *> PyMem_Calloc(_FIRST_CAPACITY, sizeof(_Entry))
        if self._table == NULL:
            raise MemoryError()
        self._mask = _FIRST_CAPACITY - 1
        self._used = 0
        self._long_values = []
        self._key_numbers = {}
        self._key_names = []
        self._children = []
        self._vector_ids = {}

    def __dealloc__(self):
        PyMem_Free(self._table)
        PyMem_Free(self._rested)
        PyMem_Free(self._ids)

    def __init__(self, attributes=(), value_separator=":"):
        self._wake()
        if type(value_separator) is not str:
            raise TypeError(
                f"value_separator must be a str; got {type(value_separator).__name__}."
            )
        self._separator = value_separator
        self._names = []
        self._index_names(0)
        self._found = None
        self._cached_misses = 0
        self._complete = len(value_separator) == 1
        # (a second __init__ starts afresh)
        memset(self._table, 0, (self._mask + 1) * sizeof(_Entry))
        self._used = 0
        self._long_values = []
        self._key_numbers = {}
        self._key_names = []
        self._children = []
        self._vector_ids = {}
        self._index = None
        self._lazy = None
        if isinstance(attributes, LazyNames):
            self._index = attributes.string_index
            self._lazy = attributes
            self._found = {}
            self._complete = False  # its names were not added through the cache
            return
        for attribute in attributes:
            if type(attribute) is not str:
                raise TypeError(
                    f"attribute names must be str; got {type(attribute).__name__} "
                    f"{attribute!r}."
                )
            if self._find(attribute) >= 0:
                raise ValueError(f"attribute {attribute!r} is given twice.")
            self._add(attribute)

    @property
    def attributes(self):
        """Attribute names in id order (the vocabulary's own list: do not modify)."""
        # (woken first: listing packed names while another thread rebuilds
        # the tables would leave it the tables of no names)
        self._wake()
        self._list_names()
        return self._names

    @property
    def value_separator(self):
        return self._separator

    def __len__(self):
        if self._index is not None:
            return len(self._index)
        return len(self._names)

    def __contains__(self, name):
        self._wake()
        return type(name) is str and self._find(name) >= 0

    def get(self, name, default=-1):
        """The id of attribute ``name``, or ``default``."""
        self._wake()
        if not isinstance(name, str):
            return default
        found = self._find(_exact_str(name))
        return default if found < 0 else found

    def __reduce__(self):
        return (Vocabulary, (self._names if self._lazy is None else self._lazy,
                             self._separator))

    def __repr__(self):
        return (
            f"Vocabulary(<{len(self)} attributes>, "
            f"value_separator={self._separator!r})"
        )

    def rest(self, *, pack=False):
        """Give back the memory of the lookup tables until the next use.

        For the owner of a vocabulary that will not be used for a while (a
        fit, while its optimizer runs): the name -> id dict and the
        string-value cache's table are dropped (the names stay). Any method
        (or :meth:`wake`) rebuilds both, with the same answers, once: the
        first use from any number of threads at once is safe. ``rest``
        itself is not for a vocabulary that other threads use. A vocabulary
        of lazy names (a model opened from a CRFsuite file) does not rest.

        ``pack=True`` also packs the names into one UTF-8 text (format 6's
        table, :class:`~skcrf._utils._name_index.PackedNameIndex`) and drops
        their str objects: the vocabulary then serves lazy names, as a model
        file's, and this returns them (a
        :class:`~skcrf._utils._cqdb_index.LazyNames`, to be the model's
        ``attributes`` in place of the list). None if it did not pack (lazy
        names already, no names, a name UTF-8 cannot encode).
        """
        cdef Py_ssize_t i, k = 0
        cdef int32_t *rested
        if self._resting or self._lazy is not None:
            return
        rested = <int32_t *> PyMem_Malloc(2 * max(self._used, 1) * sizeof(int32_t))
        if rested == NULL:
            raise MemoryError()
        for i in range(self._mask + 1):
            if self._table[i].tag != 0 and self._table[i].id >= 0:
                rested[2 * k] = self._table[i].id
                rested[2 * k + 1] = self._table[i].tag
                k += 1
        self._rested = rested
        self._n_rested = k
        self._rested_capacity = self._mask + 1
        PyMem_Free(self._table)
        self._table = NULL
        self._used = 0
        self._cached_misses = 0
        del self._long_values[:]
        self._set_ids(NULL)
        self._resting = True
        if pack and self._names:
            return self._pack_names()

    cdef object _pack_names(self):
        """rest(pack=True)'s packing (resting, names listed)."""
        try:
            packed = PackedNameIndex(*pack_names(self._names), len(self._names))
        except ValueError:
            return None  # (a lone surrogate: the names stay as they are)
        lazy = LazyNames.of_packed(packed, distinct_known=True)
        self._index = packed
        self._lazy = lazy
        self._found = {}
        self._names = []
        return lazy

    def wake(self):
        """Rebuild what :meth:`rest` gave back (nothing if it did not rest)."""
        self._wake()

    cdef inline int _wake(self) except -1:
        if self._resting:
            self._wake_locked()
        return 0

    cdef int _wake_locked(self) except -1:
        # A fitted model's vocabulary rests until its first use, which may be
        # from several threads at once: one rebuilds, the others wait for it.
        # _rebuild_rested sets _resting last, with the GIL held since the
        # tables were assigned, so a thread that sees it False sees them.
        with _WAKE_LOCK:
            if self._resting:
                self._rebuild_rested()
        return 0

    cdef int _rebuild_rested(self) except -1:
        """The id table and the cache's table, with the entries :meth:`rest` kept."""
        cdef Py_ssize_t i, slot, mask = self._rested_capacity - 1, skip, start, length
        cdef int32_t tag
        cdef str name
        cdef PackedNameIndex packed_names = (
            self._index if isinstance(self._index, PackedNameIndex) else None)
        cdef _Value packed
        cdef _Entry *entry
        cdef _IdSlot *ids = NULL
        cdef Py_ssize_t ids_mask = 0
        cdef _Entry *table = <_Entry *> PyMem_Calloc(self._rested_capacity, sizeof(_Entry))
        if table == NULL:
            raise MemoryError()
        # the length of "key" + separator before the value, by tag
        cdef Py_ssize_t *skips = <Py_ssize_t *> PyMem_Calloc(
            len(self._key_numbers) + 1, sizeof(Py_ssize_t))
        if skips == NULL:
            PyMem_Free(table)
            raise MemoryError()
        packed.hash = 0
        packed.w0 = 0
        packed.w1 = 0
        try:
            ids = _id_table(self._names, 0, &ids_mask)
            for key, number in self._key_numbers.items():
                skips[<Py_ssize_t> number + 1] = len(key) + len(self._separator)
            # (a C loop: a fitted model's first use pays it, per known entry)
            for i in range(self._n_rested):
                tag = self._rested[2 * i + 1]
                skip = 0 if tag == _NAMES_TAG else skips[tag]
                if packed_names is not None:
                    # packed names (rest(pack=True)): an ASCII name's value is
                    # packed from its bytes; any other's from its str
                    start = name_start(packed_names, self._rested[2 * i])
                    length = name_start(packed_names, self._rested[2 * i] + 1) - start
                    if (_is_ascii(packed_names._text + start, length)
                            and _pack_chars(packed_names._text + start + skip,
                                            length - skip, &packed)):
                        name = None
                    else:
                        name = packed_names.name(self._rested[2 * i])
                else:
                    name = <str> PyList_GET_ITEM(self._names, self._rested[2 * i])
                # the value's str is made only when the entry keeps it (long)
                if name is not None and not _pack_tail(name, skip, &packed):
                    value = name[skip:]
                    _pack(<str> value, &packed)
                    if packed.w1 == _LONG:
                        self._long_values.append(value)  # keeps it alive
                slot = <Py_ssize_t> (_slot_hash(packed.hash, tag) & <uint64_t> mask)
                while table[slot].tag != 0:
                    slot = (slot + 1) & mask
                entry = &table[slot]
                entry.hash = packed.hash
                entry.w0 = packed.w0
                entry.w1 = packed.w1
                entry.id = self._rested[2 * i]
                entry.tag = tag
        except BaseException:
            PyMem_Free(table)
            PyMem_Free(ids)
            del self._long_values[:]
            raise
        finally:
            PyMem_Free(skips)
        self._table = table
        self._mask = mask
        self._used = self._n_rested
        self._ids_mask = ids_mask
        self._set_ids(ids)
        PyMem_Free(self._rested)
        self._rested = NULL
        self._resting = False
        return 0

    cdef int _list_names(self) except -1:
        """Lazy names: list them all (``_ids`` complete, ``_index`` dropped)."""
        lazy = self._lazy  # (another thread may list them meanwhile: the same names)
        if lazy is None:
            return 0
        names = list(lazy.tolist())  # ours: it grows
        cdef Py_ssize_t ids_mask
        cdef _IdSlot *ids = _id_table(names, 0, &ids_mask)
        # assigned after the work, with the GIL held throughout (lookups hold
        # it too): a thread sees the old state or the new one
        self._names = names
        self._ids_mask = ids_mask
        self._set_ids(ids)
        self._index = None
        self._lazy = None
        self._found = None
        return 0

    cdef inline void _set_ids(self, _IdSlot *ids):
        PyMem_Free(self._ids)
        self._ids = ids

    cdef int _index_names(self, Py_ssize_t room) except -1:
        """A new id table of ``_names``, with room for ``room`` names."""
        cdef Py_ssize_t ids_mask
        cdef _IdSlot *ids = _id_table(self._names, room, &ids_mask)
        self._ids_mask = ids_mask
        self._set_ids(ids)
        return 0

    cdef inline Py_ssize_t _find(self, str name) except -2:
        """Id of ``name`` (an exact str), -1 when unseen (never grows)."""
        cdef Py_hash_t h
        cdef Py_ssize_t k, attribute
        cdef PyObject *other
        cdef PyObject *found
        if self._index is not None:  # lazy names (none listed): the file's answers
            found = PyDict_GetItem(self._found, name)
            if found != NULL:
                return PyLong_AsLong(<object> found)
            attribute = self._index.find_str(name)
            if attribute >= 0:
                self._found[name] = attribute  # a cache of the file's answers
            return attribute
        h = PyObject_Hash(name)
        k = <Py_ssize_t> (<size_t> h & <size_t> self._ids_mask)
        while self._ids[k].id1 != 0:
            if self._ids[k].hash == h:
                other = PyList_GET_ITEM(self._names, self._ids[k].id1 - 1)
                if other == <PyObject *> name or (<str> other) == name:
                    return self._ids[k].id1 - 1
            k = (k + 1) & self._ids_mask
        return -1

    # -- ids ------------------------------------------------------------------

    cdef Py_ssize_t _add(self, str name) except -1:
        """Give ``name`` the next id (a name not added through the string-value
        cache ends ``_complete`` if it holds the separator)."""
        if self._separator in name:
            self._complete = False
            if self._cached_misses:
                # it may be a (key, value) pair cached as unseen at predict time
                self._drop_unseen()
        return self._add_name(name)

    cdef int _drop_unseen(self) except -1:
        """Forget the cache's "unseen" answers (the known ids stay cached)."""
        self._rebuild_table(self._mask + 1, False)
        self._cached_misses = 0
        return 0

    cdef Py_ssize_t _add_name(self, str name) except -1:
        cdef Py_ssize_t attribute = len(self._names)
        if attribute >= INT32_MAX:
            raise OverflowError("more than 2**31 - 1 attributes: ids are int32.")
        name = _exact_str(name)
        if 3 * (attribute + 1) > 2 * (self._ids_mask + 1):
            self._index_names(2 * attribute + 2)
        self._names.append(name)
        _put_id(self._ids, self._ids_mask, PyObject_Hash(name), attribute)
        return attribute

    cdef inline Py_ssize_t _resolve(self, str name, bint grow) except -2:
        """Id of ``name``: added when growing, else -1 when unseen."""
        cdef Py_ssize_t attribute = self._find(name)
        if attribute >= 0 or not grow:
            return attribute
        self._list_names()  # (encode lists lazy names before growing)
        return self._add(name)

    cdef Py_ssize_t _key_number(self, str key, bint grow) except -2:
        """The number of ``key`` in the string-value cache, given when missing;
        -1 at predict time once the cache of unseen answers is full."""
        cdef PyObject *found = PyDict_GetItem(self._key_numbers, key)
        cdef Py_ssize_t number
        if found != NULL:
            return PyLong_AsLong(<object> found)
        if not grow:
            if self._cached_misses >= _MISS_CACHE_LIMIT:
                return -1
            self._cached_misses += 1  # the key may be unseen: count its number
        number = len(self._key_numbers)
        if number >= INT32_MAX - 1:
            return -1  # (out of tags: not cached)
        self._key_numbers[key] = number
        self._key_names.append(key)
        self._children.append(None)
        return number

    cdef Py_ssize_t _child_number(self, Py_ssize_t parent, str key, bint grow) except -2:
        """The key number of ``parent``'s key, ``:`` and ``key`` (a nested key's
        full name), remembered per parent so that the name is built once; -1
        as :meth:`_key_number`."""
        cdef object children = self._children[parent]
        cdef PyObject *found
        cdef Py_ssize_t number
        if children is not None:
            found = PyDict_GetItem(<dict> children, key)
            if found != NULL:
                return PyLong_AsLong(<object> found)
        number = self._key_number(<str> self._key_names[parent] + ":" + key, grow)
        if number >= 0:
            if children is None:
                children = self._children[parent] = {}
            (<dict> children)[key] = number
        return number

    cdef inline Py_ssize_t _string_id(self, Py_ssize_t key_number, str key, str value,
                                      _Value *packed, bint grow) except -2:
        """Id of the attribute of a string value, through the cache (``packed``:
        from :func:`_pack`; ``key_number`` -1: not cached)."""
        cdef Py_ssize_t slot
        cdef int32_t tag
        cdef _Entry *entry
        if key_number < 0:
            return self._resolve(key + self._separator + value, grow)
        tag = <int32_t> (key_number + 1)
        slot = <Py_ssize_t> (_slot_hash(packed.hash, tag) & <uint64_t> self._mask)
        while True:
            entry = &self._table[slot]
            if entry.tag == 0:
                break
            if _entry_holds(entry, packed, tag, value):
                if entry.id >= 0 or not grow:
                    return entry.id
                break
            slot = (slot + 1) & self._mask
        return self._string_miss(tag, key, value, packed, grow)

    cdef Py_ssize_t _string_miss(self, int32_t tag, str key, str value, _Value *packed,
                                 bint grow) except -2:
        cdef Py_ssize_t attribute
        if (not grow and self._complete and self._separator not in key
                and self._separator not in value):
            # "key:value" holds the separator once, so only (key, value) names
            # it, and every such name in _ids is cached: unseen
            attribute = -1
        else:
            # the only place a "key:value" name is built on the fast path
            name = key + self._separator + value
            attribute = self._find(name)
            if attribute < 0 and grow:
                attribute = self._add_name(name)  # cached below: _complete stays
        if attribute < 0:
            if self._cached_misses >= _MISS_CACHE_LIMIT:
                return attribute  # remember no more unseen values
            self._cached_misses += 1
        # the table may have changed while the name was built: find the slot again
        self._store(tag, value, packed, attribute)
        return attribute

    cdef int _store(self, int32_t tag, str value, _Value *packed,
                    Py_ssize_t attribute) except -1:
        """Cache ``attribute`` as the answer for ``value`` (``packed``) under
        ``tag``, in its existing entry or a new one (the slot found afresh)."""
        cdef Py_ssize_t slot
        cdef _Entry *entry
        if 4 * (self._used + 1) > 3 * (self._mask + 1):
            self._grow_table()
        slot = <Py_ssize_t> (_slot_hash(packed.hash, tag) & <uint64_t> self._mask)
        while True:
            entry = &self._table[slot]
            if entry.tag == 0:
                break
            if _entry_holds(entry, packed, tag, value):
                entry.id = <int32_t> attribute
                return 0
            slot = (slot + 1) & self._mask
        if packed.w1 == _LONG:
            self._long_values.append(value)  # keeps it alive (cannot run Python code)
        entry.hash = packed.hash
        entry.w0 = packed.w0
        entry.w1 = packed.w1
        entry.id = <int32_t> attribute
        entry.tag = tag
        self._used += 1
        return 0

    cdef int _grow_table(self) except -1:
        return self._rebuild_table(2 * (self._mask + 1), True)

    cdef int _rebuild_table(self, Py_ssize_t capacity, bint keep_unseen) except -1:
        """The cache's entries in a new table of ``capacity`` (a power of 2);
        the "unseen" ones (id -1) only if ``keep_unseen``."""
        cdef Py_ssize_t old_capacity = self._mask + 1, mask = capacity - 1, i, slot
        cdef Py_ssize_t used = 0
        cdef _Entry *old = self._table
        cdef _Entry *table = <_Entry *> PyMem_Calloc(capacity, sizeof(_Entry))
        if table == NULL:
            raise MemoryError()
        for i in range(old_capacity):
            if old[i].tag != 0 and (keep_unseen or old[i].id >= 0):
                slot = <Py_ssize_t> (_slot_hash(old[i].hash, old[i].tag) & <uint64_t> mask)
                while table[slot].tag != 0:
                    slot = (slot + 1) & mask
                table[slot] = old[i]
                used += 1
        self._table = table
        self._mask = mask
        self._used = used
        PyMem_Free(old)
        return 0

    cdef int _rollback(self, Py_ssize_t size) except -1:
        """Forget the attributes from id ``size`` on (after a failed encode)."""
        cdef Py_ssize_t k
        del self._names[size:]
        # the table in place, without allocating (this may follow a MemoryError)
        for k in range(self._ids_mask + 1):
            if self._ids[k].id1 > size:
                self._ids[k].id1 = 0
        _reinsert_ids(self._ids, self._ids_mask)
        # the cache may hold forgotten ids: empty it (key numbers stay); the
        # names kept are no longer all cached
        memset(self._table, 0, (self._mask + 1) * sizeof(_Entry))
        self._used = 0
        del self._long_values[:]
        self._vector_ids.clear()
        self._cached_misses = 0
        if size:
            self._complete = False

    # -- encoding -------------------------------------------------------------

    cdef bint _encode_plain(self, dict token, bint grow, _Output out,
                            _Memo *memo, object dims=None, object sink=None,
                            Py_ssize_t i=0, Py_ssize_t j=0, object name=None,
                            Py_ssize_t row=0) except -1:
        """Encode a plain dict token; False (nothing written) if it needs the
        general path.

        Two passes over each chunk of up to _MEMO_SIZE items: the first checks
        the values, finds the keys' numbers, hashes the string values and
        prefetches their cache slots (so the memory accesses of a whole token
        overlap); the second finds the ids in order (ids are given in order of
        first appearance) and writes them."""
        cdef Py_ssize_t position = 0, start = out.size, slot = -1, n = 0, key_number
        cdef PyObject *key
        cdef PyObject *value
        cdef PyTypeObject *value_type
        cdef double number
        cdef PyObject *keys[_MEMO_SIZE]
        cdef PyObject *values[_MEMO_SIZE]
        cdef double numbers[_MEMO_SIZE]
        cdef Py_ssize_t key_numbers[_MEMO_SIZE]   # -2: a number
        cdef _Value packed[_MEMO_SIZE]
        while PyDict_Next(token, &position, &key, &value):
            slot += 1
            value_type = Py_TYPE(<object> value)
            if Py_TYPE(<object> key) != <PyTypeObject *> str:
                value_type = NULL  # (a bytes key: taken on its own, below)
            if value_type == <PyTypeObject *> str:
                if slot < _MEMO_SIZE and _same_key(memo[slot].string_key, key):
                    key_number = memo[slot].key_number
                else:
                    key_number = self._key_number(<str> key, grow)
                    if slot < _MEMO_SIZE:
                        memo[slot].string_key = key
                        memo[slot].key_number = key_number
                if key_number >= 0:
                    _pack(<str> value, &packed[n])
                    _prefetch(&self._table[
                        _slot_hash(packed[n].hash, <int32_t> (key_number + 1))
                        & <uint64_t> self._mask])
                number = 1.0
            else:
                if value_type == <PyTypeObject *> bool:
                    number = 1.0 if (<object> value) is True else 0.0
                elif value_type == <PyTypeObject *> float:
                    number = PyFloat_AS_DOUBLE(<object> value)
                    if not isfinite(number):
                        break  # the general path names the bad value
                elif value_type == <PyTypeObject *> int:
                    number = _long_as_double(<object> value)
                    if number == -1.0 and PyErr_Occurred() != NULL:
                        PyErr_Clear()  # too large for a float: the general path says so
                        break
                elif (dims is not None and value_type != NULL
                      and cnp.PyArray_CheckExact(<object> value)
                      and _plain_vector(<object> value)):
                    number = 0.0
                    key_number = -3  # a vector (float64, 1-D, finite)
                    keys[n] = key
                    values[n] = value
                    numbers[n] = number
                    key_numbers[n] = key_number
                    n += 1
                    if n == _MEMO_SIZE:
                        self._push_items(keys, values, numbers, key_numbers, packed, n,
                                         slot + 1 - n, grow, out, memo, dims, sink, i, j,
                                         name, row)
                        n = 0
                    continue
                elif (value_type == NULL or value_type == <PyTypeObject *> dict
                      or value_type == <PyTypeObject *> list
                      or value_type == <PyTypeObject *> set
                      or value_type == <PyTypeObject *> bytes):
                    # a bytes key, a nested dict, a list or set of names, a
                    # bytes value: this item on its own, after the ones before
                    # it (a list of numbers, a vector, goes to the general path)
                    self._push_items(keys, values, numbers, key_numbers, packed, n,
                                     slot - n, grow, out, memo, dims, sink, i, j, name, row)
                    n = 0
                    if not self._encode_item(<object> key, <object> value, -1, grow, out, 0):
                        break
                    continue
                else:
                    break
                key_number = -2
            keys[n] = key
            values[n] = value
            numbers[n] = number
            key_numbers[n] = key_number
            n += 1
            if n == _MEMO_SIZE:
                self._push_items(keys, values, numbers, key_numbers, packed, n,
                                 slot + 1 - n, grow, out, memo, dims, sink, i, j, name, row)
                n = 0
        else:
            self._push_items(keys, values, numbers, key_numbers, packed, n,
                             slot + 1 - n, grow, out, memo, dims, sink, i, j, name, row)
            return True
        out.size = start  # drop this token's partial output
        return False

    cdef int _push_items(self, PyObject **keys, PyObject **values, double *numbers,
                         Py_ssize_t *key_numbers, _Value *packed, Py_ssize_t n,
                         Py_ssize_t first_slot, bint grow, _Output out,
                         _Memo *memo, object dims=None, object sink=None,
                         Py_ssize_t i=0, Py_ssize_t j=0, object name=None,
                         Py_ssize_t row=0) except -1:
        """The second pass of :meth:`_encode_plain` over ``n`` checked items, the
        first at position ``first_slot`` of the token."""
        cdef Py_ssize_t k, slot, attribute
        cdef PyObject *key
        for k in range(n):
            key = keys[k]
            if key_numbers[k] == -3:
                self._encode_vector(<str> key, <object> values[k], i, j, name, grow, out,
                                    dims, sink, row)
                continue
            if key_numbers[k] != -2:
                attribute = self._string_id(key_numbers[k], <str> key, <str> values[k],
                                            &packed[k], grow)
            else:
                slot = first_slot + k
                if slot < _MEMO_SIZE and _same_key(memo[slot].number_key, key):
                    attribute = memo[slot].number_id
                else:
                    attribute = self._resolve(<str> key, grow)
                    if slot < _MEMO_SIZE:
                        memo[slot].number_key = key
                        memo[slot].number_id = attribute
            if attribute >= 0:
                out.push(attribute, numbers[k])
        return 0

    cdef bint _encode_item(self, object key, object value, Py_ssize_t parent, bint grow,
                           _Output out, int depth) except -1:
        """Encode one ``key: value`` of a dict token (``parent`` -1) or of a
        nested dict (``parent``: the key number of its full key); False when
        the general path must take the token (what was written stays: the
        caller drops the token's output).

        Every form is found through the string-value cache, so that no name
        is built for a known attribute: a string (or UTF-8 bytes) value ``v``
        of the full key ``F`` (``F`` the key, or ``parent:key`` nested,
        numbered by :meth:`_child_number`) is ``(F, v)``; each name ``s`` in a
        list or set value is ``(F, s)``; a number nested under ``parent`` is
        the attribute ``parent:key``, that is ``(parent, key)`` when the
        separator is ``':'`` (nested dicts are taken only then); a number at
        the top is the attribute ``key`` (:meth:`_resolve`). The order is
        the general path's (so, when growing, the same ids)."""
        cdef Py_ssize_t number, attribute, position = 0
        cdef PyObject *inner_key
        cdef PyObject *inner_value
        cdef PyTypeObject *value_type = Py_TYPE(value)
        cdef double x
        cdef int kind
        cdef _Value packed
        if Py_TYPE(key) == <PyTypeObject *> bytes:
            key = _decoded(<bytes> key)
            if key is None:
                return False
        elif Py_TYPE(key) != <PyTypeObject *> str:
            return False
        kind = _number_value(value, &x)
        if kind < 0:
            return False  # the general path names the value
        if kind:
            if parent < 0:
                attribute = self._resolve(<str> key, grow)
            else:
                _pack(<str> key, &packed)
                attribute = self._string_id(parent, <str> self._key_names[parent], <str> key,
                                            &packed, grow)
            if attribute >= 0:
                out.push(attribute, x)
            return True
        if value_type == <PyTypeObject *> dict and (self._separator != ":"
                                                    or depth >= _MAX_DEPTH):
            return False
        if (value_type != <PyTypeObject *> str and value_type != <PyTypeObject *> bytes
                and value_type != <PyTypeObject *> dict and value_type != <PyTypeObject *> list
                and value_type != <PyTypeObject *> set):
            return False
        number = (self._key_number(<str> key, grow) if parent < 0
                  else self._child_number(parent, <str> key, grow))
        if number < 0 and (parent >= 0 or value_type == <PyTypeObject *> dict):
            return False  # (out of key numbers: rare; the general path builds the names)
        if value_type == <PyTypeObject *> dict:
            while PyDict_Next(value, &position, &inner_key, &inner_value):
                if not self._encode_item(<object> inner_key, <object> inner_value, number,
                                         grow, out, depth + 1):
                    return False
            return True
        if value_type == <PyTypeObject *> str or value_type == <PyTypeObject *> bytes:
            return self._encode_string(number, <str> key, value, grow, out)
        for item in value:  # a list or set: names
            if not self._encode_string(number, <str> key, item, grow, out):
                return False
        return True

    cdef bint _encode_string(self, Py_ssize_t number, str key, object value, bint grow,
                             _Output out) except -1:
        """The attribute of a str (or UTF-8 bytes) ``value`` of the full key
        numbered ``number`` (-1: a top-level ``key`` out of numbers); False
        for another value."""
        cdef Py_ssize_t attribute
        cdef _Value packed
        if Py_TYPE(value) == <PyTypeObject *> bytes:
            value = _decoded(<bytes> value)
            if value is None:
                return False
        elif Py_TYPE(value) != <PyTypeObject *> str:
            return False
        _pack(<str> value, &packed)
        attribute = self._string_id(number, key if number < 0 else <str> self._key_names[number],
                                    <str> value, &packed, grow)
        if attribute >= 0:
            out.push(attribute, 1.0)
        return True

    cdef int _encode_general(self, token, Py_ssize_t i, Py_ssize_t j, name, bint grow,
                             _Output out, dict dims=None, object sink=None,
                             Py_ssize_t row=0) except -1:
        cdef Py_ssize_t attribute
        if sink is not None:
            sink.forget(row)  # a fast path that gave up may have written this token's vectors
        for attribute_name, value in token_attributes(token, i, j, name, self._separator,
                                                      True):
            if type(value) is np.ndarray:
                self._encode_vector(attribute_name, value, i, j, name, grow, out, dims,
                                    sink, row)
                continue
            attribute = self._resolve(attribute_name, grow)
            if attribute >= 0:
                out.push(attribute, value)
        return 0

    cdef object _vector_key_ids(self, str key, Py_ssize_t d, bint grow):
        """Ids of the attributes ``key[0]`` ... ``key[d-1]`` (-1: unseen)."""
        cdef Py_ssize_t k, attribute
        cdef bint complete = True
        cached = self._vector_ids.get(key)
        if cached is not None and len(cached) == d:
            return cached
        ids = np.empty(d, dtype=np.int32)
        for k in range(d):
            attribute = self._resolve(f"{key}[{k}]", grow)
            ids[k] = attribute
            complete = complete and attribute >= 0
        if complete:
            self._vector_ids[key] = ids
        return ids

    cdef int _encode_vector(self, str key, value, Py_ssize_t i, Py_ssize_t j, name,
                            bint grow, _Output out, dict dims, object sink,
                            Py_ssize_t row) except -1:
        """A vector value: its dimensions as CSR entries, or into ``sink`` (dense)."""
        cdef Py_ssize_t d = len(value), k
        cdef const int32_t[::1] id_view
        cdef const double[::1] value_view
        if dims is not None:
            first = dims.get(key)
            if first is None:
                dims[key] = (d, i, j)
            elif first[0] != d:
                raise ValueError(
                    f"{name}[{i}][{j}]: feature {key!r} is a vector of length {d}, but "
                    f"{name}[{first[1]}][{first[2]}] gives it length {first[0]}; every "
                    "token must give a vector key the same length."
                )
        ids = self._vector_key_ids(key, d, grow)
        if sink is not None:
            sink.add(key, ids, value, row)
            return 0
        id_view = ids
        value_view = value
        for k in range(d):
            if id_view[k] >= 0:
                out.push(id_view[k], value_view[k])
        return 0

    # -- lists of names; python-crfsuite's items ------------------------------

    cdef bint _encode_names(self, token, bint grow, _Output out) except -1:
        """Encode a ``list`` or ``tuple`` of plain ``str`` names (value 1.0 each);
        False (nothing written) for any other token, which the general path
        takes. The same ids, values and order as the general path.

        Known names are found through the string-value cache, under a tag no
        key has (``_NAMES_TAG``), in two passes over each chunk of names as in
        :meth:`_encode_plain` (pack and prefetch, then look up). Unseen names
        are not cached: a name can be added later through another path (a
        dict key, ``key:value``), which would leave a cached "unseen" stale.
        The names are borrowed from ``token`` (the caller holds it); nothing
        called here runs Python code."""
        cdef Py_ssize_t n, k, c, chunk, attribute
        cdef PyObject **items
        cdef _Value packed[_MEMO_SIZE]
        if type(token) is not list and type(token) is not tuple:
            return False
        n = PySequence_Fast_GET_SIZE(token)
        items = PySequence_Fast_ITEMS(token)
        for k in range(n):
            if Py_TYPE(<object> items[k]) != <PyTypeObject *> str:
                names = _decoded_names(token)  # UTF-8 bytes names
                return names is not None and self._encode_names(names, grow, out)
        k = 0
        while k < n:
            chunk = min(n - k, <Py_ssize_t> _MEMO_SIZE)
            for c in range(chunk):
                _pack(<str> items[k + c], &packed[c])
                _prefetch(&self._table[_slot_hash(packed[c].hash, _NAMES_TAG)
                                       & <uint64_t> self._mask])
            for c in range(chunk):
                attribute = self._name_id(<str> items[k + c], &packed[c], grow)
                if attribute >= 0:
                    out.push(attribute, 1.0)
            k += chunk
        return True

    cdef inline Py_ssize_t _name_id(self, str name, _Value *packed, bint grow) except -2:
        """Id of the attribute ``name`` (``packed``: from :func:`_pack`), through
        the cache; -1 when unseen (``grow`` False)."""
        cdef Py_ssize_t slot
        cdef _Entry *entry
        slot = <Py_ssize_t> (_slot_hash(packed.hash, _NAMES_TAG) & <uint64_t> self._mask)
        while True:
            entry = &self._table[slot]
            if entry.tag == 0:
                break
            if _entry_holds(entry, packed, _NAMES_TAG, name):
                return entry.id  # (only known names are cached)
            slot = (slot + 1) & self._mask
        return self._name_miss(name, packed, grow)

    cdef Py_ssize_t _name_miss(self, str name, _Value *packed, bint grow) except -2:
        """Look ``name`` up (or add it when growing); cache its id if it has one."""
        cdef Py_ssize_t attribute = self._resolve(name, grow)
        if attribute < 0:
            return attribute
        self._store(_NAMES_TAG, name, packed, attribute)
        return attribute

    def encode_items(self, xseq, name="xseq"):
        """Encode one sequence in python-crfsuite's item formats, for prediction.

        The fast path of ``skcrf.pycrfsuite``: ``xseq`` a ``list`` or
        ``tuple`` of items, each a plain ``dict`` with ``str`` (or UTF-8
        ``bytes``) keys and ``str``, ``bytes``, ``bool``, ``int`` or finite
        ``float`` values, nested plain ``dict`` values of the same, ``list``
        or ``set`` values of names, or a ``list`` or ``tuple`` of ``str``
        or ``bytes`` names. Names as python-crfsuite builds them
        (``key:value``; the vocabulary's separator must be ``':'``); unseen
        attributes are skipped (``grow=False``). An attribute given more
        than once in an item comes once, at its first place, with its values
        summed in order (``0.0 + v1 + v2 ...``): what summing the item into
        a dict gives.

        Parameters
        ----------
        xseq : list or tuple of items
        name : str, default='xseq'
            How to call the sequence in error messages.

        Returns
        -------
        Encoded or None
            One sequence (``lengths == [len(xseq)]``); None when some item
            is in another form (sets or iterators as items, str subclasses,
            numpy scalars, NaN, None, bytes that are not UTF-8, ...) or the
            separator is not ``':'``: the caller then
            converts the sequence itself, and names a bad item.
        """
        self._wake()
        cdef Py_ssize_t n, j, start, capacity = 0
        cdef cnp.npy_intp size
        cdef int64_t *indptr_data
        cdef _Output out
        cdef _Memo memo[_MEMO_SIZE]
        cdef bint done
        if self._separator != ":" or (type(xseq) is not list and type(xseq) is not tuple):
            return None
        n = len(xseq)
        for j in range(n):
            item = xseq[j]
            if type(item) is not dict and type(item) is not list and type(item) is not tuple:
                return None
            capacity += len(item)  # the entries of the forms taken here
        size = n + 1
        indptr = cnp.PyArray_EMPTY(1, &size, cnp.NPY_INT64, 0)
        indptr_data = <int64_t *> cnp.PyArray_DATA(indptr)
        indptr_data[0] = 0
        out = _Output(capacity)
        memset(memo, 0, sizeof(memo))
        for j in range(n):
            item = xseq[j]
            start = out.size
            if type(item) is dict:
                done = self._encode_plain(item, False, out, memo, None, None, 0, j, name, j)
            else:
                done = self._encode_names(item, False, out)
            if not done:
                return None
            out.size = _merge_repeats(out.ids, out.values, start, out.size)
            indptr_data[j + 1] = out.size
        ids, values = out.finish()
        size = 1
        lengths = cnp.PyArray_EMPTY(1, &size, cnp.NPY_INTP, 0)
        (<cnp.intp_t *> cnp.PyArray_DATA(lengths))[0] = n
        return Encoded(indptr, ids, values, lengths)

    def encode(self, sequences, *, grow, name="X", dense=False, transitions=None, n_threads=1):
        """Encode sequences of tokens into attribute ids and values.

        Parameters
        ----------
        sequences : list of sequences of tokens
            As :func:`skcrf._featurize._validation.check_sequences` returns it; every
            token is checked here.
        grow : bool
            True (fit): an unseen attribute gets the next id, and the data
            must hold at least one token. False (predict): unseen attributes
            are skipped.
        name : str, default='X'
            How to call the data in error messages (``X[i][j]: ...``).
        dense : bool, default=False
            Keep vector values (``{'emb': array}``) as one dense block,
            ``Encoded.dense`` (:class:`DenseFeatures`), instead of one CSR
            entry per dimension (the attributes ``emb[0]``... are the same).
        transitions : TransitionParts, optional
            A dict token holding the key ``'__transition__'`` is encoded
            without it, and its transition attributes go to
            ``transitions.take`` (in this same pass over the tokens). None:
            tokens are encoded as they are.
        n_threads : int, default=1
            Ignored: dict tokens are encoded by one thread (a template's
            vocabulary, which reads raw tokens, uses it).

        Returns
        -------
        Encoded
            ``indptr`` (int64), ``ids`` (int32), ``values`` (float64): one
            CSR row per token in flat order; ``lengths`` (intp) per sequence.
            Explicit zeros (``False``, ``0``) are kept.
        """
        self._wake()
        cdef bint growing = bool(grow)
        cdef Py_ssize_t n_sequences = len(sequences), n_tokens = 0, i, j, row = 0
        cdef Py_ssize_t first_size
        cdef cnp.intp_t[::1] lengths_view
        cdef int64_t *indptr_data
        cdef _Output out
        cdef _Memo memo[_MEMO_SIZE]
        cdef bint done
        if growing:
            self._list_names()
        first_size = len(self._names)

        # sequences as lists or tuples (indexable in C), and their lengths
        seqs = []
        lengths = np.empty(n_sequences, dtype=np.intp)
        lengths_view = lengths
        for i in range(n_sequences):
            seq = sequences[i]
            if type(seq) is not list and type(seq) is not tuple:
                seq = list(seq)
            seqs.append(seq)
            lengths_view[i] = len(seq)
            n_tokens += len(seq)
        if growing:
            check_nonempty(sequences, n_tokens, name)

        indptr = np.empty(n_tokens + 1, dtype=np.int64)
        indptr_data = <int64_t *> cnp.PyArray_DATA(indptr)
        indptr_data[0] = 0
        out = _Output(n_tokens * _first_token_size(seqs) + 16)
        memset(memo, 0, sizeof(memo))
        dims = {}
        sink = _DenseSink() if dense else None
        try:
            for i in range(n_sequences):
                seq = seqs[i]
                for j in range(len(seq)):
                    token = seq[j]
                    if transitions is not None:
                        token = _without_transitions(token, transitions, i, j, name)
                    if type(token) is dict:
                        done = self._encode_plain(token, growing, out, memo, dims, sink, i,
                                                  j, name, row)
                    else:
                        done = self._encode_names(token, growing, out)
                    if not done:
                        self._encode_general(token, i, j, name, growing, out, dims, sink, row)
                    row += 1
                    indptr_data[row] = out.size
        except BaseException:
            if growing:
                self._rollback(first_size)
            raise
        ids, values = out.finish()
        return Encoded(indptr, ids, values, lengths,
                       None if sink is None else sink.finish(row, ids, self._lazy_or_names(),
                                                             name))

    cdef object _lazy_or_names(self):
        """The names for messages: the lazy ones stay lazy."""
        return self._names if self._lazy is None else self._lazy


cdef inline object _without_transitions(object token, object transitions, Py_ssize_t i,
                                        Py_ssize_t j, object name):
    """``token``, or when it is a dict holding the transition key, what
    ``transitions.take`` leaves of it (a copy without the key)."""
    if not PyDict_Check(token) or PyDict_GetItem(token, _TRANSITION_KEY) == NULL:
        return token
    return transitions.take(token, i, j, name)


cdef Py_ssize_t _merge_repeats(int32_t *ids, double *values, Py_ssize_t start,
                               Py_ssize_t end) except -1:
    """Merge the entries ``start:end`` (one token) that have the same id.

    Each id is kept once, at its first place, with its values summed in
    order, ``0.0 + v1 + v2 ...`` (as ``token[name] = token.get(name, 0.0) +
    value`` sums them); returns the new end. A small open-addressing table
    of the positions kept, on the stack for most tokens.
    """
    cdef Py_ssize_t n = end - start, k, kept = start, capacity = 16, mask
    cdef uint32_t slot, shift = 28
    cdef int32_t stack_table[_MERGE_STACK]
    cdef int32_t *table = stack_table
    cdef int32_t attribute, position
    for k in range(start, end):
        values[k] = 0.0 + values[k]  # -0.0 becomes 0.0, as in the dict's sum
    if n < 2:
        return end
    if n > INT32_MAX // 4:
        raise OverflowError("too many features in one item")
    while capacity < 2 * n:
        capacity *= 2
        shift -= 1
    if capacity > _MERGE_STACK:
        table = <int32_t *> malloc(capacity * sizeof(int32_t))
        if table == NULL:
            raise MemoryError()
    memset(table, 0xFF, capacity * sizeof(int32_t))  # -1: an empty slot
    mask = capacity - 1
    for k in range(start, end):
        attribute = ids[k]
        slot = (<uint32_t> attribute * 0x9E3779B1U) >> shift
        while True:
            position = table[slot]
            if position < 0:  # first seen: keep it
                table[slot] = <int32_t> (kept - start)
                ids[kept] = attribute
                values[kept] = values[k]
                kept += 1
                break
            if ids[start + position] == attribute:
                values[start + position] += values[k]
                break
            slot = (slot + 1) & <uint32_t> mask
    if table != stack_table:
        free(table)
    return kept


cdef class StreamEncoder:
    """Encodes sequences one at a time into growing CSR buffers.

    The streaming form of :meth:`Vocabulary.encode`: each :meth:`add` encodes
    one sequence (the same per-token code, so the same ids and values in the
    same order) and keeps nothing of it but its CSR rows, so the caller can
    drop the token dicts as soon as it returns. The buffers grow by doubling
    (amortized); :meth:`finish` trims them and returns the :class:`Encoded`.

    If an :meth:`add` raises (an invalid token), call :meth:`abort`: when
    growing, the attributes added since the encoder was made are removed
    from the vocabulary again (as a failed ``encode`` does).

    Parameters
    ----------
    vocabulary : Vocabulary
    grow : bool
        As in :meth:`Vocabulary.encode`.
    name : str, default='X'
        How to call the data in error messages (``X[i][j]: ...``).
    dense : bool, default=False
        Keep vector values as one dense block (``Encoded.dense``), as
        :meth:`Vocabulary.encode` does with ``dense=True``.
    transitions : TransitionParts, optional
        As in :meth:`Vocabulary.encode`.

    Examples
    --------
    >>> vocabulary = Vocabulary()
    >>> encoder = StreamEncoder(vocabulary, grow=True)
    >>> for seq in ([{"w": "a"}], [{"w": "b"}, {"w": "a"}]):
    ...     n_tokens = encoder.add(seq)
    >>> encoded = encoder.finish()
    >>> encoded.ids.tolist(), encoded.lengths.tolist()
    ([0, 1, 0], [1, 2])
    """

    cdef Vocabulary _vocabulary
    cdef bint _grow
    cdef object _name
    cdef _Output _out
    cdef object _indptr            # int64 buffer, grown by doubling
    cdef object _lengths           # intp buffer, grown by doubling
    cdef Py_ssize_t _n_rows, _n_sequences
    cdef Py_ssize_t _first_size
    cdef bint _done
    cdef dict _dims
    cdef object _sink
    cdef object _transitions
    cdef _Memo _memo[_MEMO_SIZE]

    def __init__(self, Vocabulary vocabulary, *, grow, name="X", dense=False,
                 transitions=None):
        vocabulary._wake()
        self._vocabulary = vocabulary
        self._grow = bool(grow)
        self._name = name
        self._out = _Output(1024)
        self._indptr = np.zeros(1024, dtype=np.int64)
        self._lengths = np.zeros(256, dtype=np.intp)
        self._n_rows = 0
        self._n_sequences = 0
        if self._grow:
            vocabulary._list_names()
        self._first_size = len(vocabulary._names)
        self._done = False
        self._dims = {}
        self._sink = _DenseSink() if dense else None
        self._transitions = transitions

    @property
    def n_sequences(self):
        """Sequences added so far."""
        return self._n_sequences

    @property
    def n_tokens(self):
        """Tokens added so far."""
        return self._n_rows

    def add(self, seq):
        """Encode one sequence (a list or tuple of tokens) after the others.

        Returns its number of tokens.
        """
        cdef Py_ssize_t j, n, i = self._n_sequences
        cdef int64_t *indptr_data
        cdef bint done
        if self._done:
            raise RuntimeError("StreamEncoder.add after finish.")
        self._vocabulary._wake()
        if type(seq) is not list and type(seq) is not tuple:
            seq = list(seq)
        n = len(seq)
        if self._n_rows + n + 1 > len(self._indptr):
            self._indptr.resize(max(2 * len(self._indptr), self._n_rows + n + 1),
                                refcheck=False)
        if i == len(self._lengths):
            self._lengths.resize(2 * i, refcheck=False)
        # The memo borrows key pointers, valid only while their tokens live:
        # the previous sequence may be gone, so start it afresh.
        memset(self._memo, 0, sizeof(self._memo))
        indptr_data = <int64_t *> cnp.PyArray_DATA(self._indptr)
        for j in range(n):
            token = seq[j]
            if self._transitions is not None:
                token = _without_transitions(token, self._transitions, i, j, self._name)
            if type(token) is dict:
                done = self._vocabulary._encode_plain(
                    token, self._grow, self._out, self._memo, self._dims, self._sink,
                    i, j, self._name, self._n_rows)
            else:
                done = self._vocabulary._encode_names(token, self._grow, self._out)
            if not done:
                self._vocabulary._encode_general(token, i, j, self._name, self._grow,
                                                 self._out, self._dims, self._sink,
                                                 self._n_rows)
            self._n_rows += 1
            indptr_data[self._n_rows] = self._out.size
        memset(self._memo, 0, sizeof(self._memo))
        self._lengths[i] = n
        self._n_sequences += 1
        return n

    def abort(self):
        """Forget what was added (after a failed :meth:`add`); roll the
        vocabulary back when growing."""
        if self._grow and not self._done:
            self._vocabulary._wake()
            self._vocabulary._rollback(self._first_size)
        self._done = True

    def finish(self):
        """The :class:`Encoded` of every sequence added (buffers trimmed).

        When growing, the data must hold at least one token (as in
        :meth:`Vocabulary.encode`).
        """
        if self._done:
            raise RuntimeError("StreamEncoder.finish called twice.")
        self._vocabulary._wake()
        if self._grow and not self._n_rows:
            try:
                check_nonempty(range(self._n_sequences), 0, self._name)
            except BaseException:
                self.abort()
                raise
        ids, values = self._out.finish()
        dense = None
        if self._sink is not None:
            try:
                dense = self._sink.finish(self._n_rows, ids, self._vocabulary._lazy_or_names(),
                                          self._name)
            except BaseException:
                self.abort()
                raise
        self._done = True
        self._indptr.resize(self._n_rows + 1, refcheck=False)
        self._lengths.resize(self._n_sequences, refcheck=False)
        return Encoded(self._indptr, ids, values, self._lengths, dense)


# -- python-crfsuite's items as attribute names ------------------------------------


def item_pairs(xseq):
    """python-crfsuite's items of one sequence as ``(attribute, value)`` pairs.

    The compiled form of ``skcrf.pycrfsuite``'s conversion (``ItemSequence``,
    ``Trainer.append``), for the forms :meth:`Vocabulary.encode_items` takes:
    ``xseq`` a ``list`` or ``tuple`` of items, each a plain ``dict`` (``str``
    or UTF-8 ``bytes`` keys; ``str``, ``bytes``, ``bool``, ``int``, finite
    ``float``, nested plain ``dict``, ``list`` or ``set`` of names values)
    or a ``list`` or ``tuple`` of names. Names as python-crfsuite builds them
    (``:`` joins a key and its value or nested name), in order, repeats
    kept; values are floats.

    Returns
    -------
    list of list of tuple, or None
        One list of pairs per item; None when some item is in another form
        (or invalid): the caller then converts the sequence in Python,
        which names a bad item.

    Examples
    --------
    >>> item_pairs([{"w": "Hi", "n": {"a": 1, "b": [b"x"]}}, ["p", "p"]])
    [[('w:Hi', 1.0), ('n:a', 1.0), ('n:b:x', 1.0)], [('p', 1.0), ('p', 1.0)]]
    """
    cdef list seq = [], pairs
    cdef Py_ssize_t j, k
    if type(xseq) is not list and type(xseq) is not tuple:
        return None
    for j in range(len(xseq)):
        item = xseq[j]
        pairs = []
        if type(item) is dict:
            if not _dict_pairs(<dict> item, None, pairs, 0):
                return None
        elif type(item) is list or type(item) is tuple:
            for k in range(len(item)):
                name = _name_text(item[k])
                if name is None:
                    return None
                pairs.append((name, 1.0))
        else:
            return None
        seq.append(pairs)
    return seq


cdef object _name_text(object name):
    """A str name as it is, UTF-8 bytes decoded; None for anything else."""
    if Py_TYPE(name) == <PyTypeObject *> str:
        return name
    if Py_TYPE(name) == <PyTypeObject *> bytes:
        return _decoded(<bytes> name)
    return None


cdef bint _dict_pairs(dict mapping, str prefix, list pairs, int depth) except -1:
    """Append the pairs of a dict item (nested under ``prefix``, which ends with
    ``:``; None at the top); False for a form left to the Python conversion."""
    cdef Py_ssize_t position = 0
    cdef PyObject *key
    cdef PyObject *value
    cdef PyTypeObject *value_type
    cdef double x
    cdef int kind
    while PyDict_Next(mapping, &position, &key, &value):
        name = _name_text(<object> key)
        if name is None:
            return False
        if prefix is not None:
            name = prefix + <str> name
        value_type = Py_TYPE(<object> value)
        if value_type == <PyTypeObject *> str or value_type == <PyTypeObject *> bytes:
            text = _name_text(<object> value)
            if text is None:
                return False
            pairs.append((<str> name + ":" + <str> text, 1.0))
        elif value_type == <PyTypeObject *> dict:
            if depth >= _MAX_DEPTH:
                return False
            if not _dict_pairs(<dict> value, <str> name + ":", pairs, depth + 1):
                return False
        elif value_type == <PyTypeObject *> list or value_type == <PyTypeObject *> set:
            for item in <object> value:
                text = _name_text(item)
                if text is None:
                    return False
                pairs.append((<str> name + ":" + <str> text, 1.0))
        else:
            kind = _number_value(<object> value, &x)
            if kind != 1:
                return False
            pairs.append((name, x))
    return True


def summed_items(seq_pairs):
    """One ``{attribute: value}`` dict per item of :func:`item_pairs`' pairs, an
    attribute repeated in an item summed in order (``0.0 + v1 + v2 ...``).

    >>> summed_items([[("a", 1.0), ("b", -0.0), ("a", 2.5)]])
    [{'a': 3.5, 'b': 0.0}]
    """
    cdef list tokens = []
    cdef dict token
    cdef PyObject *found
    cdef double total
    for pairs in seq_pairs:
        token = {}
        for name, value in pairs:
            found = PyDict_GetItem(token, name)
            total = 0.0 if found == NULL else <double> <object> found
            token[name] = total + <double> value
        tokens.append(token)
    return tokens


class _DenseSink:
    """Collects vector values, one table of distinct vectors per key.

    Word vectors repeat (one per word type), so each key keeps its distinct
    vectors (found by their bytes) and, per token, the number of its vector
    (-1: the token has no such key). :meth:`finish` combines the keys into
    one table of distinct rows and a row number per token.
    """

    def __init__(self):
        self.entries = {}  # key -> [ids, {bytes: number}, [vectors], token numbers]

    def add(self, key, ids, value, row):
        entry = self.entries.get(key)
        if entry is None:
            entry = [ids, {}, [], np.full(max(1024, 2 * row), -1, dtype=np.intp)]
            self.entries[key] = entry
        numbers = entry[3]
        if row >= len(numbers):
            bigger = np.full(max(2 * len(numbers), row + 1), -1, dtype=np.intp)
            bigger[: len(numbers)] = numbers
            entry[3] = numbers = bigger
        if numbers[row] >= 0:  # the same key twice in a token: the values add up
            value = entry[2][numbers[row]] + value
        value = np.ascontiguousarray(value, dtype=np.float64)
        data = value.tobytes()
        number = entry[1].get(data)
        if number is None:
            number = len(entry[2])
            entry[1][data] = number
            entry[2].append(value)
        numbers[row] = number

    def forget(self, row):
        """Drop what was added for token ``row``."""
        for entry in self.entries.values():
            if row < len(entry[3]):
                entry[3][row] = -1

    def finish(self, n_rows, sparse_ids, names, name):
        """The :class:`DenseFeatures` of ``n_rows`` tokens (None without vectors)."""
        if not self.entries:
            return None
        keys = tuple(self.entries)
        tables, numbers, columns, key_of_column = [], [], [], []
        for key_number, key in enumerate(keys):
            ids, _, vectors, token_numbers = self.entries[key]
            token_numbers = token_numbers[:n_rows]
            if len(token_numbers) < n_rows:
                token_numbers = np.concatenate(
                    [token_numbers, np.full(n_rows - len(token_numbers), -1, np.intp)])
            table = np.vstack(vectors + [np.zeros(len(ids))])  # last row: no such key
            tables.append(table)
            numbers.append(np.where(token_numbers >= 0, token_numbers, len(vectors)))
            columns.append(np.asarray(ids, dtype=np.int64))
            key_of_column.append(np.full(len(ids), key_number, dtype=np.intp))
        self.entries = {}
        present = np.column_stack(
            [n != len(t) - 1 for n, t in zip(numbers, tables)]
        ).reshape(n_rows, len(keys))
        if len(keys) == 1:
            used, row_index = np.unique(numbers[0], return_inverse=True)
            values = tables[0][used]
        else:
            combos, row_index = np.unique(np.column_stack(numbers), axis=0,
                                          return_inverse=True)
            values = np.hstack([t[combos[:, k]] for k, t in enumerate(tables)])
        columns = np.concatenate(columns)
        key_of_column = np.concatenate(key_of_column)
        known = columns >= 0
        if not known.all():
            columns, key_of_column = columns[known], key_of_column[known]
            values = values[:, known]
        both = np.intersect1d(columns, np.unique(sparse_ids))
        if len(both):
            raise ValueError(
                f"{name}: the attribute {names[int(both[0])]!r} is both a dimension of a "
                "vector feature and a feature of its own in some token; rename one of "
                "them."
            )
        return DenseFeatures(columns, np.ascontiguousarray(values), key_of_column, present,
                             keys, np.ascontiguousarray(row_index.reshape(-1), dtype=np.intp))


cdef bint _plain_vector(value) except -1:
    """Whether an ndarray is a vector the fast path takes as it is: 1-D,
    float64 in the machine's byte order, contiguous and aligned, at least one
    value, all finite (else the general path converts or refuses it)."""
    cdef cnp.ndarray array = <cnp.ndarray> value
    cdef Py_ssize_t k, n
    cdef const double[:] view
    if cnp.PyArray_NDIM(array) != 1 or cnp.PyArray_TYPE(array) != cnp.NPY_DOUBLE:
        return False
    # NPY_DOUBLE is either byte order: a swapped or strided array is converted
    # by the general path (a typed view of it would fail with no position)
    if not cnp.PyArray_ISNOTSWAPPED(array) or not cnp.PyArray_ISCARRAY_RO(array):
        return False
    n = cnp.PyArray_DIM(array, 0)
    if n == 0:
        return False
    view = value
    for k in range(n):
        if not isfinite(view[k]):
            return False
    return True


cdef Py_ssize_t _first_token_size(list seqs):
    """Features in the first token: a guess of the features per token."""
    for seq in seqs:
        if len(seq):
            token = seq[0]
            try:
                return len(token) + 1
            except TypeError:
                return 1
    return 1
