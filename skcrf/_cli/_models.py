"""The commands' models, opened from files or trained, without an estimator.

:class:`~skcrf.CRFTagger` is a scikit-learn estimator: importing it imports
scikit-learn and SciPy, which cost more time and memory than tagging a file
or than the model being trained (measured: ``import sklearn.base`` about 0.9 s
and 115 MB of peak memory here, ``skcrf crfpp test`` on the Treebank test
part about 0.4 s without it). So the commands use the parts the estimator
is made of, each the one the estimator uses:

- a model file is read by :mod:`skcrf._persist`'s reader for its kind into
  the :class:`~skcrf._model.FittedState` that ``CRFTagger.load`` (or
  ``from_crfsuite``, ``from_crfpp``, ``from_wapiti``) reads;
- a :class:`~skcrf._predictor.Predictor` answers for it, the one such an
  estimator holds, with the decoding parameters kept in the file;
- training is the fit driver's :func:`~skcrf._training._fit.fit`, called as
  ``CRFTagger.fit`` calls it, and the model file
  :func:`~skcrf._persist._npz.save_state`'s (``CRFTagger.save``'s format;
  the parameters the command set are kept, the others are the estimator's
  defaults when it loads the file).
"""

from collections.abc import Callable
from typing import Any

from .._featurize._validation import check_sequences
from .._model import FittedState
from .._persist._templates import state_template, template_extra
from .._predictor import Decoding, Predictor
from .._template._expand import CompiledPlan
from .._template._reference import expand_dicts
from .._template._vocabulary import TemplateVocabulary
from .._utils._data_files import check_regular_file, display_name
from ._common import CommandError

__all__ = [
    "Model",
    "open_model",
    "template_model",
    "token_features",
    "train_template_model",
]

#: The first bytes of a CRFsuite model file and of an skcrf model file (a zip).
CRFSUITE_MAGIC = b"lCRF"
ZIP_MAGIC = b"PK\x03\x04"
#: The first bytes of CRF++ 0.58 models: the binary file's version (100, a
#: little-endian uint32), crf_learn -t's text file; of Wapiti 1.5 models.
CRFPP_BINARY_MAGIC = (100).to_bytes(4, "little")
CRFPP_TEXT_MAGIC = b"version:"
WAPITI_MAGIC = b"#mdl#"


class Model:
    """A fitted model as the commands use it: what a fitted ``CRFTagger`` holds.

    Parameters
    ----------
    state : FittedState
        The model and what a model file keeps with it (parameters, template).
    predictor : Predictor, optional
        Built from ``state`` when not given (a model read from a file).
    """

    def __init__(self, state: FittedState, predictor: "Predictor | None" = None) -> None:
        self.state = state
        self.model = state.model
        self.classes = state.model.classes
        if predictor is None:
            predictor = Predictor(state.model, template=state_template(state))
        self.predictor = predictor
        #: the compiled template (None for a model of feature dicts)
        self.template = predictor.template
        self.decoding = Decoding.from_params(state.params)

    @property
    def plan(self) -> Any:
        """The template's plan (the model must have a template)."""
        return self.template.plan

    def predict(self, X: list[Any]) -> list[list[Any]]:
        return self.predictor.predict(X, self.decoding)

    def marginals(self, X: list[Any]) -> list[list[dict[Any, float]]]:
        return self.predictor.marginals(X, self.decoding)

    def nbest(self, X: list[Any], n: int) -> list[list[tuple[list[Any], float]]]:
        return self.predictor.nbest(X, n, self.decoding)

    def sequence_log_proba(self, X: list[Any]) -> Any:
        return self.predictor.sequence_log_proba(X, None, self.decoding)

    def dump(self, path: "str | None" = None) -> None:
        """CRFsuite's text dump of the model (``CRFTagger.tagger_.dump(path)``)."""
        from .._persist._estimator_files import check_crfsuite_model
        from .._tagger_view import CRFsuiteTagger

        model = check_crfsuite_model(self.model, "tagger_")
        CRFsuiteTagger(model, self.predictor.vocabulary, self.predictor.decoder).dump(path)

    def save(self, path: str) -> None:
        """Write the model file (``CRFTagger.save``'s format)."""
        from .._persist._npz import save_state

        save_state(self.state, path)


def open_model(path: str, *, cost_factor: float = 1.0) -> Model:
    """The fitted model of a model file, by its first bytes.

    CRFsuite model files (``lCRF``) are read as ``CRFTagger.from_crfsuite``
    reads them, skcrf's own (``save``) as ``CRFTagger.load`` does, CRF++'s
    (``cost_factor`` is ``crf_test -c``) and Wapiti's as ``from_crfpp`` and
    ``from_wapiti`` do; anything else is refused.
    """
    check_regular_file(path, display_name(path), "a model file")
    with open(path, "rb") as f:
        head = f.read(8)
    crfpp = head.startswith(CRFPP_BINARY_MAGIC) or head.startswith(CRFPP_TEXT_MAGIC)
    if cost_factor != 1.0 and not crfpp:
        raise CommandError(f"{path}: -c (the cost factor) applies to CRF++ models only")
    # each kind's reader imported when a file of that kind is opened
    if head.startswith(CRFSUITE_MAGIC):
        from .._persist._estimator_files import crfsuite_state

        return Model(crfsuite_state(path, ()))
    if head.startswith(ZIP_MAGIC):
        from .._persist._npz import load_state

        return Model(load_state(path, lazy_attributes=True))
    if crfpp:
        from .._persist._crfpp_model import read_crfpp_model

        return Model(read_crfpp_model(path, cost_factor=cost_factor))
    if head.startswith(WAPITI_MAGIC):
        from .._persist._wapiti_model import read_wapiti_model

        return Model(read_wapiti_model(path))
    raise CommandError(
        f"{path}: not a model file that skcrf reads (a CRFsuite, CRF++ or Wapiti model, or "
        f"one saved by skcrf; it starts with {head[:4]!r})"
    )


def token_features(plan: Any, X: list[Any]) -> list[list[dict[str, Any]]]:
    """``TemplateFeaturizer(plan).transform(X)``: the feature dicts of every token."""
    return expand_dicts(plan, check_sequences(X, name="X"))


def template_model(model: Model, path: str) -> Model:
    """``model``, which must carry a template (trained with a ``TemplateFeaturizer``)."""
    if model.template is None:
        raise CommandError(
            f"{path}: the model has no template (it was not trained with "
            "featurizer=skcrf.TemplateFeaturizer(...)), so it cannot read column files"
        )
    return model


def attribute_model(model: Model, path: str) -> Model:
    """``model``, which must read attributes (``skcrf tag`` gives it CRFsuite data)."""
    if model.template is not None:
        raise CommandError(
            f"{path}: the model featurizes raw tokens with a template (trained by skcrf "
            "crfpp learn, skcrf wapiti train or featurizer=...), so it cannot read "
            "attributes: tag column files with skcrf crfpp test or skcrf wapiti label"
        )
    return model


def train_template_model(
    plan: Any, X: list[Any], y: list[Any], params: dict[str, Any], callback: Callable[..., Any]
) -> Model:
    """Train a model of raw tokens as ``CRFTagger(featurizer=..., **params).fit(X, y)``.

    Parameters
    ----------
    plan : Plan
        The template (a :class:`~skcrf.TemplateFeaturizer`'s ``plan()``).
    params : dict
        ``CRFTagger``'s parameters that the command sets (L-BFGS's, the
        feature-generation ones, ``n_jobs``), checked by the command; the
        others keep their defaults.
    callback : callable
        ``fit``'s ``callback``. No warning when training stops before
        converging: the command's log says how it stopped.
    """
    from .._training import _fit as fit_driver

    algorithm, settings = fit_driver.resolve_settings(params)
    template = CompiledPlan(plan)
    result = fit_driver.fit(
        X,
        y,
        algorithm,
        settings,
        TemplateVocabulary(template),
        n_jobs=params.get("n_jobs"),
        random_state=None,  # L-BFGS does not shuffle
        monitor_options={"verbose": False, "callback": callback},
        warn=False,
    )
    state = FittedState(
        params=params,
        model=result.model,
        n_iter=result.n_iter,
        status=result.status,
        training_log=result.log,
        extra={"best_iteration": result.best_iteration, **template_extra(template)},
    )
    return Model(state, Predictor(result.model, result.vocabulary, template=template))
