"""Validation of label sequences given on their own (no token sequences).

The metrics take ``y_true`` and ``y_pred`` without the ``X`` they label, so
:func:`skcrf._validation.check_labels` (which checks labels against token
counts) cannot be called first. :func:`check_label_sequences` applies the same
rules as :mod:`skcrf._validation` (same containers accepted, generators
rejected, labels hashable and not NaN, messages naming ``y[i]`` / ``y[i][j]``)
and :func:`check_label_sequence_pair` checks two of them against each other.

This belongs in :mod:`skcrf._validation`; it lives here only until that
module's owner moves it there.
"""

from collections.abc import Iterator, Mapping

import numpy as np

from ._validation import _check_container, _check_label_values, _is_sequence, _short

__all__ = ["check_label_sequence_pair", "check_label_sequences"]


def _flat_list_error(name, i, seq):
    kind = "a string" if isinstance(seq, (str, bytes)) else "a single label"
    return TypeError(
        f"{name}[{i}] is {kind} ({_short(seq)}), not a sequence of labels: is {name} "
        f"a flat list of labels? {name} must be a list of label sequences, "
        f"{name} = [[label, label, ...], ...]; wrap a single sequence as [{name}]."
    )


def check_label_sequences(y, name="y"):
    """Check a list of label sequences; return it as a list of lists.

    Parameters
    ----------
    y : sequence of sequences of hashable labels
        A list, tuple or numpy array of sequences; each sequence a list,
        tuple or 1-D array of labels. Generators are rejected (pass
        ``list(y)``).
    name : str
        How to call ``y`` in error messages.

    Returns
    -------
    list of list
        The label sequences (numpy scalars as Python scalars).

    Examples
    --------
    >>> check_label_sequences([["B", "I"], ("O",)], name="y_true")
    [['B', 'I'], ['O']]
    """
    _check_container(y, name, "a list of label sequences")
    sequences = []
    for i, seq in enumerate(y if type(y) is list else list(y)):
        if type(seq) is not list:
            if isinstance(seq, (set, frozenset, Mapping)):
                raise TypeError(
                    f"{name}[{i}] is a {type(seq).__name__}, which is unordered; each "
                    "sequence must be a list, tuple or 1-D array of labels."
                )
            if isinstance(seq, Iterator):  # a generator: "pass list(...)"
                _check_container(seq, f"{name}[{i}]", "a label sequence (a list of labels)")
            if isinstance(seq, (str, bytes)) or not _is_sequence(seq) or (
                isinstance(seq, np.ndarray) and seq.ndim == 0
            ):
                raise _flat_list_error(name, i, seq)
            if isinstance(seq, np.ndarray) and seq.ndim != 1:
                raise ValueError(
                    f"{name}[{i}] is a {seq.ndim}-D array; each sequence must be 1-D."
                )
            _check_container(seq, f"{name}[{i}]", "a label sequence (a list of labels)")
            seq = seq.tolist() if isinstance(seq, np.ndarray) else list(seq)
        sequences.append(seq)
    labels = [label for seq in sequences for label in seq]
    _check_label_values(labels, [len(seq) for seq in sequences], name)
    return sequences


def check_label_sequence_pair(y_true, y_pred, names=("y_true", "y_pred")):
    """Check two lists of label sequences of the same shape.

    Returns
    -------
    y_true, y_pred : list of list

    Raises
    ------
    TypeError
        If either is not a list of label sequences (a string, a flat list of
        labels, a generator, ...).
    ValueError
        If the numbers of sequences differ, or ``y_true[i]`` and ``y_pred[i]``
        have different lengths (the message names ``i``).
    """
    true_name, pred_name = names
    y_true = check_label_sequences(y_true, true_name)
    y_pred = check_label_sequences(y_pred, pred_name)
    if len(y_true) != len(y_pred):
        raise ValueError(
            f"{true_name} and {pred_name} must contain the same number of sequences; "
            f"got {len(y_true)} and {len(y_pred)}."
        )
    for i, (seq_true, seq_pred) in enumerate(zip(y_true, y_pred)):
        if len(seq_true) != len(seq_pred):
            raise ValueError(
                f"{true_name}[{i}] has length {len(seq_true)} but {pred_name}[{i}] has "
                f"length {len(seq_pred)}; each pair of sequences must have the same "
                "length."
            )
    return y_true, y_pred
