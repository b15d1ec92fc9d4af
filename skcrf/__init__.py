"""skcrf: a scikit-learn compatible linear-chain CRF for sequence labelling."""

__version__ = "0.1.0.dev0"

from . import io, metrics  # noqa: E402
from ._cv import CRFTaggerCV  # noqa: E402
from ._featurize._embeddings import Embeddings  # noqa: E402
from ._featurize._featurizer import SequenceFeaturizer  # noqa: E402
from ._tagger import CRFTagger  # noqa: E402
from ._training._lbfgs import LBFGSStatus  # noqa: E402
from ._training._monitor import CallbackInfo  # noqa: E402
from ._training._online_train import OnlineStatus  # noqa: E402
from ._training._training_log import LabelScore, TrainingLog  # noqa: E402

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
