"""Type aliases of the public API, importable by every module (it imports none)."""

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["LabelSequencesLike", "SequenceLike", "SequencesLike"]

#: What the estimator takes: sequences of tokens (a token is a dict of
#: features or a list of feature names), and sequences of labels.
SequenceLike = Sequence[Any]
SequencesLike = Iterable[SequenceLike]
LabelSequencesLike = Iterable[Sequence[Any]]
