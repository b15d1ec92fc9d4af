"""Blocks of sequences in the packed layout, and their forward-backward.

Training and decoding both cut a batch of sequences into blocks of similar
length (sorted longest first, at most :data:`BLOCK_ELEMENTS` tokens x labels
per block, or one sequence), each held in the packed time-major layout of
:mod:`skcrf._utils._packing` with its token features as CSR rows. Buffers are sized
by a block (a :class:`Workspace` per thread), never by the whole data.
"""

from typing import NamedTuple

import numpy as np

from .._utils._packing import pack, sequence_rows
from . import _conditioned, _kernels
from ._logspace import _forward_backward_log
from ._logspace import forward_backward as _forward_backward_numpy

#: Upper bound on tokens x labels of one block (unless one sequence is longer).
BLOCK_ELEMENTS = 1 << 16

#: Largest transition spread (max - min, in nats) of the scaled
#: forward-backward: its scale factors stay above exp(-spread) / L and its
#: weighted rows below L * exp(2 * spread). Wider spreads, seen only at
#: extreme trial points of a line search, take the log-domain path.
MAX_TRANSITION_SPREAD = 300.0


class Block:
    """Sequences of similar length in the packed layout, with their features.

    With ``unit_values`` a block whose values are all 1 keeps none
    (``values`` is None): the kernels read 1, and the block's features take
    a third of the memory (4 bytes of id instead of 12 with the value).
    """

    def __init__(
        self, encoded, sequences, drop_zeros, unit_values=False, token_weights=None, labels=None
    ):
        lengths = np.asarray(encoded.lengths)
        layout = pack(lengths[sequences])
        rows = sequence_rows(lengths, sequences)[layout.flat_index]
        self.indptr, self.ids, self.values = gather_rows(
            encoded.indptr, encoded.ids, encoded.values, rows, drop_zeros=drop_zeros
        )
        if unit_values and (self.values == 1.0).all():
            self.values = None
        # input-conditioned transitions: the rows' transition attributes
        self.t_indptr = self.t_ids = self.t_values = None
        transitions = getattr(encoded, "transitions", None)
        if transitions is not None:
            self.t_indptr, self.t_ids, self.t_values = gather_rows(
                transitions.indptr, transitions.ids, transitions.values, rows, drop_zeros=True
            )
        self.batch_sizes = layout.batch_sizes
        # weighted training: each row's weight c, the backward pass's v, and
        # (weights that vary within a sequence) the gold labels and c's steps
        self.token_weights = self.row_weights = self.weight_steps = self.gold = None
        if token_weights is not None:
            self.token_weights, self.row_weights, steps = _row_weights(
                np.asarray(token_weights, dtype=np.float64)[rows], self.batch_sizes
            )
            if steps.any():
                if labels is None or (np.asarray(labels)[rows] < 0).any():
                    raise ValueError("token weights that vary within a sequence need its labels")
                self.weight_steps = steps
                self.gold = np.asarray(labels, dtype=np.intp)[rows]
        self.n_rows = len(rows)
        self.n_sequences = int(np.count_nonzero(lengths[sequences]))
        self.rows = rows
        # vector features (Encoded.dense): this block's rows of the dense block
        dense = getattr(encoded, "dense", None)
        self.vector_rows = None if dense is None else np.ascontiguousarray(dense.row_index[rows])
        # the sequence of each packed column (empty sequences own none)
        self.sequences = np.asarray(sequences)[layout.order[: self.n_sequences]]
        self._columns = None
        self.packed = False  # ids are attribute ids (see pack_features)

    def put_dense_first(self, dense_row):
        """Put each row's entries with a dense row first (stably).

        ``dense_row`` is :class:`StateLayout`'s (``dense_row[id] >= 0``: the
        attribute has a dense row). The state kernels add such a leading run
        without choosing, entry by entry, between a dense row and sparse
        features: a branch that rows mixing the two mispredict. The sums are
        the same, added in another order (so not always to the same bits).
        """
        rows = np.repeat(np.arange(len(self.indptr) - 1), np.diff(self.indptr))
        order = np.argsort(2 * rows + (dense_row[self.ids] < 0), kind="stable")
        self.ids = self.ids[order]
        if self.values is not None:
            self.values = self.values[order]

    def pack_features(self, layout):
        """Replace the attribute ids by where their features are in ``layout``.

        Each entry becomes ``count << 24 | start`` (the kernels' packed
        entries, :func:`~skcrf._inference._kernels.pack_entries`): the
        attribute's ``count`` features from ``start`` on in the layout's
        order, or, with ``count`` 0, its dense row ``start``. The state kernels
        then read neither ``state_ptr`` nor ``dense_row``. Done in place (the
        block takes no more memory); entries of attributes without features
        are dropped (they add nothing). For training blocks, whose layout is
        fixed for the fit: the block no longer holds attribute ids.

        Returns False, changing nothing, when an entry cannot hold the
        features (see ``pack_entries``).
        """
        if not self.packed:
            kept = _kernels.pack_entries(
                self.indptr, self.ids, self.values, layout.state_ptr, layout.dense_row
            )
            if kept < 0:
                return False
            if kept < len(self.ids):
                self.ids = self.ids[:kept].copy()
                if self.values is not None:
                    self.values = self.values[:kept].copy()
            self.packed = True
        return True

    @property
    def columns(self):
        """The packed column (sequence position in the block) of every row."""
        if self._columns is None:
            batch_sizes = np.asarray(self.batch_sizes)
            starts = np.cumsum(batch_sizes) - batch_sizes
            self._columns = np.arange(self.n_rows) - np.repeat(starts, batch_sizes)
        return self._columns

    @property
    def lengths(self):
        """Tokens of each packed column's sequence."""
        return np.bincount(self.columns, minlength=self.n_sequences)


def _row_weights(c, batch_sizes):
    """A block's row weights: ``c``, ``v = c - c[next row]`` and ``c``'s steps.

    ``c``: one weight per packed row; the steps are ``c[next row] - c`` (0
    at a sequence's last row).

    ``sum_r c[r] (log Z_{1..r} - log Z_{1..r-1})`` over a sequence's rows is
    ``sum_r v[r] log Z_{1..r}`` (``v`` is ``c`` at a sequence's last row):
    the row weights of :func:`skcrf._inference._kernels.forward_backward`,
    which equal ``c`` times the log-likelihood when ``c`` is constant over
    each sequence (the steps are then all 0).
    """
    c = np.ascontiguousarray(c, dtype=np.float64)
    v = c.copy()
    steps = np.zeros_like(c)
    lo = 0
    for t in range(len(batch_sizes) - 1):
        n, n_next = int(batch_sizes[t]), int(batch_sizes[t + 1])
        v[lo : lo + n_next] -= c[lo + n : lo + n + n_next]
        steps[lo : lo + n_next] = c[lo + n : lo + n + n_next] - c[lo : lo + n_next]
        lo += n
    return c, v, steps


def weighted_log_z(c, scale, row_max, t_max, first_rows, columns=None, n_sequences=0):
    """``sum_r c[r] (log Z_{1..r} - log Z_{1..r-1})`` of a block after the scaled pass.

    ``log Z_{1..r} - log Z_{1..r-1}`` is ``log scale[r] + row_max[r]`` plus
    ``t_max`` after a sequence's first row (the shifts of ``psi`` and
    ``exp_trans``); ``first_rows``: how many rows step 0 has. With
    ``columns``, the sums per sequence (packed column order).
    """
    n = len(c)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.log(scale[:n]) + row_max[:n]
    terms[first_rows:] += t_max
    # a row of weight 0 adds nothing, even where its term is not finite
    terms = np.where(c != 0.0, c * terms, 0.0)
    if columns is None:
        return float(terms.sum())
    return np.bincount(columns, weights=terms, minlength=n_sequences)


def _first_rows(block):
    """Rows of a block's first step (0 for a block of empty sequences)."""
    return int(block.batch_sizes[0]) if len(block.batch_sizes) else 0


def gather_rows(indptr, ids, values, rows, *, drop_zeros=False):
    """CSR arrays of the given rows, in that order (explicit zeros dropped if asked)."""
    starts = indptr[rows]
    counts = indptr[rows + 1] - starts
    new_indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=new_indptr[1:])
    positions = np.repeat(starts - new_indptr[:-1], counts) + np.arange(new_indptr[-1])
    new_ids, new_values = ids[positions], values[positions]
    if drop_zeros:
        nonzero = new_values != 0
        if not nonzero.all():
            new_ids, new_values = new_ids[nonzero], new_values[nonzero]
            kept = np.zeros(len(nonzero) + 1, dtype=np.int64)
            np.cumsum(nonzero, out=kept[1:])
            new_indptr = kept[new_indptr]
    return new_indptr, np.ascontiguousarray(new_ids), np.ascontiguousarray(new_values)


def _block_bounds(lengths, sequences, n_labels, max_tokens=None):
    """``sequences`` longest first, and the ``(start, stop)`` of each block in them."""
    sequences = np.asarray(sequences)
    sequences = sequences[np.argsort(-lengths[sequences], kind="stable")]
    budget = max(1, BLOCK_ELEMENTS // max(n_labels, 1))
    if max_tokens is not None:
        budget = max(1, min(budget, max_tokens))
    # A block ends where its running token count would pass the budget; the
    # cumulative sum gives every block boundary at once.
    ends = np.cumsum(lengths[sequences])
    bounds, start, base = [], 0, 0
    while start < len(sequences):
        stop = int(np.searchsorted(ends, base + budget, side="right"))
        stop = max(stop, start + 1)
        bounds.append((start, stop))
        base = int(ends[stop - 1])
        start = stop
    return sequences, bounds


def make_blocks(
    encoded,
    sequences,
    n_labels,
    *,
    drop_zeros=False,
    unit_values=False,
    token_weights=None,
    labels=None,
):
    """Cut ``sequences`` (indices) into blocks of similar lengths within the budget.

    ``unit_values``: see :class:`Block`. ``token_weights`` (one per token,
    flat order, or None): the blocks of a weighted objective (see
    :func:`block_marginals`); ``labels`` (flat): the gold labels, needed
    where the weights vary within a sequence.
    """
    sequences, bounds = _block_bounds(np.asarray(encoded.lengths), sequences, n_labels)
    return blocks_of(
        encoded,
        [sequences[start:stop] for start, stop in bounds],
        drop_zeros=drop_zeros,
        unit_values=unit_values,
        token_weights=token_weights,
        labels=labels,
    )


def blocks_of(
    encoded, groups, *, drop_zeros=False, unit_values=False, token_weights=None, labels=None
):
    """A :class:`Block` of each group of sequences (see :func:`make_blocks`)."""
    return [
        Block(encoded, group, drop_zeros, unit_values, token_weights, labels) for group in groups
    ]


def deal_blocks(lengths, sequences, n_labels, n_shards):
    """Cut ``sequences`` as :func:`make_blocks` does; deal the blocks into shards.

    Returns one list per shard: the sequences of each of its blocks, in the
    order of the cut. Blocks hold at most ``1 / n_shards`` of the tokens
    (or one sequence), so there are as many shards as sequences with a
    token allow; beyond that, the cut does not depend on ``n_shards``. Each
    block goes to the shard with the fewest tokens so far (largest blocks
    first): the shards' token counts differ by at most one block's.

    Examples
    --------
    Four sequences, 16,384 labels: blocks of at most 4 tokens (or one sequence).

    >>> shards = deal_blocks([5, 1, 4, 2], range(4), BLOCK_ELEMENTS // 4, 2)
    >>> [[block.tolist() for block in shard] for shard in shards]
    [[[0]], [[2], [3, 1]]]
    """
    lengths = np.asarray(lengths)
    sequences = np.asarray(sequences, dtype=np.intp)
    n_tokens = int(lengths[sequences].sum())
    sequences, bounds = _block_bounds(lengths, sequences, n_labels, -(-n_tokens // n_shards))
    groups = [sequences[start:stop] for start, stop in bounds]
    sizes = np.array([lengths[group].sum() for group in groups], dtype=np.int64)
    n_shards = max(1, min(int(n_shards), len(groups)))
    tokens = np.zeros(n_shards, dtype=np.int64)
    dealt = [[] for _ in range(n_shards)]
    for k in np.argsort(-sizes, kind="stable"):
        shard = int(np.argmin(tokens))
        dealt[shard].append(int(k))
        tokens[shard] += sizes[k]
    return [[groups[k] for k in sorted(ks)] for ks in dealt]


def count_blocks(lengths, n_labels):
    """How many blocks :func:`make_blocks` cuts the sequences with a token into."""
    lengths = np.asarray(lengths)
    return len(_block_bounds(lengths, np.flatnonzero(lengths), n_labels)[1])


class Workspace:
    """Per-thread buffers, sized by the largest block."""

    def __init__(self, blocks, n_labels):
        max_rows = max((block.n_rows for block in blocks), default=0)
        self.psi = np.empty((max_rows, n_labels))
        self.alpha = np.empty((max_rows, n_labels))
        self.scale = np.empty(max_rows)
        self.row_max = np.empty(max_rows)
        self.beta = np.empty((max_rows, n_labels))
        self.weighted = np.empty((max_rows, n_labels))


class StateLayout:
    """Which attributes' state weights the kernels read as dense rows.

    Most attributes have features with a few labels and are read sparsely
    (label, weight) pairs; the few frequent ones that have features with a
    good part of the labels carry most of the work, and a contiguous row of
    ``n_labels`` weights is faster for them (the loop vectorizes). The
    weights stay in the model's flat order; :meth:`dense_weights` builds the
    rows for an evaluation and :meth:`gather` reads expected counts back.

    Parameters
    ----------
    state_ptr, state_labels : ndarray
        The state features (CSR by attribute).
    n_labels : int

    Attributes
    ----------
    dense_row : ndarray of int32, shape (n_attributes,)
        The dense row of each attribute, or -1.
    dense_first : bool
        Whether the attributes with a dense row are exactly the first
        ``n_dense`` (as the training objective numbers them): the kernels
        then tell them by their number, without reading ``dense_row``.
    complete : bool
        Whether the dense rows are the first ``n_dense * n_labels`` features,
        every label of each in label order (``all_possible_states``): the
        rows are then views of the weights and of the counts
        (:meth:`dense_weights`, :meth:`dense_rows_of`).
    """

    def __init__(self, state_ptr, state_labels, n_labels):
        self.state_ptr = np.ascontiguousarray(state_ptr, dtype=np.int64)
        self.state_labels = np.ascontiguousarray(state_labels, dtype=np.int32)
        self.n_labels = n_labels
        counts = np.diff(self.state_ptr)
        dense = has_dense_row(self.state_ptr, n_labels)
        self.n_dense = int(np.count_nonzero(dense))
        self.dense_first = bool(dense[: self.n_dense].all())
        self.dense_row = np.full(len(counts), -1, dtype=np.int32)
        self.dense_row[dense] = np.arange(self.n_dense, dtype=np.int32)
        # every label of every dense row, in label order, rows first
        # (all_possible_states): the rows are the first weights themselves
        size = self.n_dense * n_labels
        self.complete = self.dense_first and int(self.state_ptr[self.n_dense]) == size
        if self.complete:
            rows = self.state_labels[:size].reshape(self.n_dense, n_labels)
            self.complete = bool((rows == np.arange(n_labels)).all())
        if self.complete:  # no index arrays the size of the weights (fit memory)
            self.dense_features = self.dense_positions = None
            return
        in_dense = np.repeat(dense, counts)
        self.dense_features = np.flatnonzero(in_dense)
        self.dense_positions = (
            np.repeat(np.arange(self.n_dense, dtype=np.int64) * n_labels, counts[dense])
            + self.state_labels[in_dense]
        )

    def dense_rows_of(self, expected):
        """Where the dense rows' counts go for ``expected`` (flat order).

        A view of ``expected`` when the rows are complete (:meth:`gather`
        then has nothing to do), else None (the caller's own buffer).
        """
        if not self.complete:
            return None
        return expected[: self.n_dense * self.n_labels].reshape(self.n_dense, self.n_labels)

    def dense_weights(self, state_weights):
        """The dense rows, shape (n_dense, n_labels); 0 where no feature exists.

        A read-only view of ``state_weights`` when the rows are complete.
        """
        if self.complete:
            rows = state_weights[: self.n_dense * self.n_labels].view()
            rows.flags.writeable = False
            return rows.reshape(self.n_dense, self.n_labels)
        dense = np.zeros(self.n_dense * self.n_labels)
        dense[self.dense_positions] = state_weights[self.dense_features]
        return dense.reshape(self.n_dense, self.n_labels)

    def gather(self, dense_expected, expected):
        """Copy the dense rows' expected counts into ``expected`` (flat order)."""
        if self.complete:
            rows = expected[: self.n_dense * self.n_labels]
            if not np.may_share_memory(rows, dense_expected):  # (else summed in place)
                rows[:] = dense_expected.ravel()
            return
        expected[self.dense_features] = dense_expected.ravel()[self.dense_positions]


#: An attribute with features for at least 1 / DENSE_DENOMINATOR of the
#: labels is read as a dense row.
DENSE_DENOMINATOR = 2


def has_dense_row(state_ptr, n_labels):
    """Which attributes :class:`StateLayout` reads as dense rows (bool array)."""
    return np.diff(state_ptr) * DENSE_DENOMINATOR >= max(n_labels, 1)


class ScoreArrays(NamedTuple):
    """What the kernels read of a model at one weight vector."""

    layout: StateLayout
    state_weights: np.ndarray
    dense_weights: np.ndarray
    transitions: np.ndarray
    exp_trans: np.ndarray
    t_max: float
    spread: float
    #: State scores of the distinct vector rows (``U @ W``; n_distinct x L), or None.
    vector_scores: np.ndarray = None
    #: Input-conditioned transitions ``(ptr, pairs, weights)``
    #: (:meth:`skcrf._model.ConditionedTransitions.arrays`), or None.
    conditioned: tuple = None


def score_arrays(layout, state_weights, transitions):
    """The :class:`ScoreArrays` of a weight vector (exp of the transitions included)."""
    t_max = float(transitions.max()) if transitions.size else 0.0
    spread = t_max - float(transitions.min()) if transitions.size else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        exp_trans = np.exp(transitions - t_max)
    state_weights = np.ascontiguousarray(state_weights, dtype=np.float64)
    return ScoreArrays(
        layout,
        state_weights,
        layout.dense_weights(state_weights),
        np.ascontiguousarray(transitions),
        exp_trans,
        t_max,
        spread,
    )


def masked_score_arrays(arrays, transitions):
    """``arrays`` with transitions holding ``-inf`` (forbidden pairs).

    The maximum and the spread are those of the allowed (finite) pairs, and
    ``exp_trans`` is 0 at the forbidden ones; the state weights are shared.
    """
    finite = transitions[np.isfinite(transitions)]
    t_max = float(finite.max()) if finite.size else 0.0
    spread = t_max - float(finite.min()) if finite.size else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        exp_trans = np.exp(transitions - t_max)
    return arrays._replace(
        transitions=np.ascontiguousarray(transitions),
        exp_trans=exp_trans,
        t_max=t_max,
        spread=spread,
    )


def state_scores(indptr, ids, values, arrays, out, packed=False):
    """Overwrite ``out`` with the state scores of the CSR rows.

    ``packed``: ``ids`` are packed entries (:meth:`Block.pack_features`).
    """
    layout = arrays.layout
    _kernels.state_scores(
        indptr,
        ids,
        values,
        layout.state_ptr,
        layout.state_labels,
        arrays.state_weights,
        layout.dense_row,
        arrays.dense_weights,
        out,
        dense_first=layout.dense_first,
        packed=packed,
    )


def expected_states(block, marginals, layout, out, dense_out):
    """Add a block's expected state counts under ``marginals`` to the accumulators.

    ``out``: one per state feature, in ``layout``'s order; ``dense_out``: the
    dense rows' (:class:`StateLayout`).
    """
    _kernels.expected_states(
        block.indptr,
        block.ids,
        block.values,
        layout.state_ptr,
        layout.state_labels,
        marginals,
        layout.dense_row,
        out,
        dense_out,
        dense_first=layout.dense_first,
        packed=block.packed,
    )


def block_state_scores(block, arrays, out):
    """Overwrite ``out`` with the state scores of a block's rows.

    The CSR entries, plus the vector features' BLAS product when the block
    has them.
    """
    state_scores(block.indptr, block.ids, block.values, arrays, out, block.packed)
    vector_rows = getattr(block, "vector_rows", None)
    if vector_rows is not None and arrays.vector_scores is not None:
        _kernels.add_rows(arrays.vector_scores, vector_rows, out)


def block_marginals(block, workspace, arrays, want_pairs=None, check=None, want_conditioned=None):
    """Marginals of a block (a view into the workspace) and the block's log Z sum.

    With ``want_pairs`` (an ``(L, L)`` array) the expected label pair counts
    are added to it; ``check(emissions)``, when given, sees the state scores
    first. With input-conditioned transitions (``arrays.conditioned`` and
    the block's transition attributes), each row has its own transition
    matrix (the compiled pass's ``corrections``) and ``want_conditioned``
    (one entry per conditioned feature, or None) receives their expected
    counts.

    A block with token weights (``block.token_weights``, ``c``) gives the
    weighted sum ``sum_r c[r] (log Z_{1..r} - log Z_{1..r-1})`` instead of
    ``log Z`` (``Z_{1..r}``: the partition function of the row's sequence
    cut after the row) and, in place of the marginals and pair counts, that
    sum's derivatives by the state scores and the transitions (see
    :func:`weighted_log_z`). All weights 1 give ``log Z`` and the marginals.
    Beyond :data:`MAX_TRANSITION_SPREAD` a weighted block has no log-domain
    path: its sum is ``inf`` (a line search backs off from such a point).
    """
    n = block.n_rows
    psi = workspace.psi[:n]
    block_state_scores(block, arrays, psi)
    if check is not None:
        check(psi)
    weights = getattr(block, "token_weights", None)
    corrections = deltas = None
    spread = arrays.spread
    if arrays.conditioned is not None and getattr(block, "t_indptr", None) is not None:
        if weights is not None and block.weight_steps is not None:
            raise ValueError("class weights and conditioned transitions")
        deltas = _conditioned.row_deltas(block, arrays.conditioned, psi.shape[1])
        if len(deltas[2]):
            spread += float(np.abs(deltas[2]).max())
        corrections = (deltas[0], deltas[1], np.exp(deltas[2]), np.zeros(len(deltas[2])))
    if weights is not None and not spread <= MAX_TRANSITION_SPREAD:
        return np.zeros((n, psi.shape[1])), float("inf")
    if weights is not None and block.weight_steps is not None:
        return _conditional_marginals(block, workspace, arrays, want_pairs)
    if not spread <= MAX_TRANSITION_SPREAD and deltas is not None:
        return _conditioned_log_marginals(block, psi, arrays, deltas, want_pairs, want_conditioned)
    if not spread <= MAX_TRANSITION_SPREAD:
        result = _forward_backward_numpy(psi, arrays.transitions, block.batch_sizes)
        if want_pairs is not None:
            want_pairs += result.transition_marginals
        return result.marginals, float(result.log_partition.sum())
    row_max = workspace.row_max[:n]
    _kernels.exp_shifted(psi, row_max)
    alpha = workspace.alpha[:n]
    pairs = None
    if want_pairs is not None:
        pairs = np.zeros_like(want_pairs)
    log_sum = _kernels.forward_backward(
        psi,
        arrays.exp_trans,
        block.batch_sizes,
        alpha,
        workspace.scale,
        workspace.beta,
        workspace.weighted,
        pairs,
        None if weights is None else block.row_weights,
        corrections,
    )
    if want_pairs is not None:
        want_pairs += pairs * arrays.exp_trans
    if corrections is not None and want_conditioned is not None:
        _add_conditioned_expected(block, arrays, deltas, corrections[3], want_conditioned)
    if weights is not None:
        log_z = weighted_log_z(weights, workspace.scale, row_max, arrays.t_max, _first_rows(block))
        return alpha, log_z
    log_z = log_sum + float(row_max.sum()) + arrays.t_max * (n - block.n_sequences)
    return alpha, log_z


def _add_conditioned_expected(block, arrays, deltas, entry_marginal, out):
    """Add the block's expected conditioned feature counts to ``out``."""
    ptr, pairs, _ = arrays.conditioned
    _kernels.conditioned_expected(
        block.t_indptr,
        block.t_ids,
        block.t_values,
        ptr,
        pairs,
        deltas[0],
        deltas[1],
        entry_marginal,
        arrays.transitions.shape[0],
        out,
    )


def _conditioned_log_marginals(block, emissions, arrays, deltas, want_pairs, want_conditioned):
    """:func:`block_marginals` with conditioned transitions, in the log domain."""
    row_trans = _conditioned.row_transitions(arrays.transitions, deltas)
    log_z, marginals, pairs = _conditioned.forward_backward_rows(
        emissions, row_trans, block.batch_sizes
    )
    if want_pairs is not None:
        want_pairs += pairs.sum(axis=0)
    if want_conditioned is not None:
        rows = np.repeat(np.arange(block.n_rows), np.diff(deltas[0]))
        entry_marginal = pairs.reshape(block.n_rows, -1)[rows, deltas[1]]
        _add_conditioned_expected(block, arrays, deltas, entry_marginal, want_conditioned)
    return marginals, float(log_z.sum())


def _conditional_marginals(block, workspace, arrays, want_pairs):
    """:func:`block_marginals` of a block whose weights vary within sequences.

    The value is ``sum_t c_t (-log p(y_t | y_{t-1}, x))`` plus the weighted
    gold scores (which the caller's observed counts take back), written as
    ``c_1 log Z + sum_t u_t log beta_t(y_t)`` with ``u_t = c_{t+1} - c_t``
    and ``beta_t`` the backward variables (each suffix's partition function
    given the gold label at ``t``). Its derivatives by the scores come from
    one more forward pass, ``rho``, differentiating the backward recursion:
    ``rho_1 = c_1 alpha_1`` and ``rho_t = ((rho_{t-1} + u_{t-1} e_{y_{t-1}} /
    beta_{t-1}(y_{t-1})) / scale_t) @ exp_trans * psi_t`` (scaled
    variables); ``rho * beta`` takes the place of the marginals and the
    pair sums are those of ``rho + u e_y / beta(y)`` with the backward
    pass's weighted rows. Not finite (an underflow at an extreme point):
    ``inf``, and the line search steps back.
    """
    n, n_labels = block.n_rows, workspace.psi.shape[1]
    psi = workspace.psi[:n]
    row_max = workspace.row_max[:n]
    _kernels.exp_shifted(psi, row_max)
    _kernels.forward_backward(
        psi,
        arrays.exp_trans,
        block.batch_sizes,
        workspace.alpha[:n],
        workspace.scale,
        workspace.beta,
        workspace.weighted,
        None,
    )
    scale, beta, weighted = workspace.scale[:n], workspace.beta[:n], workspace.weighted[:n]
    c, u, gold = block.token_weights, block.weight_steps, block.gold
    batch_sizes = np.asarray(block.batch_sizes)
    starts = np.concatenate([[0], np.cumsum(batch_sizes)])
    first = int(batch_sizes[0])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ell = np.log(scale) + row_max
        ell[first:] += arrays.t_max
        # suffix sums of ell after each row, within its sequence
        after = np.zeros(n)
        for t in range(len(batch_sizes) - 2, -1, -1):
            lo, n_next = starts[t], batch_sizes[t + 1]
            nxt = slice(starts[t + 1], starts[t + 1] + n_next)
            after[lo : lo + n_next] = ell[nxt] + after[nxt]
        beta_gold = beta[np.arange(n), gold]
        restart = np.divide(u, beta_gold, out=np.zeros(n), where=u != 0)
        value = float(c[:first] @ (ell[:first] + after[:first]))
        moving = u != 0
        value += float(u[moving] @ (np.log(beta_gold[moving]) + after[moving]))
        rho = np.empty((n, n_labels))
        rho[:first] = c[:first, None] * psi[:first] / scale[:first, None]
        for t in range(1, len(batch_sizes)):
            lo, size, prev = starts[t], batch_sizes[t], starts[t - 1]
            source = rho[prev : prev + size].copy()
            source[np.arange(size), gold[prev : prev + size]] += restart[prev : prev + size]
            rho[lo : lo + size] = (source @ arrays.exp_trans) * psi[lo : lo + size]
            rho[lo : lo + size] /= scale[lo : lo + size, None]
        if want_pairs is not None:
            source = rho.copy()
            source[np.arange(n), gold] += restart
            want_pairs += (source.T @ weighted) * arrays.exp_trans
        rho *= beta
    if not (np.isfinite(value) and np.isfinite(rho).all()):
        return np.zeros((n, n_labels)), float("inf")
    return rho, value


def masked_block_marginals(block, workspace, arrays, masks, want_pairs=None, check=None):
    """:func:`block_marginals` under constraints, with each sequence's ``log Z``.

    Parameters
    ----------
    block, workspace, arrays
        As :func:`block_marginals`; ``arrays`` may come from
        :func:`masked_score_arrays` (forbidden pairs).
    masks : list of (rows, allowed)
        Block rows and the labels allowed there (a bool array per row, or
        one row broadcast); every row must allow at least one label.
    want_pairs, check
        As :func:`block_marginals`.

    Returns
    -------
    marginals : ndarray of shape (n_rows, n_labels)
        A view into the workspace (the log-domain fallback: a new array).
    log_z : ndarray of shape (n_sequences,)
        ``log`` of the sum over the allowed labellings of each sequence, in
        packed column order; ``-inf`` when a sequence has none. A block with
        token weights gives the weighted sums and their derivatives instead
        (as :func:`block_marginals`), ``-inf`` where the scaled pass fails.
    """
    from ._constraints import apply_log_masks, apply_zero_masks

    if arrays.conditioned is not None and getattr(block, "t_indptr", None) is not None:
        raise ValueError("constrained marginals of conditioned transitions: see _conditioned")
    n = block.n_rows
    psi = workspace.psi[:n]
    block_state_scores(block, arrays, psi)
    if check is not None:
        check(psi)
    apply_log_masks(psi, masks)
    weights = getattr(block, "token_weights", None)
    if arrays.spread <= MAX_TRANSITION_SPREAD:
        row_max = workspace.row_max[:n]
        _kernels.exp_shifted(psi, row_max)
        apply_zero_masks(psi, masks)
        alpha = workspace.alpha[:n]
        pairs = None if want_pairs is None else np.zeros_like(want_pairs)
        _kernels.forward_backward(
            psi,
            arrays.exp_trans,
            block.batch_sizes,
            alpha,
            workspace.scale,
            workspace.beta,
            workspace.weighted,
            pairs,
            None if weights is None else block.row_weights,
        )
        if weights is None:
            log_z = np.bincount(
                block.columns,
                weights=_log(workspace.scale[:n]) + row_max,
                minlength=block.n_sequences,
            ) + arrays.t_max * (block.lengths - 1)
        else:
            log_z = weighted_log_z(
                weights,
                workspace.scale,
                row_max,
                arrays.t_max,
                _first_rows(block),
                block.columns,
                block.n_sequences,
            )
        if np.isfinite(log_z).all():
            if want_pairs is not None:
                want_pairs += pairs * arrays.exp_trans
            return alpha, log_z
    if weights is not None:  # no log-domain path for weighted sums
        return np.zeros((n, psi.shape[1])), np.full(block.n_sequences, -np.inf)
    if arrays.spread <= MAX_TRANSITION_SPREAD:
        # some allowed labellings underflowed (or none exist): the log domain decides
        block_state_scores(block, arrays, psi)
        apply_log_masks(psi, masks)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        result = _forward_backward_log(psi, arrays.transitions, block.batch_sizes)
    if want_pairs is not None:
        want_pairs += np.nan_to_num(result.transition_marginals)
    return result.marginals, result.log_partition


def _log(x):
    """``log(x)``, ``-inf`` at 0 without a warning (a sequence with no allowed labelling)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x)
