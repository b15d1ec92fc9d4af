"""skcrf: a scikit-learn compatible linear-chain CRF for sequence labelling."""

from . import io, metrics
from ._cv import CRFTaggerCV
from ._featurize._embeddings import Embeddings
from ._featurize._featurizer import SequenceFeaturizer
from ._interop._eli5 import install as _install_eli5
from ._moved import install as _install_moved
from ._tagger import CRFTagger
from ._training._lbfgs import LBFGSStatus
from ._training._monitor import CallbackInfo
from ._training._online_train import OnlineStatus
from ._training._training_log import LabelScore, TrainingLog
from ._version import __version__ as __version__

# eli5.explain_weights(tagger) works once eli5 is imported; eli5 is not imported here
_install_eli5()
# pickles made before the subpackages name old module paths (skcrf._lbfgs, ...)
_install_moved()

__all__ = [
    "CRFTagger",
    "CRFTaggerCV",
    "CallbackInfo",
    "Embeddings",
    "LBFGSStatus",
    "LabelScore",
    "OnlineStatus",
    "SequenceFeaturizer",
    "TrainingLog",
    "io",
    "metrics",
]
