"""The encoded data: sequences of tokens as attribute ids and values."""

from typing import NamedTuple

import numpy as np

__all__ = ["DenseFeatures", "Encoded", "concatenate"]


class Encoded(NamedTuple):
    """Sequences of tokens as attribute ids and values, one CSR row per token.

    Rows are in flat order: the tokens of sequence 0, then sequence 1, ...
    A row may hold the same id more than once (the same attribute reached
    twice in one token, e.g. ``['a', 'a']``); such values add up.
    """

    indptr: np.ndarray  # int64, shape (n_tokens + 1,)
    ids: np.ndarray  # int32, shape (indptr[-1],)
    values: np.ndarray  # float64, shape (indptr[-1],)
    lengths: np.ndarray  # intp, shape (n_sequences,)
    #: Vector features kept dense (``encode(..., dense=True)``), or None: then
    #: every vector dimension is an ordinary CSR entry.
    dense: "DenseFeatures | None" = None
    #: Each token's transition attributes (input-conditioned transitions,
    #: an :class:`Encoded` of the same tokens with its own attribute ids;
    #: empty at each sequence's first token), or None.
    transitions: "Encoded | None" = None


class DenseFeatures(NamedTuple):
    """Vector-valued token features as one dense block beside the CSR rows.

    A token value ``{'emb': vector}`` means the attributes ``emb[0]`` ...
    ``emb[d-1]`` with those values; here they are the columns of the dense
    rows. Vectors repeat (one per word type), so ``values`` holds the
    distinct rows once and ``row_index`` gives each token's row (flat order;
    0 where a token has no such key): token ``t`` has the values
    ``values[row_index[t]]``.
    """

    columns: np.ndarray  # int64, shape (n_columns,): attribute id of each column
    values: np.ndarray  # float64, C order, shape (n_distinct, n_columns)
    key_of_column: np.ndarray  # intp, shape (n_columns,): its key's number
    present: np.ndarray  # bool, shape (n_tokens, n_keys): the token has the key
    keys: tuple  # the keys (feature names), in key-number order
    row_index: np.ndarray  # intp, shape (n_tokens,): the row of each token


def concatenate(encodeds):
    """The sequences of several :class:`Encoded`, one after the other, as one.

    Joins the CSR rows, the lengths and (where the pieces have them) the
    transition attributes. Pieces with dense vector features are refused:
    their distinct rows would need merging, which no caller needs.

    >>> import numpy as np
    >>> a = Encoded(np.array([0, 2]), np.array([0, 1], np.int32), np.ones(2), np.array([1]))
    >>> b = Encoded(np.array([0, 1, 1]), np.array([2], np.int32), np.ones(1), np.array([2]))
    >>> joined = concatenate([a, b])
    >>> joined.indptr.tolist(), joined.ids.tolist(), joined.lengths.tolist()
    ([0, 2, 3, 3], [0, 1, 2], [1, 2])
    """
    if any(e.dense is not None for e in encodeds):
        raise ValueError("cannot concatenate encoded data with dense vector features")
    if len(encodeds) == 1:
        return encodeds[0]
    offsets = np.cumsum([0] + [int(e.indptr[-1]) for e in encodeds[:-1]])
    tails = [e.indptr[1:] + offset for e, offset in zip(encodeds, offsets, strict=True)]
    transitions = None
    if encodeds[0].transitions is not None:
        transitions = concatenate([e.transitions for e in encodeds])
    return Encoded(
        np.concatenate([encodeds[0].indptr[:1], *tails]),
        np.concatenate([e.ids for e in encodeds]),
        np.concatenate([e.values for e in encodeds]),
        np.concatenate([e.lengths for e in encodeds]),
        transitions=transitions,
    )
