"""Input-conditioned transition attributes: read from the token dicts, encoded apart.

A token dict may hold, under the reserved key :data:`TRANSITION_KEY`, a dict
of *transition attributes* (the same forms as a token's features: string
values, numbers, booleans, lists of strings, nested dicts). Those do not
score labels: they score the pair (previous label, label) of the token, as
CRF++'s bigram templates do. They are taken out of the token before the
state features are encoded, and encoded into a vocabulary of their own; at
a sequence's first token (no previous label) they are ignored.

Data without the key takes exactly the usual path: :func:`split_transitions`
returns it as it is.
"""

from collections.abc import Mapping

import numpy as np

from ._validation import check_iterable, is_reusable

__all__ = ["TRANSITION_KEY", "encode_transitions", "split_transitions", "with_transitions"]

#: The reserved key of a token dict whose value holds its transition attributes.
TRANSITION_KEY = "__transition__"


#: A token without transition attributes (shared, never changed).
_NONE: dict = {}


class TransitionParts:
    """Each sequence's transition attributes, filled as the sequences are read.

    ``sequences[i]`` is the list of sequence ``i``'s transition dicts (``{}``
    for a token without any, and for its first token), or None when none of
    its tokens has the key.
    """

    def __init__(self):
        self.sequences = []
        self.found = False


def _strip(seq, i, name, parts):
    """``seq`` without transition attributes; records them in ``parts``."""
    if not isinstance(seq, (list, tuple)) or not any(
        isinstance(token, dict) and TRANSITION_KEY in token for token in seq
    ):
        parts.sequences.append(None)
        return seq
    parts.found = True
    state, transitions = [], []
    for j, token in enumerate(seq):
        if isinstance(token, dict) and TRANSITION_KEY in token:
            attributes = token[TRANSITION_KEY]
            if not isinstance(attributes, Mapping):
                raise ValueError(
                    f"{name}[{i}][{j}][{TRANSITION_KEY!r}] must be a dict of transition "
                    f"attributes (as a token's features); got {type(attributes).__name__}."
                )
            stripped = token.copy()  # a C copy of the table, then one deletion
            del stripped[TRANSITION_KEY]
            state.append(stripped)
            # the token's own dict, not a copy: the parts hold references only
            if type(attributes) is not dict:
                attributes = dict(attributes)
            transitions.append(attributes if j else _NONE)
        else:
            state.append(token)
            transitions.append(_NONE)
    parts.sequences.append(transitions)
    return state


def split_transitions(X, name="X"):
    """``X`` without its transition attributes, and those attributes.

    Parameters
    ----------
    X : iterable of sequences of tokens
        A list is scanned for the key now; a list with it, and any other
        iterable, is wrapped, and read (once) by whoever reads the returned
        one: each sequence's stripped copy lives while it is encoded, not
        all of them at once.

    Returns
    -------
    X : list or iterator
        ``X`` itself when it is a list none of whose tokens has the key.
    parts : TransitionParts or None
        None when ``X`` is a list with no transition attributes; otherwise
        filled as the returned ``X`` is read (check ``parts.found`` then).
    """
    if is_reusable(X):
        try:
            found = any(
                isinstance(seq, (list, tuple))
                and any(isinstance(token, dict) and TRANSITION_KEY in token for token in seq)
                for seq in X
            )
        except TypeError:  # no container of sequences (a 0-d array): the reader says so
            return X, None
        if not found:
            return X, None
    else:
        check_iterable(X, name)  # the reader's error for what is no iterable of sequences
    parts = TransitionParts()
    return (_strip(seq, i, name, parts) for i, seq in enumerate(X)), parts


def encode_transitions(vocabulary, parts, lengths, *, grow, name="X"):
    """Encode the transition attributes of ``parts`` (sequence lengths ``lengths``).

    Returns
    -------
    Encoded
        One row per token (flat order), empty at each sequence's first token.
    """
    sequences = [
        [_NONE] * int(length) if seq is None else seq
        for seq, length in zip(parts.sequences, np.asarray(lengths).tolist())
    ]
    return vocabulary.encode(sequences, grow=grow, name=name)


def with_transitions(encoded, parts, vocabulary, *, grow=False, name="X"):
    """``encoded`` with the transition attributes of ``parts`` (None: none) attached.

    ``parts`` is emptied: its dicts go once they are encoded.
    """
    if parts is None:
        parts = TransitionParts()
        parts.sequences = [None] * len(encoded.lengths)
    transitions = encode_transitions(vocabulary, parts, encoded.lengths, grow=grow, name=name)
    parts.sequences = []
    return encoded._replace(transitions=transitions)
