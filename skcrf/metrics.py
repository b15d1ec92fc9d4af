"""Evaluation metrics and scorers for sequence labelling.

All functions take ``y_true`` and ``y_pred`` as *lists of sequences*: each
sequence is a list, tuple or 1-D array of labels (any hashable labels for the
flat and sequence metrics, string tags such as ``'B-PER'`` for the entity
metrics). ``y_true[i]`` and ``y_pred[i]`` must have the same length.

Three families of metrics are provided:

* **flat** (token-level) metrics, ``flat_*``: the sequences are concatenated
  and the scikit-learn metric of the same name is applied to the flat lists;
* **sequence accuracy**, :func:`sequence_accuracy_score`: the fraction of
  sequences whose labels are all predicted correctly;
* **entity** (chunk-level) metrics, ``entity_*``: precision, recall and F1
  over chunks decoded from IOB2/BIO/IOB1/IOBES tags with the chunk
  definition of the CoNLL-2000 ``conlleval`` script (a predicted chunk counts
  as correct only when its type and both its boundaries match a true chunk).

scikit-learn scorers for these metrics are available through
:data:`SCORERS`, :func:`get_scorer`, :func:`get_scorer_names` and
:func:`scorers`. scikit-learn's own ``scoring`` strings cannot be extended, so
pass scorer objects instead of strings::

    cross_validate(tagger, X, y, scoring=scorers("flat_f1_macro", "entity_f1"))
    GridSearchCV(tagger, grid, scoring=get_scorer("entity_f1"))

The ``flat_*`` functions keep the signatures of their ``sklearn_crfsuite``
counterparts, so they are drop-in replacements.
"""

from __future__ import annotations

import copy
import math
import numbers
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar, overload

import numpy as np
from numpy.typing import ArrayLike
from sklearn import metrics as _skmetrics
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import make_scorer

from ._featurize._labels import check_label_sequence_pair
from ._training._weights import check_sample_weight
from ._typing import LabelSequencesLike

__all__ = [
    "SCORERS",
    "entity_classification_report",
    "entity_f1_score",
    "entity_precision_score",
    "entity_recall_score",
    "flat_accuracy_score",
    "flat_classification_report",
    "flat_f1_score",
    "flat_fbeta_score",
    "flat_precision_score",
    "flat_recall_score",
    "flatten",
    "get_scorer",
    "get_scorer_names",
    "scorers",
    "sequence_accuracy_score",
]


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


def _check_sequences(y_true: Any, y_pred: Any) -> tuple[list[list[Any]], list[list[Any]]]:
    """Validate a pair of lists of sequences and return them as lists of lists.

    The rules are the estimator's: lists, tuples, arrays and any iterable of
    sequences (a generator is read once) are accepted, labels must be
    hashable and not NaN; messages name the place (``y_pred[1]``).

    Raises
    ------
    TypeError
        If either argument is a string, a flat list of labels or otherwise not
        a list of sequences.
    ValueError
        If the numbers of sequences differ, or if some ``y_true[i]`` and
        ``y_pred[i]`` have different lengths (the message names ``i``).
    """
    return check_label_sequence_pair(y_true, y_pred, iterables=True)


def flatten(sequences: Iterable[Iterable[Any]]) -> list[Any]:
    """Concatenate sequences into one flat list (sklearn-crfsuite's ``flatten``).

    Parameters
    ----------
    sequences : iterable of sequences
        E.g. label sequences, as ``predict`` returns them.

    Returns
    -------
    list

    Examples
    --------
    >>> flatten([["B-PER", "I-PER"], ["O"]])
    ['B-PER', 'I-PER', 'O']
    """
    if isinstance(sequences, (str, bytes)):
        raise TypeError(
            f"flatten takes a list of sequences; got {type(sequences).__name__} "
            f"{sequences[:20]!r}."
        )
    flat: list[Any] = []
    for i, seq in enumerate(sequences):
        if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
            raise TypeError(
                f"flatten takes a list of sequences, but item {i} is "
                f"{type(seq).__name__} {seq!r:.40}; wrap a single sequence in a list."
            )
        flat.extend(seq)
    return flat


def _flatten(y_true, y_pred):
    """Validate two lists of sequences and concatenate each into a flat list.

    Examples
    --------
    >>> _flatten([["a", "b"], ["c"]], [["a", "a"], ["c"]])
    (['a', 'b', 'c'], ['a', 'a', 'c'])
    """
    y_true, y_pred = _check_sequences(y_true, y_pred)
    flat_true = [label for seq in y_true for label in seq]
    flat_pred = [label for seq in y_pred for label in seq]
    return flat_true, flat_pred


def _flat_metric(metric, y_true, y_pred, /, **kwargs):
    """The scikit-learn ``metric`` of the flattened ``y_true`` and ``y_pred``.

    What every ``flat_*`` function does: the sequences are checked and
    concatenated (:func:`_flatten`), then ``metric(y_true=..., y_pred=...,
    **kwargs)`` is called on the flat lists. A ``sample_weight`` has one
    weight per sequence; each token gets its sequence's weight.
    """
    y_true, y_pred = _check_sequences(y_true, y_pred)
    flat_true = [label for seq in y_true for label in seq]
    flat_pred = [label for seq in y_pred for label in seq]
    if kwargs.get("sample_weight") is not None:
        kwargs["sample_weight"] = _token_weights(kwargs["sample_weight"], y_true)
    return metric(y_true=flat_true, y_pred=flat_pred, **kwargs)


def _sequence_weights(sample_weight, y_true):
    """``sample_weight`` checked: one finite non-negative weight per sequence."""
    return check_sample_weight(sample_weight, len(y_true))


def _token_weights(sample_weight, y_true):
    """Each token's weight: its sequence's (flat order)."""
    weights = _sequence_weights(sample_weight, y_true)
    return np.repeat(weights, [len(seq) for seq in y_true])


# ---------------------------------------------------------------------------
# Flat (token-level) metrics
# ---------------------------------------------------------------------------

# The y_true and y_pred entries of the docstrings' Parameters ({sequences}).
_SEQUENCES_DOC = """y_true : list of sequences of labels
        Ground truth labels, one sequence per sample.
    y_pred : list of sequences of labels
        Predicted labels; ``y_pred[i]`` must have the length of ``y_true[i]``."""


def flat_accuracy_score(
    y_true: LabelSequencesLike, y_pred: LabelSequencesLike, **kwargs: Any
) -> float:
    """Token-level accuracy: ``accuracy_score`` on the flattened sequences.

    Parameters
    ----------
    {sequences}
    **kwargs
        Passed to :func:`sklearn.metrics.accuracy_score` (e.g. ``normalize``).

    Returns
    -------
    score : float
        Fraction of tokens labelled correctly.

    Examples
    --------
    >>> from skcrf.metrics import flat_accuracy_score
    >>> y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O"], ["O", "B-LOC"]]
    >>> float(flat_accuracy_score(y_true, y_pred))
    0.8
    """
    return _flat_metric(_skmetrics.accuracy_score, y_true, y_pred, **kwargs)


def flat_precision_score(
    y_true: LabelSequencesLike, y_pred: LabelSequencesLike, **kwargs: Any
) -> float | np.ndarray:
    """Token-level precision: ``precision_score`` on the flattened sequences.

    Parameters
    ----------
    {sequences}
    **kwargs
        Passed to :func:`sklearn.metrics.precision_score` (``average``,
        ``labels``, ``pos_label``, ``zero_division``, ...). As in scikit-learn
        the default is ``average='binary'``, so multi-class tags need e.g.
        ``average='macro'``.

    Returns
    -------
    precision : float or ndarray
        See :func:`sklearn.metrics.precision_score`.

    Examples
    --------
    >>> from skcrf.metrics import flat_precision_score
    >>> y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O"], ["O", "B-LOC"]]
    >>> round(float(flat_precision_score(y_true, y_pred, average="micro")), 3)
    0.8
    >>> flat_precision_score(y_true, y_pred, average=None,
    ...                      labels=["B-PER", "I-PER"], zero_division=0)
    array([1., 0.])
    """
    return _flat_metric(_skmetrics.precision_score, y_true, y_pred, **kwargs)


def flat_recall_score(
    y_true: LabelSequencesLike, y_pred: LabelSequencesLike, **kwargs: Any
) -> float | np.ndarray:
    """Token-level recall: ``recall_score`` on the flattened sequences.

    Parameters
    ----------
    {sequences}
    **kwargs
        Passed to :func:`sklearn.metrics.recall_score`.

    Returns
    -------
    recall : float or ndarray
        See :func:`sklearn.metrics.recall_score`.

    Examples
    --------
    >>> from skcrf.metrics import flat_recall_score
    >>> y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O"], ["O", "B-LOC"]]
    >>> flat_recall_score(y_true, y_pred, average=None,
    ...                   labels=["B-LOC", "B-PER", "I-PER", "O"])
    array([1., 1., 0., 1.])
    """
    return _flat_metric(_skmetrics.recall_score, y_true, y_pred, **kwargs)


def flat_f1_score(
    y_true: LabelSequencesLike, y_pred: LabelSequencesLike, **kwargs: Any
) -> float | np.ndarray:
    """Token-level F1: ``f1_score`` on the flattened sequences.

    Parameters
    ----------
    {sequences}
    **kwargs
        Passed to :func:`sklearn.metrics.f1_score`.

    Returns
    -------
    f1 : float or ndarray
        See :func:`sklearn.metrics.f1_score`.

    Examples
    --------
    >>> from skcrf.metrics import flat_f1_score
    >>> y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O"], ["O", "B-LOC"]]
    >>> round(float(flat_f1_score(y_true, y_pred, average="macro")), 4)
    0.7
    """
    return _flat_metric(_skmetrics.f1_score, y_true, y_pred, **kwargs)


def flat_fbeta_score(
    y_true: LabelSequencesLike, y_pred: LabelSequencesLike, beta: float, **kwargs: Any
) -> float | np.ndarray:
    """Token-level F-beta: ``fbeta_score`` on the flattened sequences.

    Parameters
    ----------
    {sequences}
    beta : float
        Weight of recall relative to precision. It may be passed positionally,
        as in ``sklearn_crfsuite.metrics.flat_fbeta_score``.
    **kwargs
        Passed to :func:`sklearn.metrics.fbeta_score`.

    Returns
    -------
    fbeta : float or ndarray
        See :func:`sklearn.metrics.fbeta_score`.

    Examples
    --------
    >>> from skcrf.metrics import flat_fbeta_score
    >>> y_true = [[0, 1, 1], [0, 1]]
    >>> y_pred = [[0, 1, 0], [1, 1]]
    >>> round(float(flat_fbeta_score(y_true, y_pred, 1.0)), 4)
    0.6667
    """
    return _flat_metric(_skmetrics.fbeta_score, y_true, y_pred, beta=beta, **kwargs)


def flat_classification_report(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    labels: Iterable[Any] | None = None,
    **kwargs: Any,
) -> str | dict[str, Any]:
    """Token-level ``classification_report`` on the flattened sequences.

    Parameters
    ----------
    {sequences}
    labels : list of labels, default=None
        Labels to include in the report (e.g. all tags except ``'O'``).
    **kwargs
        Passed to :func:`sklearn.metrics.classification_report`
        (``digits``, ``output_dict``, ``zero_division``, ...).

    Returns
    -------
    report : str or dict
        See :func:`sklearn.metrics.classification_report`.

    Examples
    --------
    >>> from skcrf.metrics import flat_classification_report
    >>> y_true = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O"], ["O", "B-LOC"]]
    >>> report = flat_classification_report(y_true, y_pred, output_dict=True,
    ...                                     zero_division=0)
    >>> report["I-PER"]["recall"], round(report["O"]["precision"], 4)
    (0.0, 0.6667)
    """
    return _flat_metric(_skmetrics.classification_report, y_true, y_pred, labels=labels, **kwargs)


# ---------------------------------------------------------------------------
# Sequence accuracy
# ---------------------------------------------------------------------------


def sequence_accuracy_score(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    *,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Fraction of sequences whose labels are all predicted correctly.

    Unlike ``sklearn_crfsuite.metrics.sequence_accuracy_score``, the result is
    always the number of fully correct sequences divided by the number of
    sequences, also when all sequences have the same length (that version then
    compares a 2-D array element-wise and counts tokens, so it can exceed 1).

    Parameters
    ----------
    {sequences}
    sample_weight : array-like of shape (n_sequences,), optional
        Weights of the sequences: the weighted fraction.

    Returns
    -------
    score : float
        A number in [0, 1].

    Raises
    ------
    ValueError
        If there are no sequences, or sequence lengths differ.

    Examples
    --------
    >>> from skcrf.metrics import sequence_accuracy_score
    >>> y_true = [["B-PER", "I-PER"], ["O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O"], ["O", "B-LOC"]]
    >>> sequence_accuracy_score(y_true, y_pred)
    0.5
    """
    y_true, y_pred = _check_sequences(y_true, y_pred)
    if not y_true:
        raise ValueError("sequence_accuracy_score needs at least one sequence.")
    correct = [
        all(a == b for a, b in zip(seq_true, seq_pred))
        for seq_true, seq_pred in zip(y_true, y_pred)
    ]
    if sample_weight is not None:
        weights = _sequence_weights(sample_weight, y_true)
        if not weights.sum() > 0:
            raise ValueError("sequence_accuracy_score: sample_weight sums to 0.")
        return float(np.average(correct, weights=weights))
    return sum(correct) / len(y_true)


for _func in (
    flat_accuracy_score,
    flat_precision_score,
    flat_recall_score,
    flat_f1_score,
    flat_fbeta_score,
    flat_classification_report,
    sequence_accuracy_score,
):
    if _func.__doc__:  # None under python -OO
        _func.__doc__ = _func.__doc__.replace("{sequences}", _SEQUENCES_DOC)
del _func


# ---------------------------------------------------------------------------
# Entity (chunk-level) metrics
# ---------------------------------------------------------------------------

# Every accepted scheme name maps to the set of chunk prefixes it allows. The
# chunk decoding rules are the same for all schemes (conlleval's rules, which
# cover IOB1, IOB2 and, with the E-/S- extension, IOBES).
_SCHEME_PREFIXES = {
    "IOB2": frozenset("BI"),
    "BIO": frozenset("BI"),
    "IOB1": frozenset("BI"),
    "IOBES": frozenset("BIES"),
    # the scheme names of decoding constraints (skcrf._inference._constraints.SCHEMES)
    "BIOUL": frozenset("BILU"),
    "BMES": frozenset("BMES"),
}
# Prefixes read as another: BIOUL's L- (last) and U- (unit) are IOBES's E-
# and S-; BMES's M- (middle) is I-.
_PREFIX_ALIASES = {"L": "E", "U": "S", "M": "I"}
_OUTSIDE = "O"


def _check_scheme(scheme):
    key = scheme.upper() if isinstance(scheme, str) else scheme
    try:
        return key, _SCHEME_PREFIXES[key]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown tagging scheme {scheme!r}; expected one of {sorted(_SCHEME_PREFIXES)}."
        ) from None


def _parse_tag(tag, scheme, prefixes):
    """Split a tag into ``(prefix, type)``; ``'O'`` gives ``('O', None)``.

    Stricter than the decoding constraints' reading of a scheme's labels
    (``skcrf._inference._constraints``), on purpose: an entity needs a type
    (no bare ``'B'``), and each scheme name takes only its own letters
    (``E-`` under ``'BIOUL'`` is an error that names ``'IOBES'``).
    """
    if isinstance(tag, str):
        if tag == _OUTSIDE:
            return _OUTSIDE, None
        prefix, sep, chunk_type = tag.partition("-")
        if sep and chunk_type and prefix in prefixes:
            return _PREFIX_ALIASES.get(prefix, prefix), chunk_type
        if sep and chunk_type and prefix in _SCHEME_PREFIXES["IOBES"]:
            raise ValueError(
                f"Tag {tag!r} uses the prefix {prefix}-, which scheme "
                f"{scheme!r} does not allow; use scheme='IOBES'."
            )
        if sep and chunk_type and prefix in _PREFIX_ALIASES:
            owner = "'BMES'" if prefix == "M" else "'BIOUL'"
            raise ValueError(
                f"Tag {tag!r} uses the prefix {prefix}-, which scheme "
                f"{scheme!r} does not allow; use scheme={owner}."
            )
    raise ValueError(
        f"Entity metrics need tags of the form PREFIX-TYPE (prefix one of "
        f"{', '.join(p + '-' for p in sorted(prefixes))} for scheme "
        f"{scheme!r}, e.g. 'B-PER') or 'O'; got {tag!r}. Tags without a "
        "prefix are not accepted (conlleval would read them as a chunk tag "
        "with an empty type)."
    )


def _end_of_chunk(prev_prefix, prefix, prev_type, chunk_type):
    """Whether a chunk ends at the previous token (conlleval's endOfChunk)."""
    if prev_prefix == _OUTSIDE:
        return False
    if prev_prefix in ("E", "S"):  # E- and S- always close their chunk
        return True
    # previous token is B- or I-: the chunk goes on only with I-/E- of its type
    return prefix not in ("I", "E") or prev_type != chunk_type


def _start_of_chunk(prev_prefix, prefix, prev_type, chunk_type):
    """Whether a chunk starts at the current token (conlleval's startOfChunk)."""
    if prefix == _OUTSIDE:
        return False
    if prefix in ("B", "S"):
        return True
    # I- or E-: starts a chunk unless it continues a B-/I- chunk of its type
    return prev_prefix in (_OUTSIDE, "E", "S") or prev_type != chunk_type


def _chunks_from_parsed(parsed):
    chunks = []
    prev_prefix, prev_type = _OUTSIDE, None
    start = None
    for i, (prefix, chunk_type) in enumerate(parsed):
        if start is not None and _end_of_chunk(prev_prefix, prefix, prev_type, chunk_type):
            chunks.append((prev_type, start, i))
            start = None
        if _start_of_chunk(prev_prefix, prefix, prev_type, chunk_type):
            start = i
        prev_prefix, prev_type = prefix, chunk_type
    if start is not None:
        chunks.append((prev_type, start, len(parsed)))
    return chunks


def _extract_chunks(seq, scheme="IOB2"):
    """Decode the chunks of one tag sequence.

    The rules are those of the CoNLL-2000 ``conlleval`` script, extended to
    S- tags: a chunk starts at B- and S- tags, and at an I- or E- tag that
    follows O, E-, S- or a tag of another type; a chunk ends before O, B- and
    S- tags and before a tag of another type, and right after E- and S- tags.
    So ``I-X`` without a preceding ``B-X`` starts a chunk and ``B-X I-Y`` gives
    two chunks.

    Parameters
    ----------
    seq : sequence of str
        Tags such as ``'B-PER'``, ``'I-PER'`` or ``'O'``. The type is what
        follows the first ``'-'``, so it may itself contain ``'-'``.
    scheme : {'IOB2', 'BIO', 'IOB1', 'IOBES', 'BIOUL', 'BMES'}, default='IOB2'
        Allowed prefixes: B- and I- for IOB2/BIO/IOB1, also E- and S- for
        IOBES.

    Returns
    -------
    chunks : list of tuple
        ``(type, start, end)`` triples in order, ``end`` exclusive, so the
        chunk covers ``seq[start:end]``.

    Examples
    --------
    >>> _extract_chunks(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
    [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
    >>> _extract_chunks(["S-PER", "B-LOC", "E-LOC", "I-LOC"], scheme="IOBES")
    [('PER', 0, 1), ('LOC', 1, 3), ('LOC', 3, 4)]
    """
    scheme, prefixes = _check_scheme(scheme)
    return _chunks_from_parsed([_parse_tag(tag, scheme, prefixes) for tag in seq])


def _entity_counts(y_true, y_pred, scheme, sample_weight=None):
    """Per-type counts of correct, predicted and true chunks.

    Returns ``types`` (sorted list) and three int arrays aligned with it:
    ``n_correct``, ``n_pred``, ``n_true``; with ``sample_weight`` (one per
    sequence), each chunk counts its sequence's weight (float arrays).
    """
    scheme, prefixes = _check_scheme(scheme)
    y_true, y_pred = _check_sequences(y_true, y_pred)
    weights = None if sample_weight is None else _sequence_weights(sample_weight, y_true)
    cache = {}

    def chunks(seq, name, index):
        parsed = []
        for pos, tag in enumerate(seq):
            try:
                parsed.append(cache[tag])
            except (KeyError, TypeError):
                try:
                    value = _parse_tag(tag, scheme, prefixes)
                except ValueError as exc:
                    raise ValueError(f"{name}[{index}][{pos}]: {exc}") from None
                try:
                    cache[tag] = value
                except TypeError:  # unhashable tag; cannot happen for str
                    pass
                parsed.append(value)
        return set(_chunks_from_parsed(parsed))

    n_correct, n_pred, n_true = Counter(), Counter(), Counter()
    for i, (seq_true, seq_pred) in enumerate(zip(y_true, y_pred)):
        chunks_true = chunks(seq_true, "y_true", i)
        chunks_pred = chunks(seq_pred, "y_pred", i)
        if weights is None:
            n_true.update(chunk[0] for chunk in chunks_true)
            n_pred.update(chunk[0] for chunk in chunks_pred)
            n_correct.update(chunk[0] for chunk in chunks_true & chunks_pred)
        elif weights[i] > 0:  # a sequence of weight 0 is as if absent
            w = weights[i]
            for counter, found in (
                (n_true, chunks_true),
                (n_pred, chunks_pred),
                (n_correct, chunks_true & chunks_pred),
            ):
                for chunk in found:
                    counter[chunk[0]] += w
    types = sorted(set(n_true) | set(n_pred))
    dtype = int if weights is None else float
    return (
        types,
        np.array([n_correct[t] for t in types], dtype=dtype),
        np.array([n_pred[t] for t in types], dtype=dtype),
        np.array([n_true[t] for t in types], dtype=dtype),
    )


def _check_zero_division(zero_division):
    if isinstance(zero_division, str) and zero_division == "warn":
        return 0.0
    if isinstance(zero_division, numbers.Real) and not isinstance(zero_division, bool):
        value = float(zero_division)
        if value in (0.0, 1.0) or math.isnan(value):
            return value
    raise ValueError(f"zero_division must be 'warn', 0.0, 1.0 or np.nan; got {zero_division!r}.")


def _check_average(average):
    if average not in ("micro", "macro", "weighted"):
        raise ValueError(f"average must be 'micro', 'macro' or 'weighted'; got {average!r}.")


_CAUSES = {
    "precision": "predicted",
    "recall": "true",
    "f1-score": "true nor predicted",
}


def _warn_undefined(metric, per_type, stacklevel=4):
    where = "in entity types with" if per_type else "due to"
    warnings.warn(
        f"{metric.capitalize()} is ill-defined and being set to 0.0 {where} no "
        f"{_CAUSES[metric]} entities. Use `zero_division` parameter to control "
        "this behavior.",
        UndefinedMetricWarning,
        stacklevel=stacklevel,
    )


def _ratio(numerator, denominator, zero_division_value):
    """Element-wise division; returns (values, undefined mask)."""
    numerator = np.asarray(numerator, dtype=float)
    denominator = np.asarray(denominator, dtype=float)
    undefined = denominator == 0
    values = np.full(numerator.shape, zero_division_value, dtype=float)
    np.divide(numerator, denominator, out=values, where=~undefined)
    return values, undefined


def _metric_values(metric, n_correct, n_pred, n_true, zero_division):
    """Per-entry precision, recall or F1 (F1 as 2 tp / (2 tp + fp + fn))."""
    zero_division_value = _check_zero_division(zero_division)
    if metric == "precision":
        return _ratio(n_correct, n_pred, zero_division_value)
    if metric == "recall":
        return _ratio(n_correct, n_true, zero_division_value)
    return _ratio(2 * n_correct, n_pred + n_true, zero_division_value)


def _average_values(values, weights, zero_division_value):
    """Mean of ``values`` ignoring NaN; weights that sum to 0 are ignored."""
    keep = ~np.isnan(values)
    values = values[keep]
    if values.size == 0:
        return float("nan") if np.any(~keep) else zero_division_value
    if weights is not None:
        weights = np.asarray(weights, dtype=float)[keep]
        if weights.sum() > 0:
            return float(np.average(values, weights=weights))
    return float(np.mean(values))


def _entity_score(metric, y_true, y_pred, scheme, average, zero_division, sample_weight=None):
    _check_average(average)
    zero_division_value = _check_zero_division(zero_division)
    types, n_correct, n_pred, n_true = _entity_counts(y_true, y_pred, scheme, sample_weight)
    warn = isinstance(zero_division, str)
    if average == "micro":
        values, undefined = _metric_values(
            metric, n_correct.sum(), n_pred.sum(), n_true.sum(), zero_division
        )
        if warn and undefined:
            _warn_undefined(metric, per_type=False)
        return float(values)
    values, undefined = _metric_values(metric, n_correct, n_pred, n_true, zero_division)
    if not types:  # no chunk at all: every average is undefined
        if warn:
            _warn_undefined(metric, per_type=False)
        return zero_division_value
    if warn and undefined.any():
        _warn_undefined(metric, per_type=True)
    weights = n_true if average == "weighted" else None
    return _average_values(values, weights, zero_division_value)


_ENTITY_PARAMS_DOC = """
    Parameters
    ----------
    y_true : list of sequences of str
        Ground truth tags, e.g. ``[['B-PER', 'I-PER', 'O'], ['B-LOC']]``.
    y_pred : list of sequences of str
        Predicted tags; ``y_pred[i]`` must have the length of ``y_true[i]``.
    scheme : {'IOB2', 'BIO', 'IOB1', 'IOBES', 'BIOUL', 'BMES'}, default='IOB2'
        Tagging scheme (case-insensitive), the names that
        ``allowed_transitions`` accepts. ``'BIO'`` and ``'IOB1'`` are
        aliases of ``'IOB2'`` (the conlleval decoding rules handle all
        three); ``'IOBES'`` also allows ``E-`` and ``S-`` tags; ``'BIOUL'``
        is IOBES written with ``L-`` and ``U-``; ``'BMES'`` has ``B-``,
        ``M-`` (inside), ``E-`` and ``S-``. Tags must be ``'O'`` or
        ``PREFIX-TYPE``; anything else raises ``ValueError``.
    average : {'micro', 'macro', 'weighted'}, default='micro'
        ``'micro'`` pools the chunks of all types (conlleval's overall
        score); ``'macro'`` is the unweighted mean of the per-type scores over
        the types found in ``y_true`` or ``y_pred``; ``'weighted'`` weights
        them by the number of true chunks of each type.
    zero_division : {'warn', 0.0, 1.0, np.nan}, default='warn'
        Value used when the score is undefined (no predicted chunks for
        precision, no true chunks for recall, neither for F1), as in
        scikit-learn: ``'warn'`` acts as 0.0 and raises an
        :class:`~sklearn.exceptions.UndefinedMetricWarning`. With ``np.nan``
        undefined per-type scores are left out of the macro average.
    sample_weight : array-like of shape (n_sequences,), optional
        Weights of the sequences: each chunk counts its sequence's weight.
"""


def entity_precision_score(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    *,
    scheme: str = "IOB2",
    average: Literal["micro", "macro", "weighted"] = "micro",
    zero_division: Literal["warn"] | float = "warn",
    sample_weight: ArrayLike | None = None,
) -> float:
    """Entity-level precision: correct chunks / predicted chunks.

    A predicted chunk is correct only when a true chunk has the same type and
    the same start and end (CoNLL-2000 ``conlleval`` definition).
    {params}

    Returns
    -------
    precision : float

    Examples
    --------
    >>> from skcrf.metrics import entity_precision_score
    >>> y_true = [["B-PER", "I-PER", "O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O", "B-LOC"]]
    >>> entity_precision_score(y_true, y_pred)
    0.5
    """
    return _entity_score(
        "precision", y_true, y_pred, scheme, average, zero_division, sample_weight
    )


def entity_recall_score(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    *,
    scheme: str = "IOB2",
    average: Literal["micro", "macro", "weighted"] = "micro",
    zero_division: Literal["warn"] | float = "warn",
    sample_weight: ArrayLike | None = None,
) -> float:
    """Entity-level recall: correct chunks / true chunks.

    A true chunk is found only when a predicted chunk has the same type and
    the same start and end (CoNLL-2000 ``conlleval`` definition).
    {params}

    Returns
    -------
    recall : float

    Examples
    --------
    >>> from skcrf.metrics import entity_recall_score
    >>> y_true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "I-LOC"]]
    >>> y_pred = [["B-PER", "I-PER", "O", "O"], ["I-LOC", "I-LOC"]]
    >>> round(entity_recall_score(y_true, y_pred), 4)
    0.6667
    """
    return _entity_score("recall", y_true, y_pred, scheme, average, zero_division, sample_weight)


def entity_f1_score(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    *,
    scheme: str = "IOB2",
    average: Literal["micro", "macro", "weighted"] = "micro",
    zero_division: Literal["warn"] | float = "warn",
    sample_weight: ArrayLike | None = None,
) -> float:
    """Entity-level F1: harmonic mean of entity precision and recall.

    Computed as ``2 * correct / (predicted + true)`` chunks, the FB1 score of
    ``conlleval`` (as a fraction, not a percentage).
    {params}

    Returns
    -------
    f1 : float

    Examples
    --------
    >>> from skcrf.metrics import entity_f1_score
    >>> y_true = [["B-PER", "I-PER", "O", "B-LOC"]]
    >>> y_pred = [["B-PER", "O", "O", "B-LOC"]]
    >>> entity_f1_score(y_true, y_pred)
    0.5
    >>> entity_f1_score(y_true, y_pred, average="macro")
    0.5
    >>> entity_f1_score([["S-PER", "B-LOC", "E-LOC"]],
    ...                 [["S-PER", "B-LOC", "E-LOC"]], scheme="IOBES")
    1.0
    """
    return _entity_score("f1-score", y_true, y_pred, scheme, average, zero_division, sample_weight)


for _func in (entity_precision_score, entity_recall_score, entity_f1_score):
    if _func.__doc__:  # None under python -OO
        _func.__doc__ = _func.__doc__.replace("{params}", _ENTITY_PARAMS_DOC)
del _func


@overload
def entity_classification_report(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    *,
    scheme: str = ...,
    digits: int = ...,
    output_dict: Literal[False] = ...,
    zero_division: Literal["warn"] | float = ...,
    sample_weight: ArrayLike | None = ...,
) -> str: ...


@overload
def entity_classification_report(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    *,
    scheme: str = ...,
    digits: int = ...,
    output_dict: Literal[True],
    zero_division: Literal["warn"] | float = ...,
    sample_weight: ArrayLike | None = ...,
) -> dict[str, dict[str, float]]: ...


@overload
def entity_classification_report(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    *,
    scheme: str = ...,
    digits: int = ...,
    output_dict: bool = ...,
    zero_division: Literal["warn"] | float = ...,
    sample_weight: ArrayLike | None = ...,
) -> str | dict[str, dict[str, float]]: ...


def entity_classification_report(
    y_true: LabelSequencesLike,
    y_pred: LabelSequencesLike,
    *,
    scheme: str = "IOB2",
    digits: int = 2,
    output_dict: bool = False,
    zero_division: Literal["warn"] | float = "warn",
    sample_weight: ArrayLike | None = None,
) -> str | dict[str, dict[str, float]]:
    """Per-type entity precision, recall, F1 and support, with averages.

    Chunks are decoded and matched as in :func:`entity_f1_score`. The rows are
    the chunk types found in ``y_true`` or ``y_pred`` (sorted), then
    ``'micro avg'`` (conlleval's overall score), ``'macro avg'`` and
    ``'weighted avg'`` (weighted by support). Support is the number of true
    chunks.

    Parameters
    ----------
    y_true : list of sequences of str
        Ground truth tags.
    y_pred : list of sequences of str
        Predicted tags; ``y_pred[i]`` must have the length of ``y_true[i]``.
    scheme : {'IOB2', 'BIO', 'IOB1', 'IOBES', 'BIOUL', 'BMES'}, default='IOB2'
        Tagging scheme, see :func:`entity_f1_score`.
    digits : int, default=2
        Number of digits of the floats in the text report (ignored with
        ``output_dict=True``).
    output_dict : bool, default=False
        Return a dict instead of a string.
    zero_division : {'warn', 0.0, 1.0, np.nan}, default='warn'
        Value of undefined scores, see :func:`entity_f1_score`.
    sample_weight : array-like of shape (n_sequences,), optional
        Weights of the sequences: each chunk counts its sequence's weight,
        and the support is the weighted count (a float).

    Returns
    -------
    report : str or dict
        With ``output_dict=True``, a dict mapping each type and each of
        ``'micro avg'``, ``'macro avg'``, ``'weighted avg'`` to a dict with
        keys ``'precision'``, ``'recall'``, ``'f1-score'`` (floats) and
        ``'support'`` (int), like :func:`sklearn.metrics.classification_report`.

    Examples
    --------
    >>> from skcrf.metrics import entity_classification_report
    >>> y_true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "O"]]
    >>> y_pred = [["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "O"]]
    >>> print(entity_classification_report(y_true, y_pred))
                  precision    recall  f1-score   support
    <BLANKLINE>
             LOC       1.00      0.50      0.67         2
             PER       0.50      1.00      0.67         1
    <BLANKLINE>
       micro avg       0.67      0.67      0.67         3
       macro avg       0.75      0.75      0.67         3
    weighted avg       0.83      0.67      0.67         3
    <BLANKLINE>
    >>> report = entity_classification_report(y_true, y_pred, output_dict=True)
    >>> {key: round(value, 4) for key, value in report["LOC"].items()}
    {'precision': 1.0, 'recall': 0.5, 'f1-score': 0.6667, 'support': 2}
    """
    zero_division_value = _check_zero_division(zero_division)
    types, n_correct, n_pred, n_true = _entity_counts(y_true, y_pred, scheme, sample_weight)
    support = int if sample_weight is None else float
    warn = isinstance(zero_division, str)
    metrics = ("precision", "recall", "f1-score")

    per_type: dict[str, np.ndarray] = {}
    for metric in metrics:
        values, undefined = _metric_values(metric, n_correct, n_pred, n_true, zero_division)
        if warn and undefined.any():
            _warn_undefined(metric, per_type=True, stacklevel=3)
        per_type[metric] = values

    report: dict[str, dict[str, float]] = {}
    for i, chunk_type in enumerate(types):
        report[chunk_type] = {m: float(per_type[m][i]) for m in metrics}
        report[chunk_type]["support"] = support(n_true[i])

    total_support = support(n_true.sum())
    micro: dict[str, float] = {}
    for metric in metrics:
        value, undefined = _metric_values(
            metric, n_correct.sum(), n_pred.sum(), n_true.sum(), zero_division
        )
        if warn and undefined:
            _warn_undefined(metric, per_type=False, stacklevel=3)
        micro[metric] = float(value)
    report["micro avg"] = {**micro, "support": total_support}
    for name, weights in (("macro avg", None), ("weighted avg", n_true)):
        report[name] = {
            metric: (
                _average_values(per_type[metric], weights, zero_division_value)
                if types
                else zero_division_value
            )
            for metric in metrics
        }
        report[name]["support"] = total_support

    if output_dict:
        return report

    headers = ["precision", "recall", "f1-score", "support"]
    width = max([len(name) for name in report] + [digits])
    lines = [" " * width + " " + "".join(f" {h:>9}" for h in headers), ""]

    def row(name):
        values = report[name]
        cells = "".join(f" {values[m]:>9.{digits}f}" for m in metrics)
        count = values["support"]
        count = f"{count:>9}" if isinstance(count, int) else f"{count:>9.{digits}f}"
        return f"{name:>{width}} {cells} {count}"

    lines += [row(name) for name in types]
    if types:
        lines.append("")
    lines += [row(name) for name in ("micro avg", "macro avg", "weighted avg")]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Scorers
# ---------------------------------------------------------------------------

#: Scorers (built with :func:`sklearn.metrics.make_scorer`) by name. Prefer
#: :func:`get_scorer`, which returns a copy. Entity scorers use the IOB2
#: scheme; for IOBES build one with
#: ``make_scorer(entity_f1_score, scheme="IOBES")``.
SCORERS: dict[str, Callable[..., float]] = {
    "flat_accuracy": make_scorer(flat_accuracy_score),
    "flat_f1_macro": make_scorer(flat_f1_score, average="macro"),
    "flat_f1_micro": make_scorer(flat_f1_score, average="micro"),
    "flat_f1_weighted": make_scorer(flat_f1_score, average="weighted"),
    "flat_precision_macro": make_scorer(flat_precision_score, average="macro"),
    "flat_precision_micro": make_scorer(flat_precision_score, average="micro"),
    "flat_precision_weighted": make_scorer(flat_precision_score, average="weighted"),
    "flat_recall_macro": make_scorer(flat_recall_score, average="macro"),
    "flat_recall_micro": make_scorer(flat_recall_score, average="micro"),
    "flat_recall_weighted": make_scorer(flat_recall_score, average="weighted"),
    "sequence_accuracy": make_scorer(sequence_accuracy_score),
    "entity_f1": make_scorer(entity_f1_score),
    "entity_f1_macro": make_scorer(entity_f1_score, average="macro"),
    "entity_precision": make_scorer(entity_precision_score),
    "entity_precision_macro": make_scorer(entity_precision_score, average="macro"),
    "entity_recall": make_scorer(entity_recall_score),
    "entity_recall_macro": make_scorer(entity_recall_score, average="macro"),
}


def get_scorer_names() -> list[str]:
    """Return the names accepted by :func:`get_scorer`.

    Returns
    -------
    names : list of str
        Sorted names of the scorers in :data:`SCORERS`.

    Examples
    --------
    >>> from skcrf.metrics import get_scorer_names
    >>> "entity_f1" in get_scorer_names()
    True
    """
    return sorted(SCORERS)


_ScorerT = TypeVar("_ScorerT", bound=Callable[..., Any])


@overload
def get_scorer(scoring: str) -> Callable[..., float]: ...


@overload
def get_scorer(scoring: None) -> None: ...


@overload
def get_scorer(scoring: _ScorerT) -> _ScorerT: ...


def get_scorer(scoring: str | Callable[..., Any] | None) -> Callable[..., Any] | None:
    """Return a scorer for sequence labelling from its name.

    Parameters
    ----------
    scoring : str, callable or None
        A name from :func:`get_scorer_names`. Any other (non-string) value is
        passed to :func:`sklearn.metrics.get_scorer` (a callable or ``None``
        is returned unchanged).

    Returns
    -------
    scorer : callable
        A copy of the scorer, to pass as ``scoring=`` to
        :func:`~sklearn.model_selection.cross_val_score`,
        :class:`~sklearn.model_selection.GridSearchCV`, etc. It calls
        ``estimator.predict(X)``, which may return a list of lists.

    Raises
    ------
    ValueError
        If ``scoring`` is a string that is not a known name. scikit-learn's
        own names (such as ``'accuracy'``) are not accepted: their metrics do
        not work on lists of sequences.

    Examples
    --------
    >>> from skcrf.metrics import get_scorer
    >>> get_scorer("flat_f1_macro")
    make_scorer(flat_f1_score, response_method='predict', average=macro)
    """
    if isinstance(scoring, str):
        if scoring not in SCORERS:
            raise ValueError(
                f"{scoring!r} is not a valid skcrf scoring value. Valid names: "
                f"{get_scorer_names()}."
            )
        return copy.deepcopy(SCORERS[scoring])
    return _skmetrics.get_scorer(scoring)


def scorers(*names: str) -> dict[str, Callable[..., float]]:
    """Return a ``{name: scorer}`` dict for multi-metric evaluation.

    Parameters
    ----------
    *names : str
        Names from :func:`get_scorer_names`; all of them when none is given.

    Returns
    -------
    scoring : dict
        Suitable as ``scoring=`` for
        :func:`~sklearn.model_selection.cross_validate` or
        :class:`~sklearn.model_selection.GridSearchCV` (with ``refit=`` one of
        the names). Equivalent to ``{name: get_scorer(name) for name in
        names}``.

    Examples
    --------
    >>> from skcrf.metrics import scorers
    >>> sorted(scorers("entity_f1", "flat_accuracy"))
    ['entity_f1', 'flat_accuracy']
    """
    selected: Iterable[str] = names if names else get_scorer_names()
    return {name: get_scorer(name) for name in selected}
