"""Batched inference for linear-chain CRFs in numpy: forward-backward, log domain.

Kernels are plain functions on arrays in the packed time-major layout of
:mod:`skcrf._utils._packing`: ``emissions`` has one row per token in packed order,
``batch_sizes[t]`` sequences are active at step ``t`` and the sequences still
active at step ``t + 1`` are the first rows of block ``t``. The recursion over
time is one small dense matrix product per step for all sequences at once.

Conventions
-----------
- ``emissions[r, j]``: score of label ``j`` at packed row ``r`` (``X @ W``).
- ``transitions[i, j]``: score of label ``i`` followed by label ``j``. There
  are no start or end transitions (as in CRFsuite).
- The score of a labelling is the sum of its emissions and transitions;
  ``p(y | x) = exp(score(y)) / Z(x)``.
"""

from typing import NamedTuple

import numpy as np

# Upper bound on the elements of the (rows, L, L) temporaries of Viterbi and
# the log-domain fallback, so thousands of labels do not exhaust memory.
_MAX_BLOCK_ELEMENTS = 1 << 22


class ForwardBackwardResult(NamedTuple):
    """Output of :func:`forward_backward`.

    Attributes
    ----------
    log_partition : ndarray of shape (n_sequences,)
        ``log Z`` of each sequence, in packed (sorted) sequence order.
    marginals : ndarray of shape (n_tokens, n_labels)
        ``p(y_t = j | x)`` for each packed row; rows sum to 1.
    transition_marginals : ndarray of shape (n_labels, n_labels)
        ``sum_t p(y_{t-1} = i, y_t = j | x)`` summed over all sequences.
    """

    log_partition: np.ndarray
    marginals: np.ndarray
    transition_marginals: np.ndarray


def logsumexp(a, axis=None):
    """``log(sum(exp(a)))`` along ``axis`` (``-inf`` when every term is).

    numpy's, not ``scipy.special.logsumexp``: that costs about 20 times more
    per call, and importing ``scipy.special`` a fifth of a second.
    """
    a = np.asarray(a, dtype=np.float64)
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):  # log(0): -inf, every term -inf
        out = np.log(np.sum(np.exp(a - top), axis=axis, keepdims=True)) + top
    return out.item() if axis is None else np.squeeze(out, axis=axis)


def _steps(batch_sizes):
    """Yield ``(t, lo, hi)``: step ``t`` is packed rows ``lo:hi``."""
    lo = 0
    for t, size in enumerate(batch_sizes):
        yield t, lo, lo + int(size)
        lo += int(size)


# Largest spread (in nats) of shifted scores the probability domain holds:
# exp(700) and exp(-700) times the number of labels stay normal floats.
_MAX_SPREAD = 700.0


def forward_backward(emissions, transitions, batch_sizes, *, overwrite_emissions=False):
    """Marginals and log partition functions of a packed batch.

    Scaled forward-backward in the probability domain: the emission scores
    are exponentiated after subtracting a per-row shift, the transition
    scores after subtracting their maximum, and each forward step is
    normalized to sum to one; ``log Z`` is the sum of the logs of the
    normalizers plus the shifts, and ``alpha * beta`` are the marginals.

    The shift is each row's mean (one BLAS call; a row maximum is a slow
    short-axis reduction), or the row maximum when the scores are wide. Both
    are safe while a row's emission spread plus the transition spread stays
    below ``_MAX_SPREAD``; wider scores (hundreds of nats, only seen with
    extreme weights or feature values) are handled in the log domain.

    Parameters
    ----------
    emissions : ndarray of shape (n_tokens, n_labels)
    transitions : ndarray of shape (n_labels, n_labels)
    batch_sizes : ndarray of shape (max_length,)
    overwrite_emissions : bool, default=False
        Reuse the emissions' memory (their values are lost).

    Returns
    -------
    ForwardBackwardResult
    """
    n_tokens, n_labels = emissions.shape
    if n_tokens == 0:
        return ForwardBackwardResult(
            np.zeros(0), np.zeros((0, n_labels)), np.zeros((n_labels, n_labels))
        )
    # A forward or backward message spans up to a row's emission spread plus
    # the transition spread; beyond _MAX_SPREAD it would underflow or
    # overflow. The global spread bounds the row spreads cheaply; row spreads
    # are computed only when that bound is too wide.
    trans_max = transitions.max()
    trans_spread = trans_max - transitions.min()
    shift = emissions @ np.full(n_labels, 1.0 / n_labels, dtype=emissions.dtype)
    psi = emissions if overwrite_emissions else np.empty_like(emissions)
    np.subtract(emissions, shift[:, None], out=psi)
    if psi.max() - psi.min() + trans_spread > _MAX_SPREAD:
        row_spread = (psi.max(axis=1) - psi.min(axis=1)).max()
        psi += shift[:, None]  # back to the emissions (to rounding)
        if row_spread + trans_spread > _MAX_SPREAD:
            return _forward_backward_log(psi, transitions, batch_sizes)
        shift = psi.max(axis=1)  # the row mean may sit too far below the max
        psi -= shift[:, None]
    np.exp(psi, out=psi)
    exp_trans = np.exp(transitions - trans_max)
    steps = list(_steps(batch_sizes))

    # Forward: alpha[t] = normalize((alpha[t-1] @ exp_trans) * psi[t]).
    alpha = np.empty_like(psi)
    scale = np.empty(n_tokens, dtype=psi.dtype)
    ones = np.ones(n_labels, dtype=psi.dtype)
    prev_lo = 0
    for t, lo, hi in steps:
        block = alpha[lo:hi]
        if t == 0:
            block[...] = psi[lo:hi]
        else:
            # not out=block: numpy sees the overlap with alpha and leaves BLAS
            np.multiply(alpha[prev_lo : prev_lo + hi - lo] @ exp_trans, psi[lo:hi], out=block)
        np.matmul(block, ones, out=scale[lo:hi])
        block *= (1.0 / scale[lo:hi])[:, None]
        prev_lo = lo

    log_scale = np.log(scale)
    log_scale += shift
    log_scale[int(batch_sizes[0]) :] += trans_max  # every step after the first
    log_partition = np.bincount(
        _row_sequence(batch_sizes), weights=log_scale, minlength=int(batch_sizes[0])
    )

    # Backward, scaled by the same normalizers, with beta kept for two steps
    # only: once block t+1 has served the transition sum, alpha there turns
    # into the marginals in place.
    psi /= scale[:, None]
    exp_trans_t = np.ascontiguousarray(exp_trans.T)
    transition_sum = np.zeros_like(exp_trans)
    beta_next = np.ones((int(batch_sizes[0]), n_labels), dtype=psi.dtype)
    beta = np.empty_like(beta_next)
    for (_, lo, hi), (_, next_lo, next_hi) in zip(steps[-2::-1], steps[:0:-1]):
        n_next = next_hi - next_lo
        # psi[t+1] * beta[t+1] / scale[t+1]
        weighted = np.multiply(psi[next_lo:next_hi], beta_next[:n_next])
        np.matmul(weighted, exp_trans_t, out=beta[:n_next])
        beta[n_next : hi - lo] = 1.0
        transition_sum += alpha[lo : lo + n_next].T @ weighted
        alpha[next_lo:next_hi] *= beta_next[:n_next]
        beta, beta_next = beta_next, beta
    alpha[: int(batch_sizes[0])] *= beta_next
    return ForwardBackwardResult(log_partition, alpha, transition_sum * exp_trans)


def _row_sequence(batch_sizes):
    """Packed sequence position of each packed row."""
    batch_sizes = np.asarray(batch_sizes, dtype=np.intp)
    block_starts = np.cumsum(batch_sizes) - batch_sizes
    return np.arange(batch_sizes.sum()) - np.repeat(block_starts, batch_sizes)


def last_rows(batch_sizes):
    """The last packed row of each sequence (packed column order)."""
    batch_sizes = np.asarray(batch_sizes, dtype=np.intp)
    n_sequences = int(batch_sizes[0]) if len(batch_sizes) else 0
    lengths = np.bincount(_row_sequence(batch_sizes), minlength=n_sequences)
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
    return offsets[lengths - 1] + np.arange(n_sequences)


def _forward_backward_log(emissions, transitions, batch_sizes):
    """Log-domain forward-backward: slower, for scores no scaling can hold."""
    n_tokens, n_labels = emissions.shape
    log_alpha = np.empty_like(emissions)
    log_beta = np.empty_like(emissions)
    steps = list(_steps(batch_sizes))
    prev_lo = 0
    for t, lo, hi in steps:
        log_alpha[lo:hi] = emissions[lo:hi]
        if t > 0:
            prev = log_alpha[prev_lo : prev_lo + hi - lo]
            log_alpha[lo:hi] += _log_matmul(prev, transitions)
        prev_lo = lo
    _, lo, hi = steps[-1]
    log_beta[lo:hi] = 0.0
    for (_, lo, hi), (_, next_lo, next_hi) in zip(steps[-2::-1], steps[:0:-1]):
        n_next = next_hi - next_lo
        ahead = emissions[next_lo:next_hi] + log_beta[next_lo:next_hi]
        log_beta[lo : lo + n_next] = _log_matmul(ahead, transitions.T)
        log_beta[lo + n_next : hi] = 0.0

    # log Z of a sequence is logsumexp of log_alpha at its last row.
    row_sequence = _row_sequence(batch_sizes)
    log_partition = logsumexp(log_alpha[last_rows(batch_sizes)], axis=1)
    row_log_z = log_partition[row_sequence]
    marginals = np.exp(log_alpha + log_beta - row_log_z[:, None])

    transition_marginals = np.zeros_like(transitions)
    for (_, lo, _hi), (_, next_lo, next_hi) in zip(steps[:-1], steps[1:]):
        n_next = next_hi - next_lo
        ahead = emissions[next_lo:next_hi] + log_beta[next_lo:next_hi]
        ahead -= row_log_z[next_lo:next_hi, None]
        for start, stop in _row_blocks(n_next, n_labels):
            pair = (
                log_alpha[lo + start : lo + stop, :, None]
                + transitions
                + ahead[start:stop, None, :]
            )
            transition_marginals += np.exp(pair).sum(axis=0)
    return ForwardBackwardResult(log_partition, marginals, transition_marginals)


def _row_blocks(n_rows, n_labels):
    """Split rows so a (rows, L, L) temporary stays under the memory bound."""
    block = max(1, _MAX_BLOCK_ELEMENTS // (n_labels * n_labels))
    return [(start, min(start + block, n_rows)) for start in range(0, n_rows, block)]


def _log_matmul(log_a, log_b):
    """``log(exp(log_a) @ exp(log_b))`` without overflow.

    ``log_b``: one ``(L, L)`` matrix, or one per row of ``log_a`` (``(rows, L, L)``).
    """
    out = np.empty((log_a.shape[0], log_b.shape[-1]), dtype=log_a.dtype)
    for start, stop in _row_blocks(log_a.shape[0], log_b.shape[-2]):
        b = log_b if log_b.ndim == 2 else log_b[start:stop]
        out[start:stop] = logsumexp(log_a[start:stop, :, None] + b, axis=1)
    return out


def _log_messages(emissions, transitions, batch_sizes):
    """Log-domain forward and backward messages and each sequence's ``log Z``.

    ``transitions``: ``(L, L)``, or the matrix into each packed row,
    ``(n_rows, L, L)`` (input-conditioned transitions).
    """
    log_alpha = np.empty_like(emissions)
    log_beta = np.empty_like(emissions)
    steps = list(_steps(batch_sizes))
    per_row = transitions.ndim == 3
    prev_lo = 0
    for t, lo, hi in steps:
        log_alpha[lo:hi] = emissions[lo:hi]
        if t > 0:
            into = transitions[lo:hi] if per_row else transitions
            log_alpha[lo:hi] += _log_matmul(log_alpha[prev_lo : prev_lo + hi - lo], into)
        prev_lo = lo
    _, lo, hi = steps[-1]
    log_beta[lo:hi] = 0.0
    for (_, lo, hi), (_, next_lo, next_hi) in zip(steps[-2::-1], steps[:0:-1]):
        n_next = next_hi - next_lo
        ahead = emissions[next_lo:next_hi] + log_beta[next_lo:next_hi]
        out_of = transitions[next_lo:next_hi].transpose(0, 2, 1) if per_row else transitions.T
        log_beta[lo : lo + n_next] = _log_matmul(ahead, out_of)
        log_beta[lo + n_next : hi] = 0.0
    log_partition = logsumexp(log_alpha[last_rows(batch_sizes)], axis=1)
    return log_alpha, log_beta, log_partition, steps


def pair_marginals(emissions, transitions, batch_sizes):
    """``p(y_t = i, y_{t+1} = j | x)`` of every packed row, in the log domain.

    The plain reference of the transition marginals (and the fallback of
    the compiled path for scores no scaling can hold). Scores of ``-inf``
    (forbidden labels or pairs) are allowed: the probabilities are then
    conditioned on the allowed labellings.

    Parameters
    ----------
    emissions : ndarray of shape (n_rows, n_labels)
    transitions : ndarray of shape (n_labels, n_labels)
    batch_sizes : ndarray of shape (max_length,)

    Returns
    -------
    pairs : ndarray of shape (n_rows, n_labels, n_labels)
        ``pairs[r, i, j]``: row ``r`` has label ``i`` and the next token of
        its sequence label ``j``; zeros at a sequence's last row.
    log_partition : ndarray of shape (n_sequences,)
        In packed order; ``-inf`` for a sequence with no allowed labelling
        (its pairs are then NaN).
    """
    n_rows, n_labels = emissions.shape
    pairs = np.zeros((n_rows, n_labels, n_labels))
    if n_rows == 0:
        return pairs, np.zeros(0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_alpha, log_beta, log_partition, steps = _log_messages(
            emissions, transitions, batch_sizes
        )
        row_log_z = log_partition[_row_sequence(batch_sizes)]
        for (_, lo, _hi), (_, next_lo, next_hi) in zip(steps[:-1], steps[1:]):
            n_next = next_hi - next_lo
            ahead = emissions[next_lo:next_hi] + log_beta[next_lo:next_hi]
            pairs[lo : lo + n_next] = np.exp(
                log_alpha[lo : lo + n_next, :, None]
                + transitions
                + ahead[:, None, :]
                - row_log_z[lo : lo + n_next, None, None]
            )
    return pairs, log_partition
