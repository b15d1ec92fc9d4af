"""Time-major packed layout of a batch of sequences.

Sequences are sorted by decreasing length and their tokens laid out step by
step: block ``t`` holds token ``t`` of every sequence at least ``t + 1`` long,
in sorted order. Because the sort is by decreasing length, the sequences still
active at step ``t + 1`` are the *first* ``batch_sizes[t + 1]`` rows of block
``t``, so a recursion over time is one dense operation per step on contiguous
slices, with no gathers (the layout of PyTorch's ``PackedSequence``).

Conventions
-----------
- "flat" order: the tokens of sequence 0, then of sequence 1, ... as the user
  gave them (the row order of the vectorized feature matrix).
- "packed" order: block 0, block 1, ...; ``packed = flat[layout.flat_index]``.
- Sequences of length 0 are allowed: they come last in the sort and own no row.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PackedLayout:
    """Index arrays that describe the packed layout of one batch.

    Attributes
    ----------
    lengths : ndarray of shape (n_sequences,)
        Sequence lengths in the user's order.
    order : ndarray of shape (n_sequences,)
        Sequence indices sorted by decreasing length (stable).
    batch_sizes : ndarray of shape (max_length,)
        Number of sequences active at each step (non-increasing).
    offsets : ndarray of shape (max_length + 1,)
        Block ``t`` is packed rows ``offsets[t]:offsets[t + 1]``.
    flat_index : ndarray of shape (n_tokens,)
        Flat row of each packed row.
    """

    lengths: np.ndarray
    order: np.ndarray
    batch_sizes: np.ndarray
    offsets: np.ndarray
    flat_index: np.ndarray


def pack(lengths):
    """Compute the packed layout of sequences with the given lengths.

    Parameters
    ----------
    lengths : array-like of int, shape (n_sequences,)

    Returns
    -------
    PackedLayout

    Examples
    --------
    >>> layout = pack([2, 3, 1])
    >>> layout.batch_sizes.tolist()
    [3, 2, 1]
    >>> layout.flat_index.tolist()  # flat rows 2..4 are sequence 1
    [2, 0, 5, 3, 1, 4]
    """
    lengths = np.asarray(lengths, dtype=np.intp)
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    max_length = int(sorted_lengths[0]) if len(lengths) else 0

    # batch_sizes[t] = number of sequences longer than t
    length_counts = np.bincount(sorted_lengths, minlength=max_length + 1)
    batch_sizes = len(lengths) - np.cumsum(length_counts)[:max_length]
    offsets = np.zeros(max_length + 1, dtype=np.intp)
    np.cumsum(batch_sizes, out=offsets[1:])

    step = np.repeat(np.arange(max_length, dtype=np.intp), batch_sizes)
    sequence_index = np.arange(offsets[-1], dtype=np.intp) - offsets[step]
    flat_starts = np.zeros(len(lengths), dtype=np.intp)
    np.cumsum(lengths[:-1], out=flat_starts[1:])
    flat_index = flat_starts[order[sequence_index]] + step
    return PackedLayout(
        lengths=lengths,
        order=order,
        batch_sizes=batch_sizes.astype(np.intp),
        offsets=offsets,
        flat_index=flat_index,
    )


def sequence_rows(lengths, sequences):
    """Flat rows of the tokens of ``sequences`` (indices), in that order.

    Examples
    --------
    >>> sequence_rows([2, 3, 1], [2, 0]).tolist()
    [5, 0, 1]
    """
    lengths = np.asarray(lengths, dtype=np.intp)
    sequences = np.asarray(sequences, dtype=np.intp)
    starts = np.zeros(len(lengths), dtype=np.intp)
    np.cumsum(lengths[:-1], out=starts[1:])
    selected = lengths[sequences]
    out_starts = np.cumsum(selected) - selected
    return np.repeat(starts[sequences] - out_starts, selected) + np.arange(selected.sum())
