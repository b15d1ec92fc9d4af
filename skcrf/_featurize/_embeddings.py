"""Word vectors for :class:`~skcrf.SequenceFeaturizer` (issue #15, part 3).

:class:`Embeddings` wraps a mapping from word to vector (a dict, or any object
with ``__getitem__``, ``__contains__`` and ``vector_size``, such as gensim's
``KeyedVectors``) so that ``sklearn.base.clone`` and ``get_params`` share it
instead of copying it: a grid search clones the featurizer for every fit,
and the vectors may take gigabytes. Lookups return read-only float64 arrays,
the same object for the same word (cached), which the encoder keeps once per
distinct vector.
"""

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["Embeddings"]


class _KeyedVectorsLike(Protocol):
    """What :class:`Embeddings` needs of word vectors that are not a dict (gensim's)."""

    @property
    def vector_size(self) -> int: ...

    def __getitem__(self, word: str, /) -> ArrayLike: ...

    def __contains__(self, word: object, /) -> bool: ...


class Embeddings:
    """Word vectors shared by reference (``clone`` and ``deepcopy`` return it).

    Parameters
    ----------
    vectors : mapping or KeyedVectors-like
        ``vectors[word]`` is a 1-D array of ``vector_size`` numbers; ``word in
        vectors`` says whether it is known. A dict is accepted (its vectors
        must all have one length); any object with ``__getitem__``,
        ``__contains__`` and ``vector_size`` too.
    lowercase_fallback : bool, default=True
        Look a word that is not found up again lower-cased.

    Notes
    -----
    A word not found (even lower-cased, when asked) has no vector: the
    featurizer then gives the token the zero vector and the feature
    ``emb.unknown`` (True), so the CRF learns a weight for unknown words.

    Examples
    --------
    >>> import copy
    >>> emb = Embeddings({"paris": [1.0, 0.0], "london": [0.9, 0.1]})
    >>> emb.vector_size, emb.lookup("Paris").tolist(), emb.lookup("Rome")
    (2, [1.0, 0.0], None)
    >>> copy.deepcopy(emb) is emb
    True
    """

    def __init__(
        self,
        vectors: "Embeddings | Mapping[str, ArrayLike] | _KeyedVectorsLike",
        *,
        lowercase_fallback: bool = True,
    ) -> None:
        # typed loosely: a dict, or a KeyedVectors-like object (duck-typed below)
        source: Any = vectors.vectors if isinstance(vectors, Embeddings) else vectors
        if not (hasattr(source, "__getitem__") and hasattr(source, "__contains__")):
            raise TypeError(
                "embeddings must map words to vectors (a dict, or an object with "
                f"__getitem__, __contains__ and vector_size); got {type(source).__name__}."
            )
        size = getattr(source, "vector_size", None)
        if size is None:
            if not hasattr(source, "values"):
                raise TypeError(
                    "embeddings without a vector_size attribute must be a mapping (with "
                    f"values()); got {type(source).__name__}."
                )
            first = next(iter(source.values()), None)
            if first is None:
                raise ValueError("embeddings is empty: no word has a vector.")
            size = len(first)
        self.vectors: Mapping[str, ArrayLike] | _KeyedVectorsLike = source
        self.vector_size: int = int(size)
        self.lowercase_fallback: bool = bool(lowercase_fallback)
        self._cache: dict[str, np.ndarray | None] = {}
        self.zeros: np.ndarray = np.zeros(self.vector_size)
        self.zeros.flags.writeable = False

    def __deepcopy__(self, memo: dict[int, Any]) -> "Embeddings":
        return self  # shared: clone and get_params must not copy the vectors

    def __copy__(self) -> "Embeddings":
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (Embeddings, (self.vectors,), {"lowercase_fallback": self.lowercase_fallback})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.lowercase_fallback = state["lowercase_fallback"]

    def __repr__(self) -> str:
        return f"Embeddings(<{type(self.vectors).__name__}>, vector_size={self.vector_size})"

    def lookup(self, word: str) -> np.ndarray | None:
        """The vector of ``word`` (float64, read-only), or None when unknown."""
        cache = self._cache
        found = cache.get(word)
        if found is not None or word in cache:
            return found
        vector = None
        if word in self.vectors:
            vector = self.vectors[word]
        elif self.lowercase_fallback and word.lower() in self.vectors:
            vector = self.vectors[word.lower()]
        if vector is not None:
            vector = np.array(vector, dtype=np.float64).reshape(-1)
            if len(vector) != self.vector_size:
                raise ValueError(
                    f"embeddings: the vector of {word!r} has {len(vector)} values, but "
                    f"vector_size is {self.vector_size}."
                )
            if not np.isfinite(vector).all():
                raise ValueError(f"embeddings: the vector of {word!r} is not finite.")
            vector.flags.writeable = False
        cache[word] = vector
        return vector
