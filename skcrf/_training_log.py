"""Old path of :mod:`skcrf._training._training_log` (pickles keep loading).

Pickles made before the subpackages name this path; it only re-exports.
"""

from ._training._training_log import LabelScore, TrainingLog

__all__ = ["LabelScore", "TrainingLog"]
