"""Explanations: which features add what to a labelling's score.

The score of a labelling is the sum, over its tokens, of the state features
of the token's attributes with the token's label (weight x attribute
value), plus the transition weight of every pair of neighbouring labels.
These functions list those terms and arrange them per token
(:func:`explanation`, ``CRFTagger.explain``), and list a model's strongest
features (:func:`strongest_features`, ``CRFTagger.top_features``).
"""

import numpy as np

__all__ = [
    "conditioned_contributions",
    "explanation",
    "explanation_rows",
    "state_contributions",
    "strongest",
    "strongest_features",
]


def state_contributions(model, encoded, labels):
    """The state terms of given labels at every token of one encoded sequence.

    Parameters
    ----------
    model : CRFModel
    encoded : Encoded
        One sequence (``indptr``, ``ids``, ``values``).
    labels : sequence of int
        A label index per token (the label whose terms are wanted), or -1
        for none.

    Returns
    -------
    list of list of (attribute_id, weight, value)
        Per token, the features (attribute, label) of the model with a
        nonzero weight, in the token's attribute order (an attribute given
        twice in a token appears twice, as its terms add up). The term is
        ``weight * value``.
    """
    ptr, state_labels, weights = model.state_ptr, model.state_labels, model.state_weights
    out = []
    indptr = np.asarray(encoded.indptr).tolist()
    ids = np.asarray(encoded.ids).tolist()
    values = np.asarray(encoded.values).tolist()
    for t, label in enumerate(labels):
        terms = []
        if label >= 0:
            for k in range(indptr[t], indptr[t + 1]):
                a = ids[k]
                lo, hi = int(ptr[a]), int(ptr[a + 1])
                hit = np.flatnonzero(state_labels[lo:hi] == label)
                if len(hit):
                    w = float(weights[lo + hit[0]])
                    if w != 0.0:
                        terms.append((a, w, float(values[k])))
        out.append(terms)
    return out


def conditioned_contributions(model, encoded, path):
    """The input-conditioned transition terms of a path through one encoded sequence.

    Parameters
    ----------
    model : CRFModel
        With ``model.conditioned``.
    encoded : Encoded
        One sequence, with its transition attributes (``encoded.transitions``).
    path : sequence of int
        A label index per token.

    Returns
    -------
    list of list of (transition_attribute_id, weight, value)
        Per token (none at the first), the conditioned features of the
        token's transition attributes on the pair (previous label, label)
        with a nonzero weight; the term is ``weight * value``.
    """
    conditioned, transitions = model.conditioned, encoded.transitions
    n_labels = model.n_labels
    out = [[]]
    for t in range(1, len(path)):
        pair = path[t - 1] * n_labels + path[t]
        terms = []
        for k in range(int(transitions.indptr[t]), int(transitions.indptr[t + 1])):
            a = int(transitions.ids[k])
            lo, hi = int(conditioned.ptr[a]), int(conditioned.ptr[a + 1])
            hit = np.flatnonzero(conditioned.pairs[lo:hi] == pair)
            if len(hit) and conditioned.weights[lo + hit[0]] != 0.0:
                terms.append(
                    (a, float(conditioned.weights[lo + hit[0]]), float(transitions.values[k]))
                )
        out.append(terms)
    return out


def strongest(weights, n):
    """Indices of the ``n`` largest ``|weights|`` (nonzero only), strongest first.

    Ties keep the lower index first.
    """
    weights = np.asarray(weights, dtype=np.float64)
    nonzero = np.flatnonzero(weights)
    order = np.lexsort((nonzero, -np.abs(weights[nonzero])))
    return nonzero[order[:n]]


def strongest_features(model, n):
    """The ``n`` strongest state features and transitions of ``model``.

    Returns
    -------
    state : list of (attribute, label, weight)
    transition : list of (from_label, to_label, weight)
        Strongest first (largest ``|weight|``, nonzero only); ties in
        attribute order, then label order.
    """
    classes = model.classes.tolist()
    names = model.attributes
    attribute_of = model.state_attributes()
    state = [
        (names[int(attribute_of[f])], classes[int(model.state_labels[f])], float(w))
        for f, w in ((f, model.state_weights[f]) for f in strongest(model.state_weights, n))
    ]
    matrix = model.transition_matrix()
    n_labels = len(classes)
    transition = [
        (classes[p // n_labels], classes[p % n_labels], float(matrix.flat[p]))
        for p in strongest(matrix.ravel(), n).tolist()
    ]
    return state, transition


def _sorted_terms(terms, key):
    return sorted(terms, key=lambda term: -abs(term[key]))


def explanation(model, encoded, labels, marginals):
    """Per token, the terms of the predicted label and of the runner-up.

    Parameters
    ----------
    model : CRFModel
    encoded : Encoded
        One sequence (with its transition attributes for a conditioned model).
    labels : list
        The predicted labels.
    marginals : list of dict
        The token marginals ``{label: probability}``; the runner-up of a
        token is its most probable other label (the first in ``classes``
        order on ties).

    Returns
    -------
    list of dict
        The entries of ``CRFTagger.explain`` (its docstring lists the keys).
    """
    classes = model.classes.tolist()
    index = {label: k for k, label in enumerate(classes)}
    predicted = [index[label] for label in labels]
    runner_up = []
    for token, k in zip(marginals, predicted):
        others = [(-token[c], j) for j, c in enumerate(classes) if j != k]
        runner_up.append(min(others)[1] if others else -1)
    names = model.attributes

    def terms(indices):
        return [
            _sorted_terms([(names[a], classes[k], w * v) for a, w, v in token_terms], 2)
            for token_terms, k in zip(state_contributions(model, encoded, indices), indices)
        ]

    states, runner_states = terms(predicted), terms(runner_up)
    conditioned = [[] for _ in predicted]
    if model.conditioned is not None:
        conditioned_names = model.conditioned.attributes
        conditioned = [
            _sorted_terms(
                [
                    (conditioned_names[a], classes[predicted[t - 1]], classes[k], w * v)
                    for a, w, v in token_terms
                ],
                3,
            )
            for t, (token_terms, k) in enumerate(
                zip(conditioned_contributions(model, encoded, predicted), predicted)
            )
        ]
    transitions = model.transition_matrix()
    result = []
    for t, (k, j) in enumerate(zip(predicted, runner_up)):
        previous = predicted[t - 1] if t else None
        result.append(
            {
                "position": t,
                "label": classes[k],
                "probability": float(marginals[t][classes[k]]),
                "state": states[t],
                "runner_up": classes[j] if j >= 0 else None,
                "runner_up_probability": float(marginals[t][classes[j]]) if j >= 0 else 0.0,
                "runner_up_state": runner_states[t],
                "transition": None
                if previous is None
                else (classes[previous], classes[k], float(transitions[previous, k])),
                "conditioned": conditioned[t],
            }
        )
    return result


def explanation_rows(entries):
    """The rows and columns of :func:`explanation`'s entries as a table, one row per term."""
    rows = []
    for entry in entries:
        position = entry["position"]
        for candidate, key in (("predicted", "state"), ("runner_up", "runner_up_state")):
            for attribute, label, term in entry[key]:
                rows.append((position, candidate, "state", attribute, None, label, term))
        if entry["transition"] is not None:
            source, label, weight = entry["transition"]
            rows.append((position, "predicted", "transition", None, source, label, weight))
        for attribute, source, label, term in entry["conditioned"]:
            rows.append((position, "predicted", "conditioned", attribute, source, label, term))
    columns = ["position", "candidate", "kind", "attribute", "from_label", "label", "contribution"]
    return rows, columns
