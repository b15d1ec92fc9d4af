"""The estimator's CRFsuite files: ``model_filename``, and a fitted sklearn-crfsuite CRF's.

``model_filename`` is sklearn-crfsuite's parameter: ``fit`` writes the
trained model there as a CRFsuite file (checked writable before training,
written atomically after it), and an unfitted estimator whose file exists
reads its model from it. ``CRFTagger.from_crfsuite`` also takes a fitted
``sklearn_crfsuite.CRF``, whose model is the file it names.
"""

import os

from .._featurize._transitions import TRANSITION_KEY
from .._training._defaults import FEATURE_DEFAULTS, TRAINER_PARAMETERS
from ._crfsuite_file import read_crfsuite, write_crfsuite

__all__ = [
    "check_crfsuite_model",
    "check_model_filename",
    "sklearn_crfsuite_model",
    "write_model_filename",
]


def check_model_filename(path):
    """Fail before training, not after, when the model file cannot be written."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"model_filename={path!r}: the folder {folder!r} does not exist, so the "
            "trained model could not be written there."
        )
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"model_filename={path!r} is a folder; give the path of a file for the trained model."
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(
            f"model_filename={path!r}: the folder {folder!r} is not writable, so the "
            "trained model could not be written there."
        )


def write_model_filename(model, path):
    """Write ``model`` to ``path`` (atomically) as CRFsuite does, if ``path`` is set."""
    if path is None:
        return
    try:
        write_crfsuite(model.without_zeros(), path)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"model_filename={path!r}: the trained model could not be written "
            f"({exc.strerror or exc}); the estimator and the file keep their previous state",
        ) from exc


def check_crfsuite_model(model, what):
    """``model``, which must be one a CRFsuite file can hold (``what`` needs one)."""
    if model.conditioned is not None:
        raise ValueError(
            f"{what}: this model has input-conditioned transitions (trained on "
            f"tokens with the key {TRANSITION_KEY!r}), which CRFsuite model files "
            "cannot hold. Use save() / CRFTagger.load() (npz)."
        )
    return model


#: The parameters of ``sklearn_crfsuite.CRF`` that CRFTagger has too, which
#: ``from_crfsuite`` copies (``model_filename`` and ``trainer_cls`` are not).
_SKLEARN_CRFSUITE_PARAMETERS = (
    "algorithm",
    *FEATURE_DEFAULTS,
    *sorted(TRAINER_PARAMETERS),
    "verbose",
    "keep_tempfiles",
)

_MISSING = object()


def sklearn_crfsuite_model(crf, names):
    """The model file of a fitted ``sklearn_crfsuite.CRF`` and its parameters in ``names``.

    Read attribute by attribute, never through ``get_params``: a CRF
    unpickled from an older sklearn-crfsuite (before 0.4) lacks the
    attributes of later parameters (``keep_tempfiles``, ``model_filename``,
    kept in its ``modelfile`` then), and ``get_params`` fails on it. A
    parameter it does not have keeps CRFTagger's default.
    """
    modelfile = getattr(crf, "modelfile", None)
    if modelfile is None or not hasattr(modelfile, "name"):
        raise TypeError(
            "from_crfsuite takes the path of a CRFsuite model file, its content "
            f"(bytes) or a fitted sklearn_crfsuite.CRF; got {type(crf).__name__}."
        )
    path = modelfile.name
    if path is None or not os.path.exists(path):
        from sklearn.exceptions import (
            NotFittedError,  # not at import: the command line reads files
        )

        raise NotFittedError(
            f"the {type(crf).__name__} given has no model file"
            f"{'' if path is None else f' ({path!r} does not exist)'}: fit it first."
        )
    params = {}
    for name in _SKLEARN_CRFSUITE_PARAMETERS:
        if name not in names:
            continue
        value = getattr(crf, name, _MISSING)
        if value is _MISSING and name == "keep_tempfiles":  # before 0.4
            value = getattr(modelfile, name, _MISSING)
        if value is not _MISSING:
            params[name] = value
    return path, params


def crfsuite_state(source, names):
    """The fitted state of ``CRFTagger.from_crfsuite(source)``.

    ``source``: a CRFsuite model file's path or content, or a fitted
    ``sklearn_crfsuite.CRF`` (its parameters in ``names`` join the state's).
    """
    params = {}
    if not isinstance(source, (str, bytes, os.PathLike)):
        source, params = sklearn_crfsuite_model(source, names)
    state = read_crfsuite(source, lazy_attributes=True)
    state.params.update(params)
    return state
