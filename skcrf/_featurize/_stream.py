"""Encoding data that arrives as any iterable: one pass, sequence by sequence.

``fit`` and the decoding methods accept ``X`` (and ``y``) as any iterable
of sequences, a generator included. A sized, indexable container (a list,
a tuple, an array) is encoded as before (:meth:`Vocabulary.encode`); anything
else is *streamed*: each sequence is checked, encoded into growing CSR
buffers (:class:`skcrf._featurize._vocabulary.StreamEncoder`) and dropped before the
next one is read, so the token dicts never all exist at once. Only the
compact arrays (12 bytes per stored feature, 8 per token) and the label
sequences are kept. Both paths give the same :class:`Encoded` arrays, hence
the same features and the same model.

The labels are read alongside (``zip`` in lockstep): a sequence whose label
count differs from its token count, or ``X`` and ``y`` of different lengths,
is an error naming the sequence, raised as soon as it is seen (before
anything fitted changes: ``fit`` sets its attributes at the end).

Data read more than once (``X_dev`` / ``y_dev``, scored at every iteration;
the training data of ``early_stopping`` without ``X_dev``, split into a
validation part) must be a list: :func:`skcrf._featurize._validation.check_reusable`.
"""

from ._validation import (
    check_iterable,
    check_label_sequence,
    check_sequence,
    check_sequences,
    is_reusable,
)
from ._vocabulary import StreamEncoder

__all__ = ["encode_data"]

_END = object()
_NO_LABELS = object()


def encode_data(
    vocabulary,
    X,
    y=_NO_LABELS,
    *,
    grow,
    name="X",
    y_name="y",
    single_hint=True,
    dense=False,
    transitions=None,
    n_threads=1,
):
    """Encode ``X`` (any iterable of sequences), reading it once.

    Parameters
    ----------
    vocabulary : Vocabulary
    X : iterable of sequences of tokens
        A list (or other sized, indexable container) is encoded in one call;
        any other iterable is streamed sequence by sequence.
    y : iterable of label sequences, optional
        Read in lockstep with ``X`` when ``X`` is streamed. Not given: no
        labels (None given is an error: ``y must be ...``).
    grow : bool
        As in :meth:`Vocabulary.encode` (True: fit).
    name, y_name : str
        How to call the data in error messages.
    single_hint : bool
        As in :func:`check_sequences`.
    dense : bool, default=False
        Keep vector features as one dense block (``Encoded.dense``), as
        :meth:`Vocabulary.encode` does with ``dense=True``.
    transitions : TransitionParts, optional
        Filled with the tokens' transition attributes, which are taken out of
        the tokens by the encoder (in its one pass over the tokens).
        None: tokens are encoded as they are.
    n_threads : int, default=1
        Threads featurizing raw tokens (a vocabulary that ``reads_raw_tokens``,
        a template's); feature dicts are encoded by one thread.

    Returns
    -------
    encoded : Encoded
        Without ``y``.
    encoded, label_sequences : Encoded, list
        With ``y``: the label sequences as a list (``y`` itself when it is
        a list), to be checked by :func:`check_labels` or
        :func:`check_partial_training_labels` as usual.
    """
    if getattr(vocabulary, "reads_raw_tokens", False) and not is_reusable(X):
        # raw tokens (a template's vocabulary) are small next to their
        # features: a stream of them is read into a list, checked as one
        check_iterable(X, name)
        X = list(X)
    if is_reusable(X):
        encoded = vocabulary.encode(
            check_sequences(X, name=name, single_hint=single_hint),
            grow=grow,
            name=name,
            dense=dense,
            transitions=transitions,
            n_threads=n_threads,
        )
        if y is _NO_LABELS:
            return encoded
        if not is_reusable(y):
            check_iterable(y, y_name, "a list of label sequences")
            y = list(y)
        return encoded, y
    check_iterable(X, name)
    if y is not _NO_LABELS:
        check_iterable(y, y_name, "a list of label sequences")
    return _stream(vocabulary, X, y, grow, name, y_name, single_hint, dense, transitions)


def _stream(vocabulary, X, y, grow, name, y_name, single_hint, dense, transitions):
    encoder = StreamEncoder(vocabulary, grow=grow, name=name, dense=dense, transitions=transitions)
    label_sequences = None if y is _NO_LABELS else []
    labels_left = None if y is _NO_LABELS else iter(y)
    i = -1
    try:
        for i, seq in enumerate(X):
            seq = check_sequence(seq, i, name, single_hint)
            if labels_left is not None:
                labels = next(labels_left, _END)
                if labels is _END:
                    raise ValueError(
                        f"{name} has more sequences than {y_name} has label sequences: "
                        f"{y_name} ended after {_count(i, 'label sequence')}, but "
                        f"{name}[{i}] exists; they must have one label sequence per "
                        "sequence."
                    )
                label_sequences.append(check_label_sequence(labels, i, len(seq), y_name, name))
            encoder.add(seq)
            del seq  # the dicts go now (the iterator may hold no other reference)
        if labels_left is not None and next(labels_left, _END) is not _END:
            raise ValueError(
                f"{y_name} has more label sequences than {name} has sequences: {name} "
                f"ended after {_count(i + 1, 'sequence')}, but {y_name}[{i + 1}] exists; "
                "they must have one label sequence per sequence."
            )
        encoded = encoder.finish()
    except BaseException:
        encoder.abort()
        raise
    if y is _NO_LABELS:
        return encoded
    return encoded, label_sequences


def _count(n, noun):
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
