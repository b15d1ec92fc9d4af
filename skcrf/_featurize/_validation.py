"""Validation of sequences of token features and labels.

The checks that name the place of a problem (``X[i][j]``, the feature key,
``y[i]``) so a user can find it in their data; nothing invalid reaches the
numerical code. The compiled encoder (:mod:`skcrf._featurize._vocabulary`) handles plain
dict tokens itself and hands every other token to :func:`token_attributes`,
so the rules and the error messages live here, once.

Token features follow CRFsuite's (python-crfsuite's) conventions: a string
value ``v`` of key ``k`` is the attribute ``k:v`` with value 1 (``:`` is the
vocabulary's ``value_separator``); numbers and bools are the value of the
attribute ``k``; nested dicts are flattened with ``key:`` prefixes (always
``:``); a list or set of strings gives one attribute per string.

What is accepted
----------------
- ``X`` (and ``y``): a list, tuple, numpy array or other sized, indexable
  container of sequences. :func:`check_sequences` rejects generators and
  other one-shot iterators with a message saying to pass ``list(X)``; the
  streaming entry points (:func:`skcrf._featurize._stream.encode_data`: ``fit``,
  ``predict``...) accept any iterable (:func:`check_iterable`), read once,
  and data that is read more than once (``X_dev``) must be a list
  (:func:`check_reusable`). Sets and dicts are rejected (a set has no
  order; a dict is one token).
- A sequence ``X[i]``: a sized, indexable container of tokens (possibly
  empty), or a python-crfsuite ``ItemSequence`` (its items). A str, a dict
  or a generator is rejected.
- A token ``X[i][j]``: a mapping of str keys to str, bool, int, float
  (finite), numpy scalars (any ``numbers.Real``, ``np.bool_``), nested
  mappings, lists/sets of str, or vectors (a 1-D numeric numpy array or a
  non-empty list of floats: the attributes ``key[0]``, ``key[1]``...; the
  same length for a key everywhere in the data); or a list, tuple, set or
  dict keys of feature names (str; a set in sorted order), as pycrfsuite
  takes them.
  Nesting deeper than :data:`MAX_NESTING` levels (a dict that contains
  itself, for instance) is rejected.
- Labels: any hashable value except NaN (NaN is not equal to itself, so it
  could never be predicted or scored). Labels equal under ``==`` (``1``,
  ``1.0`` and ``True``) are one label, as in a dict.
- Partial labels (decoding, ``partial_labels=``): per sequence None (free)
  or one entry per token: None (free), a label of the model (known), or a
  non-empty set / frozenset of labels (the true one is among them; labels
  the model does not know are ignored, but at least one must be known).
- Partially labelled training data (``missing_label=``): a token whose label
  equals ``missing_label`` is unknown; a set / frozenset of labels is a
  fuzzy label (non-empty, hashable members, not NaN, not ``missing_label``).
"""

import math
import numbers
import reprlib
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

import numpy as np

__all__ = [
    "MAX_NESTING",
    "check_emissions",
    "check_iterable",
    "check_label_sequence",
    "check_reusable",
    "check_sequence",
    "is_item_sequence",
    "check_sequences",
    "check_single_sequence",
    "check_sums",
    "largest_value",
    "token_attributes",
]

#: Deepest nesting of dicts inside a token that is accepted.
MAX_NESTING = 100

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 6


def _short(obj):
    """A repr of ``obj`` short enough for an error message."""
    return _repr.repr(obj)


def _type_name(obj):
    return type(obj).__name__


# -- sequences ------------------------------------------------------------------


def check_sequences(X, name="X", single_hint=True):
    """Check that ``X`` is a list of sequences; return it as a list.

    Parameters
    ----------
    X : sequence of sequences
    name : str
        How to call ``X`` in error messages.
    single_hint : bool
        Whether to suggest ``predict_single`` when ``X`` looks like one sequence.

    Returns
    -------
    list
        The sequences of ``X`` (each left as given: list, tuple or array).
    """
    _check_container(X, name, "a list of sequences (lists of tokens)")
    sequences = X if type(X) is list else list(X)
    for i, seq in enumerate(sequences):
        if type(seq) is not list:  # a list is the common case
            tokens = check_sequence(seq, i, name, single_hint)
            if tokens is not seq:
                if sequences is X:
                    sequences = list(X)  # (the caller's list stays as it is)
                sequences[i] = tokens
    return sequences


def check_sequence(seq, i, name="X", single_hint=True):
    """Check that ``seq``, the sequence ``name[i]``, is a container of tokens.

    The per-sequence rule of :func:`check_sequences` (the tokens themselves
    are checked by the encoder). Returns the sequence's tokens: ``seq``
    itself, or the items of a python-crfsuite (or ``skcrf.pycrfsuite``)
    ``ItemSequence``.
    """
    if is_item_sequence(seq):
        return seq.items()
    if type(seq) is not list:
        if isinstance(seq, Mapping):
            hint = (
                " It looks like a single sequence: pass [sequence], or use "
                "predict_single / predict_marginals_single."
                if single_hint
                else " It looks like a single sequence: pass [sequence]."
            )
            raise TypeError(
                f"{name}[{i}] is a dict (a token), but {name} must be a list of "
                f"sequences of tokens.{hint}"
            )
        if isinstance(seq, (str, bytes)):
            raise TypeError(
                f"{name}[{i}] is a {_type_name(seq)} ({_short(seq)}), but a sequence "
                "must be a list of tokens (dicts of features or lists of feature "
                "names). If these are raw words, turn them into features first "
                "(for example with skcrf.SequenceFeaturizer)."
            )
        _check_container(seq, f"{name}[{i}]", "a sequence (a list of tokens)")
    return seq


def check_single_sequence(xseq):
    """The tokens of one sequence ``xseq`` (an ``ItemSequence``'s items).

    Rejects what is no sequence, and a list of sequences passed where one
    sequence is expected (it shows in the first token; the encoder checks
    the tokens).
    """
    # a list is the common case: its checks cost per sentence (and the ABC
    # check of Mapping costs a fresh process's first tag 70 microseconds)
    if type(xseq) is not list:
        if is_item_sequence(xseq):
            return xseq.items()
        if isinstance(xseq, (str, bytes, Mapping)) or not hasattr(xseq, "__len__"):
            raise TypeError(
                f"xseq must be one sequence (a list of tokens); got {_type_name(xseq)}."
            )
    if len(xseq) and type(xseq[0]) is not dict:
        token = xseq[0]
        if isinstance(token, (list, tuple)) and token and isinstance(token[0], dict):
            raise TypeError(
                "xseq[0] is a list of dicts: xseq must be one sequence of tokens. "
                "For several sequences use predict / predict_marginals."
            )
    return xseq


def is_item_sequence(seq):
    """Whether ``seq`` is an ``ItemSequence`` (python-crfsuite's or skcrf's).

    Known by its class name and its ``items()`` (the token dicts), so that
    neither package is imported here.
    """
    return type(seq).__name__ == "ItemSequence" and callable(getattr(seq, "items", None))


def is_reusable(X):
    """Whether ``X`` can be read more than once in order.

    A sized, indexable container, not a one-shot iterator.
    """
    return not isinstance(X, Iterator) and _is_sequence(X)


def check_iterable(X, name="X", what="a list of sequences (lists of tokens)"):
    """Check that ``X`` is an ordered iterable of sequences, read once.

    Streaming entry points (``fit``, ``predict``...) accept any iterable,
    a generator included; a str, bytes, a dict (one token) and sets (no
    order) are rejected, as are non-iterables.
    """
    if X is None or isinstance(X, (str, bytes, Mapping, set, frozenset)):
        raise TypeError(f"{name} must be {what}; got {_type_name(X)}{_value_hint(X)}.")
    if isinstance(X, np.ndarray) and X.ndim == 0:
        raise TypeError(f"{name} must be {what}; got a 0-dimensional numpy array.")
    if not hasattr(X, "__iter__"):
        raise TypeError(f"{name} must be {what}; got {_type_name(X)}.")


def check_reusable(
    X, name="X", reason="it is read more than once", what="a list of sequences (lists of tokens)"
):
    """Reject a one-shot iterator where the data is read more than once.

    ``reason`` completes "... must be a list: ..." in the message.
    """
    if isinstance(X, Iterator):
        raise TypeError(
            f"{name} must be {what}, not a one-shot iterator ({_type_name(X)}): "
            f"{reason}. Pass list({name}) instead."
        )
    _check_container(X, name, what)


def check_label_sequence(seq, i, length, name="y", x_name="X"):
    """Check the label sequence ``name[i]`` against its ``length`` tokens.

    The per-sequence rule of :func:`check_labels`, for streamed data (the
    labels themselves are checked by :func:`check_labels` afterwards).
    Returns the labels as a list.
    """
    if type(seq) is not list:
        if isinstance(seq, (str, bytes, Mapping, set, frozenset)) or not (
            _is_sequence(seq) or isinstance(seq, Iterator)
        ):
            raise TypeError(
                f"{name} must be a list of label sequences, but {name}[{i}] is "
                f"{_type_name(seq)} {_short(seq)}. Give one list of labels per "
                f"sequence: {name} = [[label, label, ...], ...]."
            )
        _check_container(seq, f"{name}[{i}]", "a label sequence (a list of labels)")
        seq = seq.tolist() if isinstance(seq, np.ndarray) else list(seq)
    if len(seq) != length:
        raise ValueError(
            f"{name}[{i}] has {_count(len(seq), 'label')} but {x_name}[{i}] has "
            f"{_count(length, 'token')}; every token needs exactly one label."
        )
    return seq


def _check_container(obj, where, what):
    """Raise if ``obj`` is not a sized, ordered, indexable container."""
    if obj is None or isinstance(obj, (str, bytes, Mapping, set, frozenset)):
        raise TypeError(f"{where} must be {what}; got {_type_name(obj)}{_value_hint(obj)}.")
    if isinstance(obj, Iterator) or not _is_sequence(obj):
        hint = (
            " Generators and other one-shot iterators are not accepted: pass list(...) instead."
            if isinstance(obj, Iterator)
            else ""
        )
        raise TypeError(f"{where} must be {what}; got {_type_name(obj)}.{hint}")
    if isinstance(obj, np.ndarray) and obj.ndim == 0:
        raise TypeError(f"{where} must be {what}; got a 0-dimensional numpy array.")


def _value_hint(obj):
    if obj is None:
        return ""
    if isinstance(obj, (str, bytes)):
        return f" ({_short(obj)})"
    if isinstance(obj, Mapping):
        return " (a dict is one token)"
    return " (a set has no order)"


def _is_sequence(obj):
    return isinstance(obj, (Sequence, np.ndarray)) or (
        hasattr(obj, "__len__") and hasattr(obj, "__getitem__")
    )


def check_nonempty(sequences, n_tokens, name="X"):
    """Raise when training data holds no token (fit needs at least one)."""
    if n_tokens:
        return
    if not len(sequences):
        raise ValueError(
            f"{name} is empty: training needs at least one sequence with at least one token."
        )
    raise ValueError(
        f"{name} has no tokens: all {len(sequences)} sequences are empty; "
        "training needs at least one token."
    )


# -- tokens ---------------------------------------------------------------------


def token_attributes(token, i, j, name="X", separator=":", vectors=False):
    """``(attribute, value)`` pairs of one token, checked; CRFsuite's names.

    The general path of :meth:`skcrf._featurize._vocabulary.Vocabulary.encode`: any
    accepted token format, with the error messages naming ``name[i][j]`` and
    the feature key. The same attribute may come more than once (its values
    add up).

    A vector value (a 1-D numeric numpy array, or a non-empty list of
    floats) of key ``k`` is the attributes ``k[0]`` ... ``k[d-1]`` with its
    values (finite). With ``vectors=True`` it comes as one pair
    ``(k, array)`` (a float64 ndarray) instead, for the encoder to keep dense.

    >>> token_attributes({"emb": [0.5, -1.0]}, 0, 0)
    [('emb[0]', 0.5), ('emb[1]', -1.0)]

    Examples
    --------
    >>> token_attributes({"w": "Hi", "n": {"a": 1, "b": "x"}, "l": ["p", "q"]}, 0, 0)
    [('w:Hi', 1.0), ('n:a', 1.0), ('n:b:x', 1.0), ('l:p', 1.0), ('l:q', 1.0)]
    >>> token_attributes(["a", "b", "a"], 0, 0)
    [('a', 1.0), ('b', 1.0), ('a', 1.0)]
    >>> token_attributes({"b", "a"}, 0, 0)  # sets, dict keys: as pycrfsuite takes them
    [('a', 1.0), ('b', 1.0)]
    >>> token_attributes({"w": "Hi", "on": False}, 0, 0, separator="=")
    [('w=Hi', 1.0), ('on', 0.0)]
    """
    pairs = []
    if isinstance(token, Mapping):
        _add_mapping(pairs, token, "", i, j, name, separator, 0)
        if vectors:
            return pairs
        expanded = []
        for attribute, value in pairs:
            if type(value) is np.ndarray:
                expanded.extend((f"{attribute}[{k}]", v) for k, v in enumerate(value.tolist()))
            else:
                expanded.append((attribute, value))
        return expanded
    if isinstance(token, (list, tuple, AbstractSet)):
        if isinstance(token, (set, frozenset)):
            # (no order of their own: sorted, so that ids do not depend on hashing)
            token = sorted(token, key=str)
        for feature in token:
            if isinstance(feature, bytes):
                feature = _utf8(feature, f"{name}[{i}][{j}]: feature name")
            elif not isinstance(feature, str):
                raise TypeError(_list_token_message(token, feature, i, j, name))
            # a str subclass (np.str_) becomes a plain str name
            pairs.append((feature if type(feature) is str else str.__str__(feature), 1.0))
        return pairs
    if isinstance(token, str):
        raise TypeError(
            f"{name}[{i}][{j}] is a str ({_short(token)}), but a token must be a dict "
            "of features or a list of feature names. If you passed one sequence "
            "whose tokens are lists of feature names, pass [sequence] (or use "
            "predict_single for one sequence); if these are raw words, turn them "
            "into features first."
        )
    raise TypeError(
        f"{name}[{i}][{j}] must be a dict of features or a list of feature "
        f"names; got {_type_name(token)} ({_short(token)})."
    )


def _list_token_message(token, feature, i, j, name):
    where = f"{name}[{i}][{j}]"
    if isinstance(feature, (Mapping, list, tuple)):
        return (
            f"{where} is a {_type_name(token)} holding {_type_name(feature)}s: it "
            "looks like a sequence of tokens, not a token, so the input is nested "
            "one level too deep. Pass a list of sequences to predict / "
            "predict_marginals and one sequence to predict_single."
        )
    return (
        f"{where}: a token given as a list must hold feature names (str); found "
        f"{_type_name(feature)} {_short(feature)}."
    )


def _add_mapping(pairs, mapping, prefix, i, j, name, separator, depth):
    if depth >= MAX_NESTING:
        raise ValueError(
            f"{name}[{i}][{j}]: feature {_short(prefix[:-1])} is nested more than "
            f"{MAX_NESTING} dicts deep (does a dict contain itself?)."
        )
    for key, value in mapping.items():
        if isinstance(key, bytes):
            key = _utf8(key, f"{name}[{i}][{j}]: feature key")
        if not isinstance(key, str):
            inside = f" inside feature {prefix[:-1]!r}" if prefix else ""
            raise TypeError(
                f"{name}[{i}][{j}]: feature keys must be str; found "
                f"{_type_name(key)} {_short(key)}{inside}."
            )
        full_key = f"{prefix}{key}"  # a plain str even for a str subclass key
        if isinstance(value, str):
            pairs.append((f"{full_key}{separator}{value}", 1.0))
        elif isinstance(value, bytes):
            text = _utf8(value, f"{name}[{i}][{j}]: feature {full_key!r}")
            pairs.append((f"{full_key}{separator}{text}", 1.0))
        elif isinstance(value, (bool, np.bool_)):
            pairs.append((full_key, 1.0 if value else 0.0))
        elif isinstance(value, numbers.Real):
            try:
                number = float(value)
            except OverflowError:
                raise ValueError(_too_large_message(name, i, j, full_key, value)) from None
            if not math.isfinite(number):
                raise ValueError(
                    f"{name}[{i}][{j}]: feature {full_key!r} has the value "
                    f"{_short(value)}, which is not a finite float; feature values "
                    "must be finite numbers (no NaN or infinity)."
                )
            pairs.append((full_key, number))
        elif isinstance(value, Mapping):
            # nested keys are always joined with ':' (python-crfsuite's rule)
            _add_mapping(pairs, value, full_key + ":", i, j, name, separator, depth + 1)
        elif _is_vector(value):
            pairs.append((full_key, _vector(value, i, j, name, full_key)))
        elif isinstance(value, np.ndarray):
            raise TypeError(
                f"{name}[{i}][{j}]: feature {full_key!r} is a numpy ndarray of dtype "
                f"{value.dtype} ({_short(value)}); a vector feature is a 1-D array of "
                "numbers (bool, integer or float dtype) or a list of floats."
            )
        elif isinstance(value, (list, set, frozenset)):
            for item in value:
                if isinstance(item, bytes):
                    item = _utf8(item, f"{name}[{i}][{j}]: feature {full_key!r}")
                if not isinstance(item, str):
                    raise TypeError(
                        f"{name}[{i}][{j}]: feature {full_key!r} is a "
                        f"{_type_name(value)} holding {_type_name(item)} "
                        f"{_short(item)}; a list or set value must hold only str (a "
                        "vector feature is a numpy array or a list of floats)."
                    )
                pairs.append((f"{full_key}{separator}{item}", 1.0))
        else:
            none_hint = " (to leave a feature out, omit its key)" if value is None else ""
            raise TypeError(
                f"{name}[{i}][{j}]: feature {full_key!r} has a value of "
                f"unsupported type {_type_name(value)} ({_short(value)}); use str "
                f"(or UTF-8 bytes), bool, int, float, a dict, or a list or set of "
                f"str{none_hint}."
            )


def _is_vector(value):
    """Whether a feature value is a vector (numeric array, list of numbers)."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    if type(value) is list and value:
        return all(isinstance(v, (float, np.floating)) for v in value)
    return False


def _vector(value, i, j, name, key):
    """A vector value as a 1-D float64 array, checked (finite).

    Any numeric dtype (bool, integers, floats of any size), byte order and
    strides: the result is C-contiguous float64 in the machine's byte order,
    the numbers of ``[float(v) for v in value]``.
    """
    where = f"{name}[{i}][{j}]: feature {key!r}"
    try:
        array = np.asarray(value, dtype=np.float64)
    except OverflowError:
        raise ValueError(f"{where} holds a value too large for a float.") from None
    if array.ndim != 1:
        raise ValueError(f"{where} is a {array.ndim}-D array; a vector feature must be 1-D.")
    if not len(array):
        raise ValueError(f"{where} is an empty vector; a vector feature needs a value.")
    finite = np.isfinite(array)
    if not finite.all():
        k = int(np.flatnonzero(~finite)[0])
        raise ValueError(
            f"{where} has the value {float(array[k])!r} at index {k}, which is not a finite "
            "float; vector values must be finite numbers (no NaN or infinity)."
        )
    return np.ascontiguousarray(array)  # after the 1-D check: it makes 0-D arrays 1-D


def _utf8(data, where):
    """``bytes`` as python-crfsuite reads them: UTF-8 text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{where} is bytes that are not valid UTF-8 ({exc.reason} at byte "
            f"{exc.start}: {_short(data)}); bytes are read as UTF-8 text, as "
            "python-crfsuite does. Decode them yourself, or pass str."
        ) from None


def _too_large_message(name, i, j, key, value):
    return (
        f"{name}[{i}][{j}]: feature {key!r} has the value {_short(value)}, which is "
        "too large for a float; feature values must be finite numbers."
    )


# -- encoded data ---------------------------------------------------------------


def locate_row(flat_row, lengths):
    """``(i, j)``: sequence and token of a row in flat order."""
    ends = np.cumsum(lengths)
    i = int(np.searchsorted(ends, flat_row, side="right"))
    return i, int(flat_row - (ends[i] - lengths[i]))


def check_sums(encoded, vocabulary, name="X"):
    """Reject training values whose sums overflow (the objective would be inf).

    Parameters
    ----------
    encoded : Encoded
        The training data, as :meth:`Vocabulary.encode` returns it.
    vocabulary : Vocabulary
        The vocabulary that encoded it (for the attribute's name).
    name : str
        How to call the data in the error message.
    """
    dense = getattr(encoded, "dense", None)
    if dense is not None and dense.values.size:
        largest = max(float(dense.values.max()), -float(dense.values.min()))
        if largest * len(dense.row_index) >= 1e300:
            with np.errstate(over="ignore"):
                sums = np.abs(dense.values[dense.row_index]).sum(axis=0)
            bad = np.flatnonzero(~np.isfinite(sums))
            if len(bad):
                raise ValueError(
                    f"The values of feature "
                    f"{vocabulary.attributes[int(dense.columns[bad[0]])]!r} are too "
                    "large: the sum of their magnitudes over the training data "
                    f"overflows a float (in {name}). Scale the feature values down."
                )
    values = encoded.values
    if not len(values):
        return
    largest = abs(largest_value(encoded, name)[0])
    if largest * len(values) < 1e300:
        return  # no sum of values can overflow: the cheap, common case
    with np.errstate(over="ignore"):
        sums = np.bincount(encoded.ids, weights=np.abs(values), minlength=len(vocabulary))
    bad = np.flatnonzero(~np.isfinite(sums))
    if not len(bad):
        return
    attribute = int(bad[0])
    positions = np.flatnonzero(encoded.ids == attribute)
    position = int(positions[np.argmax(np.abs(values[positions]))])
    row = int(np.searchsorted(encoded.indptr, position, side="right")) - 1
    i, j = locate_row(row, encoded.lengths)
    raise ValueError(
        f"The values of feature {vocabulary.attributes[attribute]!r} are too large: "
        "the sum of their magnitudes over the training data overflows a float (the "
        f"largest is {float(values[position])!r}, at {name}[{i}][{j}]). Scale the "
        "feature values down."
    )


def largest_value(encoded, name="X"):
    """The token feature value of largest magnitude and where it is.

    Returns
    -------
    (value, where, attribute) or None
        The value, the token that holds it (``'X[i][j]'``) and its
        attribute id; None without values. Vector features kept dense
        (``encoded.dense``) are not looked at.
    """
    values = encoded.values
    if not len(values):
        return None
    high, low = int(values.argmax()), int(values.argmin())  # |values| without a copy
    position = high if values[high] >= -values[low] else low
    row = int(np.searchsorted(encoded.indptr, position, side="right")) - 1
    i, j = locate_row(row, encoded.lengths)
    return float(values[position]), f"{name}[{i}][{j}]", int(encoded.ids[position])


def check_emissions(emissions, lengths, name="X"):
    """Raise if label scores overflowed; name the first token concerned.

    Parameters
    ----------
    emissions : ndarray of shape (n_tokens, n_labels)
        ``X @ coef_`` in flat order.
    lengths : ndarray of int, shape (n_sequences,)
    name : str
    """
    if np.isfinite(emissions).all():
        return
    row = int(np.flatnonzero(~np.isfinite(emissions).all(axis=1))[0])
    i, j = locate_row(row, lengths)
    raise ValueError(
        f"{name}[{i}][{j}]: the label scores of this token are not finite: its "
        "feature values are too large for the model's weights. Scale the "
        "feature values down."
    )


def _count(n, noun):
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
