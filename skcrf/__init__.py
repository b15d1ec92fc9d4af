"""skcrf: a scikit-learn compatible linear-chain CRF for sequence labelling.

The public names are imported on first access (PEP 562): ``import skcrf``
alone loads neither scikit-learn nor SciPy, so that ``import
skcrf.pycrfsuite`` (which imports this package first) stays light.
``from skcrf import CRFTagger``, ``skcrf.metrics`` and ``dir(skcrf)`` work
as if everything were imported here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._interop._eli5 import install as _install_eli5
from ._moved import install as _install_moved
from ._version import __version__ as __version__

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from . import io, metrics
    from ._cv import CRFTaggerCV
    from ._featurize._embeddings import Embeddings
    from ._featurize._featurizer import SequenceFeaturizer
    from ._tagger import CRFTagger
    from ._template._featurizer import TemplateFeaturizer
    from ._training._lbfgs import LBFGSStatus
    from ._training._monitor import CallbackInfo
    from ._training._online_train import OnlineStatus
    from ._training._training_log import LabelScore, TrainingLog

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
    "TemplateFeaturizer",
    "TrainingLog",
    "io",
    "metrics",
]

# public name -> the module that defines it (imported on first access)
_LAZY = {
    "CRFTagger": "._tagger",
    "CRFTaggerCV": "._cv",
    "CallbackInfo": "._training._monitor",
    "Embeddings": "._featurize._embeddings",
    "LBFGSStatus": "._training._lbfgs",
    "LabelScore": "._training._training_log",
    "OnlineStatus": "._training._online_train",
    "SequenceFeaturizer": "._featurize._featurizer",
    "TemplateFeaturizer": "._template._featurizer",
    "TrainingLog": "._training._training_log",
}
# public submodules, imported on first access as attributes
_SUBMODULES = frozenset({"io", "metrics"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        # import_module sets the attribute on the package as well
        return importlib.import_module(f".{name}", __name__)
    source = _LAZY.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(source, __name__), name)
    globals()[name] = value  # later accesses skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
