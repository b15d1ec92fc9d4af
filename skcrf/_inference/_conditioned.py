"""Inference with input-conditioned transitions, in the log domain.

A model with conditioned transition features (CRF++'s bigram templates) has
a transition matrix per token: the base transitions plus, for every pair
``(i, j)``, the sum of ``value * weight`` of the token's transition
attributes' features on that pair (:func:`row_transitions`). Everything here
works on one block in the packed time-major layout of
:mod:`skcrf._utils._packing`, like :mod:`skcrf._inference._logspace`, with
``row_trans[r]`` the matrix *into* packed row ``r`` (from the previous token
of its sequence; unused at a sequence's first row).

These are the prediction paths of such models (n-best, marginals, pair
marginals, path scores) and the references the compiled passes are tested
against: the training pass (:func:`skcrf._inference._kernels.forward_backward`
with ``corrections``) and the Viterbi that decodes such models
(:func:`skcrf._inference._viterbi.viterbi_conditioned`, against
:func:`viterbi_rows`). Scores of ``-inf`` (forbidden labels or pairs) are
allowed.
"""

import numpy as np

from ._logspace import _log_messages, _row_sequence, _steps, last_rows


def row_deltas(block, conditioned, n_labels):
    """``(entry_ptr, entry_pair, delta)`` of a block's rows (see ``transition_deltas``)."""
    from . import _kernels

    ptr, pairs, weights = conditioned
    return _kernels.transition_deltas(
        block.t_indptr, block.t_ids, block.t_values, ptr, pairs, weights, n_labels
    )


def row_transitions(transitions, deltas):
    """Each row's transition scores, shape (n_rows, L, L).

    ``transitions`` (L, L) plus each row's ``delta`` at its entries'
    pairs (``-inf`` stays ``-inf``).
    """
    entry_ptr, entry_pair, delta = deltas
    n_rows, n_labels = len(entry_ptr) - 1, transitions.shape[0]
    out = np.empty((n_rows, n_labels, n_labels))
    out[...] = transitions
    rows = np.repeat(np.arange(n_rows), np.diff(entry_ptr))
    out.reshape(n_rows, -1)[rows, entry_pair] += delta
    return out


def log_messages_rows(emissions, row_trans, batch_sizes):
    """Log-domain forward and backward messages and each sequence's ``log Z``.

    Returns ``(log_alpha, log_beta, log_z)`` (``log_z`` in packed column order).
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _log_messages(emissions, row_trans, batch_sizes)[:3]


def forward_backward_rows(emissions, row_trans, batch_sizes):
    """Log partition, marginals and pair marginals of a packed block.

    Returns
    -------
    log_z : ndarray of shape (n_sequences,)
        Packed column order; ``-inf`` for a sequence with no allowed labelling.
    marginals : ndarray of shape (n_rows, L)
    pairs : ndarray of shape (n_rows, L, L)
        ``pairs[r, i, j] = p(y_prev = i, y_r = j | x)``; zeros at a
        sequence's first row.
    """
    n_rows, n_labels = emissions.shape
    pairs = np.zeros((n_rows, n_labels, n_labels))
    if n_rows == 0:
        return np.zeros(0), np.zeros((0, n_labels)), pairs
    steps = list(_steps(batch_sizes))
    log_alpha, log_beta, log_z = log_messages_rows(emissions, row_trans, batch_sizes)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        row_log_z = log_z[_row_sequence(batch_sizes)]
        marginals = np.exp(log_alpha + log_beta - row_log_z[:, None])
        for (_, lo, _hi), (_, next_lo, next_hi) in zip(steps[:-1], steps[1:]):
            n_next = next_hi - next_lo
            ahead = emissions[next_lo:next_hi] + log_beta[next_lo:next_hi]
            pairs[next_lo:next_hi] = np.exp(
                log_alpha[lo : lo + n_next, :, None]
                + row_trans[next_lo:next_hi]
                + ahead[:, None, :]
                - row_log_z[next_lo:next_hi, None, None]
            )
    return log_z, np.nan_to_num(marginals), np.nan_to_num(pairs)


def viterbi_rows(emissions, row_trans, batch_sizes):
    """The best path of each sequence of a packed block.

    Ties go to the lower label index, the last token's first, then the one
    before it (as the compiled Viterbi).

    Returns
    -------
    path : ndarray of intp, shape (n_rows,)
    best : ndarray of shape (n_sequences,)
        The best path's score (``-inf``: no allowed labelling).
    """
    n_rows, n_labels = emissions.shape
    path = np.zeros(n_rows, dtype=np.intp)
    if n_rows == 0:
        return path, np.zeros(0)
    steps = list(_steps(batch_sizes))
    score = np.empty_like(emissions)
    back = np.zeros((n_rows, n_labels), dtype=np.intp)
    prev_lo = 0
    for t, lo, hi in steps:
        if t == 0:
            score[lo:hi] = emissions[lo:hi]
        else:
            candidates = score[prev_lo : prev_lo + hi - lo, :, None] + row_trans[lo:hi]
            back[lo:hi] = np.argmax(candidates, axis=1)
            score[lo:hi] = np.take_along_axis(candidates, back[lo:hi, None, :], axis=1)[:, 0]
            score[lo:hi] += emissions[lo:hi]
        prev_lo = lo
    last = last_rows(batch_sizes)
    best_label = np.argmax(score[last], axis=1)
    best = score[last, best_label]
    # backtrack: from each sequence's last row to its first
    label = np.empty(len(last), dtype=np.intp)
    label[:] = best_label
    row_sequence = _row_sequence(batch_sizes)
    lengths = np.bincount(row_sequence, minlength=len(last))
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
    for t in range(len(steps) - 1, -1, -1):
        active = np.flatnonzero(lengths > t)
        rows = offsets[t] + active
        path[rows] = label[active]
        if t > 0:
            label[active] = back[rows, label[active]]
    return path, best


def kbest_sequence(emissions, row_trans, n):
    """The ``n`` best labellings of one sequence (list Viterbi).

    ``row_trans[t]`` is the matrix into token ``t``. Ties are ordered as by
    :func:`viterbi_rows`.

    Returns
    -------
    paths : ndarray of intp, shape (found, length)
    scores : ndarray of shape (found,)
        Best first; only finite scores (allowed labellings) are kept.
    """
    length, n_labels = emissions.shape
    if length == 0:
        return np.zeros((1, 0), dtype=np.intp), np.zeros(1)
    # per label: the scores of its best partial paths (ranked) and where they came from
    score = emissions[0][:, None].copy()  # (L, ranks)
    backs = []
    for t in range(1, length):
        ranks = score.shape[1]
        # candidates into label j: (i, rank) in that order, so a stable sort
        # keeps ties ordered by the previous label, then its rank
        cand = score[:, None, :] + row_trans[t][:, :, None]  # (i, j, rank)
        cand = cand.transpose(1, 0, 2).reshape(n_labels, n_labels * ranks)
        keep = min(n, n_labels * ranks)
        order = np.argsort(-cand, axis=1, kind="stable")[:, :keep]
        score = np.take_along_axis(cand, order, axis=1) + emissions[t][:, None]
        backs.append(order)
    ranks = score.shape[1]
    flat = score.reshape(-1)  # label-major: ties go to the lower last label
    order = np.argsort(-flat, kind="stable")[:n]
    order = order[np.isfinite(flat[order])]
    paths = np.empty((len(order), length), dtype=np.intp)
    for q, pick in enumerate(order.tolist()):
        label, rank = divmod(pick, ranks)
        for t in range(length - 1, -1, -1):
            paths[q, t] = label
            if t > 0:
                came = int(backs[t - 1][label, rank])
                label, rank = divmod(came, _ranks_at(backs, t - 1))
    return paths, flat[order]


def _ranks_at(backs, t):
    """How many ranks each label keeps after token ``t`` (1 at the first token)."""
    return 1 if t == 0 else backs[t - 1].shape[1]


def path_scores(emissions, row_trans, batch_sizes, labels):
    """The score of given labellings (packed rows; ``labels`` >= 0)."""
    n_rows = len(labels)
    terms = emissions[np.arange(n_rows), labels].copy()
    batch_sizes = np.asarray(batch_sizes)
    if n_rows and len(batch_sizes) > 1:
        first = int(batch_sizes[0])
        steps = np.repeat(np.arange(len(batch_sizes)), batch_sizes)[first:]
        rows = np.arange(first, n_rows)
        previous = rows - batch_sizes[steps - 1]
        terms[first:] += row_trans[rows, labels[previous], labels[first:]]
    n_sequences = int(batch_sizes[0]) if len(batch_sizes) else 0
    return np.bincount(_row_sequence(batch_sizes), weights=terms, minlength=n_sequences)
