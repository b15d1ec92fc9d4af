"""Blocks of sequences in the packed layout, and their forward-backward.

Training and decoding both cut a batch of sequences into blocks of similar
length (sorted longest first, at most :data:`BLOCK_ELEMENTS` tokens x labels
per block, or one sequence), each held in the packed time-major layout of
:mod:`skcrf._packing` with its token features as CSR rows. Buffers are sized
by a block (a :class:`Workspace` per thread), never by the whole data.
"""

import numpy as np

from . import _kernels
from ._inference import forward_backward as _forward_backward_numpy
from ._packing import pack, sequence_rows

#: Upper bound on tokens x labels of one block (unless one sequence is longer).
BLOCK_ELEMENTS = 1 << 18

#: Largest transition spread (max - min, in nats) of the scaled
#: forward-backward: its scale factors stay above exp(-spread) / L and its
#: weighted rows below L * exp(2 * spread). Wider spreads, seen only at
#: extreme trial points of a line search, take the log-domain path.
MAX_TRANSITION_SPREAD = 300.0


class Block:
    """Sequences of similar length in the packed layout, with their features."""

    def __init__(self, encoded, sequences, drop_zeros):
        lengths = np.asarray(encoded.lengths)
        layout = pack(lengths[sequences])
        rows = sequence_rows(lengths, sequences)[layout.flat_index]
        self.indptr, self.ids, self.values = gather_rows(
            encoded.indptr, encoded.ids, encoded.values, rows, drop_zeros=drop_zeros
        )
        self.batch_sizes = layout.batch_sizes
        self.n_rows = len(rows)
        self.n_sequences = int(np.count_nonzero(lengths[sequences]))
        self.layout = layout
        self.rows = rows


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


def make_blocks(encoded, sequences, n_labels, *, drop_zeros=False):
    """Cut ``sequences`` (indices) into blocks of similar lengths within the budget."""
    lengths = np.asarray(encoded.lengths)
    sequences = np.asarray(sequences)
    sequences = sequences[np.argsort(-lengths[sequences], kind="stable")]
    budget = max(1, BLOCK_ELEMENTS // max(n_labels, 1))
    # A block ends where its running token count would pass the budget; the
    # cumulative sum gives every block boundary at once.
    ends = np.cumsum(lengths[sequences])
    blocks, start, base = [], 0, 0
    while start < len(sequences):
        stop = int(np.searchsorted(ends, base + budget, side="right"))
        stop = max(stop, start + 1)
        blocks.append(Block(encoded, sequences[start:stop], drop_zeros))
        base = int(ends[stop - 1])
        start = stop
    return blocks


class Workspace:
    """Per-thread buffers, sized by the largest block."""

    def __init__(self, blocks, n_labels):
        max_rows = max((block.n_rows for block in blocks), default=0)
        max_batch = max((int(block.batch_sizes[0]) for block in blocks if block.n_rows), default=0)
        self.psi = np.empty((max_rows, n_labels))
        self.alpha = np.empty((max_rows, n_labels))
        self.scale = np.empty(max_rows)
        self.row_max = np.empty(max_rows)
        self.beta_a = np.empty((max_batch, n_labels))
        self.beta_b = np.empty((max_batch, n_labels))


def block_marginals(block, workspace, model_arrays, want_pairs=None, check=None):
    """Marginals of a block (a view into the workspace) and the block's log Z sum.

    ``model_arrays`` is ``(state_ptr, state_labels, state_weights,
    transitions, exp_trans, t_max, spread)``. With ``want_pairs`` (an
    ``(L, L)`` array) the expected label pair counts are added to it;
    ``check(emissions)``, when given, sees the state scores first.
    """
    state_ptr, state_labels, state_weights, transitions, exp_trans, t_max, spread = model_arrays
    n = block.n_rows
    psi = workspace.psi[:n]
    _kernels.state_scores(
        block.indptr, block.ids, block.values, state_ptr, state_labels, state_weights, psi
    )
    if check is not None:
        check(psi)
    if not spread <= MAX_TRANSITION_SPREAD:
        result = _forward_backward_numpy(psi, transitions, block.batch_sizes)
        if want_pairs is not None:
            want_pairs += result.transition_marginals
        return result.marginals, float(result.log_partition.sum())
    row_max = workspace.row_max[:n]
    _kernels.subtract_row_max(psi, row_max)
    np.exp(psi, out=psi)
    alpha = workspace.alpha[:n]
    pairs = None
    if want_pairs is not None:
        pairs = np.zeros_like(want_pairs)
    log_sum = _kernels.forward_backward(
        psi, exp_trans, block.batch_sizes, alpha, workspace.scale,
        workspace.beta_a, workspace.beta_b, pairs,
    )
    if want_pairs is not None:
        want_pairs += pairs * exp_trans
    log_z = log_sum + float(row_max.sum()) + t_max * (n - block.n_sequences)
    return alpha, log_z


def model_arrays(state_ptr, state_labels, state_weights, transitions):
    """The tuple :func:`block_marginals` reads (exp of the transitions included)."""
    t_max = float(transitions.max()) if transitions.size else 0.0
    spread = t_max - float(transitions.min()) if transitions.size else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        exp_trans = np.exp(transitions - t_max)
    return (state_ptr, state_labels, state_weights, transitions, exp_trans, t_max, spread)
