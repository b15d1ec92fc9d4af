"""``eli5.explain_weights`` for :class:`~skcrf.CRFTagger`, registered lazily.

skcrf never imports eli5 itself. :func:`install` runs when skcrf is imported:
if eli5 is imported already, it registers :func:`explain_weights_crftagger`
with ``eli5.explain_weights`` at once; otherwise it puts a finder at the front
of ``sys.meta_path`` that does nothing until ``import eli5``. Then it finds
eli5 with the other finders and wraps the ``exec_module`` of eli5's loader,
so that the registration runs right after eli5's own ``__init__``, and the
finder leaves ``sys.meta_path``. eli5 runs with its own loader in place; an
eli5 that fails to import leaves the finder waiting for the next attempt;
a registration that fails is a warning, never an error in ``import eli5``.

eli5 has no ``explain_prediction`` for sklearn-crfsuite, so there is none
here either.
"""

import sys
import threading
import warnings

_ELI5 = "eli5"
_lock = threading.Lock()  # guards sys.meta_path changes; never held while importing


def explain_weights_crftagger(
    crf,
    top=20,
    target_names=None,
    targets=None,
    feature_re=None,
    feature_filter=None,
):
    """Explain the weights of a fitted :class:`~skcrf.CRFTagger` (eli5's ``explain_weights``).

    The explanation eli5 gives for ``sklearn_crfsuite.CRF``: for each label,
    the state features (``attributes_``) with the largest weights, and the
    transition weights between the labels shown. Called by
    ``eli5.explain_weights(tagger, ...)``; see there for the parameters.

    Parameters
    ----------
    crf : CRFTagger
        A fitted tagger.
    top : int or tuple of (int or None, int or None) or None, default=20
        The number of features shown per label, by absolute weight; a
        ``(n_positive, n_negative)`` pair limits each sign; None shows all.
    target_names : list or dict, optional
        Display names of the labels: a list in ``classes_`` order, or a
        ``{label: name}`` dict.
    targets : list, optional
        The labels to show, in this order (labels or display names). By
        default all, ordered as eli5 orders NER tags (``O`` first, then
        ``B-X`` beside ``I-X``) when all labels are strings, else in
        ``classes_`` order.
    feature_re : str or re.Pattern, optional
        Only the attributes this regular expression finds (``re.search``).
    feature_filter : callable, optional
        Only the attributes for which ``feature_filter(name)`` is true. At
        most one of ``feature_re`` and ``feature_filter``.

    Returns
    -------
    eli5.base.Explanation
        ``targets``: one ``TargetExplanation`` per label with its top
        feature weights; ``transition_features``: the transition weights,
        ``coef[i, j]`` for label ``i`` followed by label ``j``, in the order
        of ``targets``.
    """
    import numpy as np
    from eli5._feature_names import FeatureNames
    from eli5._feature_weights import get_top_features
    from eli5.base import Explanation, TargetExplanation, TransitionFeatureWeights
    from eli5.utils import get_target_display_names

    classes = crf.classes_.tolist()  # NotFittedError before fit
    names = np.array(crf.attributes_)
    # (n_attributes, n_classes): one column per label, walked by its nonzeros
    # (eli5's sklearn-crfsuite explainer builds the dense matrix instead)
    coef = crf.coef_
    if feature_filter is not None or feature_re is not None:
        kept_names, kept = FeatureNames(names).handle_filter(feature_filter, feature_re)
        names = np.array(kept_names.feature_names)
        coef = coef[np.asarray(kept, dtype=np.intp)]
    coef = coef.tocsc()
    coef.sort_indices()

    def features(label_id):
        start, end = coef.indptr[label_id], coef.indptr[label_id + 1]
        rows, weights = coef.indices[start:end], coef.data[start:end]
        nonzero = weights != 0
        return get_top_features(names[rows[nonzero]], weights[nonzero], top)

    if targets is None:
        targets = _ner_order(classes) if all(isinstance(c, str) for c in classes) else classes
    shown = get_target_display_names(classes, target_names, targets)
    if not shown:
        raise ValueError("targets is empty: pass at least one label, or None for all")
    indices, labels = zip(*shown)
    transitions = crf.transition_[np.ix_(indices, indices)]
    return Explanation(
        targets=[
            TargetExplanation(target=label, feature_weights=features(label_id))
            for label_id, label in zip(indices, labels)
        ],
        transition_features=TransitionFeatureWeights(class_names=list(labels), coef=transitions),
        estimator=repr(crf),
        method="CRF",
    )


def _ner_order(labels):
    """eli5's default label order for sklearn-crfsuite: ``B-X`` and ``I-X`` together.

    >>> _ner_order(['B-ORG', 'B-PER', 'O', 'I-PER'])
    ['O', 'B-ORG', 'B-PER', 'I-PER']
    """

    def key(label):
        if len(label) > 2 and label[1] == "-":
            return label.split("-", 1)[1], label
        return "", label

    return sorted(labels, key=key)


def register():
    """Register :func:`explain_weights_crftagger` with eli5; idempotent.

    Imports eli5 (waiting for an import of it under way in another thread).
    """
    import eli5  # noqa: F401
    from eli5.explain import explain_weights

    from .._tagger import CRFTagger  # imported now, not when skcrf is

    explain_weights.register(CRFTagger, explain_weights_crftagger)


def _register_or_warn():
    try:
        register()
    except Exception as exc:
        warnings.warn(
            "skcrf could not register eli5.explain_weights for CRFTagger "
            f"({type(exc).__name__}: {exc}); eli5 itself is not affected.",
            RuntimeWarning,
            stacklevel=2,
        )


class _Eli5Finder:
    """Waits on ``sys.meta_path`` for ``import eli5`` (see the module docstring)."""

    _skcrf_eli5_finder = True

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _ELI5:
            return None
        spec = _find_spec(fullname, path, target)
        if spec is None:  # not installed: the next finders say so
            return None
        loader = spec.loader
        if isinstance(loader, _RegisteringLoader):
            return spec
        if loader is None or not hasattr(loader, "exec_module"):
            warnings.warn(
                "skcrf could not register eli5.explain_weights for CRFTagger: eli5's "
                f"loader {loader!r} has no exec_module; eli5 itself is not affected.",
                RuntimeWarning,
                stacklevel=2,
            )
            return spec
        # A spec only looked at (importlib.util.find_spec) is never loaded:
        # the finder stays until a spec of eli5 is executed.
        spec.loader = _RegisteringLoader(loader)
        return spec


class _RegisteringLoader:
    """eli5's loader, whose ``exec_module`` registers skcrf after eli5 has run."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        if name == "_loader":
            raise AttributeError(name)
        return getattr(self._loader, name)

    def exec_module(self, module):
        loader = self._loader
        # eli5 runs with (and keeps) its own loader
        module.__loader__ = loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = loader
        loader.exec_module(module)  # if eli5 fails, the finder waits for the next import
        _remove_finders()
        _register_or_warn()


def _find_spec(fullname, path, target):
    """eli5's spec from the other finders, in ``sys.meta_path`` order."""
    for finder in list(sys.meta_path):
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None or _is_ours(finder):
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _is_ours(finder):
    # by a class attribute, so that a reloaded module still knows its finders
    return getattr(type(finder), "_skcrf_eli5_finder", False) is True


def _add_finder():
    with _lock:
        if not any(_is_ours(f) for f in sys.meta_path):
            sys.meta_path.insert(0, _Eli5Finder())


def _remove_finders():
    with _lock:
        for finder in [f for f in sys.meta_path if _is_ours(f)]:
            sys.meta_path.remove(finder)


def install():
    """Register with eli5 now if it is imported, else right after it is; idempotent."""
    if _ELI5 not in sys.modules:
        _add_finder()
    if _ELI5 in sys.modules:  # imported before skcrf, or meanwhile by another thread
        _remove_finders()
        _register_or_warn()
