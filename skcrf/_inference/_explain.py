"""Explanations: which features add what to a labelling's score.

The score of a labelling is the sum, over its tokens, of the state features
of the token's attributes with the token's label (weight x attribute
value), plus the transition weight of every pair of neighbouring labels.
These functions list those terms; the estimator arranges them.
"""

import numpy as np

__all__ = ["conditioned_contributions", "state_contributions", "strongest"]


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
