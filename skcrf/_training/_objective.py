"""The CRF training objective: regularized negative log-likelihood and gradient.

Conventions
-----------
The parameters are the weights of the features that exist, in the flat order
of :mod:`skcrf._model`: ``w = [state weights..., transition weights...]``.
The objective is CRFsuite's::

    f(w) = -sum_sequences log p(y | x) + c2 * ||w||^2

(a sum, not a mean; ``c2 * ||w||^2``, not ``c2 / 2``), with the gradient
``expected counts - observed counts + 2 * c2 * w``. The L1 term
``c1 * ||w||_1`` is not part of it: OWL-QN handles it in the optimizer.

Partially labelled sequences (some labels unknown, or fuzzy: a set of
candidates) contribute ``-log sum_{y consistent} p(y | x) = log Z(x) -
log Z_c(x)`` (Tsuboi et al., 2008), where ``Z_c`` sums over the labellings
consistent with the known and fuzzy labels; their gradient is ``E_p[f] -
E_{p_c}[f]``, the expected counts of two forward-backward passes over the
same block, the second with the labels not allowed at each token masked out.
Fully labelled sequences keep the observed counts; a sequence with every
label unknown contributes nothing (it is left out). With no partial
sequence the objective and its evaluation are exactly the usual ones.

Weighted training (``sample_weight``, ``class_weight``) gives each token a
weight ``c_t`` and minimizes ``sum_t c_t (-log p(y_t | y_{t-1}, x))``, the
log-likelihood split by the chain rule under the model (``-log p(y_1 | x)``
at the first token), plus the L2 term; all weights 1 give the objective
above, one weight per sequence that weight times its negative
log-likelihood. The observed counts are weighted sums; a block whose weights
are constant over each sequence runs the compiled forward-backward with the
weight folded into its backward pass, one whose weights vary within a
sequence takes one more forward pass
(:func:`skcrf._inference._blocks.block_marginals`; the mathematics page of
the user guide derives both). A partially labelled sequence keeps one
weight. Unweighted, none of this runs.

Evaluation
----------
Sequences are cut into blocks of similar length (at most
:data:`skcrf._inference._blocks.BLOCK_ELEMENTS` tokens x labels and a
shard's share of the tokens, or one sequence), and the blocks are dealt
into one shard per thread (balanced by tokens), never fewer than two: one thread evaluates
the two shards of a two-thread fit one after the other, and the shards'
counts are added in the same order, so ``n_jobs=1`` and ``n_jobs=2`` give
the same bits. Each block is held in the packed time-major layout with
its token features as CSR rows. Per block:
state scores over the existing features, one ``exp``, the scaled
forward-backward (one BLAS product per time step for all the block's
sequences), and the expected counts scattered back onto the existing
features. Every buffer is sized by a block, not by the data: no tokens x
labels array spans a shard, and no attributes x labels array exists at all.

Inside the objective, attributes are numbered by decreasing frequency in
the training data (:class:`FrequencyOrder`), not in the model's order (first
appearance, CRFsuite's): the state score and expected count scatters then
read the features of the frequent attributes from a few cache lines, which
matters once the model's arrays outgrow the CPU caches. Weights come in and
gradients go out in the model's order; each feature's sums are formed in
the same order either way, so the results are the same to the bit. Blocks
whose values are all 1 keep no values (:class:`~skcrf._inference._blocks.Block`).
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._featurize._vectors import expand_dense, select_vector_features, vector_feature_index
from .._inference import _kernels
from .._inference._blocks import (
    StateLayout,
    Workspace,
    block_marginals,
    blocks_of,
    deal_blocks,
    expected_states,
    gather_rows,
    has_dense_row,
    masked_block_marginals,
    score_arrays,
)
from .._inference._constraints import Constraints
from .._model import ConditionedTransitions, CRFModel, kept_state_ptr
from .._utils._threads import single_blas_thread


def select_features(
    encoded,
    labels,
    classes,
    attributes,
    *,
    all_possible_states=False,
    all_possible_transitions=False,
    min_freq=0.0,
    value_separator=":",
    partial=None,
    token_weights=None,
    transition_attributes=None,
    all_possible_conditioned_transitions=False,
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
    encoded : Encoded
        Token features of the training data (CSR rows, flat order).
    labels : ndarray of int, shape (n_tokens,)
        Label index of each token.
    classes : ndarray of object
    attributes : list of str
    partial : PartialLabels or None
        Partially labelled data (:func:`skcrf._featurize._labels.check_partial_training_labels`;
        ``labels`` is then -1 where a label is unknown or fuzzy). Features
        are decided from the known labels only: a state feature exists when
        a token with that *known* label holds the attribute, a transition
        when two consecutive known labels form the pair (``min_freq``
        applies to those sums); ``all_possible_states`` /
        ``all_possible_transitions`` add every pair, so that the unknown
        tokens' attributes get weights for every label. The observed counts
        are those of the fully labelled sequences only (the others enter
        the objective through their constrained expectations).
    token_weights : ndarray of float64, shape (n_tokens,), or None
        The weight of each token (weighted training): the observed counts
        are then weighted sums (a transition's count takes the weight of the
        token it leads to). Which features exist and ``min_freq`` do not
        depend on the weights (sequences of weight 0 are left out by the
        caller).
    transition_attributes : list of str or None
        The names of ``encoded.transitions``' attributes (input-conditioned
        transitions; see :func:`select_conditioned`).
    all_possible_conditioned_transitions : bool
        See :func:`select_conditioned`.

    Returns
    -------
    model : CRFModel
        The features, with zero weights.
    observed : ndarray of float64, shape (n_features,)
        Value sum of each feature over the training data (the observed
        counts), in the flat parameter order.
    """
    if partial is not None or token_weights is not None:
        encoded = expand_dense(encoded)  # vectors as CSR entries on this path
    if partial is not None:
        return _select_partial_features(
            encoded,
            labels,
            classes,
            attributes,
            partial,
            all_possible_states=all_possible_states,
            all_possible_transitions=all_possible_transitions,
            min_freq=min_freq,
            value_separator=value_separator,
            token_weights=token_weights,
        )
    n_labels = len(classes)
    labels = np.asarray(labels, dtype=np.intp)
    state_ptr, state_labels, state_sum = _kernels.state_feature_sums(
        encoded.indptr,
        encoded.ids,
        encoded.values,
        labels,
        len(attributes),
        n_labels,
        all_possible_states,
    )
    state_observed = state_sum
    if token_weights is not None:
        state_observed = _weighted_state_sums(
            encoded, labels, token_weights, len(attributes), n_labels, all_possible_states
        )
    kept = state_sum >= min_freq
    if not kept.all():
        state_ptr = kept_state_ptr(state_ptr, kept)
        state_labels, state_sum = state_labels[kept], state_sum[kept]
        state_observed = state_observed[kept]
    if getattr(encoded, "dense", None) is not None:
        # vector features (a dense block): the same rules, by matrix products
        state_ptr, state_labels, state_sum = select_vector_features(
            encoded.dense,
            labels,
            n_labels,
            state_ptr,
            state_labels,
            state_sum,
            all_possible_states=all_possible_states,
            min_freq=min_freq,
        )
        state_observed = state_sum
    follows = _following_tokens(encoded.lengths, len(labels))
    transition_sum = np.zeros(n_labels * n_labels)
    pair = labels[follows - 1] * n_labels + labels[follows]
    np.add.at(transition_sum, pair, 1.0)
    transition_observed = transition_sum
    if token_weights is not None:
        transition_observed = np.bincount(
            pair, weights=np.asarray(token_weights)[follows], minlength=n_labels * n_labels
        )
    model = _unfitted_model(
        classes,
        attributes,
        value_separator,
        state_ptr,
        state_labels,
        transition_sum,
        all_possible_transitions=all_possible_transitions,
        min_freq=min_freq,
    )
    observed = np.concatenate([state_observed, transition_observed[model.transition_index]])
    if getattr(encoded, "transitions", None) is not None:
        model.conditioned, conditioned_observed = select_conditioned(
            encoded.transitions,
            labels,
            n_labels,
            transition_attributes,
            all_pairs=all_possible_conditioned_transitions,
            min_freq=min_freq,
            token_weights=token_weights,
        )
        observed = np.concatenate([observed, conditioned_observed])
    return model, observed


def select_conditioned(
    transitions, labels, n_labels, attributes, *, all_pairs=False, min_freq=0.0, token_weights=None
):
    """The input-conditioned transition features and their observed counts.

    A feature (transition attribute, label pair) exists when the attribute
    is stored for a token whose previous token and itself have that pair of
    labels (every pair, for each attribute stored for some token, with
    ``all_pairs``), and is kept when its value sum is at least ``min_freq``:
    :func:`select_features`' rules for state features, with the pair in the
    label's place. Observed counts are value sums (times the token's weight
    with ``token_weights``).

    Parameters
    ----------
    transitions : Encoded
        Each token's transition attributes (none at a sequence's first token).
    labels : ndarray of int, shape (n_tokens,)
    n_labels : int
    attributes : list of str

    Returns
    -------
    ConditionedTransitions, ndarray
        The features (zero weights) and their observed counts.
    """
    n_pairs = n_labels * n_labels
    labels = np.asarray(labels, dtype=np.int64)
    counts = np.diff(transitions.indptr)
    rows = np.repeat(np.arange(len(labels)), counts)
    if len(rows) and (np.isin(rows, np.cumsum(transitions.lengths) - transitions.lengths)).any():
        raise ValueError("transition attributes at a sequence's first token")
    ids = transitions.ids.astype(np.int64)
    values = np.asarray(transitions.values, dtype=np.float64)
    keys = ids * n_pairs + labels[rows - 1] * n_labels + labels[rows]
    keys, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=values, minlength=len(keys))
    observed = sums
    if token_weights is not None:
        weighted = values * np.asarray(token_weights, dtype=np.float64)[rows]
        observed = np.bincount(inverse, weights=weighted, minlength=len(keys))
    if all_pairs:
        present = np.unique(ids)
        every = (present[:, None] * n_pairs + np.arange(n_pairs)).ravel()
        position = np.searchsorted(keys, every)
        found = position < len(keys)
        found[found] = keys[position[found]] == every[found]
        every_sums = np.zeros(len(every))
        every_observed = np.zeros(len(every))
        every_sums[found] = sums[position[found]]
        every_observed[found] = observed[position[found]]
        keys, sums, observed = every, every_sums, every_observed
    kept = sums >= min_freq
    keys, observed = keys[kept], observed[kept]
    attribute, pairs = np.divmod(keys, n_pairs)
    ptr = np.zeros(len(attributes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(attribute, minlength=len(attributes)), out=ptr[1:])
    conditioned = ConditionedTransitions(
        attributes=list(attributes),
        ptr=ptr,
        pairs=pairs.astype(np.int32),
        weights=np.zeros(len(pairs)),
    )
    return conditioned, np.ascontiguousarray(observed, dtype=np.float64)


def _weighted_state_sums(encoded, labels, token_weights, n_attributes, n_labels, all_states):
    """Each state feature's value sum with every entry times its token's weight.

    Called with the arguments of the unweighted sums: a pair exists by its
    entries whatever their values, so the arrays line up with those.
    """
    weights = np.repeat(np.asarray(token_weights, dtype=np.float64), np.diff(encoded.indptr))
    return _kernels.state_feature_sums(
        encoded.indptr,
        encoded.ids,
        encoded.values * weights,
        labels,
        n_attributes,
        n_labels,
        all_states,
    )[2]


def _following_tokens(lengths, n_tokens):
    """Positions of the tokens that follow another one in their sequence."""
    lengths = np.asarray(lengths, dtype=np.intp)
    follows = np.ones(n_tokens, dtype=bool)
    follows[(np.cumsum(lengths) - lengths)[lengths > 0]] = False
    return np.flatnonzero(follows)


def _unfitted_model(
    classes,
    attributes,
    value_separator,
    state_ptr,
    state_labels,
    transition_sum,
    *,
    all_possible_transitions,
    min_freq,
):
    """The model of the selected features, weights 0.

    Transitions: every label pair with ``all_possible_transitions``, else
    those seen; either way only those seen ``min_freq`` times or more
    (``transition_sum`` counts them, flat ``from * n_labels + to``).
    """
    if all_possible_transitions:
        transition_exists = np.ones(transition_sum.size, dtype=bool)
    else:
        transition_exists = transition_sum > 0
    transition_index = np.flatnonzero(transition_exists & (transition_sum >= min_freq))
    return CRFModel(
        classes=classes,
        attributes=attributes,
        state_ptr=state_ptr,
        state_labels=state_labels,
        state_weights=np.zeros(len(state_labels)),
        transition_index=transition_index.astype(np.int64),
        transition_weights=np.zeros(len(transition_index)),
        value_separator=value_separator,
    )


def _select_partial_features(
    encoded,
    labels,
    classes,
    attributes,
    partial,
    *,
    all_possible_states,
    all_possible_transitions,
    min_freq,
    value_separator,
    token_weights=None,
):
    """:func:`select_features` of partially labelled data (see there)."""
    n_labels = len(classes)
    labels = np.asarray(labels, dtype=np.intp)
    lengths = np.asarray(encoded.lengths, dtype=np.intp)
    known = np.flatnonzero(labels >= 0)
    indptr, ids, values = gather_rows(encoded.indptr, encoded.ids, encoded.values, known)
    state_ptr, state_labels, state_sum = _kernels.state_feature_sums(
        indptr,
        ids,
        values,
        labels[known],
        len(attributes),
        n_labels,
        all_possible_states,
    )
    kept = state_sum >= min_freq
    if not kept.all():
        state_ptr = kept_state_ptr(state_ptr, kept)
        state_labels, state_sum = state_labels[kept], state_sum[kept]

    # observed counts: the fully labelled sequences only
    complete_rows = np.flatnonzero(np.repeat(partial.complete, lengths))
    indptr, ids, values = gather_rows(encoded.indptr, encoded.ids, encoded.values, complete_rows)
    if token_weights is not None:
        values = values * np.repeat(np.asarray(token_weights)[complete_rows], np.diff(indptr))
    c_ptr, c_labels, c_sum = _kernels.state_feature_sums(
        indptr,
        ids,
        values,
        labels[complete_rows],
        len(attributes),
        n_labels,
        False,
    )
    keys = np.repeat(np.arange(len(attributes), dtype=np.int64), np.diff(state_ptr))
    keys = keys * n_labels + state_labels
    c_keys = np.repeat(np.arange(len(attributes), dtype=np.int64), np.diff(c_ptr))
    c_keys = c_keys * n_labels + c_labels
    position = np.searchsorted(keys, c_keys)
    found = position < len(keys)
    found[found] = keys[position[found]] == c_keys[found]
    state_observed = np.zeros(len(keys))
    state_observed[position[found]] = c_sum[found]

    follows = _following_tokens(lengths, len(labels))
    both = follows[(labels[follows - 1] >= 0) & (labels[follows] >= 0)]
    pair = labels[both - 1] * n_labels + labels[both]
    transition_sum = np.bincount(pair, minlength=n_labels * n_labels).astype(np.float64)
    complete_token = np.repeat(partial.complete, lengths)
    observed_pairs = pair[complete_token[both]]
    if token_weights is None:
        transition_observed = np.bincount(observed_pairs, minlength=n_labels * n_labels).astype(
            np.float64
        )
    else:
        transition_observed = np.bincount(
            observed_pairs,
            weights=np.asarray(token_weights)[both[complete_token[both]]],
            minlength=n_labels * n_labels,
        )
    model = _unfitted_model(
        classes,
        attributes,
        value_separator,
        state_ptr,
        state_labels,
        transition_sum,
        all_possible_transitions=all_possible_transitions,
        min_freq=min_freq,
    )
    observed = np.concatenate([state_observed, transition_observed[model.transition_index]])
    return model, observed


def drop_zeros(encoded):
    """Remove the explicit zeros of ``encoded``'s CSR rows in place; returns it.

    For a caller that owns ``encoded`` (nothing else refers to its arrays)
    and has selected the features: explicit zeros count as occurrences
    there, but the objective never reads them (its blocks drop them). The
    kept entries move to the front and the arrays are trimmed, which returns
    the memory of the zeros before the blocks copy the rows. Arrays that do
    not own their memory are left as they are.
    """
    ids, values = encoded.ids, encoded.values
    if not (
        ids.flags.owndata
        and values.flags.owndata
        and encoded.indptr.flags.writeable
        and ids.flags.c_contiguous
        and values.flags.c_contiguous
        and encoded.indptr.flags.c_contiguous
    ):
        return encoded
    kept = _kernels.drop_zeros_in_place(encoded.indptr, ids, values)
    if kept < len(ids):
        ids.resize(kept, refcheck=False)
        values.resize(kept, refcheck=False)
    return encoded


#: Entries per step of :func:`_add_scaled` and of the counts of
#: :class:`FrequencyOrder` (their temporaries: 512 kB).
_CHUNK = 1 << 16
# Vectors at least this long are shared out among the threads (CRFObjective._by_parts).
_MIN_PARTS_SIZE = 1 << 16


class FrequencyOrder:
    """The objective's own numbering of attributes: dense rows first, then most frequent first.

    The attributes that :class:`StateLayout` reads as dense rows come first
    (the kernels then tell them by their number: ``StateLayout.dense_first``),
    the others by decreasing frequency in ``encoded`` (the frequent ones
    share cache lines); ties keep the model order.

    When every attribute has a feature for every label, in label order
    (``all_possible_states``), every attribute is a dense row and the model's
    order is kept (``identity``): whole rows of ``n_labels`` weights fill
    cache lines in any order (measured: the same evaluation time), and the
    objective then reads the weights and sums the counts where they lie in
    the model's vectors, with no copy in another order (fit memory: a copy
    of the weights and two int32 arrays of the features' length less).

    Parameters
    ----------
    encoded : Encoded
        Token features of the training data.
    state_ptr, state_labels : ndarray
        The model's state features (CSR by attribute, model order).
    n_labels : int

    Attributes
    ----------
    identity : bool
        Whether the order is the model's.
    rank : ndarray of int32, shape (n_attributes,)
        The internal number of each attribute.
    state_ptr, state_labels : ndarray
        The state features in the internal order (each attribute's features
        keep their relative order); the model's own arrays when ``identity``.
    features : ndarray of int32, shape (n_states,), or None
        The model position of each internal state feature: the internal
        weights are ``w[features]`` (:func:`~skcrf._inference._kernels.take`),
        and internal counts ``e`` go back by ``g[features] = e``. None when
        ``identity``.
    """

    def __init__(self, encoded, state_ptr, state_labels, n_labels):
        n_attributes = len(state_ptr) - 1
        self.identity = _every_label(state_ptr, state_labels, n_labels)
        if self.identity:
            self.rank = np.arange(n_attributes, dtype=np.int32)
            self.state_ptr = np.asarray(state_ptr, dtype=np.int64)
            self.state_labels = np.ascontiguousarray(state_labels, dtype=np.int32)
            self.features = None
            return
        counts = np.zeros(n_attributes, dtype=np.int64)
        for start in range(0, len(encoded.ids), _CHUNK):  # no intp copy of every id
            counts += np.bincount(encoded.ids[start : start + _CHUNK], minlength=n_attributes)
        sparse = ~has_dense_row(state_ptr, n_labels)
        order = np.lexsort((-counts, sparse))  # internal -> model attribute (stable)
        self.rank = np.empty(n_attributes, dtype=np.int32)
        self.rank[order] = np.arange(n_attributes, dtype=np.int32)
        sizes = np.diff(state_ptr)[order]
        self.state_ptr = np.zeros(n_attributes + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.state_ptr[1:])
        features = np.repeat(state_ptr[:-1][order] - self.state_ptr[:-1], sizes)
        features += np.arange(len(features))
        self.features = features.astype(np.int32)  # n_states < 2**31 (int32 labels)
        self.state_labels = np.ascontiguousarray(state_labels[self.features], dtype=np.int32)

    def renumber(self, blocks):
        """Rewrite the blocks' attribute ids (their own arrays) in the internal order."""
        if self.identity:
            return
        for block in blocks:
            np.take(self.rank, block.ids, out=block.ids)


class _Shard:
    """The sequences one thread evaluates: blocks, buffers and accumulators.

    With ``partial`` (a :class:`~skcrf._featurize._labels.PartialLabels`), the
    shard's partially labelled sequences get blocks of their own, evaluated
    twice (free, then with their label masks), and the sequences with no
    label at all are left out.
    """

    def __init__(
        self,
        encoded,
        groups,
        layout,
        order,
        partial=None,
        partial_groups=(),
        own_expected=True,
        token_weights=None,
        labels=None,
        n_conditioned=0,
    ):
        n_labels = layout.n_labels
        # expected counts of the input-conditioned transition features
        self.conditioned_expected = np.empty(n_conditioned) if n_conditioned else None
        self.constraints = None
        if partial is not None:
            self.constraints = Constraints(
                n_labels, None, partial.token_index, partial.token_masks
            )
        self.partial_blocks = blocks_of(
            encoded, partial_groups, drop_zeros=True, unit_values=True, token_weights=token_weights
        )
        self.blocks = blocks_of(
            encoded,
            groups,
            drop_zeros=True,
            unit_values=True,
            token_weights=token_weights,
            labels=labels,
        )
        order.renumber(self.blocks + self.partial_blocks)
        for block in self.blocks + self.partial_blocks:
            block.put_dense_first(layout.dense_row)
            block.pack_features(layout)
        self.workspace = Workspace(self.blocks + self.partial_blocks, n_labels)
        dense = getattr(encoded, "dense", None)
        # marginals summed per distinct vector row
        self.vector_expected = None if dense is None else np.empty((len(dense.values), n_labels))
        # the expected state counts (None: the caller gives the buffer); the
        # dense rows' counts go to a buffer of their own, or where they lie
        # in the counts when the rows are complete (no buffer: fit memory)
        self.expected = np.empty(len(layout.state_labels)) if own_expected else None
        self.dense_expected = _dense_buffer(layout)
        self.pairs = np.empty((n_labels, n_labels))
        if self.partial_blocks:
            self.c_expected = np.empty(len(layout.state_labels))
            self.c_dense_expected = _dense_buffer(layout)
            self.c_pairs = np.empty((n_labels, n_labels))

    def evaluate(self, arrays, expected=None):
        """Log Z summed over the shard; expected counts into the accumulators.

        ``expected``: where the expected state counts go (overwritten), if
        not into the shard's own buffer.
        """
        layout = arrays.layout
        if expected is None:
            expected = self.expected
        dense_expected = _dense_rows(layout, expected, self.dense_expected)
        expected[:] = 0.0
        dense_expected[:] = 0.0
        self.pairs[:] = 0.0
        if self.vector_expected is not None:
            self.vector_expected[:] = 0.0
        if self.conditioned_expected is not None:
            self.conditioned_expected[:] = 0.0
        log_z = 0.0
        for block in self.blocks:
            marginals, block_log_z = block_marginals(
                block,
                self.workspace,
                arrays,
                self.pairs,
                want_conditioned=self.conditioned_expected,
            )
            log_z += block_log_z
            expected_states(block, marginals, layout, expected, dense_expected)
            if self.vector_expected is not None:
                _kernels.scatter_rows(
                    np.ascontiguousarray(marginals), block.vector_rows, self.vector_expected
                )
        if self.partial_blocks:
            log_z += self._evaluate_partial(arrays, expected, dense_expected)
        layout.gather(dense_expected, expected)
        return log_z

    def _evaluate_partial(self, arrays, expected, dense_expected):
        """Log Z - log Z_c of the partial sequences; E_p - E_pc into the accumulators."""
        layout = arrays.layout
        c_dense_expected = _dense_rows(layout, self.c_expected, self.c_dense_expected)
        self.c_expected[:] = 0.0
        c_dense_expected[:] = 0.0
        self.c_pairs[:] = 0.0
        log_z = 0.0
        for block in self.partial_blocks:
            marginals, block_log_z = block_marginals(block, self.workspace, arrays, self.pairs)
            log_z += block_log_z
            expected_states(block, marginals, layout, expected, dense_expected)
            marginals, block_log_z_c = masked_block_marginals(
                block,
                self.workspace,
                arrays,
                self.constraints.emission_masks(block),
                self.c_pairs,
            )
            log_z -= float(block_log_z_c.sum())
            expected_states(
                block,
                np.ascontiguousarray(marginals),
                layout,
                self.c_expected,
                c_dense_expected,
            )
        expected -= self.c_expected  # the dense rows too, where they lie in it
        if self.c_dense_expected is not None:
            dense_expected -= self.c_dense_expected
        self.pairs -= self.c_pairs
        return log_z


class ObservedCounts:
    """The observed counts of the features, as a vector or by their nonzero entries.

    With every attribute x label pair a feature (``all_possible_states``)
    most counts are 0: the nonzero ones (index, value) then take a fraction
    of the vector's memory, which the fit's peak would otherwise hold. The
    gradient's bits are the same either way (subtracting a 0 changes no
    float); the loss's ``w . observed`` sums in another order.

    Parameters
    ----------
    observed : ndarray of float64, shape (n_features,)
        Not kept when the nonzero entries are (the caller may free it).
    """

    def __init__(self, observed):
        observed = np.asarray(observed, dtype=np.float64)
        # -0.0 kept too: g - (-0.0) is not g when g is -0.0
        nonzero = np.flatnonzero((observed != 0.0) | np.signbit(observed))
        index_dtype = np.int32 if len(observed) < 2**31 else np.int64
        if len(nonzero) * (8 + index_dtype().itemsize) * _SPARSE_OBSERVED < observed.nbytes:
            self.dense = None
            self.index = nonzero.astype(index_dtype)
            self.values = observed[nonzero]
        else:
            self.dense = observed

    def dot(self, w):
        """``w . observed``."""
        if self.dense is not None:
            return float(w @ self.dense)
        return float(self.values @ w[self.index])

    def subtract_from(self, gradient, lo, hi):
        """``gradient[lo:hi] -= observed[lo:hi]``."""
        if self.dense is not None:
            gradient[lo:hi] -= self.dense[lo:hi]
            return
        start, stop = np.searchsorted(self.index, (lo, hi))
        gradient[self.index[start:stop]] -= self.values[start:stop]


#: The observed counts are kept by their nonzero entries when these take less
#: than 1 / _SPARSE_OBSERVED of the vector's memory.
_SPARSE_OBSERVED = 2


def _deal(lengths, n_labels, partial, n_threads):
    """The blocks' sequences of each shard: fully labelled, partially labelled.

    Never fewer than two shards (unless there is one block): a one-thread
    fit evaluates the two shards of a two-thread fit in turn, on the same
    blocks, so both sum the same terms in the same order.
    """
    n_shards = max(n_threads, 2)
    sequences = np.arange(len(lengths))
    if partial is None:
        return deal_blocks(lengths, sequences, n_labels, n_shards), []
    # sequences with no known label at all are left out
    groups = deal_blocks(lengths, sequences[partial.complete], n_labels, n_shards)
    partial_groups = deal_blocks(lengths, partial.sequences, n_labels, n_shards)
    n_shards = max(len(groups), len(partial_groups))
    return [
        [kind[k] if k < len(kind) else [] for k in range(n_shards)]
        for kind in (groups, partial_groups)
    ]


def _every_label(state_ptr, state_labels, n_labels):
    """Whether every attribute has a feature for every label, in label order."""
    n_attributes = len(state_ptr) - 1
    if n_labels == 0 or len(state_labels) != n_attributes * n_labels:
        return False
    if not (np.diff(state_ptr) == n_labels).all():
        return False
    return bool((state_labels.reshape(n_attributes, n_labels) == np.arange(n_labels)).all())


def _dense_buffer(layout):
    """A buffer for the dense rows' counts, or None where they lie in the counts."""
    return None if layout.complete else np.empty((layout.n_dense, layout.n_labels))


def _dense_rows(layout, expected, buffer):
    """Where the dense rows' counts of ``expected`` are summed."""
    rows = layout.dense_rows_of(expected)
    return buffer if rows is None else rows


def _add_scaled(out, scale, x):
    """``out += scale * x`` in steps, without a temporary the size of ``x``."""
    for start in range(0, len(x), _CHUNK):
        out[start : start + _CHUNK] += scale * x[start : start + _CHUNK]


class CRFObjective:
    """Negative log-likelihood of a training set, with its gradient.

    Built once per fit; use it as a context manager (its threads, and BLAS
    kept to one thread inside them, last as long as the block).

    Parameters
    ----------
    encoded : Encoded
        Token features of the training data (CSR rows, flat order).
    model : CRFModel
        The features (their weights are ignored).
    observed : ndarray of shape (n_features,)
        Observed counts, from :func:`select_features`.
    c2 : float
        L2 coefficient: adds ``c2 * ||w||^2``.
    n_threads : int
        Threads that evaluate the shards (at least two shards; 1 and 2
        give the same bits, see the module docstring).
    partial : PartialLabels or None
        Partially labelled sequences (see the module docstring); None: every
        label is known.
    token_weights : ndarray of shape (n_tokens,) or None
        The weight of each token (flat order): the weighted objective of the
        module docstring (``observed`` must be the matching weighted counts
        of :func:`select_features`); None: every weight 1, today's path.
        Constant over each partially labelled sequence.
    labels : ndarray of int, shape (n_tokens,), or None
        The gold labels: needed where ``token_weights`` vary within a
        sequence.
    """

    def __init__(
        self,
        encoded,
        model,
        observed,
        *,
        c2=0.0,
        n_threads=1,
        partial=None,
        token_weights=None,
        labels=None,
    ):
        self.model = model
        self._observed = ObservedCounts(observed)
        self.c2 = c2
        self._conditioned = None
        if model.conditioned is not None:
            if partial is not None:
                raise ValueError("partially labelled sequences and conditioned transitions")
            self._conditioned = model.conditioned.arrays()
        if partial is not None or token_weights is not None:
            encoded = expand_dense(encoded)  # vectors as CSR entries on this path
        dense = getattr(encoded, "dense", None)
        self._vectors = None
        if dense is not None:
            # (flat position, column, label) of every vector feature
            self._vectors = vector_feature_index(
                model.state_ptr, model.state_labels, dense.columns
            ) + (dense.values,)
        self._order = FrequencyOrder(encoded, model.state_ptr, model.state_labels, model.n_labels)
        self._layout = StateLayout(self._order.state_ptr, self._order.state_labels, model.n_labels)
        # the weights in the internal order (none when it is the model's)
        self._state_weights = None if self._order.identity else np.empty(model.n_states)
        shard_groups, partial_groups = _deal(encoded.lengths, model.n_labels, partial, n_threads)
        self._shards = [
            _Shard(
                encoded,
                groups,
                self._layout,
                self._order,
                partial,
                partial_groups[k] if partial_groups else (),
                own_expected=k > 0,
                token_weights=token_weights,
                labels=labels,
                n_conditioned=model.n_conditioned,
            )
            for k, groups in enumerate(shard_groups)
        ]
        self._n_threads = n_threads
        self._pool = None
        self._blas = None

    @property
    def n_parameters(self):
        return self.model.n_features

    def _by_parts(self, work, n):
        """``work(start, stop)`` over contiguous parts of ``range(n)``, one per thread.

        For element-wise passes over the parameters (the same bits on any
        number of parts); a vector of fewer than ``_MIN_PARTS_SIZE`` is one part.
        """
        parts = len(self._shards) if self._pool is not None and n >= _MIN_PARTS_SIZE else 1
        if parts == 1:
            work(0, n)
            return
        bounds = [n * k // parts for k in range(parts + 1)]
        list(self._pool.map(work, bounds[:-1], bounds[1:]))

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
        model = self.model
        w = np.ascontiguousarray(w, dtype=np.float64)
        n_states = model.n_states
        n_base = n_states + len(model.transition_index)
        order, internal, features = self._order, self._state_weights, self._order.features
        source = w[:n_states]
        if not order.identity:  # (else the kernels read the weights where they lie)
            self._by_parts(
                lambda lo, hi: _kernels.take(source, features[lo:hi], internal[lo:hi]), n_states
            )
        arrays = score_arrays(
            self._layout,
            source if order.identity else internal,
            model.transition_matrix(w[n_states:n_base]),
        )
        if self._conditioned is not None:
            ptr, pairs, _ = self._conditioned
            arrays = arrays._replace(conditioned=(ptr, pairs, w[n_base:]))
        if self._vectors is not None:
            position, column, label, table = self._vectors
            vector_weights = np.zeros((table.shape[1], model.n_labels))
            vector_weights[column, label] = w[position]
            scores = np.zeros((len(table), model.n_labels))
            _kernels.add_vector_scores(table, vector_weights, scores)  # U @ W
            arrays = arrays._replace(vector_scores=scores)

        gradient = np.empty(model.n_features)
        # the first shard's counts, then the sum (in the internal order)
        expected = gradient[:n_states]

        def evaluate(shard):
            # A line search's trial point may overflow: the optimizer sees the
            # non-finite loss and backs off, so numpy's warnings are noise. The
            # error state is per thread, hence set here, in the worker.
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return shard.evaluate(arrays, None if shard.expected is not None else expected)

        if self._pool is None or len(self._shards) == 1:
            log_z = [evaluate(shard) for shard in self._shards]
        else:
            log_z = list(self._pool.map(evaluate, self._shards))

        def sum_shards(lo, hi):
            # (into the internal weights' buffer when the order is not the
            # model's: the first sum writes there, no copy after it)
            total = expected[lo:hi] if order.identity else internal[lo:hi]
            others = [shard.expected[lo:hi] for shard in self._shards[1:]]
            with np.errstate(over="ignore", invalid="ignore"):
                if others:
                    np.add(expected[lo:hi], others[0], out=total)
                elif not order.identity:
                    np.copyto(total, expected[lo:hi])
                for counts in others[1:]:
                    total += counts

        def finish(lo, hi):
            with np.errstate(over="ignore", invalid="ignore"):
                self._observed.subtract_from(gradient, lo, hi)
                if self.c2:
                    _add_scaled(gradient[lo:hi], 2.0 * self.c2, w[lo:hi])

        with np.errstate(over="ignore", invalid="ignore"):
            pairs = self._shards[0].pairs.copy()
            for shard in self._shards[1:]:
                pairs += shard.pairs
            # back to the model's order through the internal weights' buffer,
            # unread until the next evaluation refills it (no buffer of its own:
            # fit memory); each thread copies its part, then puts it back
            self._by_parts(sum_shards, n_states)
            if not order.identity:
                self._by_parts(
                    lambda lo, hi: _kernels.put(internal[lo:hi], features[lo:hi], expected),
                    n_states,
                )
            gradient[n_states:n_base] = pairs.ravel()[model.transition_index]
            if self._conditioned is not None:
                conditioned = gradient[n_base:]
                conditioned[:] = self._shards[0].conditioned_expected
                for shard in self._shards[1:]:
                    conditioned += shard.conditioned_expected
            if self._vectors is not None:
                position, column, label, table = self._vectors
                row_marginals = self._shards[0].vector_expected.copy()
                for shard in self._shards[1:]:
                    row_marginals += shard.vector_expected
                vector_expected = np.zeros((table.shape[1], model.n_labels))
                _kernels.add_vector_expected(table, row_marginals, vector_expected)  # U.T @ M
                gradient[position] = vector_expected[column, label]
            loss = sum(log_z) - self._observed.dot(w)
            if self.c2:
                loss += self.c2 * (w @ w)
            self._by_parts(finish, len(gradient))
        return float(loss), gradient

    def __enter__(self):
        self._blas = single_blas_thread()
        self._blas.__enter__()
        if self._n_threads > 1 and len(self._shards) > 1:
            self._pool = ThreadPoolExecutor(len(self._shards))
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        """Stop the worker threads and release the BLAS limit."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._blas is not None:
            self._blas.__exit__(None, None, None)
            self._blas = None
