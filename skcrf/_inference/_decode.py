"""Decoding a fitted model: Viterbi paths and label marginals.

A :class:`Decoder` holds what decoding reads from a :class:`~skcrf._model.CRFModel`:
its nonzero state weights (CSR by attribute) and its dense transitions. Many
sequences are decoded in blocks of the packed layout (see :mod:`skcrf._inference._blocks`),
dealt to threads when there are enough tokens; one sequence goes straight to
the compiled single-sequence kernels.

Constraints (a :class:`~skcrf._inference._constraints.Constraints`, optional everywhere)
become scores of ``-inf`` / probabilities of 0: Viterbi runs the usual
kernel (exact with ``-inf`` scores; with forbidden pairs it prunes nothing).

A model with input-conditioned transitions (``model.conditioned``) has a
transition matrix per token, the base plus the token's deltas: its Viterbi
is :func:`~skcrf._inference._viterbi.viterbi_conditioned` (the deltas added
to one copy of the base, row by row), its unconstrained marginals the
training's compiled pass; under constraints the marginals take the
log-domain rows of :mod:`skcrf._inference._conditioned`.
"""

from functools import cached_property

import numpy as np

from .._featurize._validation import check_emissions
from .._utils._threads import single_blas_thread, split_sequences, thread_map
from . import _conditioned, _kernels
from ._blocks import (
    StateLayout,
    Workspace,
    block_marginals,
    count_blocks,
    make_blocks,
    masked_block_marginals,
    masked_score_arrays,
    score_arrays,
    state_scores,
)
from ._constraints import NoValidLabelling, apply_log_masks
from ._output import MarginalDicts
from ._viterbi import TransitionPruning, viterbi_conditioned, viterbi_packed

# Below this many tokens per thread, a batch is not worth sharding.
_TOKENS_PER_THREAD = 4000


class Decoder:
    """Viterbi and marginals for one model.

    Parameters
    ----------
    model : CRFModel
    """

    def __init__(self, model):
        ptr, labels, weights, transitions = model.nonzero()
        self._nonzero = ptr, labels, weights
        self.transitions = np.ascontiguousarray(transitions)
        self.n_labels = model.n_labels
        self._single = _kernels.SequenceDecoder(ptr, labels, weights, self.transitions)
        #: ``(ptr, pairs, weights)`` of the conditioned transitions, or None
        self.conditioned = None if model.conditioned is None else model.conditioned.arrays()

    def row_deltas(self, block):
        """``(entry_ptr, entry_pair, delta)``: each row's change of the transitions."""
        if getattr(block, "t_indptr", None) is None:
            no_rows = np.zeros(block.n_rows + 1, dtype=np.int64)
            return no_rows, np.zeros(0, dtype=np.int32), np.zeros(0)
        return _conditioned.row_deltas(block, self.conditioned, self.n_labels)

    def row_transitions(self, block, transitions):
        """Each row's transition scores (conditioned models), shape (n_rows, L, L).

        ``transitions``: the base matrix (the model's, or with forbidden
        pairs at ``-inf``).
        """
        return _conditioned.row_transitions(transitions, self.row_deltas(block))

    def conditioned_marginals(self, block, workspace, arrays, masks, name):
        """Marginals of a block of a conditioned model (under the masks)."""
        if arrays is self.arrays and not masks:
            # unconstrained: the training's compiled pass (each row's matrix
            # as corrections of the base; the log domain beyond its range)
            marginals, _ = block_marginals(
                block, workspace, self._conditioned_arrays, check=_check_finite
            )
            return marginals
        emissions = workspace.psi[: block.n_rows]
        self._emissions(block.indptr, block.ids, block.values, emissions)
        _check_finite(emissions)
        apply_log_masks(emissions, masks)
        row_trans = self.row_transitions(block, arrays.transitions)
        log_z, marginals, _ = _conditioned.forward_backward_rows(
            emissions, row_trans, block.batch_sizes
        )
        if not np.isfinite(log_z).all():
            bad = np.flatnonzero(~np.isfinite(log_z))[0]
            raise NoValidLabelling(int(block.sequences[bad]), name)
        return marginals

    # Built on first use, not when a model is opened (one sentence at a time
    # needs neither). Threads may build one twice: the same value, kept once.
    @cached_property
    def arrays(self):
        """The :class:`ScoreArrays` of the batch kernels."""
        ptr, labels, weights = self._nonzero
        return score_arrays(StateLayout(ptr, labels, self.n_labels), weights, self.transitions)

    @cached_property
    def _conditioned_arrays(self):
        """:attr:`arrays` with the conditioned transitions (the training's layout)."""
        return self.arrays._replace(conditioned=self.conditioned)

    @cached_property
    def _pruning(self):
        # Viterbi's pruning parameters: one O(n_labels ** 2) scan per model,
        # not one per block (a block holds about one sequence with many labels)
        return TransitionPruning(self.arrays.transitions)

    def _emissions(self, indptr, ids, values, out):
        state_scores(indptr, ids, values, self.arrays, out)

    def _run(self, encoded, n_threads, decode_block, out, name, matrix_per_token=True):
        """Apply ``decode_block(block, workspace)`` to every block; rows into ``out``.

        ``matrix_per_token``: whether ``decode_block`` builds a conditioned
        model's transition matrix per token (the blocks are then budgeted as
        tokens x labels ** 2, else tokens x labels).
        """
        lengths = np.asarray(encoded.lengths)
        n_tokens = int(lengths.sum())
        n_threads = min(n_threads, max(1, n_tokens // _TOKENS_PER_THREAD))
        per_token = self.n_labels
        if self.conditioned is not None and matrix_per_token:
            per_token = self.n_labels**2
        if n_threads > 1:  # no more threads than blocks of work
            n_threads = min(n_threads, max(1, count_blocks(lengths, per_token)))

        def run(sequences):
            """False if some token's scores overflowed (the caller says where)."""
            blocks = make_blocks(encoded, sequences, per_token)
            workspace = Workspace(blocks, self.n_labels)
            for block in blocks:
                try:
                    result = decode_block(block, workspace)
                except _NonFinite:
                    return False
                if out is not None:
                    out[block.rows] = result
            return True

        shards = split_sequences(lengths, n_threads)
        with single_blas_thread(), np.errstate(over="ignore", invalid="ignore"):
            finite = thread_map(run, len(shards), shards)
        if not all(finite):
            # the error path: recompute the scores to name the first bad token
            emissions = np.zeros((n_tokens, self.n_labels))
            self._emissions(encoded.indptr, encoded.ids, encoded.values, emissions)
            check_emissions(emissions, lengths, name=name)
        return out

    def pruning(self, arrays):
        """The :class:`TransitionPruning` of ``arrays.transitions``.

        The model's, or a new one (once per call) for constrained transitions.
        """
        if arrays.transitions is self.arrays.transitions:
            return self._pruning
        return TransitionPruning(arrays.transitions)

    def constrained_arrays(self, constraints):
        """The score arrays with the forbidden pairs of ``constraints`` at -inf."""
        if constraints is None or not constraints.has_transitions:
            return self.arrays
        return masked_score_arrays(self.arrays, constraints.masked_transitions(self.transitions))

    def viterbi(self, encoded, n_threads=1, name="X", constraints=None):
        """Label index of every token (flat order), the most probable paths.

        With ``constraints``, the most probable allowed paths; a sequence
        with none raises :class:`~skcrf._inference._constraints.NoValidLabelling`.
        """
        n_tokens = len(encoded.indptr) - 1
        path = np.empty(n_tokens, dtype=np.intp)
        if self.conditioned is not None:
            return self._conditioned_viterbi(encoded, n_threads, name, constraints, path)
        if constraints is None:
            return self._viterbi_sequences(encoded, n_threads, name, path)
        # Forbidden pairs are -inf transitions: the Viterbi kernel then prunes
        # nothing (its bound needs finite scores) but stays exact.
        arrays = self.constrained_arrays(constraints)
        transitions = arrays.transitions
        pruning = self.pruning(arrays)

        def decode_block(block, workspace):
            emissions = workspace.psi[: block.n_rows]
            self._emissions(block.indptr, block.ids, block.values, emissions)
            _check_finite(emissions)
            apply_log_masks(emissions, constraints.emission_masks(block))
            block_path = np.empty(block.n_rows, dtype=np.intp)
            best = np.empty(block.n_sequences)
            viterbi_packed(emissions, transitions, block.batch_sizes, block_path, best, pruning)
            if not np.isfinite(best).all():
                bad = np.flatnonzero(~np.isfinite(best))[0]
                raise NoValidLabelling(int(block.sequences[bad]), name)
            return block_path

        return self._run(encoded, n_threads, decode_block, path, name)

    def _conditioned_viterbi(self, encoded, n_threads, name, constraints, path):
        """:meth:`viterbi` of a model with conditioned transitions."""
        arrays = self.constrained_arrays(constraints)

        def decode_block(block, workspace):
            emissions = workspace.psi[: block.n_rows]
            self._emissions(block.indptr, block.ids, block.values, emissions)
            _check_finite(emissions)
            if constraints is not None:
                apply_log_masks(emissions, constraints.emission_masks(block))
            block_path = np.empty(block.n_rows, dtype=np.intp)
            best = np.empty(block.n_sequences)
            entry_ptr, entry_pair, delta = self.row_deltas(block)
            viterbi_conditioned(
                emissions, arrays.transitions, entry_ptr, entry_pair, delta,
                block.batch_sizes, block_path, best,
            )  # fmt: skip
            if not np.isfinite(best).all():
                bad = np.flatnonzero(~np.isfinite(best))[0]
                raise NoValidLabelling(int(block.sequences[bad]), name)
            return block_path

        return self._run(encoded, n_threads, decode_block, path, name, matrix_per_token=False)

    def posterior(self, encoded, n_threads=1, name="X", constraints=None):
        """Label index of every token (flat order): the posterior (minimum risk) paths.

        The allowed labelling that maximizes the expected number of correct
        tokens, ``sum_t p(y_t = yhat_t | x)`` (the marginals conditioned on
        ``constraints``): by linearity of expectation that is the expected
        token accuracy, so the best one is a Viterbi pass with the marginals
        as additive state scores, 0 for an allowed pair and ``-inf`` for a
        forbidden one (and for labels the constraints forbid at a token).
        Without forbidden pairs it is each token's most probable label.
        A sequence with no allowed labelling raises
        :class:`~skcrf._inference._constraints.NoValidLabelling`.
        """
        n_tokens = len(encoded.indptr) - 1
        path = np.empty(n_tokens, dtype=np.intp)
        zeros = np.zeros((self.n_labels, self.n_labels))
        transitions = zeros if constraints is None else constraints.masked_transitions(zeros)
        transitions = np.ascontiguousarray(transitions)
        pruning = TransitionPruning(transitions)
        arrays = self.constrained_arrays(constraints)

        def decode_block(block, workspace):
            if self.conditioned is not None:
                masks = [] if constraints is None else constraints.emission_masks(block)
                marginals = self.conditioned_marginals(block, workspace, arrays, masks, name)
            elif constraints is None:
                masks = []
                marginals, _ = block_marginals(block, workspace, arrays, check=_check_finite)
            else:
                masks = constraints.emission_masks(block)
                marginals, log_z = masked_block_marginals(
                    block, workspace, arrays, masks, check=_check_finite
                )
                if not np.isfinite(log_z).all():
                    bad = np.flatnonzero(~np.isfinite(log_z))[0]
                    raise NoValidLabelling(int(block.sequences[bad]), name)
            scores = np.array(marginals, dtype=np.float64, order="C")
            apply_log_masks(scores, masks)
            block_path = np.empty(block.n_rows, dtype=np.intp)
            viterbi_packed(scores, transitions, block.batch_sizes, block_path, pruning=pruning)
            return block_path

        return self._run(encoded, n_threads, decode_block, path, name)

    def marginals(self, encoded, n_threads=1, name="X", constraints=None):
        """``p(y_t = j | x)`` of every token (flat order), shape (n_tokens, n_labels).

        With ``constraints``, conditioned on them: ``p(y_t = j | x, y allowed)``.
        """
        out = np.empty((len(encoded.indptr) - 1, self.n_labels))

        def sink(block, marginals):
            out[block.rows] = marginals

        self._each_marginals(encoded, n_threads, name, constraints, sink)
        return out

    def marginal_dicts(self, encoded, labels, n_threads=1, name="X", constraints=None):
        """:meth:`marginals` as one list per sequence of one dict per token.

        ``result[i][t][labels[j]]`` is ``p(y_t = j | x_i)``. Each block's
        dicts are built right after its forward-backward, from its rows in
        the workspace (no flat array of every token's marginals).
        """
        builder = MarginalDicts(np.asarray(encoded.lengths, dtype=np.intp), list(labels))

        def sink(block, marginals):
            builder.fill(np.ascontiguousarray(marginals), block.rows)

        self._each_marginals(encoded, n_threads, name, constraints, sink)
        return builder.result()

    def _each_marginals(self, encoded, n_threads, name, constraints, sink):
        """Call ``sink(block, marginals)`` with the marginals of every block."""
        if self.conditioned is not None:
            arrays = self.constrained_arrays(constraints)

            def decode_block(block, workspace):
                masks = [] if constraints is None else constraints.emission_masks(block)
                sink(block, self.conditioned_marginals(block, workspace, arrays, masks, name))

            self._run(encoded, n_threads, decode_block, None, name)
            return

        if constraints is None:

            def decode_block(block, workspace):
                marginals, _ = block_marginals(block, workspace, self.arrays, check=_check_finite)
                sink(block, marginals)

            self._run(encoded, n_threads, decode_block, None, name)
            return

        arrays = self.constrained_arrays(constraints)

        def decode_block(block, workspace):
            marginals, log_z = masked_block_marginals(
                block, workspace, arrays, constraints.emission_masks(block), check=_check_finite
            )
            if not np.isfinite(log_z).all():
                bad = np.flatnonzero(~np.isfinite(log_z))[0]
                raise NoValidLabelling(int(block.sequences[bad]), name)
            sink(block, marginals)

        self._run(encoded, n_threads, decode_block, None, name)

    def _viterbi_sequences(self, encoded, n_threads, name, path):
        """Unconstrained Viterbi, sequence by sequence in compiled code (no blocks).

        The one-sentence decoder over every sequence, one call per thread's
        shard without the GIL: faster than the batched blocks for sparse
        state features, and the threads run in parallel.
        """
        lengths = np.asarray(encoded.lengths, dtype=np.intp)
        n_tokens = int(lengths.sum())
        starts = np.zeros(len(lengths), dtype=np.intp)
        np.cumsum(lengths[:-1], out=starts[1:])
        n_threads = min(n_threads, max(1, n_tokens // _TOKENS_PER_THREAD))
        shards = split_sequences(lengths, n_threads)
        indptr = np.ascontiguousarray(encoded.indptr, dtype=np.int64)
        ids = np.ascontiguousarray(encoded.ids, dtype=np.int32)
        values = np.ascontiguousarray(encoded.values, dtype=np.float64)

        def run(which):
            return self._single.decode_sequences(
                indptr, ids, values, starts, lengths, which.astype(np.intp), path
            )

        bad = thread_map(run, len(shards), shards)
        if any(b >= 0 for b in bad):
            emissions = np.zeros((n_tokens, self.n_labels))
            self._emissions(encoded.indptr, encoded.ids, encoded.values, emissions)
            check_emissions(emissions, lengths, name=name)
        return path

    def viterbi_tokens(self, tokens, plan, index, constant_ids):
        """:meth:`viterbi_single` of one sequence of raw tokens, in one compiled call.

        The tokens are featurized by a template (its compiled ``plan``,
        attribute ``index`` and ``constant_ids``); raises OverflowError
        where :meth:`viterbi_single` words an error.
        """
        return self._single.decode_tokens(plan, tokens, index, constant_ids)

    def viterbi_token_sequences(self, sequences, plan, index, constant_ids, n_threads=1):
        """:meth:`viterbi_tokens` of many sequences: label indices (flat) and lengths.

        Contiguous shards, one a thread, each featurized and decoded in one
        compiled call; raises OverflowError where :meth:`viterbi` words an
        error.
        """
        lengths = np.fromiter(map(len, sequences), dtype=np.intp, count=len(sequences))
        ends = np.cumsum(lengths)
        n_tokens = int(ends[-1]) if len(ends) else 0
        path = np.empty(n_tokens, dtype=np.intp)
        n_threads = min(n_threads, max(1, n_tokens // _TOKENS_PER_THREAD))
        # shard k ends where the running token count passes k / n of the total
        cuts = np.searchsorted(ends, np.arange(1, n_threads) * n_tokens / n_threads) + 1
        bounds = sorted({0, len(sequences), *(int(c) for c in cuts if c < len(sequences))})

        def run(first, stop):
            start = int(ends[first - 1]) if first else 0
            return self._single.decode_token_sequences(
                plan,
                sequences[first:stop],
                index,
                constant_ids,
                path[start : int(ends[stop - 1]) if stop else 0],
                first,
            )

        bad = thread_map(run, len(bounds) - 1, bounds[:-1], bounds[1:])
        if any(b >= 0 for b in bad):
            raise OverflowError
        return path, lengths

    def viterbi_single(self, encoded, name="X"):
        """Label indices of one encoded sequence (no blocks, no threads)."""
        if self.conditioned is not None:
            return self.viterbi(encoded, 1, name=name)
        try:
            return self._single.decode(encoded.indptr, encoded.ids, encoded.values)
        except OverflowError:
            emissions = np.zeros((len(encoded.indptr) - 1, self.n_labels))
            self._emissions(encoded.indptr, encoded.ids, encoded.values, emissions)
            check_emissions(emissions, encoded.lengths, name=name)
            raise  # unreachable: check_emissions raises


class _NonFinite(Exception):
    """Some state scores overflowed."""


def _check_finite(emissions):
    if not np.isfinite(emissions).all():
        raise _NonFinite
