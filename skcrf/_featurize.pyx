# cython: language_level=3
"""Compiled featurization: token dicts to attribute ids and values.

A :class:`Vocabulary` numbers attributes with CRFsuite's names (``w:Hello``
for ``{'w': 'Hello'}``, ``n:a`` for ``{'n': {'a': 1}}``; see
:mod:`skcrf._validation`) and encodes sequences of tokens into CSR arrays,
one row per token in flat order (:class:`~skcrf._validation.Encoded`).

Design
------
- ``_ids`` (name -> id) is the single source of truth; ``_names`` lists the
  names in id order. Ids are given in order of first appearance, as CRFsuite
  does.
- Fast path, in C, for plain ``dict`` tokens with ``str`` keys and ``str``,
  ``bool``, ``int`` or finite ``float`` values: the token is walked with
  ``PyDict_Next``. A numeric value's attribute is its key, found directly in
  ``_ids`` (no separate cache: it would be the same lookup). A string value
  is found in a two-level cache ``key -> {value -> id}``, so no
  ``key:value`` string is built for a known attribute; on a cache miss the
  name is built once and looked up in ``_ids`` (so ``{'a:b': 1}`` and
  ``{'a': 'b'}`` are the same attribute ``a:b``, as in CRFsuite), and the
  answer is cached.
- Tokens made by one feature function hold the same key objects in the same
  order, so during one ``encode`` call a small memo per position in the
  token (``_Memo``) remembers the last key seen there, with its ``{value ->
  id}`` dict or its id: comparing with the previous token's key (the same
  object, or an equal string that is still in the CPU cache when keys are
  built per token, e.g. with f-strings) replaces a dict lookup. The memo
  borrows pointers that stay valid for the call (the input holds the keys;
  the vocabulary holds the dicts and never drops one) and is dropped after it.
- Any other token (nested dicts, list values, list-of-names tokens, numpy
  scalars, str subclasses, invalid values) goes to the general path,
  :func:`skcrf._validation.token_attributes`, which checks it and raises the
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
- Output goes to numpy buffers written through raw pointers, grown by
  doubling (``ndarray.resize``), trimmed at the end.
"""

import numpy as np

cimport numpy as cnp
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_SetItem
from cpython.float cimport PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_AsLong
from cpython.object cimport PyObject, PyTypeObject, Py_TYPE
from cpython.exc cimport PyErr_Clear, PyErr_Occurred
from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t, INT32_MAX
from libc.string cimport memset

cdef extern from "Python.h":
    # declared here without an exception clause: an overflow is cleared and
    # handed to the general path, which names the value
    double _long_as_double "PyLong_AsDouble"(object number)

from ._validation import Encoded, check_nonempty, token_attributes

cnp.import_array()

__all__ = ["Encoded", "Vocabulary"]

# How many unseen (key, value) pairs a vocabulary remembers at predict time.
cdef Py_ssize_t _MISS_CACHE_LIMIT = 1 << 16

# Positions in a token that get a memo (later positions are looked up).
cdef enum:
    _MEMO_SIZE = 64


cdef struct _Memo:
    # the last key seen at one position of a token, during one encode call
    PyObject *string_key
    PyObject *by_value      # its {value -> id} dict (borrowed; NULL: none)
    PyObject *number_key
    Py_ssize_t number_id    # its id when the value is a number


cdef inline bint _same_key(PyObject *remembered, PyObject *key):
    """Whether a memo's key (possibly NULL) is the str ``key``."""
    if remembered == key:
        return True
    # an equal key built anew for each token (f-string keys)
    return remembered != NULL and <str> remembered == <str> key


cdef class _Output:
    """Growing id and value buffers (numpy arrays written through pointers)."""

    cdef object ids_array, values_array
    cdef int32_t *ids
    cdef double *values
    cdef Py_ssize_t size, capacity

    def __cinit__(self, Py_ssize_t capacity):
        self.capacity = max(capacity, 16)
        self.size = 0
        self.ids_array = np.empty(self.capacity, dtype=np.int32)
        self.values_array = np.empty(self.capacity, dtype=np.float64)
        self._take_pointers()

    cdef void _take_pointers(self):
        self.ids = <int32_t *> cnp.PyArray_DATA(self.ids_array)
        self.values = <double *> cnp.PyArray_DATA(self.values_array)

    cdef int _resize(self, Py_ssize_t capacity) except -1:
        # no view of these arrays exists yet, so they can be resized in place
        self.ids_array.resize(capacity, refcheck=False)
        self.values_array.resize(capacity, refcheck=False)
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
    cdef dict _ids            # name -> id (int objects): the source of truth
    cdef dict _by_key         # key -> {str value -> id}: the string-value cache
    cdef str _separator
    cdef Py_ssize_t _cached_misses

    def __init__(self, attributes=(), value_separator=":"):
        if type(value_separator) is not str:
            raise TypeError(
                f"value_separator must be a str; got {type(value_separator).__name__}."
            )
        self._separator = value_separator
        self._names = []
        self._ids = {}
        self._by_key = {}
        self._cached_misses = 0
        for attribute in attributes:
            if type(attribute) is not str:
                raise TypeError(
                    f"attribute names must be str; got {type(attribute).__name__} "
                    f"{attribute!r}."
                )
            if attribute in self._ids:
                raise ValueError(f"attribute {attribute!r} is given twice.")
            self._add(attribute)

    @property
    def attributes(self):
        """Attribute names in id order (the vocabulary's own list: do not modify)."""
        return self._names

    @property
    def value_separator(self):
        return self._separator

    def __len__(self):
        return len(self._names)

    def __contains__(self, name):
        return name in self._ids

    def get(self, name, default=-1):
        """The id of attribute ``name``, or ``default``."""
        return self._ids.get(name, default)

    def __reduce__(self):
        return (Vocabulary, (self._names, self._separator))

    def __repr__(self):
        return (
            f"Vocabulary(<{len(self._names)} attributes>, "
            f"value_separator={self._separator!r})"
        )

    # -- ids ------------------------------------------------------------------

    cdef Py_ssize_t _add(self, str name) except -1:
        cdef Py_ssize_t attribute = len(self._names)
        if attribute >= INT32_MAX:
            raise OverflowError("more than 2**31 - 1 attributes: ids are int32.")
        self._ids[name] = attribute
        self._names.append(name)
        return attribute

    cdef inline Py_ssize_t _resolve(self, str name, bint grow) except -2:
        """Id of ``name``: added when growing, else -1 when unseen."""
        cdef PyObject *found = PyDict_GetItem(self._ids, name)
        if found != NULL:
            return PyLong_AsLong(<object> found)
        if not grow:
            return -1
        return self._add(name)

    cdef PyObject *_values_of(self, str key, bint grow) except? NULL:
        """The cache ``{value -> id}`` of ``key`` (borrowed), made when missing;
        NULL at predict time once the cache of unseen answers is full."""
        cdef PyObject *by_value = PyDict_GetItem(self._by_key, key)
        if by_value != NULL:
            return by_value
        if not grow:
            if self._cached_misses >= _MISS_CACHE_LIMIT:
                return NULL
            self._cached_misses += 1  # the key may be unseen: count its dict
        new = {}
        self._by_key[key] = new
        return <PyObject *> new

    cdef inline Py_ssize_t _string_id(self, PyObject *by_value, str key, str value,
                                      bint grow) except -2:
        """Id of the attribute of a string value, through the key's cache."""
        cdef PyObject *found
        cdef Py_ssize_t attribute
        if by_value != NULL:
            found = PyDict_GetItem(<dict> by_value, value)
            if found != NULL:
                attribute = PyLong_AsLong(<object> found)
                if attribute >= 0 or not grow:
                    return attribute
        return self._string_miss(by_value, key, value, grow)

    cdef Py_ssize_t _string_miss(self, PyObject *by_value, str key, str value,
                                 bint grow) except -2:
        # the only place a "key:value" name is built on the fast path
        cdef Py_ssize_t attribute = self._resolve(key + self._separator + value, grow)
        if by_value == NULL:
            return attribute
        if attribute < 0:
            if self._cached_misses >= _MISS_CACHE_LIMIT:
                return attribute  # remember no more unseen values
            self._cached_misses += 1
        PyDict_SetItem(<dict> by_value, value, attribute)
        return attribute

    cdef void _rollback(self, Py_ssize_t size):
        """Forget the attributes from id ``size`` on (after a failed encode)."""
        for name in self._names[size:]:
            del self._ids[name]
        del self._names[size:]
        # the cache may hold forgotten ids: empty it, but keep the inner dicts
        # alive (a memo may borrow them) -- the vocabulary never drops one
        for by_value in self._by_key.values():
            by_value.clear()
        self._cached_misses = 0

    # -- encoding -------------------------------------------------------------

    cdef bint _encode_plain(self, dict token, bint grow, _Output out,
                            _Memo *memo) except -1:
        """Encode a plain dict token; False (nothing written) if it needs the
        general path."""
        cdef Py_ssize_t position = 0, start = out.size, slot = -1, attribute
        cdef PyObject *key
        cdef PyObject *value
        cdef PyObject *by_value
        cdef PyTypeObject *value_type
        cdef double number
        while PyDict_Next(token, &position, &key, &value):
            slot += 1
            if Py_TYPE(<object> key) != <PyTypeObject *> str:
                break
            value_type = Py_TYPE(<object> value)
            if value_type == <PyTypeObject *> str:
                if slot < _MEMO_SIZE and _same_key(memo[slot].string_key, key):
                    by_value = memo[slot].by_value
                else:
                    by_value = self._values_of(<str> key, grow)
                    if slot < _MEMO_SIZE:
                        memo[slot].string_key = key
                        memo[slot].by_value = by_value
                attribute = self._string_id(by_value, <str> key, <str> value, grow)
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
                else:
                    break
                if slot < _MEMO_SIZE and _same_key(memo[slot].number_key, key):
                    attribute = memo[slot].number_id
                else:
                    attribute = self._resolve(<str> key, grow)
                    if slot < _MEMO_SIZE:
                        memo[slot].number_key = key
                        memo[slot].number_id = attribute
            if attribute >= 0:
                out.push(attribute, number)
        else:
            return True
        out.size = start  # drop this token's partial output
        return False

    cdef int _encode_general(self, token, Py_ssize_t i, Py_ssize_t j, name, bint grow,
                             _Output out) except -1:
        cdef Py_ssize_t attribute
        for attribute_name, value in token_attributes(token, i, j, name, self._separator):
            attribute = self._resolve(attribute_name, grow)
            if attribute >= 0:
                out.push(attribute, value)
        return 0

    def encode(self, sequences, *, grow, name="X"):
        """Encode sequences of tokens into attribute ids and values.

        Parameters
        ----------
        sequences : list of sequences of tokens
            As :func:`skcrf._validation.check_sequences` returns it; every
            token is checked here.
        grow : bool
            True (fit): an unseen attribute gets the next id, and the data
            must hold at least one token. False (predict): unseen attributes
            are skipped.
        name : str, default='X'
            How to call the data in error messages (``X[i][j]: ...``).

        Returns
        -------
        Encoded
            ``indptr`` (int64), ``ids`` (int32), ``values`` (float64): one
            CSR row per token in flat order; ``lengths`` (intp) per sequence.
            Explicit zeros (``False``, ``0``) are kept.
        """
        cdef bint growing = bool(grow)
        cdef Py_ssize_t n_sequences = len(sequences), n_tokens = 0, i, j, row = 0
        cdef Py_ssize_t first_size = len(self._names)
        cdef cnp.intp_t[::1] lengths_view
        cdef int64_t *indptr_data
        cdef _Output out
        cdef _Memo memo[_MEMO_SIZE]

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
        try:
            for i in range(n_sequences):
                seq = seqs[i]
                for j in range(len(seq)):
                    token = seq[j]
                    if type(token) is not dict or not self._encode_plain(token, growing, out, memo):
                        self._encode_general(token, i, j, name, growing, out)
                    row += 1
                    indptr_data[row] = out.size
        except BaseException:
            if growing:
                self._rollback(first_size)
            raise
        ids, values = out.finish()
        return Encoded(indptr, ids, values, lengths)


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
