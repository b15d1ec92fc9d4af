"""Decoding results as the Python objects the estimator returns, built in C.

``predict_marginals`` returns, per sequence, a list with one dict
``{label: probability}`` per token (sklearn-crfsuite's format): for the 783
test sentences of the Treebank task that is 20k dicts and 920k floats. Built
in Python (``dict(zip(labels, row))`` over ``marginals.tolist()``), this cost
five times the forward-backward itself: a list per row first, then a dict
grown by rehashing, and the cyclic garbage collector walking the row lists.
Here each dict is a copy of one template dict holding the labels (its hash
table cloned, never grown), and each value is set in place from the row of
floats: no intermediate lists, and the dicts, holding only floats, stay
untracked by the garbage collector (as ``dict(zip(...))``'s do).

A :class:`MarginalDicts` is filled block by block, right after each block's
forward-backward (its rows still in cache, no copy into a flat array), in
any row order; the lists are handed out only once every token has its dict.

The values are ``PyFloat_FromDouble`` of the doubles, the floats that
``ndarray.tolist`` gives.
"""

from cpython.dict cimport PyDict_Copy, PyDict_SetItem
from cpython.float cimport PyFloat_FromDouble
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF

import numpy as np


cdef extern from "Python.h":
    # a borrowed reference, NULL for a slot of PyList_New not set yet
    PyObject* _list_slot "PyList_GET_ITEM"(object, Py_ssize_t)


cdef class MarginalDicts:
    """The result of ``predict_marginals``, filled block by block.

    Parameters
    ----------
    lengths : ndarray of intp
        Tokens per sequence (flat rows: sequence after sequence).
    labels : list
        The keys of every dict, one per column of the marginals (distinct,
        hashable), in this order.
    """

    cdef list _sequences
    cdef dict _template
    cdef tuple _keys
    cdef Py_ssize_t _n_labels, _n_rows, _filled
    cdef const Py_ssize_t[::1] _sequence_of
    cdef const Py_ssize_t[::1] _position_of

    def __cinit__(self, const Py_ssize_t[::1] lengths, list labels):
        cdef Py_ssize_t i, n_sequences = lengths.shape[0], total = 0
        for i in range(n_sequences):
            if lengths[i] < 0:
                raise ValueError("negative sequence length")
            total += lengths[i]
        self._template = dict.fromkeys(labels)
        if len(self._template) != len(labels):
            raise ValueError("the labels must be distinct")
        self._keys = tuple(labels)
        self._n_labels = len(labels)
        self._n_rows = total
        self._filled = 0
        lengths_arr = np.asarray(lengths)
        sequence_of = np.repeat(np.arange(n_sequences, dtype=np.intp), lengths_arr)
        starts = np.cumsum(lengths_arr) - lengths_arr
        self._sequence_of = sequence_of
        self._position_of = np.arange(total, dtype=np.intp) - starts[sequence_of]
        self._sequences = PyList_New(n_sequences)
        for i in range(n_sequences):
            sequence = PyList_New(lengths[i])  # slots set by fill
            Py_INCREF(sequence)
            PyList_SET_ITEM(self._sequences, i, sequence)

    def fill(self, const double[:, ::1] marginals, const Py_ssize_t[::1] rows):
        """Make the dict of flat row ``rows[k]`` from ``marginals[k]``, for every ``k``."""
        cdef Py_ssize_t k, j, r, n_labels = self._n_labels
        cdef const double* values
        cdef dict token
        cdef object sequence
        if marginals.shape[0] != rows.shape[0] or marginals.shape[1] != n_labels:
            raise ValueError("one row of one value per label is needed for each row index")
        for k in range(rows.shape[0]):
            r = rows[k]
            if r < 0 or r >= self._n_rows:
                raise IndexError("row index out of range")
            sequence = <object> _list_slot(self._sequences, self._sequence_of[r])
            if _list_slot(sequence, self._position_of[r]) != NULL:
                raise ValueError("row filled twice")
            token = PyDict_Copy(self._template)
            if n_labels:
                values = &marginals[k, 0]
                for j in range(n_labels):
                    PyDict_SetItem(token, self._keys[j], PyFloat_FromDouble(values[j]))
            Py_INCREF(token)
            PyList_SET_ITEM(sequence, self._position_of[r], token)
            self._filled += 1

    def result(self):
        """One list per sequence of one dict per token; every row must be filled."""
        if self._filled != self._n_rows:
            raise ValueError("some rows have no marginals")
        return self._sequences


def marginal_dicts(const double[:, ::1] marginals, const Py_ssize_t[::1] lengths,
                   list labels):
    """One list per sequence of one dict ``{labels[j]: marginals[r, j]}`` per token.

    Parameters
    ----------
    marginals : ndarray of shape (n_tokens, n_labels)
        The rows of every token, sequence after sequence (flat order).
    lengths : ndarray of intp
        Tokens per sequence; they sum to ``n_tokens``.
    labels : list
        The ``n_labels`` keys (distinct, hashable).

    Returns
    -------
    list of list of dict
    """
    if len(labels) != marginals.shape[1]:
        raise ValueError("one label per column is needed")
    builder = MarginalDicts(lengths, labels)
    if builder._n_rows != marginals.shape[0]:
        raise ValueError("the lengths must sum to the number of rows")
    builder.fill(marginals, np.arange(marginals.shape[0], dtype=np.intp))
    return builder.result()


def label_lists(const Py_ssize_t[::1] path, const Py_ssize_t[::1] lengths, list labels):
    """One list per sequence of its tokens' labels: ``labels[path[t]]``.

    ``classes[path].tolist()`` cut by the lengths, without the object array
    and the flat list in between (the serial part of a batch's decoding).

    Parameters
    ----------
    path : ndarray of intp
        The label index of every token, sequence after sequence (flat order).
    lengths : ndarray of intp
        Tokens per sequence; they sum to ``len(path)``.
    labels : list
        The label of each index.

    Returns
    -------
    list of list
    """
    cdef Py_ssize_t i, t, n_labels = len(labels), total = 0, start = 0
    cdef object label, sequence
    for i in range(lengths.shape[0]):
        if lengths[i] < 0:
            raise ValueError("negative sequence length")
        total += lengths[i]
    if total != path.shape[0]:
        raise ValueError("the lengths must sum to the number of tokens")
    for t in range(total):
        if path[t] < 0 or path[t] >= n_labels:
            raise IndexError("label index out of range")
    result = PyList_New(lengths.shape[0])
    for i in range(lengths.shape[0]):
        sequence = PyList_New(lengths[i])
        for t in range(lengths[i]):
            label = labels[path[start + t]]
            Py_INCREF(label)
            PyList_SET_ITEM(sequence, t, label)
        start += lengths[i]
        Py_INCREF(sequence)
        PyList_SET_ITEM(result, i, sequence)
    return result
