"""The CRF training objective: regularized negative log-likelihood and gradient.

Conventions
-----------
The model has ``n_attributes`` attributes (DictVectorizer columns) and
``n_labels`` labels. Its parameters are the weights of the features that
*exist* (see :func:`select_features`), in one flat vector::

    w = [state weights..., transition weights...]

- state weights: ``W.ravel()[state_index]`` of a dense ``(n_attributes,
  n_labels)`` array ``W``; ``state_index`` is sorted, so state features are
  ordered by attribute, then label.
- transition weights: ``T.ravel()[transition_index]`` of a dense ``(n_labels,
  n_labels)`` array ``T`` (``T[i, j]``: label ``i`` followed by ``j``).

Entries of ``W`` and ``T`` outside the index are 0 (those features do not
exist) and never change.

The objective is CRFsuite's::

    f(w) = -sum_sequences log p(y | x) + c2 * ||w||^2

(a sum, not a mean; ``c2 * ||w||^2``, not ``c2 / 2``). The L1 term
``c1 * ||w||_1`` is not part of it: OWL-QN handles it in the optimizer.
"""

import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits  # a scikit-learn dependency

from ._inference import forward_backward
from ._packing import pack, sequence_rows


class FeatureIndex(NamedTuple):
    """Which features exist, and their value sums over the training data.

    Attributes
    ----------
    state_index : ndarray of int
        Flat indices into an ``(n_attributes, n_labels)`` array.
    transition_index : ndarray of int
        Flat indices into an ``(n_labels, n_labels)`` array.
    observed : ndarray of float
        Value sum of each feature over the training data (the observed
        counts), in the flat parameter order.
    """

    state_index: np.ndarray
    transition_index: np.ndarray
    observed: np.ndarray

    @property
    def n_states(self):
        return len(self.state_index)

    @property
    def n_parameters(self):
        return len(self.state_index) + len(self.transition_index)


def select_features(
    X,
    labels,
    lengths,
    n_labels,
    *,
    all_possible_states=False,
    all_possible_transitions=False,
    min_freq=0.0,
):
    """The features of the model, as CRFsuite chooses them.

    A state feature (attribute, label) exists when the attribute is stored for
    a token with that label (explicit zeros, such as a ``False`` value, count
    as occurrences), or for every pair when ``all_possible_states``; likewise
    a transition feature exists when the label pair occurs, or always when
    ``all_possible_transitions``. A feature is then kept when the sum of its
    values over the training data is at least ``min_freq`` (so with the
    default 0, a feature whose values sum to a negative number is dropped, as
    in CRFsuite).

    Parameters
    ----------
    X : sparse matrix of shape (n_tokens, n_attributes)
        Token features in flat order, explicit zeros still stored.
    labels : ndarray of int, shape (n_tokens,)
        Label index of each token.
    lengths : ndarray of int, shape (n_sequences,)
    n_labels : int

    Returns
    -------
    FeatureIndex
    """
    n_tokens, n_attributes = X.shape
    X = sp.csr_matrix(X)
    # One key per stored entry (explicit zeros included): attribute * L + label.
    key_type = np.int32 if n_attributes * n_labels < 2**31 else np.int64
    keys = X.indices.astype(key_type) * key_type(n_labels)
    keys += np.repeat(labels.astype(key_type), np.diff(X.indptr))
    if all_possible_states:
        state_index = np.arange(n_attributes * n_labels)
        state_sum = np.bincount(keys, weights=X.data, minlength=n_attributes * n_labels)
    else:
        state_index, inverse = np.unique(keys, return_inverse=True)
        state_sum = np.bincount(inverse, weights=X.data, minlength=len(state_index))
    kept = state_sum >= min_freq
    state_index, state_sum = state_index[kept], state_sum[kept]

    transition_sum = np.zeros(n_labels * n_labels)
    is_first = np.zeros(n_tokens, dtype=bool)
    is_first[np.cumsum(lengths)[lengths > 0] - lengths[lengths > 0]] = True
    follows = np.flatnonzero(~is_first)
    np.add.at(transition_sum, labels[follows - 1] * n_labels + labels[follows], 1.0)
    if all_possible_transitions:
        transition_exists = np.ones(n_labels * n_labels, dtype=bool)
    else:
        transition_exists = transition_sum > 0
    transition_index = np.flatnonzero(transition_exists & (transition_sum >= min_freq))

    observed = np.concatenate([state_sum, transition_sum[transition_index]])
    return FeatureIndex(state_index, transition_index, observed)


def unpack_weights(w, features, n_attributes, n_labels):
    """Dense ``(W, T)`` arrays from the flat parameter vector."""
    W = np.zeros(n_attributes * n_labels, dtype=w.dtype)
    W[features.state_index] = w[: features.n_states]
    T = np.zeros(n_labels * n_labels, dtype=w.dtype)
    T[features.transition_index] = w[features.n_states :]
    return W.reshape(n_attributes, n_labels), T.reshape(n_labels, n_labels)


def pack_weights(W, T, features):
    """Flat parameter vector from dense ``(W, T)`` arrays."""
    return np.concatenate([W.ravel()[features.state_index], T.ravel()[features.transition_index]])


def effective_n_threads(n_jobs):
    """Threads to use for ``n_jobs`` (None means 1, negative counts back from all cores)."""
    if n_jobs is None:
        return 1
    n_cpus = os.cpu_count() or 1
    if n_jobs < 0:
        return max(1, n_cpus + 1 + n_jobs)
    return max(1, int(n_jobs))


def split_sequences(lengths, n_shards):
    """Deal sequences into shards of similar size and length profile.

    Sequences are sorted by length and dealt round-robin, so every shard gets
    a similar number of tokens and of forward-backward steps.
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    n_shards = max(1, min(n_shards, len(order)))
    return [np.sort(order[k::n_shards]) for k in range(n_shards)]


class _Shard:
    """The sequences one thread evaluates: packed features and layout."""

    def __init__(self, X, lengths, sequences):
        rows = sequence_rows(lengths, sequences)
        self.layout = pack(lengths[sequences])
        packed = X[rows[self.layout.flat_index]]
        packed.eliminate_zeros()  # zeros still define features, but cost time here
        self.X = packed
        # X.T of a CSR matrix is a CSC view; its product with a C-ordered
        # dense matrix streams through the rows, faster than a CSR transpose.
        self.XT = packed.T

    def expected_counts(self, W, T, state_index):
        """log Z summed, expected state counts at ``state_index``, and pair counts."""
        result = forward_backward(
            self.X @ W, T, self.layout.batch_sizes, overwrite_emissions=True
        )
        expected_states = (self.XT @ result.marginals).ravel()[state_index]
        return result.log_partition.sum(), expected_states, result.transition_marginals


class CRFObjective:
    """Negative log-likelihood of a training set, with its gradient.

    Built once per fit: the sequences are dealt into ``n_threads`` shards,
    each shard's feature matrix reordered into the packed layout with its
    explicit zeros dropped. An evaluation runs every shard (two sparse
    products and one forward-backward) on its own thread: scipy's sparse
    products and numpy's array operations release the GIL.

    Parameters
    ----------
    X : sparse matrix of shape (n_tokens, n_attributes), flat order
    lengths : ndarray of int, shape (n_sequences,)
    n_labels : int
    features : FeatureIndex
    c2 : float
        L2 coefficient: adds ``c2 * ||w||^2``.
    n_threads : int
    """

    def __init__(self, X, lengths, n_labels, features, *, c2=0.0, n_threads=1):
        X = sp.csr_matrix(X)
        lengths = np.asarray(lengths, dtype=np.intp)
        self.n_attributes = X.shape[1]
        self.n_labels = n_labels
        self.features = features
        self.c2 = c2
        self._shards = [
            _Shard(X, lengths, sequences)
            for sequences in split_sequences(lengths, n_threads)
        ]
        self._pool = ThreadPoolExecutor(len(self._shards)) if len(self._shards) > 1 else None
        self._blas_limit = None

    @property
    def n_parameters(self):
        return self.features.n_parameters

    def loss_gradient(self, w):
        """Objective value and gradient at ``w`` (one forward-backward).

        Parameters
        ----------
        w : ndarray of shape (n_parameters,)

        Returns
        -------
        loss : float
        gradient : ndarray of shape (n_parameters,)
        """
        features = self.features
        W, T = unpack_weights(w, features, self.n_attributes, self.n_labels)
        def evaluate(shard):
            # A line search's trial point may overflow: the optimizer sees the
            # non-finite loss and backs off, so numpy's warnings are noise. The
            # error state is per thread, hence set here, in the worker.
            with np.errstate(over="ignore", invalid="ignore"):
                return shard.expected_counts(W, T, features.state_index)

        if self._pool is None:
            parts = [evaluate(shard) for shard in self._shards]
        else:
            parts = list(self._pool.map(evaluate, self._shards))

        with np.errstate(over="ignore", invalid="ignore"):
            loss = sum(log_z for log_z, _, _ in parts) - w @ features.observed
            gradient = np.concatenate(
                [
                    sum(states for _, states, _ in parts),
                    sum(pairs for _, _, pairs in parts).ravel()[features.transition_index],
                ]
            )
            gradient -= features.observed
            if self.c2:
                loss += self.c2 * (w @ w)
                gradient += 2.0 * self.c2 * w
        return float(loss), gradient

    def __enter__(self):
        # The forward-backward's small matrix products lose to BLAS threads
        # (their start-up and spinning cost more than the products, and
        # compete with the shard threads): one BLAS thread while in use.
        self._blas_limit = threadpool_limits(limits=1, user_api="blas")
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        """Stop the worker threads and restore BLAS's thread count."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._blas_limit is not None:
            self._blas_limit.restore_original_limits()
            self._blas_limit = None
