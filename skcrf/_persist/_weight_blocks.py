"""The fitted state of a CRF++ or Wapiti model: weights in blocks, one block a feature string.

Both toolkits give each feature string (CRF++'s) or observation (Wapiti's)
a block of weights: ``L`` for a unigram one (label ``y`` at ``first + y``),
``L * L`` for a bigram one (label ``i`` followed by ``j`` at ``first + i *
L + j``). :func:`block_state` lays such a model out as skcrf's
:class:`~skcrf._model.CRFModel` with its template (see the readers,
:mod:`skcrf._persist._crfpp_model` and :mod:`skcrf._persist._wapiti_model`).
"""

import numpy as np

from .._model import ConditionedTransitions, CRFModel, FittedState, check_model_arrays
from .._template._plan import plan_to_data

__all__ = ["block_state"]


def block_state(labels, plan, weights, unigrams, bigrams, plain):
    """The fitted state of a model whose features own blocks of ``weights``.

    Parameters
    ----------
    labels : list of str
        In the model's label order.
    plan : Plan
        The model's template.
    weights : ndarray of float64
        Every weight of the model (finite).
    unigrams, bigrams : (list of str, ndarray of int64)
        The unigram (bigram) strings and where each one's block starts.
    plain : list of str
        The strings of the template lines that give the plain transitions
        (a bigram line with no macro; a line given twice listed twice: the
        toolkits add its block twice).

    Returns
    -------
    FittedState
        ``model.attributes`` the unigram strings, each with its ``L`` state
        features; the transitions the sum of the blocks of ``plain``, every
        pair (none without ``plain``); when the plan has transition
        features, every bigram string an input-conditioned transition
        attribute with its ``L * L`` weights; the template in ``extra``.
    """
    n_labels = len(labels)
    label_range = np.arange(n_labels, dtype=np.int64)
    pairs = np.arange(n_labels * n_labels, dtype=np.int64)
    (state_names, state_first), (bigram_names, bigram_first) = unigrams, bigrams
    transitions = np.zeros(len(pairs))
    for name, first in zip(bigram_names, bigram_first.tolist()):
        transitions += plain.count(name) * weights[first : first + len(pairs)]
    conditioned = None
    if any(feature.kind != "state" for feature in plan.features):
        conditioned = ConditionedTransitions(
            attributes=list(bigram_names),
            ptr=np.arange(len(bigram_names) + 1, dtype=np.int64) * len(pairs),
            pairs=np.tile(pairs, len(bigram_names)).astype(np.int32),
            weights=weights[(bigram_first[:, None] + pairs).ravel()],
        )
    n_states = len(state_names)
    arrays = {
        "state_ptr": np.arange(n_states + 1, dtype=np.int64) * n_labels,
        "state_labels": np.tile(label_range, n_states).astype(np.int32),
        "state_weights": weights[(state_first[:, None] + label_range).ravel()],
        "transition_index": pairs if plain else pairs[:0],
        "transition_weights": transitions if plain else transitions[:0],
    }
    check_model_arrays(n_states, n_labels, arrays)
    classes = np.empty(n_labels, dtype=object)
    classes[:] = labels
    model = CRFModel(
        classes=classes,
        attributes=list(state_names),
        value_separator=plan.separator,
        conditioned=conditioned,
        **arrays,
    )
    return FittedState(params={}, model=model, extra={"template": plan_to_data(plan)})
