"""Validation of labels: label sequences, classes, partial and missing labels.

The rules are those of :mod:`skcrf._featurize._validation`'s module docstring;
the messages name ``y[i][j]`` and the label.
"""

import numbers
from collections.abc import Iterator, Mapping
from typing import NamedTuple

import numpy as np

from ._validation import (
    _check_container,
    _count,
    _is_sequence,
    _short,
    _type_name,
    check_iterable,
    is_reusable,
    locate_row,
)

__all__ = [
    "PartialLabels",
    "check_classes",
    "check_distinct_labels",
    "check_label_sequence_pair",
    "check_label_sequences",
    "check_labels",
    "check_partial_labels",
    "check_partial_training_labels",
    "encode_labels",
    "same_label",
]


# -- labels ---------------------------------------------------------------------


def check_labels(y, lengths, name="y"):
    """Check label sequences against the token counts.

    Returns
    -------
    labels : list
        The labels of all tokens in flat order.
    """
    x_name = "X" + name[1:] if name.startswith("y") else "X"
    _check_container(y, name, "a list of label sequences")
    sequences = y if type(y) is list else list(y)
    if sequences:
        first = sequences[0]
        if (
            isinstance(first, (str, bytes))
            or not _is_sequence(first)
            or isinstance(first, Mapping)
        ):
            raise TypeError(
                f"{name} must be a list of label sequences, but {name}[0] is "
                f"{_type_name(first)} {_short(first)} (is {name} a flat list of "
                "labels?). Give one list of labels per sequence: "
                f"{name} = [[label, label, ...], ...]."
            )
    if len(sequences) != len(lengths):
        raise ValueError(
            f"{x_name} has {len(lengths)} sequences but {name} has {len(sequences)} "
            "label sequences; they must have one label sequence per sequence."
        )
    labels = []
    for i, (seq, length) in enumerate(zip(sequences, lengths)):
        if type(seq) is not list:
            if isinstance(seq, (str, bytes, Mapping)) or not (
                _is_sequence(seq) or isinstance(seq, Iterator)
            ):
                raise TypeError(
                    f"{name} must be a list of label sequences, but {name}[{i}] is "
                    f"{_type_name(seq)} {_short(seq)}. Give one list of labels per "
                    f"sequence: {name} = [[label, label, ...], ...]."
                )
            _check_container(seq, f"{name}[{i}]", "a label sequence (a list of labels)")
        if len(seq) != length:
            raise ValueError(
                f"{name}[{i}] has {_count(len(seq), 'label')} but {x_name}[{i}] has "
                f"{_count(length, 'token')}; every token needs exactly one label."
            )
        labels.extend(seq)
    _check_label_values(labels, lengths, name)
    return labels


def check_classes(classes):
    """``classes`` of partial_fit as a list of labels."""
    if isinstance(classes, (str, bytes, Mapping)) or not hasattr(classes, "__iter__"):
        raise TypeError(
            f"classes must be a list of labels; got {type(classes).__name__} {classes!r:.100}."
        )
    classes = list(classes)
    if not classes:
        raise ValueError("classes must hold at least one label.")
    check_distinct_labels([], classes=classes, classes_name="classes")
    return classes


def _check_label_values(labels, lengths, name):
    """Labels must be hashable and not NaN; name the first offender."""
    try:
        unique = dict.fromkeys(labels)
    except TypeError:
        for row, label in enumerate(labels):
            try:
                hash(label)
            except TypeError:
                i, j = locate_row(row, np.asarray(lengths))
                raise TypeError(
                    f"{name}[{i}][{j}]: the label {_short(label)} is not hashable; "
                    "labels must be hashable (str, int, tuple, ...)."
                ) from None
        raise
    for label in unique:
        if _is_nan(label):
            row = next(k for k, other in enumerate(labels) if _is_nan(other))
            i, j = locate_row(row, np.asarray(lengths))
            raise ValueError(
                f"{name}[{i}][{j}]: the label is NaN; NaN is not equal to itself, "
                "so it cannot be a label."
            )


def _is_nan(label):
    try:
        return bool(label != label)
    except Exception:  # noqa: BLE001 - a label with an odd __ne__ is not NaN
        return False


def encode_labels(labels, classes=None, name="y", lengths=None, classes_name="classes"):
    """Map labels to indices.

    Parameters
    ----------
    labels : list of hashable
    classes : ndarray of object or None
        Known classes; ``None`` learns them: sorted when the labels can be
        sorted, else in order of first appearance.
    name : str
        How to call the labels in error messages.
    lengths : array of int, optional
        Tokens of each sequence: errors then name ``name[i][j]`` (else the
        token in flat order).
    classes_name : str
        How to call ``classes`` in error messages.

    Returns
    -------
    indices : ndarray of int
        Index into ``classes``; -1 for a label not in ``classes``.
    classes : ndarray of object

    Raises
    ------
    ValueError
        If two labels, or a label and one of ``classes``, are equal in Python
        but not the same label (``1``, ``1.0``, ``True``): see
        :func:`check_distinct_labels`.
    """
    try:
        check_distinct_labels(
            labels, name, classes=classes, lengths=lengths, classes_name=classes_name
        )
        if classes is None:
            unique = list(dict.fromkeys(labels))
            try:
                unique = sorted(unique)
            except TypeError:
                pass  # mixed, unorderable label types: keep first appearance
            classes = np.empty(len(unique), dtype=object)
            classes[:] = unique
        index = {label: k for k, label in enumerate(classes)}
        indices = np.fromiter(
            (index.get(label, -1) for label in labels), dtype=np.intp, count=len(labels)
        )
    except TypeError as exc:
        for k, label in enumerate(labels):
            try:
                hash(label)
            except TypeError:
                raise TypeError(
                    f"{_where(name, k, lengths)}: label {label!r} is not "
                    "hashable; labels must be hashable (str, int, ...)."
                ) from exc
        raise
    return indices, classes


def _kind_of_type(cls):
    """What labels of type ``cls`` are, with numpy's scalar types counted as Python's."""
    if issubclass(cls, str):
        return str
    if issubclass(cls, (bool, np.bool_)):
        return bool
    if issubclass(cls, numbers.Integral):
        return int
    if issubclass(cls, numbers.Real):
        return float
    return cls


def _label_kind(label):
    """What a label is, with numpy's scalar types counted as Python's."""
    return _kind_of_type(type(label))


def _label_key(label):
    """A label with its kind, recursively.

    Two labels are the same label exactly when their keys are equal:
    ``(1, "a")`` and ``(True, "a")`` are not, though Python finds them equal.
    """
    if isinstance(label, (tuple, frozenset)):
        members = (_label_key(member) for member in label)
        return type(label), (tuple(members) if isinstance(label, tuple) else frozenset(members))
    return _label_kind(label), label


#: Label types whose equal values of one type are always the same label.
PLAIN_LABEL_TYPES = frozenset({str, int, float, bool})


def same_label(first, second):
    """Whether two labels equal in Python are also the same label (of one kind)."""
    kind = type(first)
    if kind is type(second) and kind in PLAIN_LABEL_TYPES:
        return True  # equal values of one plain type: the common case, without keys
    return bool(_label_key(first) == _label_key(second))


def _may_conflict(types):
    """Whether labels of these types can be equal without being the same."""
    kinds = {_kind_of_type(cls) for cls in types}
    return len(kinds) > 1 or any(issubclass(cls, (tuple, frozenset)) for cls in types)


def _where(name, row, lengths):
    if lengths is None:
        return f"{name} (token {row} in flat order)"
    i, j = locate_row(row, np.asarray(lengths))
    return f"{name}[{i}][{j}]"


def _describe(label):
    return f"{_short(label)} ({type(label).__name__})"


def check_distinct_labels(
    labels, name="y", *, classes=None, lengths=None, rows=None, classes_name="classes"
):
    """Reject labels that are equal but not the same (``1``, ``1.0``, ``True``).

    Python's ``==`` would merge them into one class, and predictions would
    return only one of them: a silent wrong answer. The labels are checked
    among themselves and against ``classes`` (labels a model already has);
    numpy's scalar types count as Python's (``np.int64(1)`` is ``1``), and a
    tuple or frozenset is compared member by member.

    Parameters
    ----------
    labels : list of hashable
    name : str
        How to call the labels in error messages.
    classes : sequence of hashable, optional
        Labels already known (a model's classes): checked among themselves
        too, as ``classes_name``.
    lengths : array of int, optional
        Tokens of each sequence, to name ``name[i][j]``.
    rows : list of int, optional
        The token (in flat order) of each label, when ``labels`` are not all
        the tokens' labels in order.
    classes_name : str

    Raises
    ------
    ValueError
        Naming both labels, their types and where they are.
    """
    known = [] if classes is None else list(classes)
    types = set(map(type, labels))
    types.update(map(type, known))
    if not _may_conflict(types):
        return
    first = {}
    for k, label in enumerate(known):
        key = _label_key(label)
        seen = first.setdefault(label, (k, label, key, True))
        if seen[2] != key:
            raise ValueError(
                f"{classes_name}: the labels {_describe(seen[1])} at index {seen[0]} and "
                f"{_describe(label)} at index {k} are equal in Python but not the same "
                "label; they would be merged into one class. Use labels of one type "
                "(e.g. all str)."
            )
    for k, label in enumerate(labels):
        key = _label_key(label)
        row = k if rows is None else rows[k]
        seen = first.setdefault(label, (row, label, key, False))
        if seen[2] == key:
            continue
        if seen[3]:
            raise ValueError(
                f"{_where(name, row, lengths)}: the label {_describe(label)} and the label "
                f"{_describe(seen[1])} of {classes_name} {_short(known)} are equal in "
                "Python but not the same label; they would be merged into one class. "
                "Use labels of the classes' type."
            )
        raise ValueError(
            f"{_where(name, row, lengths)}: the labels {_describe(seen[1])} at "
            f"{_where(name, seen[0], lengths)} and {_describe(label)} are equal in "
            "Python but not the same label; they would be merged into one class. "
            "Use labels of one type (e.g. all str)."
        )


# -- label sequences on their own (metrics) ------------------------------------


def _flat_list_error(name, i, seq):
    kind = "a string" if isinstance(seq, (str, bytes)) else "a single label"
    return TypeError(
        f"{name}[{i}] is {kind} ({_short(seq)}), not a sequence of labels: is {name} "
        f"a flat list of labels? {name} must be a list of label sequences, "
        f"{name} = [[label, label, ...], ...]; wrap a single sequence as [{name}]."
    )


def check_label_sequences(y, name="y", iterables=False):
    """Check a list of label sequences; return it as a list of lists.

    Parameters
    ----------
    y : sequence of sequences of hashable labels
        A list, tuple or numpy array of sequences; each sequence a list,
        tuple or 1-D array of labels. Generators are rejected (pass
        ``list(y)``).
    name : str
        How to call ``y`` in error messages.
    iterables : bool, default=False
        Accept any iterable of label sequences (a generator included, read
        once) for ``y`` itself; the sequences are still checked one by one.

    Returns
    -------
    list of list
        The label sequences (numpy scalars as Python scalars).

    Examples
    --------
    >>> check_label_sequences([["B", "I"], ("O",)], name="y_true")
    [['B', 'I'], ['O']]
    """
    if iterables and not is_reusable(y):
        check_iterable(y, name, "a list of label sequences")
    else:
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
            if (
                isinstance(seq, (str, bytes))
                or not _is_sequence(seq)
                or (isinstance(seq, np.ndarray) and seq.ndim == 0)
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


def check_label_sequence_pair(y_true, y_pred, names=("y_true", "y_pred"), iterables=False):
    """Check two lists of label sequences of the same shape.

    ``iterables=True`` accepts any iterable (a generator included) for
    either, as :func:`check_label_sequences` does.

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
    y_true = check_label_sequences(y_true, true_name, iterables)
    y_pred = check_label_sequences(y_pred, pred_name, iterables)
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


# -- partial labels -------------------------------------------------------------


def check_partial_labels(partial_labels, lengths, classes, name="partial_labels"):
    """Check decoding-time partial labels; return them as token masks.

    Parameters
    ----------
    partial_labels : list
        One entry per sequence: None (every token free) or a list with one
        entry per token: None (free), a label of ``classes`` (known), or a
        set / frozenset of labels (the true label is one of them; members
        that are not in ``classes`` are ignored, at least one must be).
    lengths : ndarray of int
        Tokens of each sequence.
    classes : ndarray of object
        The model's labels.
    name : str

    Returns
    -------
    token_index : ndarray of int32, shape (n_tokens,)
        -1 for a free token, else its row of ``token_masks`` (flat order).
    token_masks : ndarray of bool, shape (n_masked, n_labels)
        The labels allowed at each constrained token.
    """
    _check_container(partial_labels, name, "a list with one entry (None or a list) per sequence")
    sequences = partial_labels if type(partial_labels) is list else list(partial_labels)
    lengths = np.asarray(lengths)
    if len(sequences) != len(lengths):
        raise ValueError(
            f"X has {len(lengths)} sequences but {name} has {len(sequences)} entries; "
            "give one entry (None or a list with one entry per token) per sequence."
        )
    labels = classes.tolist()
    index = {label: k for k, label in enumerate(labels)}
    n_labels = len(index)
    # labels of the model's one plain type are found through the index alone
    label_types = {type(label) for label in labels}
    plain_type = label_types.pop() if len(label_types) == 1 else None
    if plain_type not in PLAIN_LABEL_TYPES:
        plain_type = None
    rows, known, set_rows, set_masks = [], [], [], []
    offset = 0
    for i, (seq, length) in enumerate(zip(sequences, lengths.tolist())):
        if seq is not None:
            if type(seq) is not list:
                if isinstance(seq, (str, bytes, Mapping, set, frozenset)) or not _is_sequence(seq):
                    raise TypeError(
                        f"{name}[{i}] must be None or a list with one entry per token; got "
                        f"{_type_name(seq)} {_short(seq)}."
                    )
            if len(seq) != length:
                raise ValueError(
                    f"{name}[{i}] has {len(seq)} {'entry' if len(seq) == 1 else 'entries'}"
                    f" but X[{i}] has {_count(length, 'token')}; give one entry (None, a "
                    "label or a set of labels) per token."
                )
            for j in [j for j, value in enumerate(seq) if value is not None]:
                value = seq[j]
                if type(value) is plain_type:
                    k = index.get(value)
                    if k is not None:
                        rows.append(offset + j)
                        known.append(k)
                        continue
                if isinstance(value, (set, frozenset)):
                    mask = np.zeros(n_labels, dtype=bool)
                    for member in value:
                        k = _label_position(index, labels, member, name, i, j)
                        if k is not None:
                            mask[k] = True
                    if not mask.any():
                        raise ValueError(
                            f"{name}[{i}][{j}]: none of the labels {_short(value)} is one of "
                            f"the model's labels {_short(list(classes))}; a set must hold at "
                            "least one of them."
                        )
                    set_rows.append(offset + j)
                    set_masks.append(mask)
                    continue
                k = _label_position(index, labels, value, name, i, j)
                if k is None:
                    raise ValueError(
                        f"{name}[{i}][{j}]: the label {_short(value)} is not one of the "
                        f"model's labels {_short(list(classes))}."
                    )
                rows.append(offset + j)
                known.append(k)
        offset += length
    token_index = np.full(offset, -1, dtype=np.int32)
    token_masks = np.zeros((len(rows) + len(set_rows), n_labels), dtype=bool)
    token_masks[np.arange(len(rows)), np.asarray(known, dtype=np.intp)] = True
    if set_rows:
        token_masks[len(rows) :] = set_masks
    token_index[np.asarray(rows + set_rows, dtype=np.intp)] = np.arange(
        len(token_masks), dtype=np.int32
    )
    return token_index, token_masks


def _label_position(index, labels, label, name, i, j):
    """Index of ``label`` among the model's ``labels`` (``index``: label -> k), or None."""
    try:
        k = index.get(label)
    except TypeError:
        raise TypeError(
            f"{name}[{i}][{j}]: {_short(label)} is not hashable; give None, a label or "
            "a set of labels."
        ) from None
    if k is not None:
        known = labels[k]
        # the same plain type (str, int, ...): the same label; else check the kinds
        if not (type(known) is type(label) and type(label) in PLAIN_LABEL_TYPES) and not (
            same_label(known, label)
        ):
            raise ValueError(
                f"{name}[{i}][{j}]: the label {_describe(label)} is equal in Python to "
                f"the model's label {_describe(known)} but not the same label; use the "
                "labels of classes_."
            )
    return k


class PartialLabels(NamedTuple):
    """Partially labelled training data (see :func:`check_partial_training_labels`).

    ``sequences`` are the indices of the sequences that are neither fully
    labelled nor fully unknown; ``token_index`` / ``token_masks`` give the
    labels allowed at each of their tokens (known: one label; fuzzy: the
    set; unknown: free, -1), in flat order over all tokens.
    """

    sequences: np.ndarray  # intp
    token_index: np.ndarray  # int32, shape (n_tokens,)
    token_masks: np.ndarray  # bool, shape (n_masked, n_labels)
    complete: np.ndarray  # bool, shape (n_sequences,): every label known


def check_partial_training_labels(y, lengths, missing_label, name="y", previous_classes=None):
    """Check training labels where some are missing or fuzzy.

    Parameters
    ----------
    y : list of label sequences
        A label equal to ``missing_label`` is unknown; a set / frozenset of
        labels is fuzzy (the true label is one of them).
    lengths : ndarray of int
    missing_label : hashable, not None
    name : str
    previous_classes : ndarray of object, optional
        Labels the model already has (warm start): they stay classes.

    Returns
    -------
    label_index : ndarray of intp, shape (n_tokens,)
        Index into ``classes`` of each known label; -1 for an unknown or
        fuzzy one.
    classes : ndarray of object
        The known labels and the members of the fuzzy ones (sorted when they
        can be, as :func:`encode_labels`).
    partial : PartialLabels or None
        None when every label is known (training is then exactly the usual).

    Raises
    ------
    ValueError
        If every label is ``missing_label`` (there would be no class), or on
        a label that is not valid (the message names ``y[i][j]``).
    """
    if _is_nan(missing_label):
        raise ValueError("missing_label is NaN, which equals nothing; use another marker.")
    _check_container(y, name, "a list of label sequences")
    sequences = y if type(y) is list else list(y)
    if len(sequences) != len(lengths):
        raise ValueError(
            f"X has {len(lengths)} sequences but {name} has {len(sequences)} label "
            "sequences; they must have one label sequence per sequence."
        )
    flat, kinds = [], []  # kind: 0 known, 1 missing, 2 fuzzy
    members, member_rows = [], []
    for i, (seq, length) in enumerate(zip(sequences, lengths)):
        if type(seq) is not list:
            if isinstance(seq, (str, bytes, Mapping)) or not _is_sequence(seq):
                raise TypeError(
                    f"{name} must be a list of label sequences, but {name}[{i}] is "
                    f"{_type_name(seq)} {_short(seq)}."
                )
        if len(seq) != length:
            raise ValueError(
                f"{name}[{i}] has {_count(len(seq), 'label')} but X[{i}] has "
                f"{_count(length, 'token')}; every token needs exactly one label (or "
                "missing_label)."
            )
        for j, label in enumerate(seq):
            if isinstance(label, (set, frozenset)):
                if not label:
                    raise ValueError(
                        f"{name}[{i}][{j}]: the fuzzy label is an empty set; it must hold "
                        "at least one label."
                    )
                for member in label:
                    if _is_missing(member, missing_label, name, i, j):
                        raise ValueError(
                            f"{name}[{i}][{j}]: the fuzzy label {_short(label)} holds "
                            f"missing_label={missing_label!r:.60}; use missing_label alone "
                            "for an unknown label."
                        )
                    members.append(member)
                    member_rows.append(len(flat))
                flat.append(label)
                kinds.append(2)
            elif _is_missing(label, missing_label, name, i, j):
                flat.append(label)
                kinds.append(1)
            else:
                flat.append(label)
                kinds.append(0)
    kinds = np.asarray(kinds, dtype=np.int8)
    if len(kinds) and (kinds == 1).all():
        # no class to learn (or, on warm start, nothing to learn them from);
        # a model of zero labels would fail at predict
        raise ValueError(
            f"every label of {name} ({_count(len(kinds), 'token')}) is "
            f"missing_label={missing_label!r:.60}: there is no label to train on. Give "
            "the known labels (or sets of labels) of at least some tokens."
        )
    known_rows = np.flatnonzero(kinds == 0)
    known_labels = [flat[k] for k in known_rows.tolist()]
    # the checks name the token in flat order through locate_row
    _check_label_values(known_labels + members, [len(known_labels) + len(members)], name)
    check_distinct_labels(
        known_labels + members,
        name,
        classes=previous_classes,
        lengths=lengths,
        rows=known_rows.tolist() + member_rows,
        classes_name="classes_ (of the model warm_start continues)",
    )
    prior = [] if previous_classes is None else list(previous_classes)
    _, classes = encode_labels(prior + known_labels + members, name=name)
    label_index = np.full(len(flat), -1, dtype=np.intp)
    label_index[known_rows], _ = encode_labels(known_labels, classes, name=name)
    if not (kinds != 0).any():
        return label_index, classes, None
    n_labels = len(classes)
    member_index, _ = encode_labels(members, classes, name=name)
    masks = np.zeros((len(flat), n_labels), dtype=bool)
    masks[known_rows, label_index[known_rows]] = True
    if len(members):
        masks[np.asarray(member_rows, dtype=np.intp), member_index] = True
    free = ~masks.any(axis=1) | masks.all(axis=1)  # unknown, or a set of every label
    if n_labels > 1 and not len(known_rows) and free.all():
        raise ValueError(
            f"no token of {name} has a known label, and every set of labels holds "
            f"all {n_labels} labels {_short(list(classes))}: the labels constrain "
            "nothing, there is nothing to train on. Give the known labels (or "
            "smaller sets) of at least some tokens."
        )
    lengths = np.asarray(lengths, dtype=np.intp)
    sequence_of = np.repeat(np.arange(len(lengths)), lengths)
    n_free = np.bincount(sequence_of, weights=free, minlength=len(lengths))
    n_uncertain = np.bincount(sequence_of, weights=kinds != 0, minlength=len(lengths))
    complete = n_uncertain == 0
    partial = np.flatnonzero(~complete & (n_free < lengths))
    constrained = ~free & ~complete[sequence_of]
    token_index = np.full(len(flat), -1, dtype=np.int32)
    rows = np.flatnonzero(constrained)
    token_index[rows] = np.arange(len(rows), dtype=np.int32)
    return label_index, classes, PartialLabels(partial, token_index, masks[rows], complete)


def _is_missing(label, missing_label, name, i, j):
    """Whether ``name[i][j]``, ``label``, is ``missing_label``."""
    try:
        equal = bool(label == missing_label)
    except Exception:  # noqa: BLE001 - an odd __eq__ (numpy arrays): not missing
        return False
    if equal and not same_label(label, missing_label):
        raise ValueError(
            f"{name}[{i}][{j}]: the label {_describe(label)} is equal in Python to "
            f"missing_label={_describe(missing_label)} but not the same label; is it "
            "unknown or a label? Give missing_label itself for an unknown label, or "
            "choose a missing_label of another value."
        )
    return equal
