"""skcrf: a scikit-learn compatible linear-chain CRF for sequence labelling."""

from ._featurizer import SequenceFeaturizer
from ._tagger import CRFTagger

__version__ = "0.1.0.dev0"
__all__ = ["CRFTagger", "SequenceFeaturizer"]
