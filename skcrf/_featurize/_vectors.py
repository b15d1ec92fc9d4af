"""Dense vector features: a token value ``{'emb': vector}`` (issue #15).

Semantics
---------
A vector value of key ``k`` with ``d`` numbers *is* the ``d`` attributes
``k[0]`` ... ``k[d-1]`` with those values: exactly what CRFsuite trains when
the numbers are given as ``d`` separate scalar keys. They are ordinary
attributes of the vocabulary and of the :class:`~skcrf._model.CRFModel`, with
state features chosen by the usual rules (a pair (``k[i]``, label) exists
when a token with that label has the key, an explicit 0 included; kept when
the sum of its values is at least ``min_freq``), so every consumer
(``coef_``, ``state_features_``, persistence, the CRFsuite export, decoding)
works unchanged.

Only the training computation differs. ``Vocabulary.encode(..., dense=True)``
keeps the vectors as one dense block (:class:`DenseFeatures`) instead of
``D`` CSR entries per token: the distinct rows ``U`` (word vectors repeat:
one per word type) and each token's row number ``r``. Per evaluation the
objective computes ``E = U @ W`` (``W``: the ``D x labels`` weights, 0 where
no feature), adds ``E[r_t]`` to each token's state scores, sums each block's
marginals per distinct row (``M[r_t] += p_t``) and gets the expected counts
as ``U.T @ M``: two BLAS products per evaluation
(:func:`skcrf._inference._kernels.add_vector_scores`,
:func:`~skcrf._inference._kernels.add_vector_expected`), whose size is set by the
distinct rows, not the tokens. Paths that do not know the
dense block (the online trainers, partially labelled data, decoding) get the
vectors as ordinary CSR entries (:func:`expand_dense`, or ``dense=False``).
"""

import numpy as np

from .._model import kept_state_ptr
from ._encoded import Encoded

__all__ = ["expand_dense", "select_vector_features", "vector_feature_index"]


def expand_dense(encoded):
    """``encoded`` with its dense block as ordinary CSR entries (no ``dense``).

    Each token's vector dimensions follow its other entries, explicit zeros
    included (the attribute is present, as a scalar 0.0 would be).
    """
    dense = encoded.dense
    if dense is None:
        return encoded
    present = dense.present[:, dense.key_of_column]  # (n_tokens, D)
    counts_sparse = np.diff(encoded.indptr)
    counts_dense = present.sum(axis=1)
    indptr = np.zeros(len(counts_sparse) + 1, dtype=np.int64)
    np.cumsum(counts_sparse + counts_dense, out=indptr[1:])
    n = int(indptr[-1])
    ids = np.empty(n, dtype=np.int32)
    values = np.empty(n)
    # sparse entries first in each row, then the vector dimensions
    row_of_sparse = np.repeat(np.arange(len(counts_sparse)), counts_sparse)
    position = indptr[:-1][row_of_sparse] + (
        np.arange(len(encoded.ids)) - encoded.indptr[:-1][row_of_sparse]
    )
    ids[position] = encoded.ids
    values[position] = encoded.values
    rows, cols = np.nonzero(present)
    start = indptr[:-1] + counts_sparse
    first = np.zeros(len(counts_dense) + 1, dtype=np.int64)
    np.cumsum(counts_dense, out=first[1:])
    position = start[rows] + (np.arange(len(rows)) - first[rows])
    ids[position] = dense.columns[cols]
    values[position] = dense.values[dense.row_index[rows], cols]
    return Encoded(indptr, ids, values, encoded.lengths)


def select_vector_features(
    dense,
    labels,
    n_labels,
    state_ptr,
    state_labels,
    state_sum,
    *,
    all_possible_states=False,
    min_freq=0.0,
):
    """Add the vector attributes' state features to those of the CSR entries.

    Parameters
    ----------
    dense : DenseFeatures
    labels : ndarray of int, shape (n_tokens,)
    n_labels : int
    state_ptr, state_labels, state_sum : ndarray
        The features chosen from the CSR entries (none for the vector
        attributes), as :func:`skcrf._inference._kernels.state_feature_sums` gives them
        after ``min_freq``.

    Returns
    -------
    state_ptr, state_labels, state_sum
        With the vector features merged in (CSR by attribute, labels
        increasing), by the same rules: the pair exists when a token with
        that label has the key (or ``all_possible_states``), and is kept
        when its value sum is at least ``min_freq``.
    """
    import scipy.sparse as sp

    n_tokens = len(labels)
    labels = np.asarray(labels, dtype=np.intp)
    onehot = sp.csr_matrix(
        (np.ones(n_tokens), (labels, np.arange(n_tokens))),
        shape=(n_labels, n_tokens),
    )
    # tokens per (label, distinct row), then the rows' values: sums (L, D)
    by_row = sp.csr_matrix(
        (np.ones(n_tokens), (labels, dense.row_index)),
        shape=(n_labels, len(dense.values)),
    )
    sums = np.asarray(by_row @ dense.values)
    if all_possible_states:
        exists = np.ones_like(sums, dtype=bool)
    else:
        seen = np.asarray(onehot @ dense.present.astype(np.float64)) > 0  # (L, n_keys)
        exists = seen[:, dense.key_of_column]
    kept = (exists & (sums >= min_freq)).T  # (D, L)
    n_attributes = len(state_ptr) - 1
    sparse_counts = np.diff(state_ptr)
    if sparse_counts[dense.columns].any():
        # (all_possible_states gave the vector attributes features with no
        # values from the CSR entries: they are decided here instead)
        vector_attribute = np.zeros(n_attributes, dtype=bool)
        vector_attribute[dense.columns] = True
        keep = ~np.repeat(vector_attribute, sparse_counts)
        state_ptr = kept_state_ptr(state_ptr, keep)
        state_labels, state_sum = state_labels[keep], state_sum[keep]
        sparse_counts = np.diff(state_ptr)
    counts = sparse_counts.copy()
    counts[dense.columns] += kept.sum(axis=1)
    new_ptr = np.zeros(n_attributes + 1, dtype=np.int64)
    np.cumsum(counts, out=new_ptr[1:])
    n = int(new_ptr[-1])
    new_labels = np.empty(n, dtype=np.int32)
    new_sum = np.empty(n)
    attribute = np.repeat(np.arange(n_attributes), sparse_counts)
    position = new_ptr[attribute] + np.arange(len(state_labels)) - state_ptr[attribute]
    new_labels[position] = state_labels
    new_sum[position] = state_sum
    cc, kk = np.nonzero(kept)
    per_column = kept.sum(axis=1)
    first = np.zeros(len(per_column) + 1, dtype=np.int64)
    np.cumsum(per_column, out=first[1:])
    position = new_ptr[dense.columns[cc]] + np.arange(len(cc)) - first[cc]
    new_labels[position] = kk
    new_sum[position] = sums[kk, cc]
    return new_ptr, new_labels, new_sum


def vector_feature_index(state_ptr, state_labels, columns):
    """Where the vector attributes' features are in the flat state weights.

    Returns
    -------
    position : ndarray of intp
        Flat index of each such feature.
    column, label : ndarray of intp
        Its column of the dense block and its label: the weight goes to
        ``W[column, label]``.
    """
    columns = np.asarray(columns, dtype=np.intp)
    starts = state_ptr[columns]
    counts = state_ptr[columns + 1] - starts
    column = np.repeat(np.arange(len(columns)), counts)
    first = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    position = (starts[column] + np.arange(len(column)) - first[column]).astype(np.intp)
    return position, column, np.asarray(state_labels[position], dtype=np.intp)
