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

The values are ``PyFloat_FromDouble`` of the doubles, the floats that
``ndarray.tolist`` gives.
"""

from cpython.dict cimport PyDict_Copy, PyDict_SetItem
from cpython.float cimport PyFloat_FromDouble
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF


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
    cdef Py_ssize_t n_rows = marginals.shape[0], n_labels = marginals.shape[1]
    cdef Py_ssize_t n_sequences = lengths.shape[0], total = 0, i, t, j, r = 0
    cdef const double* row
    cdef dict template, token
    cdef list sequence, result
    if len(labels) != n_labels:
        raise ValueError("one label per column is needed")
    for i in range(n_sequences):
        if lengths[i] < 0:
            raise ValueError("negative sequence length")
        total += lengths[i]
    if total != n_rows:
        raise ValueError("the lengths must sum to the number of rows")
    template = dict.fromkeys(labels)
    if len(template) != n_labels:
        raise ValueError("the labels must be distinct")
    keys = tuple(labels)
    result = PyList_New(n_sequences)
    for i in range(n_sequences):
        sequence = PyList_New(lengths[i])
        for t in range(lengths[i]):
            token = PyDict_Copy(template)
            if n_labels:
                row = &marginals[r, 0]
                for j in range(n_labels):
                    PyDict_SetItem(token, (<tuple> keys)[j], PyFloat_FromDouble(row[j]))
            r += 1
            Py_INCREF(token)
            PyList_SET_ITEM(sequence, t, token)
        Py_INCREF(sequence)
        PyList_SET_ITEM(result, i, sequence)
    return result
