"""Plain references of the package's fast code, for the tests only.

The package's kernels are checked against these (and against brute-force
enumeration on tiny problems); they favour plainness over speed.
"""

import itertools
import struct

import numpy as np

from skcrf._inference._logspace import _row_blocks, _steps

# A row whose previous scores leave at most this many labels in the running
# is reduced over those only (most rows, once the emissions are trained).
_FEW_CANDIDATES = 8
_MIN_PRUNED_ELEMENTS = 2048


def _viterbi_step(prev, transitions_t, spread, best, backpointer):
    """One max-product step: the best previous label of each row and label.

    For each row r and label j, ``argmax_i prev[r, i] + transitions_t[j, i]``
    and its score.

    A previous label ``i`` with ``prev[r, i] < max(prev[r]) - spread``
    (``spread``: max minus min transition score) can never win, nor tie:
    ``prev[r, i] + T[i, j] <= prev[r, i] + max T < max(prev[r]) + min T``.
    Rows with few remaining labels are reduced over those, in label order
    (so ties still go to the lowest label); the others over all labels.
    """
    n_rows, n_labels = prev.shape
    rest = None  # rows reduced over all labels; None: every row
    # small steps: the pruning's extra numpy calls cost more than they save
    if n_labels > 2 * _FEW_CANDIDATES and n_rows * n_labels >= _MIN_PRUNED_ELEMENTS:
        top = prev.max(axis=1, keepdims=True)
        # a margin against rounding: pruning less is always safe
        in_running = prev >= top - (spread + 1e-9 * (1.0 + np.abs(top) + spread))
        few = np.count_nonzero(in_running, axis=1) <= _FEW_CANDIDATES
        rows = np.flatnonzero(few)
        rest = np.flatnonzero(~few)
        # the labels in the running first, each group in label order
        labels = np.argsort(~in_running[rows], axis=1, kind="stable")[:, :_FEW_CANDIDATES]
        candidates = np.take_along_axis(prev[rows], labels, axis=1)[:, None, :] + transitions_t[
            :, labels
        ].transpose(1, 0, 2)
        arg = candidates.argmax(axis=2)
        backpointer[rows] = np.take_along_axis(labels, arg, axis=1)
        best[rows] = np.take_along_axis(candidates, arg[:, :, None], axis=2)[:, :, 0]
    for start, stop in _row_blocks(n_rows if rest is None else len(rest), n_labels):
        index = slice(start, stop) if rest is None else rest[start:stop]
        candidates = prev[index, None, :] + transitions_t
        arg = candidates.argmax(axis=2)
        backpointer[index] = arg
        best[index] = np.take_along_axis(candidates, arg[:, :, None], axis=2)[:, :, 0]


def viterbi(emissions, transitions, batch_sizes):
    """Most probable labelling of every sequence of a packed batch.

    Ties go to the lowest label index, as in CRFsuite.

    Parameters
    ----------
    emissions : ndarray of shape (n_tokens, n_labels)
    transitions : ndarray of shape (n_labels, n_labels)
    batch_sizes : ndarray of shape (max_length,)

    Returns
    -------
    path : ndarray of shape (n_tokens,)
        Label index of each packed row.
    best_score : ndarray of shape (n_sequences,)
        Score of the best labelling, in packed (sorted) sequence order.
    """
    n_tokens, n_labels = emissions.shape
    best = np.empty_like(emissions)
    backpointer = np.empty((n_tokens, n_labels), dtype=np.intp)
    # candidates[r, j, i] = best[r, i] + transitions[i, j]: the reduction over
    # the previous label i runs along the last, contiguous axis.
    transitions_t = np.ascontiguousarray(transitions.T)
    spread = float(transitions.max() - transitions.min()) if n_labels else 0.0
    steps = list(_steps(batch_sizes))
    prev_lo = 0
    for t, lo, hi in steps:
        if t == 0:
            best[lo:hi] = emissions[lo:hi]
            continue
        _viterbi_step(
            best[prev_lo : prev_lo + hi - lo],
            transitions_t,
            spread,
            best[lo:hi],
            backpointer[lo:hi],
        )
        best[lo:hi] += emissions[lo:hi]
        prev_lo = lo

    path = np.empty(n_tokens, dtype=np.intp)
    n_sequences = int(batch_sizes[0]) if len(batch_sizes) else 0
    best_score = np.empty(n_sequences, dtype=emissions.dtype)
    # A sequence ends at step t when it is active at t but not at t + 1.
    for (_t, lo, hi), n_next in zip(reversed(steps), [0] + [int(s) for s in batch_sizes[:0:-1]]):
        if n_next:
            next_lo = hi
            rows = np.arange(n_next)
            path[lo : lo + n_next] = backpointer[next_lo + rows, path[next_lo : next_lo + n_next]]
        ending = best[lo + n_next : hi]
        path[lo + n_next : hi] = ending.argmax(axis=1)
        best_score[n_next : hi - lo] = ending.max(axis=1)
    return path, best_score


def kbest_packed(emissions, transitions, batch_sizes, k, paths_out, scores_out):
    """The ``k`` best labellings of every sequence of a packed batch (eager).

    Same arguments, results and tie order as
    :func:`skcrf._inference._nbest.kbest_packed`: every node keeps its ``k``
    best partial paths, ordered by score (before the node's emission is
    added), then by previous label, then by that label's rank; the final
    list by score, then last label, then rank. Returns the number found per
    sequence (packed order); rows of ``paths_out`` past it are left as they were.
    """
    emissions = np.asarray(emissions)
    transitions = np.asarray(transitions)
    batch_sizes = np.asarray(batch_sizes)
    n_labels = emissions.shape[1]
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
    n_sequences = int(batch_sizes[0]) if len(batch_sizes) else 0
    found = np.zeros(n_sequences, dtype=np.intp)
    allowed = transitions > -np.inf
    for column in range(n_sequences):
        length = int(np.count_nonzero(batch_sizes > column))
        rows = offsets[:length] + column
        prev = np.full((n_labels, k), -np.inf)
        prev[:, 0] = emissions[rows[0]]
        back = []  # per step: (label, rank) of the predecessor of each (label, rank)
        for t in range(1, length):
            e = emissions[rows[t]]
            candidates = prev[:, :, None] + transitions[:, None, :]  # (i, r, j)
            usable = (prev > -np.inf)[:, :, None] & allowed[:, None, :]
            candidates = np.where(usable, candidates, -np.inf)
            cur = np.full((n_labels, k), -np.inf)
            label = np.full((n_labels, k), -1)
            rank = np.full((n_labels, k), -1)
            for j in range(n_labels):
                if e[j] == -np.inf:
                    continue
                flat = candidates[:, :, j].ravel()  # in (previous label, rank) order
                best = np.argsort(-flat, kind="stable")[:k]
                best = best[flat[best] > -np.inf]
                cur[j, : len(best)] = flat[best] + e[j]
                label[j, : len(best)], rank[j, : len(best)] = np.divmod(best, k)
            back.append((label, rank))
            prev = cur
        flat = prev.ravel()  # in (last label, rank) order
        best = np.argsort(-flat, kind="stable")[:k]
        best = best[flat[best] > -np.inf]
        found[column] = len(best)
        scores_out[column, : len(best)] = flat[best]
        scores_out[column, len(best) :] = -np.inf
        for q, index in enumerate(best):
            j, r = divmod(int(index), k)
            for t in range(length - 1, -1, -1):
                paths_out[q, rows[t]] = j
                if t > 0:
                    label, rank = back[t - 1]
                    j, r = int(label[j, r]), int(rank[j, r])
    return found


def labellings(emissions, transitions, lengths):
    """Every labelling of every non-empty sequence, and its score (brute force).

    ``emissions``: n_tokens x n_labels, the sequences of ``lengths`` one after
    the other. Yields, per sequence with at least one token, ``(tokens,
    paths, scores)``: the slice of its rows, every labelling (one row each,
    in ``itertools.product`` order) and each labelling's emission plus
    transition score.
    """
    n_labels = transitions.shape[0]
    start = 0
    for length in lengths:
        stop = start + int(length)
        if stop > start:
            em = emissions[start:stop]
            paths = np.array(list(itertools.product(range(n_labels), repeat=stop - start)))
            scores = em[np.arange(stop - start), paths].sum(axis=1)
            scores += transitions[paths[:, :-1], paths[:, 1:]].sum(axis=1)
            yield slice(start, stop), paths, scores
        start = stop


def to_flat(layout, packed):
    """Rows (axis 0) in the packed order of ``layout`` put back in the flat order."""
    flat = np.empty_like(packed)
    flat[layout.flat_index] = packed
    return flat


def marginal_dicts(marginals, lengths, labels):
    """One list per sequence of one ``{label: probability}`` dict per token (rows in flat order)."""
    rows = [dict(zip(labels, row)) for row in np.asarray(marginals).tolist()]
    bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(int).tolist()
    return [rows[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]


# -- lookup3 hashlittle, one key at a time --------------------------------------

_U32 = 0xFFFFFFFF


def _rot(x, k):
    return ((x << k) | (x >> (32 - k))) & _U32


def _mix(a, b, c):
    a = (a - c) & _U32
    a ^= _rot(c, 4)
    c = (c + b) & _U32
    b = (b - a) & _U32
    b ^= _rot(a, 6)
    a = (a + c) & _U32
    c = (c - b) & _U32
    c ^= _rot(b, 8)
    b = (b + a) & _U32
    a = (a - c) & _U32
    a ^= _rot(c, 16)
    c = (c + b) & _U32
    b = (b - a) & _U32
    b ^= _rot(a, 19)
    a = (a + c) & _U32
    c = (c - b) & _U32
    c ^= _rot(b, 4)
    b = (b + a) & _U32
    return a, b, c


def _final(a, b, c):
    c ^= b
    c = (c - _rot(b, 14)) & _U32
    a ^= c
    a = (a - _rot(c, 11)) & _U32
    b ^= a
    b = (b - _rot(a, 25)) & _U32
    c ^= b
    c = (c - _rot(b, 16)) & _U32
    a ^= c
    a = (a - _rot(c, 4)) & _U32
    b ^= a
    b = (b - _rot(a, 14)) & _U32
    c ^= b
    c = (c - _rot(b, 24)) & _U32
    return a, b, c


def hashlittle(key, initval=0):
    """Bob Jenkins' lookup3 ``hashlittle`` of the bytes ``key`` (a 32-bit int).

    The reference of :func:`skcrf._persist._cqdb.hash_keys`. The key is read
    as little-endian 32-bit words, 12 bytes (3 words) per round; the last,
    partial block is padded with zero bytes (this is what the C code's masks
    amount to).
    """
    key = bytes(key)
    n = len(key)
    a = b = c = (0xDEADBEEF + n + initval) & _U32
    if n == 0:
        return c
    padded = key.ljust(-(-n // 12) * 12, b"\0")
    words = struct.unpack(f"<{len(padded) // 4}I", padded)
    last = len(words) - 3
    for i in range(0, last, 3):
        a, b, c = _mix((a + words[i]) & _U32, (b + words[i + 1]) & _U32, (c + words[i + 2]) & _U32)
    a, b, c = _final(
        (a + words[last]) & _U32, (b + words[last + 1]) & _U32, (c + words[last + 2]) & _U32
    )
    return c


def two_loop_direction(grad, s_mem, y_mem, ys_mem, newest, n_pairs, gamma, owlqn=False):
    """``-H grad`` of L-BFGS: the two-loop recursion, one numpy pass at a time
    (``owlqn``: 0 where it does not move against ``grad``)."""
    m = len(s_mem)
    slots = [(newest - i) % m for i in range(n_pairs)]  # newest first
    d = -grad
    alpha = np.empty(n_pairs)
    for i, j in enumerate(slots):
        alpha[i] = s_mem[j] @ d / ys_mem[j]
        d = d - alpha[i] * y_mem[j]
    d = gamma * d
    for i in reversed(range(n_pairs)):
        j = slots[i]
        beta = y_mem[j] @ d / ys_mem[j]
        d = d + (alpha[i] - beta) * s_mem[j]
    if owlqn:
        d[d * grad >= 0.0] = 0.0
    return d


def owlqn_trial(x0, pg0, d, step):
    """OWL-QN's projected trial point, ``|x|_1`` and ``(x - x0) . pg0``."""
    orthant = np.where(x0 != 0.0, x0, -pg0)
    x = d * step + x0
    x[x * orthant < 0.0] = 0.0
    return x, np.abs(x).sum(), (x - x0) @ pg0
