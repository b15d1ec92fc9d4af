"""skcrf: a scikit-learn compatible linear-chain CRF for sequence labelling."""

__version__ = "0.1.0.dev0"

from . import io, metrics  # noqa: E402
from ._featurizer import SequenceFeaturizer  # noqa: E402
from ._tagger import CRFTagger  # noqa: E402

__all__ = ["CRFTagger", "SequenceFeaturizer", "io", "metrics"]
