"""Old path of :mod:`skcrf._featurize._featurizer` (pickles keep loading).

Pickles made before the subpackages name this path; it only re-exports.
"""

from ._featurize._featurizer import SequenceFeaturizer

__all__ = ["SequenceFeaturizer"]
