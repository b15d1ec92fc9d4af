"""The work of :class:`skcrf.dask.DaskCRFTagger` on one partition, and the merges.

Plain functions of plain data, run as Dask tasks on the workers (and called
directly by the tests): nothing here imports Dask, so the map-reduce can be
checked against :func:`skcrf._training._objective.select_features` without a cluster.

Conventions
-----------
The fit is two passes over the partitions of ``X`` and ``y``, in partition
order ``k = 0, 1, ...``:

1. :func:`scan_partition` validates partition ``k`` and encodes it with a
   vocabulary of its own (local attribute ids, in order of first appearance
   in the partition) and local label indices (order of first appearance).
   Its :class:`PartitionStats` (:func:`partition_stats`) hold the local
   attribute names, the local labels, the value sum of every stored
   (attribute, label) pair and the label-pair counts. :func:`merge_stats`
   merges the stats of two *consecutive* runs of partitions (``left`` before
   ``right``): attributes and labels keep their order of first appearance,
   sums of the same pair add up. Merging is associative for that order, so
   any tree over the partitions in order gives the attribute order of one
   pass over the concatenated data: a local fit's.
2. :func:`build_model` turns the merged stats into the model's features
   exactly as :func:`~skcrf._training._objective.select_features` chooses them
   (``classes`` sorted as :func:`~skcrf._featurize._labels.encode_labels` sorts
   them, then ``all_possible_*`` and ``min_freq``), with the observed counts.
   :func:`vectorize_partition` maps a scan's local ids onto the global ones,
   and :func:`group_partitions` makes a run of consecutive vectorized
   partitions (those of one worker) one :class:`PartitionObjective` (a
   :class:`~skcrf._training._objective.CRFObjective` with no observed counts
   and no L2 term: both are added once, on the driver), so that the
   partitions of a worker share one model layout.

Per evaluation, :func:`partition_loss` gives ``(sum of log Z, expected
counts)`` of one group at ``w``, and :func:`add_losses` adds the groups'
pairs in group order on the driver, which then subtracts the observed counts
and adds ``c2 * ||w||^2``.
"""

import numpy as np

from .._featurize._encoded import concatenate
from .._featurize._labels import (
    check_distinct_labels,
    check_labels,
    encode_labels,
    same_label,
)
from .._featurize._transitions import TRANSITION_KEY, TransitionParts
from .._featurize._validation import check_sequences, check_sums
from .._featurize._vocabulary import Vocabulary
from .._inference import _kernels
from .._inference._blocks import gather_rows
from .._model import CRFModel
from .._training._objective import CRFObjective
from .._training._weights import check_sample_weight
from .._utils._threads import effective_n_threads, single_blas_thread
from .._version import __version__


class VersionMismatchError(RuntimeError):
    """A worker runs another skcrf than the driver."""


def check_version(expected):
    """Raise :class:`VersionMismatchError` unless this process runs skcrf ``expected``."""
    if __version__ != expected:
        where = "this worker"
        try:  # name the worker when running inside one
            from distributed import get_worker

            where = f"worker {get_worker().address}"
        except (ImportError, ValueError):
            pass
        raise VersionMismatchError(
            f"{where} runs skcrf {__version__} but the driver runs skcrf {expected}; "
            "install the same skcrf version on the driver and on every worker."
        )


def partition_names(k):
    """How errors name partition ``k`` of ``X`` and ``y`` (``X.partitions[k][i][j]``)."""
    return f"X.partitions[{k}]", f"y.partitions[{k}]"


class PartitionScan:
    """Partition ``k`` encoded with its own vocabulary (kept on its worker).

    Attributes
    ----------
    encoded : Encoded
        Token features with local attribute ids.
    stats : PartitionStats
    """

    def __init__(self, encoded, stats, token_weights=None):
        self.encoded = encoded
        self.stats = stats
        self.token_weights = token_weights

    def __sizeof__(self):
        # Dask's memory accounting reads sys.getsizeof.
        return object.__sizeof__(self) + _nbytes(self.encoded)


class PartitionStats:
    """What the vocabulary of a run of consecutive partitions needs.

    Attributes
    ----------
    attributes : list of str
        Attribute names in order of first appearance.
    labels : list
        Labels in order of first appearance.
    state_attributes, state_labels : ndarray of int64
        The stored (attribute, label) pairs, as indices into ``attributes``
        and ``labels``.
    state_sums : ndarray of float64
        The value sum of each pair.
    transitions : ndarray of float64, shape (n_labels, n_labels)
        ``transitions[i, j]``: how often ``labels[i]`` is followed by
        ``labels[j]``.
    abs_max : float
        Largest magnitude of a value (for the overflow check of the sums).
    n_values, n_tokens, n_sequences : int
    state_observed, transitions_observed : ndarray or None
        With ``sample_weight``: the sums and counts with each token's
        weight (the observed counts; the unweighted ones choose the
        features). None without weights.
    """

    def __init__(
        self,
        attributes,
        labels,
        state_attributes,
        state_labels,
        state_sums,
        transitions,
        abs_max,
        n_values,
        n_tokens,
        n_sequences,
        state_observed=None,
        transitions_observed=None,
    ):
        self.state_observed = state_observed
        self.transitions_observed = transitions_observed
        self.attributes = attributes
        self.labels = labels
        self.state_attributes = state_attributes
        self.state_labels = state_labels
        self.state_sums = state_sums
        self.transitions = transitions
        self.abs_max = abs_max
        self.n_values = n_values
        self.n_tokens = n_tokens
        self.n_sequences = n_sequences

    def __sizeof__(self):
        arrays = (self.state_attributes, self.state_labels, self.state_sums, self.transitions)
        return 64 * (len(self.attributes) + len(self.labels)) + sum(a.nbytes for a in arrays)


def scan_partition(X_part, y_part, k, version, w_part=None):
    """Validate and encode partition ``k`` with a vocabulary of its own.

    ``w_part``: the partition's ``sample_weight`` (or None). Its sequences of
    weight 0 are then left out after validation (their attributes stay in
    the vocabulary, with no feature), as :meth:`skcrf.CRFTagger.fit` does.

    Parameters
    ----------
    X_part, y_part : iterable of sequences
        The partition's sequences of tokens and of labels.
    k : int
        The partition's number, for error messages (``X.partitions[k][i][j]``).
    version : str
        The driver's skcrf version.

    Returns
    -------
    PartitionScan
    """
    check_version(version)
    x_name, y_name = partition_names(k)
    sequences = check_sequences(list(X_part), name=x_name, single_hint=False)
    vocabulary = Vocabulary()
    n_tokens = sum(len(seq) for seq in sequences)
    parts = TransitionParts()
    # grow=True requires a token; a partition may hold none and still be valid.
    encoded = vocabulary.encode(sequences, grow=n_tokens > 0, name=x_name, transitions=parts)
    if parts.found:
        raise ValueError(
            f"{x_name} holds transition attributes (the token key {TRANSITION_KEY!r}: "
            "input-conditioned transitions); DaskCRFTagger does not train them. Use "
            "CRFTagger."
        )
    check_sums(encoded, vocabulary, name=x_name)
    labels = check_labels(list(y_part), encoded.lengths, name=y_name)
    check_distinct_labels(labels, y_name, lengths=encoded.lengths)
    token_weights = None
    if w_part is not None:
        weights = check_sample_weight(
            list(w_part), len(sequences), name=f"sample_weight.partitions[{k}]"
        )
        lengths = np.asarray(encoded.lengths, dtype=np.intp)
        keep = weights > 0
        if not keep.all():
            token_keep = np.repeat(keep, lengths)
            rows = np.flatnonzero(token_keep)
            indptr, ids, values = gather_rows(encoded.indptr, encoded.ids, encoded.values, rows)
            encoded = encoded._replace(
                indptr=indptr, ids=ids, values=values, lengths=lengths[keep]
            )
            labels = [label for label, kept in zip(labels, token_keep.tolist()) if kept]
            weights = weights[keep]
        if not (weights == 1.0).all():
            token_weights = np.repeat(weights, np.asarray(encoded.lengths, dtype=np.intp))
        n_tokens = len(labels)
    unique = list(dict.fromkeys(labels))
    local_classes = np.empty(len(unique), dtype=object)
    local_classes[:] = unique
    label_index, _ = encode_labels(labels, local_classes, name=y_name)

    n_labels = len(unique)
    state_ptr, state_labels, state_sums = _kernels.state_feature_sums(
        encoded.indptr,
        encoded.ids,
        encoded.values,
        label_index,
        len(vocabulary),
        max(n_labels, 1),
        False,
    )
    state_attributes = np.repeat(np.arange(len(vocabulary), dtype=np.int64), np.diff(state_ptr))
    lengths = np.asarray(encoded.lengths, dtype=np.intp)
    transitions = np.zeros(n_labels * n_labels)
    follows = np.ones(len(label_index), dtype=bool)
    follows[(np.cumsum(lengths) - lengths)[lengths > 0]] = False
    follows = np.flatnonzero(follows)
    pairs = label_index[follows - 1] * n_labels + label_index[follows]
    np.add.at(transitions, pairs, 1.0)
    state_observed = transitions_observed = None
    if w_part is not None:
        state_observed, transitions_observed = state_sums, transitions
        if token_weights is not None:
            state_observed = _kernels.state_feature_sums(
                encoded.indptr,
                encoded.ids,
                encoded.values * np.repeat(token_weights, np.diff(encoded.indptr)),
                label_index,
                len(vocabulary),
                max(n_labels, 1),
                False,
            )[2]
            transitions_observed = np.bincount(
                pairs, weights=token_weights[follows], minlength=n_labels * n_labels
            )
        transitions_observed = transitions_observed.reshape(n_labels, n_labels)
    values = encoded.values
    stats = PartitionStats(
        attributes=list(vocabulary.attributes),
        labels=unique,
        state_attributes=state_attributes,
        state_labels=state_labels.astype(np.int64),
        state_sums=state_sums,
        transitions=transitions.reshape(n_labels, n_labels),
        abs_max=float(np.abs(values).max()) if len(values) else 0.0,
        n_values=len(values),
        n_tokens=n_tokens,
        n_sequences=len(encoded.lengths),
        state_observed=state_observed,
        transitions_observed=transitions_observed,
    )
    return PartitionScan(encoded, stats, token_weights)


def partition_stats(scan):
    """The stats of a scan (a task of its own, so that merges move only them)."""
    return scan.stats


def _union(left, right, on_equal=None):
    """``left`` then the items of ``right`` not in it; where each of ``right`` is.

    Returns the merged list and an int64 array: the index in it of each item
    of ``right``. ``on_equal(known, item)`` is called for each item of
    ``right`` already there (``known`` its equal).
    """
    merged = list(left)
    index_of = {item: i for i, item in enumerate(merged)}
    where = np.empty(len(right), dtype=np.int64)
    for k, item in enumerate(right):
        index = index_of.get(item)
        if index is None:
            index = index_of[item] = len(merged)
            merged.append(item)
        elif on_equal is not None:
            on_equal(merged[index], item)
        where[k] = index
    return merged, where


def _check_same_label(known, label):
    if not same_label(known, label):
        # equal in Python (1 and 1.0) but in different partitions
        raise ValueError(
            f"y: the labels {known!r:.100} ({type(known).__name__}) of an earlier "
            f"partition and {label!r:.100} ({type(label).__name__}) of a later one are "
            "equal in Python but not the same label; they would be merged into one "
            "class. Use labels of one type (e.g. all str)."
        )


def merge_stats(left, right):
    """The stats of ``left``'s partitions followed by ``right``'s.

    Parameters
    ----------
    left, right : PartitionStats
        Stats of two consecutive runs of partitions, ``left`` first.

    Returns
    -------
    PartitionStats
    """
    attributes, attribute_map = _union(left.attributes, right.attributes)
    labels, label_map = _union(left.labels, right.labels, on_equal=_check_same_label)

    n_labels = len(labels)
    keys = np.concatenate(
        [
            left.state_attributes * n_labels + left.state_labels,
            attribute_map[right.state_attributes] * n_labels + label_map[right.state_labels],
        ]
    )
    sums = np.concatenate([left.state_sums, right.state_sums])
    # one sum per pair: left's partial sum plus right's, in that order
    unique, inverse = np.unique(keys, return_inverse=True)
    state_sums = np.zeros(len(unique))
    np.add.at(state_sums, inverse, sums)

    transitions = np.zeros((n_labels, n_labels))
    n_left = len(left.labels)
    transitions[:n_left, :n_left] = left.transitions
    np.add.at(transitions, (label_map[:, None], label_map[None, :]), right.transitions)
    state_observed = transitions_observed = None
    if left.state_observed is not None:
        state_observed = np.zeros(len(unique))
        np.add.at(
            state_observed,
            inverse,
            np.concatenate([left.state_observed, right.state_observed]),
        )
        transitions_observed = np.zeros((n_labels, n_labels))
        transitions_observed[:n_left, :n_left] = left.transitions_observed
        np.add.at(
            transitions_observed,
            (label_map[:, None], label_map[None, :]),
            right.transitions_observed,
        )
    return PartitionStats(
        attributes=attributes,
        labels=labels,
        state_attributes=unique // n_labels if n_labels else unique,
        state_labels=unique % n_labels if n_labels else unique,
        state_sums=state_sums,
        transitions=transitions,
        abs_max=max(left.abs_max, right.abs_max),
        n_values=left.n_values + right.n_values,
        n_tokens=left.n_tokens + right.n_tokens,
        n_sequences=left.n_sequences + right.n_sequences,
        state_observed=state_observed,
        transitions_observed=transitions_observed,
    )


class ModelBundle:
    """The global model, its observed counts and the label order of the stats.

    Attributes
    ----------
    model : CRFModel
        The features (zero weights).
    observed : ndarray of float64, shape (n_features,)
    label_map : ndarray of int64
        Class index of each label of the merged stats (in their order).
    n_tokens, n_sequences : int
    """

    def __init__(self, model, observed, label_map, n_tokens, n_sequences):
        self.model = model
        self.observed = observed
        self.label_map = label_map
        self.n_tokens = n_tokens
        self.n_sequences = n_sequences


def build_model(
    stats,
    *,
    all_possible_states=False,
    all_possible_transitions=False,
    min_freq=0.0,
    value_separator=":",
):
    """The features of the model from the merged stats of all partitions.

    The same choice as :func:`skcrf._training._objective.select_features` on the
    concatenated data (state pairs stored or all of them, transitions seen or
    all of them, then the ``min_freq`` threshold on the value sums).

    Returns
    -------
    ModelBundle

    Raises
    ------
    ValueError
        If the data holds no token, or a feature's values overflow when summed.
    """
    if stats.n_tokens == 0:
        if stats.n_sequences == 0:
            raise ValueError(
                "X is empty: training needs at least one sequence with at least one token."
            )
        raise ValueError(
            f"X has no tokens: all {stats.n_sequences} sequences are empty; training "
            "needs at least one token."
        )
    _check_total_sums(stats)
    label_map, classes = encode_labels(stats.labels, name="y")
    n_labels, n_attributes = len(classes), len(stats.attributes)

    attributes_of = stats.state_attributes
    labels_of = label_map[stats.state_labels]
    weighted = stats.state_observed is not None
    state_observed = stats.state_observed if weighted else stats.state_sums
    if all_possible_states:
        state_sums = np.zeros(n_attributes * n_labels)
        state_sums[attributes_of * n_labels + labels_of] = stats.state_sums
        observed = np.zeros(n_attributes * n_labels)
        observed[attributes_of * n_labels + labels_of] = state_observed
        state_observed = observed
        attributes_of = np.repeat(np.arange(n_attributes, dtype=np.int64), n_labels)
        labels_of = np.tile(np.arange(n_labels, dtype=np.int64), n_attributes)
    else:
        # CSR by attribute, labels increasing within an attribute
        order = np.argsort(attributes_of * n_labels + labels_of, kind="stable")
        attributes_of, labels_of = attributes_of[order], labels_of[order]
        state_sums = stats.state_sums[order]
        state_observed = state_observed[order]
    kept = state_sums >= min_freq
    attributes_of, labels_of, state_sums = attributes_of[kept], labels_of[kept], state_sums[kept]
    state_observed = state_observed[kept]
    state_ptr = np.zeros(n_attributes + 1, dtype=np.int64)
    np.cumsum(np.bincount(attributes_of, minlength=n_attributes), out=state_ptr[1:])

    transition_sum = np.zeros((n_labels, n_labels))
    transition_sum[label_map[:, None], label_map[None, :]] = stats.transitions
    transition_sum = transition_sum.ravel()
    if all_possible_transitions:
        exists = np.ones(n_labels * n_labels, dtype=bool)
    else:
        exists = transition_sum > 0
    transition_index = np.flatnonzero(exists & (transition_sum >= min_freq))
    transition_observed = transition_sum
    if weighted:
        transition_observed = np.zeros((n_labels, n_labels))
        transition_observed[label_map[:, None], label_map[None, :]] = stats.transitions_observed
        transition_observed = transition_observed.ravel()

    model = CRFModel(
        classes=classes,
        attributes=stats.attributes,
        state_ptr=state_ptr,
        state_labels=labels_of.astype(np.int32),
        state_weights=np.zeros(len(labels_of)),
        transition_index=transition_index.astype(np.int64),
        transition_weights=np.zeros(len(transition_index)),
        value_separator=value_separator,
    )
    observed = np.concatenate([state_observed, transition_observed[transition_index]])
    return ModelBundle(model, observed, label_map, stats.n_tokens, stats.n_sequences)


def _check_total_sums(stats):
    """A feature whose values overflow when summed over all partitions."""
    if stats.abs_max * stats.n_values < 1e300:
        return  # no sum can overflow: the common case
    bad = np.flatnonzero(~np.isfinite(stats.state_sums))
    if len(bad):
        name = stats.attributes[int(stats.state_attributes[bad[0]])]
        raise ValueError(
            f"The values of feature {name!r} are too large: their sum over the "
            "training data overflows a float. Scale the feature values down."
        )


class PartitionObjective:
    """Partitions' data with global ids, and its objective (kept on its worker).

    The :class:`~skcrf._training._objective.CRFObjective` (blocks and buffers) is built
    on first use and not pickled: a partition moved or spilled by Dask
    travels as its encoded data and rebuilds it.

    Parameters
    ----------
    encoded : Encoded
        Token features with the model's attribute ids.
    model : CRFModel
    n_threads : int
        Threads of the partition's evaluation.
    token_weights : ndarray or None
        Each token's weight (``sample_weight``), or None.
    """

    def __init__(self, encoded, model, n_threads=1, token_weights=None):
        self.encoded = encoded
        self.model = model
        self.n_threads = n_threads
        self.token_weights = token_weights
        self._objective = None

    @property
    def objective(self):
        if self._objective is None:
            # No observed counts and no L2 term: the driver adds them once.
            self._objective = CRFObjective(
                self.encoded,
                self.model,
                np.zeros(self.model.n_features),
                c2=0.0,
                n_threads=self.n_threads,
                token_weights=self.token_weights,
            )
        return self._objective

    @property
    def n_tokens(self):
        return len(self.encoded.indptr) - 1

    def __getstate__(self):
        return {
            "encoded": self.encoded,
            "model": self.model,
            "n_threads": self.n_threads,
            "token_weights": self.token_weights,
        }

    def __setstate__(self, state):
        self.__init__(
            state["encoded"], state["model"], state["n_threads"], state.get("token_weights")
        )

    def __sizeof__(self):
        # the encoded data, and the blocks that copy it once built
        data = _nbytes(self.encoded)
        return object.__sizeof__(self) + (2 * data if self._objective is not None else data)


def vectorize_partition(scan, bundle, version):
    """Partition ``k`` with the model's attribute ids (its CSR arrays and lengths).

    The local ids of the scan are mapped onto the model's (every attribute of
    the partition is one of the model's), which gives the arrays
    ``Vocabulary(model.attributes).encode(X_part, grow=False)`` would give
    without encoding the tokens again. Plain arrays: cheap to move to the
    worker of the partition's group (:func:`group_partitions`).

    Returns
    -------
    encoded : Encoded
    token_weights : ndarray or None
    """
    check_version(version)
    model = bundle.model
    vocabulary = Vocabulary(model.attributes, model.value_separator)
    local = scan.stats.attributes
    to_global = np.fromiter(
        (vocabulary.get(name) for name in local), dtype=np.int32, count=len(local)
    )
    encoded = scan.encoded
    encoded = encoded._replace(ids=to_global[encoded.ids] if len(local) else encoded.ids)
    return encoded, scan.token_weights


def group_threads(n_jobs):
    """Threads of a group's evaluation: ``n_jobs``, or the worker's threads when None.

    A group is the one task of its worker in an evaluation: with ``n_jobs``
    None it uses the threads the worker was started with (which would
    otherwise each have evaluated a partition of their own).
    """
    if n_jobs is None:
        try:
            from distributed import get_worker

            n_jobs = get_worker().state.nthreads
        except (ImportError, ValueError, AttributeError):
            n_jobs = 1
    return effective_n_threads(n_jobs)


def group_partitions(parts, bundle, n_jobs, version):
    """Consecutive vectorized partitions as one objective, kept on one worker.

    The partitions of a worker share one model layout: an evaluation takes
    the weights into the kernels' order once, evaluates every partition's
    sequences on the worker's threads and returns one summed gradient (not
    one per partition).

    Parameters
    ----------
    parts : list of (Encoded, ndarray or None)
        :func:`vectorize_partition` of each partition, in partition order.
    bundle : ModelBundle
    n_jobs : int or None
        See :func:`group_threads`.
    version : str
        The driver's skcrf version.

    Returns
    -------
    PartitionObjective
    """
    check_version(version)
    encoded = concatenate([e for e, _ in parts])
    token_weights = None
    if any(w is not None for _, w in parts):
        token_weights = np.concatenate(
            [
                np.ones(len(e.indptr) - 1) if w is None else np.asarray(w, dtype=np.float64)
                for e, w in parts
            ]
        )
    group = PartitionObjective(encoded, bundle.model, group_threads(n_jobs), token_weights)
    if group.n_tokens:
        _ = group.objective  # built now, not in the first evaluation
    return group


_BLAS_SINGLE = None  # whether BLAS runs one thread in this process (checked once)


def _blas_is_single():
    global _BLAS_SINGLE
    if _BLAS_SINGLE is None:
        from threadpoolctl import threadpool_info

        _BLAS_SINGLE = all(
            pool.get("num_threads", 1) <= 1
            for pool in threadpool_info()
            if pool.get("user_api") == "blas"
        )
    return _BLAS_SINGLE


def partition_loss(partition, w):
    """``(sum of log Z, expected counts)`` of one :class:`PartitionObjective` at ``w``."""
    if partition.n_tokens == 0:
        return 0.0, np.zeros(len(w))
    if partition.n_threads > 1:
        # the objective's threads (and its BLAS limit) live for one evaluation:
        # a partition held between evaluations keeps no thread alive
        with partition.objective as objective:
            return objective.loss_gradient(w)
    if _blas_is_single():
        # Dask's nanny starts workers with OMP_NUM_THREADS=1 and the like:
        # no limit to set, and setting one costs more than a small evaluation.
        return partition.objective.loss_gradient(w)
    with single_blas_thread():  # the L x L products must not spawn BLAS threads
        return partition.objective.loss_gradient(w)


def add_losses(*partial):
    """The sum of partial ``(loss, gradient)`` pairs, in the order given.

    A new array: Dask may hand the inputs to another task again (a retry).
    """
    loss, gradient = partial[0][0], partial[0][1].copy()
    for other_loss, other_gradient in partial[1:]:
        loss += other_loss
        gradient += other_gradient
    return loss, gradient


def _nbytes(encoded):
    """Bytes of the CSR arrays of an Encoded (its optional fields left out)."""
    return sum(a.nbytes for a in (encoded.indptr, encoded.ids, encoded.values, encoded.lengths))


def encoded_nbytes(partition):
    """Bytes of a partition's vectorized data (indptr, ids, values, lengths)."""
    return _nbytes(partition.encoded)
