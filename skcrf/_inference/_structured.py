"""Structured outputs of a fitted model.

n-best labellings, sequence probabilities and transition marginals, with or
without constraints.

Functions over a :class:`~skcrf._inference._decode.Decoder` and encoded sequences,
batched in the blocks of :mod:`skcrf._inference._blocks` and dealt to threads as
decoding is (``Decoder._run``). The estimator turns their label indices into
labels.

Conventions
-----------
- Probabilities are conditioned on the constraints when there are some:
  ``p(y | x, constraints) = exp(score(y)) / Z_c(x)`` where ``Z_c`` sums over
  the allowed labellings only; a labelling that breaks a constraint has
  probability 0 (log-probability ``-inf``).
- ``log Z`` comes from the scaled forward pass (:mod:`skcrf._inference._nbest`'s
  :func:`forward_log_partition`), or from the log-domain reference of
  :mod:`skcrf._inference._logspace` when scores are too wide for scaling.
- n-best ties: labellings of equal score are ordered by their labels read
  from the end (the lower last label index in ``classes_`` first, then the
  label before it, ...); the first one is ``predict``'s (see
  :mod:`skcrf._inference._nbest`).
- n-best lists come from the lazy k-best kernel (:func:`skcrf._inference._nbest.kbest_packed`,
  Huang & Chiang's algorithm 3: one pruned Viterbi pass, then only the
  nodes the n best paths reach are expanded).
- An empty sequence has one labelling, the empty one, of probability 1.
- Per-sequence results are in the caller's sequence order; per-token ones
  in flat order.
- A model with input-conditioned transitions (``decoder.conditioned``):
  ``log Z`` from the same scaled forward pass with each row's deltas as
  corrections, or the log-domain rows of
  :mod:`skcrf._inference._conditioned`; the best labelling from the
  compiled :func:`~skcrf._inference._viterbi.viterbi_conditioned`; n-best
  lists and transition marginals from the log-domain rows (one transition
  matrix per token; n-best one sequence at a time).
"""

import numpy as np

from . import _conditioned, _kernels
from ._blocks import MAX_TRANSITION_SPREAD, state_scores
from ._constraints import NoValidLabelling, apply_log_masks, apply_zero_masks
from ._decode import _check_finite
from ._logspace import _forward_backward_log, last_rows, pair_marginals
from ._nbest import forward_log_partition, kbest_packed
from ._viterbi import viterbi_conditioned, viterbi_packed

__all__ = ["log_partition", "nbest", "sequence_scores", "transition_marginals"]


def _block_emissions(decoder, block, workspace, arrays, masks):
    """The block's state scores (a workspace view), checked, with the masks at -inf."""
    emissions = workspace.psi[: block.n_rows]
    state_scores(block.indptr, block.ids, block.values, arrays, emissions)
    _check_finite(emissions)
    apply_log_masks(emissions, masks)
    return emissions


def _block_log_z(block, workspace, arrays, emissions, masks, name, deltas=None):
    """Each sequence's ``log Z`` (packed order); overwrites ``emissions``.

    ``deltas``: a conditioned model's ``(entry_ptr, entry_pair, delta)``
    (each row's change of the transitions: corrections of the scaled pass,
    per-row matrices in the log domain), or None.
    Raises NoValidLabelling when a sequence has no allowed labelling.
    """
    n = block.n_rows
    log_z = None
    spread, corrections = arrays.spread, None
    if deltas is not None:
        entry_ptr, entry_pair, delta = deltas
        spread += float(np.abs(delta).max()) if len(delta) else 0.0
        corrections = (entry_ptr, entry_pair, np.exp(delta))
    if spread <= MAX_TRANSITION_SPREAD:
        backup = emissions.copy() if masks else None
        row_max = workspace.row_max[:n]
        _kernels.exp_shifted(emissions, row_max)
        apply_zero_masks(emissions, masks)
        log_z = np.empty(block.n_sequences)
        forward_log_partition(
            emissions,
            arrays.exp_trans,
            block.batch_sizes,
            workspace.alpha,
            workspace.scale,
            log_z,
            corrections,
        )
        log_z += np.bincount(block.columns, weights=row_max, minlength=block.n_sequences)
        log_z += arrays.t_max * (block.lengths - 1)
        if not np.isfinite(log_z).all():
            log_z = None  # underflow, or no allowed labelling: the log domain decides
            if backup is not None:
                emissions[...] = backup
            else:
                state_scores(block.indptr, block.ids, block.values, arrays, emissions)
    if log_z is None:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if deltas is None:
                log_z = _forward_backward_log(emissions, arrays.transitions, block.batch_sizes)[0]
            else:
                row_trans = _conditioned.row_transitions(arrays.transitions, deltas)
                log_z = _conditioned.log_messages_rows(emissions, row_trans, block.batch_sizes)[2]
    if not np.isfinite(log_z).all():
        raise NoValidLabelling(int(block.sequences[np.flatnonzero(~np.isfinite(log_z))[0]]), name)
    return log_z


def _sequence_rows(block):
    """The packed rows of each sequence of a block, in token order."""
    batch_sizes = np.asarray(block.batch_sizes)
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
    return [offsets[:length] + column for column, length in enumerate(block.lengths.tolist())]


def _conditioned_nbest(decoder, block, workspace, arrays, emissions, masks, n, name):
    """:func:`nbest`'s block results with per-row transitions."""
    paths = np.zeros((n, block.n_rows), dtype=np.intp)
    scores = np.full((block.n_sequences, n), -np.inf)
    found = np.zeros(block.n_sequences, dtype=np.intp)
    deltas = decoder.row_deltas(block)
    if n == 1:  # the compiled Viterbi (predict's path)
        viterbi_conditioned(
            emissions, arrays.transitions, *deltas, block.batch_sizes, paths[0], scores[:, 0]
        )
        found[:] = np.isfinite(scores[:, 0])
    else:
        row_trans = _conditioned.row_transitions(arrays.transitions, deltas)
        for column, rows in enumerate(_sequence_rows(block)):
            seq_paths, seq_scores = _conditioned.kbest_sequence(
                emissions[rows], row_trans[rows], n
            )
            found[column] = len(seq_scores)
            paths[: len(seq_scores), rows] = seq_paths
            scores[column, : len(seq_scores)] = seq_scores
    if not found.all():
        raise NoValidLabelling(int(block.sequences[np.argmin(found)]), name)
    log_z = _block_log_z(block, workspace, arrays, emissions, masks, name, deltas)
    return paths, scores - log_z[:, None], found


def log_partition(decoder, encoded, n_threads=1, constraints=None, name="X"):
    """``log Z(x)`` of every sequence (over the allowed labellings).

    Returns
    -------
    ndarray of shape (n_sequences,)
        0 for an empty sequence.
    """
    arrays = decoder.constrained_arrays(constraints)
    out = np.zeros(len(encoded.lengths))

    def decode_block(block, workspace):
        masks = constraints.emission_masks(block) if constraints is not None else []
        emissions = _block_emissions(decoder, block, workspace, arrays, masks)
        deltas = None if decoder.conditioned is None else decoder.row_deltas(block)
        log_z = _block_log_z(block, workspace, arrays, emissions, masks, name, deltas)
        out[block.sequences] = log_z

    decoder._run(encoded, n_threads, decode_block, None, name)
    return out


def nbest(decoder, encoded, n, n_threads=1, constraints=None, name="X"):
    """The ``n`` most probable (allowed) labellings of every sequence.

    Parameters
    ----------
    decoder : Decoder
    encoded : Encoded
    n : int
        At least 1.
    n_threads : int
    constraints : Constraints or None
    name : str

    Returns
    -------
    paths : ndarray of intp, shape (n, n_tokens)
        ``paths[q, row]``: the label index of token ``row`` (flat order) in
        its sequence's labelling of rank ``q`` (0 past ``found``).
    log_proba : ndarray of shape (n_sequences, n)
        Their log-probabilities, best first (``-inf`` past ``found``).
    found : ndarray of intp, shape (n_sequences,)
        How many labellings each sequence has in the list: ``n``, or fewer
        when fewer exist (1 for an empty sequence: the empty labelling).
    """
    arrays = decoder.constrained_arrays(constraints)
    transitions = arrays.transitions
    n_tokens = len(encoded.indptr) - 1
    n_sequences = len(encoded.lengths)
    paths = np.zeros((n_tokens, n), dtype=np.intp)
    log_proba = np.full((n_sequences, n), -np.inf)
    log_proba[:, 0] = 0.0  # empty sequences; the others are overwritten
    found = np.ones(n_sequences, dtype=np.intp)
    viterbi_only = n == 1
    pruning = decoder.pruning(arrays) if viterbi_only else None

    def decode_block(block, workspace):
        masks = constraints.emission_masks(block) if constraints is not None else []
        emissions = _block_emissions(decoder, block, workspace, arrays, masks)
        if decoder.conditioned is not None:
            block_paths, block_log_proba, block_found = _conditioned_nbest(
                decoder, block, workspace, arrays, emissions, masks, n, name
            )
            log_proba[block.sequences] = block_log_proba
            found[block.sequences] = block_found
            return block_paths.T
        if viterbi_only:
            block_paths = np.empty((1, block.n_rows), dtype=np.intp)
            scores = np.empty((block.n_sequences, 1))
            viterbi_packed(
                emissions, transitions, block.batch_sizes, block_paths[0], scores[:, 0], pruning
            )
            block_found = np.isfinite(scores[:, 0]).astype(np.intp)
        else:
            block_paths = np.zeros((n, block.n_rows), dtype=np.intp)
            scores = np.empty((block.n_sequences, n))
            block_found = kbest_packed(
                emissions, transitions, block.batch_sizes, n, block_paths, scores
            )
        if not block_found.all():
            raise NoValidLabelling(int(block.sequences[np.argmin(block_found)]), name)
        log_z = _block_log_z(block, workspace, arrays, emissions, masks, name)
        log_proba[block.sequences] = scores - log_z[:, None]
        found[block.sequences] = block_found
        return block_paths.T

    decoder._run(encoded, n_threads, decode_block, paths, name)
    return paths.T, log_proba, found


def sequence_scores(decoder, encoded, label_index, n_threads=1, constraints=None, name="X"):
    """``log p(y | x)`` of given labellings (under the constraints).

    Parameters
    ----------
    label_index : ndarray of intp, shape (n_tokens,)
        The label index of every token (flat order); -1 for a label the
        model does not know (the labelling then has probability 0).

    Returns
    -------
    ndarray of shape (n_sequences,)
        ``-inf`` for a labelling with an unknown label or that breaks a
        constraint; 0 for an empty sequence.
    """
    arrays = decoder.constrained_arrays(constraints)
    transitions = arrays.transitions
    out = np.zeros(len(encoded.lengths))
    label_index = np.asarray(label_index, dtype=np.intp)

    def decode_block(block, workspace):
        masks = constraints.emission_masks(block) if constraints is not None else []
        emissions = _block_emissions(decoder, block, workspace, arrays, masks)
        labels = label_index[block.rows]
        unknown = labels < 0
        labels = np.where(unknown, 0, labels)
        if decoder.conditioned is not None:
            deltas = decoder.row_deltas(block)
            row_trans = _conditioned.row_transitions(transitions, deltas)
            scores = _conditioned.path_scores(emissions, row_trans, block.batch_sizes, labels)
            has_unknown = np.bincount(block.columns, weights=unknown, minlength=block.n_sequences)
            scores[has_unknown > 0] = -np.inf
            log_z = _block_log_z(block, workspace, arrays, emissions, masks, name, deltas)
            out[block.sequences] = scores - log_z
            return
        terms = emissions[np.arange(block.n_rows), labels]
        batch_sizes = np.asarray(block.batch_sizes)
        first = int(batch_sizes[0])
        # the previous row of row r (step t >= 1) is r - batch_sizes[t - 1]
        steps = np.repeat(np.arange(len(batch_sizes)), batch_sizes)[first:]
        rows = np.arange(first, block.n_rows)
        terms[first:] += transitions[labels[rows - batch_sizes[steps - 1]], labels[first:]]
        terms[unknown] = -np.inf
        scores = np.bincount(block.columns, weights=terms, minlength=block.n_sequences)
        scores[
            np.bincount(block.columns, weights=unknown, minlength=block.n_sequences) > 0
        ] = -np.inf
        log_z = _block_log_z(block, workspace, arrays, emissions, masks, name)
        out[block.sequences] = scores - log_z

    with np.errstate(invalid="ignore"):
        decoder._run(encoded, n_threads, decode_block, None, name)
    return out


def transition_marginals(decoder, encoded, n_threads=1, constraints=None, name="X"):
    """``p(y_t = i, y_{t+1} = j | x)`` of every token that has a successor.

    Returns
    -------
    ndarray of shape (n_tokens, n_labels, n_labels)
        Row ``r`` (flat order) pairs token ``r`` with the next token of its
        sequence; zeros at a sequence's last token.
    """
    arrays = decoder.constrained_arrays(constraints)
    n_labels = decoder.n_labels
    n_tokens = len(encoded.indptr) - 1
    out = np.zeros((n_tokens, n_labels, n_labels))

    def decode_block(block, workspace):
        masks = constraints.emission_masks(block) if constraints is not None else []
        n = block.n_rows
        psi = _block_emissions(decoder, block, workspace, arrays, masks)
        if decoder.conditioned is not None:
            row_trans = decoder.row_transitions(block, arrays.transitions)
            log_z, _, into = _conditioned.forward_backward_rows(psi, row_trans, block.batch_sizes)
            if not np.isfinite(log_z).all():
                bad = np.flatnonzero(~np.isfinite(log_z))[0]
                raise NoValidLabelling(int(block.sequences[bad]), name)
            # row r's pair with its successor is the successor's pair into it
            pairs = np.zeros_like(into)
            batch_sizes = np.asarray(block.batch_sizes)
            first = int(batch_sizes[0])
            steps = np.repeat(np.arange(len(batch_sizes)), batch_sizes)[first:]
            successors = np.arange(first, n)
            pairs[successors - batch_sizes[steps - 1]] = into[first:]
            return pairs
        pairs = None
        if arrays.spread <= MAX_TRANSITION_SPREAD:
            backup = psi.copy()
            row_max = workspace.row_max[:n]
            _kernels.exp_shifted(psi, row_max)
            apply_zero_masks(psi, masks)
            alpha, beta, weighted = workspace.alpha[:n], workspace.beta[:n], workspace.weighted[:n]
            _kernels.forward_backward(
                psi,
                arrays.exp_trans,
                block.batch_sizes,
                alpha,
                workspace.scale,
                workspace.beta,
                workspace.weighted,
            )
            if np.isfinite(alpha).all():
                # alpha now holds the marginals alpha * beta; the pair of row r
                # and its successor is alpha[r, i] * exp_trans[i, j] * weighted[r, j]
                with np.errstate(divide="ignore", invalid="ignore"):
                    forward = np.where(beta > 0, alpha / beta, 0.0)
                pairs = forward[:, :, None] * arrays.exp_trans * weighted[:, None, :]
                pairs[last_rows(block.batch_sizes)] = 0.0
            else:
                psi[...] = backup
        if pairs is None:
            pairs, log_z = pair_marginals(psi, arrays.transitions, block.batch_sizes)
            if not np.isfinite(log_z).all():
                bad = np.flatnonzero(~np.isfinite(log_z))[0]
                raise NoValidLabelling(int(block.sequences[bad]), name)
        return pairs

    decoder._run(encoded, n_threads, decode_block, out, name)
    return out
