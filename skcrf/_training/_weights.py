"""Sample and class weights: checks, per-token weights, sequences of weight 0.

Weighted training is one vector ``c`` of per-token weights (flat order): a
sequence's ``sample_weight`` times the ``class_weight`` of each token's gold
label (1 for a token whose label is unknown or a set of candidates). The
objective it weights is in :mod:`skcrf._training._objective`; the online
trainers scale their updates (:mod:`skcrf._training._online_train`).

A sequence of sample weight 0 is removed from the training data before
features and labels are chosen, so that it is exactly as if absent (its
attributes stay in the vocabulary, with no features).
"""

from numbers import Real

import numpy as np

from .._featurize._encoded import Encoded
from .._featurize._labels import PartialLabels
from .._featurize._vectors import expand_dense
from .._inference._blocks import gather_rows


def check_sample_weight(sample_weight, n_sequences=None, name="sample_weight"):
    """``sample_weight`` as float64, one finite non-negative weight per sequence.

    None stays None (no weights). Errors name the first bad index;
    ``n_sequences`` None: the length is checked later.
    """
    if sample_weight is None:
        return None
    if isinstance(sample_weight, (str, bytes)):
        raise TypeError(f"{name} must be None or an array of numbers, got a string.")
    try:
        weights = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be None or a 1-D array of numbers (one weight per sequence): {exc}"
        ) from None
    if weights.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (one weight per sequence), got shape {weights.shape}."
        )
    if n_sequences is not None and len(weights) != n_sequences:
        raise ValueError(
            f"{name} has {len(weights)} weights for {n_sequences} sequences: one "
            "weight per sequence is needed."
        )
    bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"{name}[{i}] is {float(weights[i])!r}: sample weights must be finite and "
            "non-negative."
        )
    return weights


def check_class_weight(class_weight, *, allow_balanced=True, name="class_weight"):
    """Check the form of ``class_weight`` (the labels are checked at fit)."""
    if class_weight is None:
        return None
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(
                f"{name} must be None, 'balanced' or a dict {{label: weight}}, got "
                f"{class_weight!r}."
            )
        if not allow_balanced:
            raise ValueError(
                f"{name}='balanced' is not supported by partial_fit: the label "
                "frequencies of one batch are not those of the data. Compute the "
                "weights over all the data (for example with "
                "sklearn.utils.class_weight.compute_class_weight) and give them as "
                "a dict."
            )
        return class_weight
    if not isinstance(class_weight, dict):
        raise TypeError(
            f"{name} must be None, 'balanced' or a dict {{label: weight}}, got "
            f"{type(class_weight).__name__}."
        )
    for label, weight in class_weight.items():
        if (
            isinstance(weight, bool)
            or not isinstance(weight, Real)
            or not np.isfinite(weight)
            or weight < 0
        ):
            raise ValueError(
                f"{name}[{label!r}] is {weight!r}: class weights must be finite, "
                "non-negative numbers."
            )
    return class_weight


def label_weights(class_weight, label_index, classes):
    """The weight of each class (index order), or None when all are 1.

    Parameters
    ----------
    class_weight : None, 'balanced' or dict
        Checked by :func:`check_class_weight`.
    label_index : ndarray of int
        Each token's label index (-1: unknown or a set of labels).
    classes : ndarray of object

    'balanced' gives ``n_tokens / (n_labels * count(label))`` over the
    tokens whose label is known (``n_labels``: the labels that occur among
    them); a label of the dict that is not one of ``classes`` is an error
    (a misspelt label would otherwise weigh nothing, silently).
    """
    if class_weight is None:
        return None
    weights = np.ones(len(classes))
    if class_weight == "balanced":
        known = label_index[label_index >= 0]
        counts = np.bincount(known, minlength=len(classes))
        present = counts > 0
        weights[present] = len(known) / (np.count_nonzero(present) * counts[present])
        return weights
    position = {label: k for k, label in enumerate(classes.tolist())}
    unknown = [label for label in class_weight if label not in position]
    if unknown:
        raise ValueError(
            f"class_weight has labels that are not in the training labels: "
            f"{unknown!r:.200}; the labels are {classes.tolist()!r:.200}."
        )
    for label, weight in class_weight.items():
        weights[position[label]] = float(weight)
    return weights


def token_weights(sample_weight, class_weights, label_index, lengths, partial=None):
    """Each token's weight (flat order), or None when there are no weights.

    ``sample_weight`` (per sequence) times the class weight of the token's
    label. A partially labelled sequence (``partial``) takes its sample
    weight only, on every token: its objective, ``-log`` of the probability
    of its consistent labellings, has no per-token terms to weigh.
    """
    if sample_weight is None and class_weights is None:
        return None
    lengths = np.asarray(lengths, dtype=np.intp)
    c = np.ones(len(label_index))
    if sample_weight is not None:
        c = np.repeat(sample_weight, lengths)
    if class_weights is not None:
        weighed = label_index >= 0
        if partial is not None:
            weighed &= np.repeat(partial.complete, lengths)
        c[weighed] *= class_weights[label_index[weighed]]
    return c


def drop_sequences(encoded, label_index, classes, partial, keep, previous_classes=None):
    """The training data without the sequences where ``keep`` is False.

    Labels that then occur nowhere are removed from ``classes`` (except
    ``previous_classes``, which a warm start keeps), the others keep their
    order.

    Returns
    -------
    encoded, label_index, classes, partial
    """
    encoded = expand_dense(encoded)
    lengths = np.asarray(encoded.lengths, dtype=np.intp)
    keep = np.asarray(keep, dtype=bool)
    token_keep = np.repeat(keep, lengths)
    rows = np.flatnonzero(token_keep)
    indptr, ids, values = gather_rows(encoded.indptr, encoded.ids, encoded.values, rows)
    transitions = encoded.transitions
    if transitions is not None:
        transitions = Encoded(
            *gather_rows(transitions.indptr, transitions.ids, transitions.values, rows),
            lengths[keep],
        )
    new_encoded = Encoded(indptr, ids, values, lengths[keep], transitions=transitions)
    label_index = label_index[token_keep]

    used = np.zeros(len(classes), dtype=bool)
    used[label_index[label_index >= 0]] = True
    if previous_classes is not None:
        used[: len(previous_classes)] = True
    if partial is not None:
        masks = partial.token_index[token_keep]
        used |= partial.token_masks[np.unique(masks[masks >= 0])].any(axis=0)
    new_index = np.cumsum(used) - 1
    label_index = np.where(label_index >= 0, new_index[label_index], -1)
    classes = classes[used]
    if partial is not None:
        old_sequences = np.flatnonzero(keep)
        sequence_map = np.full(len(keep), -1, dtype=np.intp)
        sequence_map[old_sequences] = np.arange(len(old_sequences))
        complete = partial.complete[keep]
        if complete.all():
            partial = None
        else:
            in_partial = np.zeros(len(keep), dtype=bool)
            in_partial[partial.sequences] = True
            partial = PartialLabels(
                sequences=sequence_map[np.flatnonzero(in_partial & keep)],
                token_index=partial.token_index[token_keep],
                token_masks=partial.token_masks[:, used],
                complete=complete,
            )
    return new_encoded, label_index, classes, partial
