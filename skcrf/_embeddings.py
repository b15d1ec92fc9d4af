"""Old path of :mod:`skcrf._featurize._embeddings` (pickles keep loading).

Pickles made before the subpackages name this path; it only re-exports.
"""

from ._featurize._embeddings import Embeddings

__all__ = ["Embeddings"]
