"""Input-conditioned transition attributes: read from the token dicts, encoded apart.

A token dict may hold, under the reserved key :data:`TRANSITION_KEY`, a dict
of *transition attributes* (the same forms as a token's features: string
values, numbers, booleans, lists of strings, nested dicts). Those do not
score labels: they score the pair (previous label, label) of the token, as
CRF++'s bigram templates do. They are taken out of the token before the
state features are encoded, and encoded into a vocabulary of their own; at
a sequence's first token (no previous label) they are ignored.

Data without the key takes exactly the usual path; the encoder looks the key
up in each dict token (in C) only when asked to (:class:`TransitionParts`).
"""

from collections.abc import Mapping

import numpy as np

__all__ = ["TRANSITION_KEY", "TransitionParts", "encode_transitions", "with_transitions"]

#: The reserved key of a token dict whose value holds its transition attributes.
TRANSITION_KEY = "__transition__"


#: A token without transition attributes (shared, never changed).
_NONE: dict = {}


class TransitionParts:
    """The tokens' transition attributes, taken out by the encoder as it reads them.

    Given to :func:`~skcrf._featurize._stream.encode_data` (or
    :meth:`Vocabulary.encode`), whose one pass over the tokens hands every
    dict token holding :data:`TRANSITION_KEY` to :meth:`take` and encodes
    what it returns. ``tokens`` lists ``(i, j, attributes)`` of each such
    token but the first of a sequence (no previous label there); ``found``
    tells whether any token had the key.
    """

    def __init__(self):
        self.tokens = []
        self.found = False
        # Set by an encoder that encodes the transition attributes itself (a
        # template's, skcrf._template._vocabulary): their rows, and when
        # growing the names of its index, those from ``first_new`` on new.
        self.encoded = None
        self.names = None
        self.first_new = 0

    def take(self, token, i, j, name="X"):
        """``token``, the token ``name[i][j]``, without its transition attributes."""
        attributes = token[TRANSITION_KEY]
        if not isinstance(attributes, Mapping):
            raise ValueError(
                f"{name}[{i}][{j}][{TRANSITION_KEY!r}] must be a dict of transition "
                f"attributes (as a token's features); got {type(attributes).__name__}."
            )
        self.found = True
        if j:
            # the token's own dict, not a copy: the parts hold references only
            self.tokens.append(
                (i, j, attributes if type(attributes) is dict else dict(attributes))
            )
        stripped = token.copy()  # a C copy of the table, then one deletion
        del stripped[TRANSITION_KEY]
        return stripped


def encode_transitions(vocabulary, parts, lengths, *, grow, name="X"):
    """Encode the transition attributes of ``parts`` (sequence lengths ``lengths``).

    Returns
    -------
    Encoded
        One row per token (flat order), empty at each sequence's first token.
    """
    sequences = [[_NONE] * length for length in np.asarray(lengths).tolist()]
    for i, j, attributes in parts.tokens:
        sequences[i][j] = attributes
    return vocabulary.encode(sequences, grow=grow, name=name)


def with_transitions(encoded, parts, vocabulary, *, grow=False, name="X"):
    """``encoded`` with the transition attributes of ``parts`` (None: none) attached.

    ``parts`` is emptied: its dicts go once they are encoded.
    """
    if parts is None:
        parts = TransitionParts()
    if parts.encoded is not None:
        if grow and parts.names is not None:
            new = parts.names[parts.first_new :]
            if len(vocabulary) != parts.first_new:
                raise RuntimeError("transition vocabulary out of step with the template's")
            if new:
                vocabulary.encode([[dict.fromkeys(new, 1.0)]], grow=True, name=name)
        return encoded._replace(transitions=parts.encoded)
    transitions = encode_transitions(vocabulary, parts, encoded.lengths, grow=grow, name=name)
    parts.tokens = []
    return encoded._replace(transitions=transitions)
