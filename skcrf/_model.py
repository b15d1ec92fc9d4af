"""The fitted state of a CRF: one plain structure that every part shares.

The estimator hands a :class:`FittedState` to persistence (npz files, CRFsuite
files) and gets one back; decoding and the objective read a :class:`CRFModel`.
Nothing here imports the estimator or the file formats.

Conventions
-----------
A model has ``n_attributes`` attributes (the names CRFsuite gives token
features: ``key:value`` for a string value, ``key`` for a number, nested
dicts joined by ``:``), ``n_labels`` labels and ``n_features`` features, the
parameters that training optimizes, in one flat vector::

    w = [state weights..., transition weights...]

- State features are grouped by attribute, in CSR form: the features of
  attribute ``a`` are ``state_ptr[a]:state_ptr[a + 1]``, each with its label
  ``state_labels[k]`` (increasing within an attribute) and weight
  ``state_weights[k]``. A pair (attribute, label) with no feature scores 0.
- Transition features are the flat indices ``transition_index`` (increasing)
  into an ``(n_labels, n_labels)`` array ``T``, where ``T[i, j]`` is the
  score of label ``i`` followed by label ``j``; they have the weights
  ``transition_weights``. There are no start or end transitions (as in
  CRFsuite).
- Input-conditioned transition features (optional, not CRFsuite's; see
  :class:`ConditionedTransitions`) come last::

      w = [state weights..., transition weights..., conditioned weights...]
"""

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._utils._array_checks import (
    COLUMN_OUT_OF_RANGE,
    COLUMNS_NOT_INCREASING,
    PTR_NOT_RISING,
    all_finite,
    csr_problem,
    model_arrays_problem,
)


@dataclass
class ConditionedTransitions:
    """Transition features conditioned on the input (CRF++'s bigram templates).

    A transition attribute ``a`` of token ``t`` (not the first of its
    sequence) with value ``v`` adds ``v * weights[k]`` to the score of the
    label pair ``pairs[k]`` (flat ``i * n_labels + j``: label ``i`` at
    ``t - 1``, ``j`` at ``t``) for each feature ``k`` in ``ptr[a]:ptr[a + 1]``.

    Attributes
    ----------
    attributes : list of str
        Transition attribute names, in id order (their own vocabulary).
    ptr : ndarray of int64, shape (n_attributes + 1,)
    pairs : ndarray of int32, shape (n_conditioned,)
        Increasing within an attribute.
    weights : ndarray of float64, shape (n_conditioned,)
    """

    attributes: list
    ptr: np.ndarray
    pairs: np.ndarray
    weights: np.ndarray

    def arrays(self, weights=None):
        """``(ptr, pairs, weights)`` as the kernels read them."""
        return (
            np.ascontiguousarray(self.ptr, dtype=np.int64),
            np.ascontiguousarray(self.pairs, dtype=np.int32),
            np.ascontiguousarray(self.weights if weights is None else weights, dtype=np.float64),
        )

    def with_weights(self, weights):
        return ConditionedTransitions(
            self.attributes, self.ptr, self.pairs, np.array(weights, dtype=np.float64)
        )

    def features(self, classes):
        """Nonzero weights as ``{(attribute, label_from, label_to): weight}``."""
        n_labels = len(classes)
        keep = np.flatnonzero(self.weights)
        attribute = np.repeat(np.arange(len(self.attributes)), np.diff(self.ptr))[keep]
        source, target = np.divmod(self.pairs[keep].astype(np.int64), n_labels)
        return {
            (self.attributes[a], classes[i], classes[j]): w
            for a, i, j, w in zip(
                attribute.tolist(), source.tolist(), target.tolist(), self.weights[keep].tolist()
            )
        }


@dataclass
class CRFModel:
    """Labels, attributes, the features that exist and their weights.

    Attributes
    ----------
    classes : ndarray of object, shape (n_labels,)
        The labels, as the user gave them.
    attributes : list of str, length n_attributes
        Attribute names, in attribute-id order; or, for a model served from
        a CRFsuite file, a :class:`~skcrf._utils._cqdb_index.LazyNames`
        (``len``, ``in``, lookups from the file; the list on first use):
        :meth:`attribute_names` is always the list.
    state_ptr : ndarray of int64, shape (n_attributes + 1,)
    state_labels : ndarray of int32, shape (n_states,)
    state_weights : ndarray of float64, shape (n_states,)
    transition_index : ndarray of int64, shape (n_transitions,)
    transition_weights : ndarray of float64, shape (n_transitions,)
    value_separator : str
    conditioned : ConditionedTransitions or None
        Input-conditioned transition features (None: none, CRFsuite's model).
    """

    classes: np.ndarray
    attributes: list
    state_ptr: np.ndarray
    state_labels: np.ndarray
    state_weights: np.ndarray
    transition_index: np.ndarray
    transition_weights: np.ndarray
    #: Joins a key and its string value in attribute names: ":" as CRFsuite
    #: does; models of skcrf 0.1 files use "=" (DictVectorizer's default).
    value_separator: str = ":"
    conditioned: ConditionedTransitions | None = None

    def attribute_names(self):
        """``attributes`` as a list (lazy names, from a model file, listed once)."""
        attributes = self.attributes
        return attributes if isinstance(attributes, list) else attributes.tolist()

    @property
    def n_labels(self):
        return len(self.classes)

    @property
    def n_attributes(self):
        return len(self.attributes)

    @property
    def n_states(self):
        return len(self.state_labels)

    @property
    def n_conditioned(self):
        return 0 if self.conditioned is None else len(self.conditioned.pairs)

    @property
    def n_features(self):
        return len(self.state_labels) + len(self.transition_index) + self.n_conditioned

    @property
    def weights(self):
        """The flat parameter vector ``[state, transition(, conditioned) weights]``."""
        parts = [self.state_weights, self.transition_weights]
        if self.conditioned is not None:
            parts.append(self.conditioned.weights)
        return np.concatenate(parts)

    def with_weights(self, w):
        """The same features with the flat parameter vector ``w``."""
        w = np.asarray(w, dtype=np.float64)
        n_base = self.n_states + len(self.transition_index)
        conditioned = self.conditioned
        if conditioned is not None:
            conditioned = conditioned.with_weights(w[n_base:])
        return CRFModel(
            classes=self.classes,
            attributes=self.attributes,
            state_ptr=self.state_ptr,
            state_labels=self.state_labels,
            state_weights=w[: self.n_states].copy(),
            transition_index=self.transition_index,
            transition_weights=w[self.n_states : n_base].copy(),
            value_separator=self.value_separator,
            conditioned=conditioned,
        )

    def transition_matrix(self, transition_weights=None):
        """Dense ``(n_labels, n_labels)`` transition scores (0 where no feature)."""
        if transition_weights is None:
            transition_weights = self.transition_weights
        T = np.zeros(self.n_labels * self.n_labels)
        T[self.transition_index] = transition_weights
        return T.reshape(self.n_labels, self.n_labels)

    def state_attributes(self):
        """Attribute id of every state feature, shape (n_states,)."""
        return np.repeat(np.arange(self.n_attributes, dtype=np.int64), np.diff(self.state_ptr))

    def coef(self):
        """State weights as a CSR matrix of shape (n_attributes, n_labels).

        Every feature of the model is a stored entry, zero weights included.
        """
        import scipy.sparse as sp  # here: reading and tagging never need SciPy

        return sp.csr_matrix(
            (self.state_weights, self.state_labels, self.state_ptr),
            shape=(self.n_attributes, self.n_labels),
        )

    def vectorizer(self):
        """A fitted ``DictVectorizer`` whose features are the attributes, in id order."""
        from sklearn.feature_extraction import DictVectorizer  # here: as coef's SciPy

        vectorizer = DictVectorizer(separator=self.value_separator, sort=False)
        vectorizer.feature_names_ = list(self.attributes)
        vectorizer.vocabulary_ = {name: k for k, name in enumerate(self.attributes)}
        return vectorizer

    def state_features(self):
        """Nonzero state weights as ``{(attribute, label): weight}``."""
        keep = np.flatnonzero(self.state_weights)
        attributes = self.state_attributes()[keep].tolist()
        labels = self.state_labels[keep].tolist()
        names, classes = self.attributes, self.classes
        return {
            (names[a], classes[k]): w
            for a, k, w in zip(attributes, labels, self.state_weights[keep].tolist())
        }

    def transition_features(self):
        """Nonzero transition weights as ``{(label_from, label_to): weight}``."""
        transition = self.transition_matrix()
        rows, cols = np.nonzero(transition)
        classes = self.classes
        return {
            (classes[r], classes[c]): float(transition[r, c])
            for r, c in zip(rows.tolist(), cols.tolist())
        }

    def conditioned_transition_features(self):
        """Nonzero input-conditioned transition weights (empty without transition attributes).

        ``{(transition attribute, label_from, label_to): weight}``.
        """
        if self.conditioned is None:
            return {}
        return self.conditioned.features(self.classes)

    def without_zeros(self):
        """The model as CRFsuite's trainer stores it in a model file.

        Only the features with a nonzero weight, and only the attributes
        that keep one (in attribute order, renumbered); every label stays.
        It predicts exactly what this model predicts.
        """
        keep = self.state_weights != 0
        counts = np.diff(kept_state_ptr(self.state_ptr, keep))
        active = np.flatnonzero(counts)
        keep_transitions = self.transition_weights != 0
        return CRFModel(
            classes=self.classes,
            attributes=[self.attributes[a] for a in active.tolist()],
            state_ptr=np.concatenate([[0], np.cumsum(counts[active])]).astype(np.int64),
            state_labels=self.state_labels[keep],
            state_weights=self.state_weights[keep],
            transition_index=self.transition_index[keep_transitions],
            transition_weights=self.transition_weights[keep_transitions],
            value_separator=self.value_separator,
        )

    def nonzero(self):
        """The model reduced to its nonzero weights (what decoding needs).

        Returns
        -------
        state_ptr, state_labels, state_weights, transitions
            CSR arrays of the nonzero state weights (same attributes) and the
            dense transition matrix.
        """
        keep = self.state_weights != 0
        if keep.all():  # (no copies: a model read from a file shares its arrays)
            return (
                self.state_ptr,
                np.ascontiguousarray(self.state_labels, dtype=np.int32),
                np.ascontiguousarray(self.state_weights, dtype=np.float64),
                self.transition_matrix(),
            )
        ptr = kept_state_ptr(self.state_ptr, keep)
        return (
            ptr,
            np.ascontiguousarray(self.state_labels[keep], dtype=np.int32),
            np.ascontiguousarray(self.state_weights[keep], dtype=np.float64),
            self.transition_matrix(),
        )


def merge_features(old, new):
    """The union of the features of two models, with the old weights.

    ``new`` has the attributes of ``old`` first (same ids), then more, and
    every label of ``old`` (in any order, with more). The result keeps
    ``old``'s weights; features only in ``new`` weigh 0.

    Input-conditioned transitions: both models have them or neither, and
    ``new``'s transition attributes start with ``old``'s (same ids).

    Returns
    -------
    model : CRFModel
        Labels, attributes and value separator of ``new``.
    old_index, new_index : ndarray of int64
        Where each feature of ``old`` (of ``new``) is in the result's flat
        vector.
    """
    if (old.conditioned is None) != (new.conditioned is None):
        raise ValueError("only one of the models has input-conditioned transitions")
    n_labels = new.n_labels
    position = {label: k for k, label in enumerate(new.classes.tolist())}
    relabel = np.array([position[label] for label in old.classes.tolist()], dtype=np.int64)
    old_keys = old.state_attributes() * n_labels + relabel[old.state_labels]
    new_keys = new.state_attributes() * n_labels + new.state_labels
    keys = np.union1d(old_keys, new_keys)
    attributes_of = keys // n_labels
    state_ptr = np.searchsorted(attributes_of, np.arange(new.n_attributes + 1)).astype(np.int64)
    old_from, old_to = np.divmod(old.transition_index, old.n_labels)
    old_transitions = relabel[old_from] * n_labels + relabel[old_to]
    transitions = np.union1d(old_transitions, new.transition_index).astype(np.int64)
    old_index = np.concatenate(
        [
            np.searchsorted(keys, old_keys),
            len(keys) + np.searchsorted(transitions, old_transitions),
        ]
    ).astype(np.int64)
    new_index = np.concatenate(
        [
            np.searchsorted(keys, new_keys),
            len(keys) + np.searchsorted(transitions, new.transition_index),
        ]
    ).astype(np.int64)
    conditioned = None
    n_base = len(keys) + len(transitions)
    if new.conditioned is not None:
        n_pairs = n_labels * n_labels
        old_c, new_c = old.conditioned, new.conditioned
        old_from, old_to = np.divmod(old_c.pairs.astype(np.int64), old.n_labels)
        old_attribute = np.repeat(np.arange(len(old_c.attributes)), np.diff(old_c.ptr))
        old_c_keys = old_attribute * n_pairs + relabel[old_from] * n_labels + relabel[old_to]
        new_attribute = np.repeat(np.arange(len(new_c.attributes)), np.diff(new_c.ptr))
        new_c_keys = new_attribute * n_pairs + new_c.pairs
        c_keys = np.union1d(old_c_keys, new_c_keys)
        conditioned = ConditionedTransitions(
            attributes=new_c.attributes,
            ptr=np.searchsorted(c_keys // n_pairs, np.arange(len(new_c.attributes) + 1)).astype(
                np.int64
            ),
            pairs=(c_keys % n_pairs).astype(np.int32),
            weights=np.zeros(len(c_keys)),
        )
        old_index = np.concatenate([old_index, n_base + np.searchsorted(c_keys, old_c_keys)])
        new_index = np.concatenate([new_index, n_base + np.searchsorted(c_keys, new_c_keys)])
        n_base += len(c_keys)
    weights = np.zeros(n_base)
    weights[old_index] = old.weights
    n_states = len(keys)
    if conditioned is not None:
        conditioned.weights = weights[n_states + len(transitions) :]
    model = CRFModel(
        classes=new.classes,
        attributes=new.attributes,
        state_ptr=state_ptr,
        state_labels=(keys % n_labels).astype(np.int32),
        state_weights=weights[: len(keys)],
        transition_index=transitions,
        transition_weights=weights[n_states : n_states + len(transitions)],
        value_separator=new.value_separator,
        conditioned=conditioned,
    )
    return model, old_index.astype(np.int64), new_index.astype(np.int64)


def kept_state_ptr(state_ptr, keep):
    """``state_ptr`` of the state features where the mask ``keep`` is True."""
    kept_before = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(keep, out=kept_before[1:])
    return kept_before[state_ptr]


@dataclass
class FittedState:
    """Everything a fitted estimator holds, as plain data.

    Attributes
    ----------
    params : dict
        The estimator's ``get_params(deep=False)``.
    model : CRFModel
    n_iter : int
        Optimizer iterations run.
    status : object
        How training stopped (an ``LBFGSStatus`` member), or None.
    training_log : object
        The ``TrainingLog`` of the fit, or None.
    extra : dict
        Further fitted attributes a writer wants to keep (plain values).
    """

    params: dict
    model: CRFModel
    n_iter: int = 0
    status: Any = None
    training_log: Any = None
    extra: dict = field(default_factory=dict)


def check_model_arrays(n_attributes, n_labels, arrays):
    """Check the consistency of the format 2 arrays (ValueError naming it).

    ``arrays`` maps the array names to 1-D arrays of the right dtypes, with
    ``state_labels``/``state_weights`` and ``transition_index`` /
    ``transition_weights`` of equal lengths.
    """
    ptr = arrays["state_ptr"]
    labels = arrays["state_labels"]
    index = arrays["transition_index"]
    n_states = len(labels)
    if len(ptr) != n_attributes + 1:
        raise ValueError(
            f"state_ptr has {len(ptr)} entries; n_attributes + 1 = {n_attributes + 1} expected."
        )
    problem = None  # (not checked: arrays of other types)
    if _kernel_types(ptr, labels, index, arrays):
        problem = model_arrays_problem(
            ptr, labels, n_labels, index, arrays["state_weights"], arrays["transition_weights"]
        )
        if problem == 0:
            return  # (one compiled pass found nothing; otherwise the checks below say what)
    check_csr(
        ptr,
        labels,
        n_labels,
        f"state_ptr must be non-decreasing from 0 to n_states = {n_states}.",
        f"state_labels must be label indices in [0, {n_labels}).",
        "state_labels must be strictly increasing within an attribute.",
    )
    size = n_labels * n_labels
    if len(index) and (index[0] < 0 or index[-1] >= size or (np.diff(index) <= 0).any()):
        raise ValueError(
            f"transition_index must be strictly increasing indices in [0, {size}) "
            f"(n_labels * n_labels)."
        )
    for name in ("state_weights", "transition_weights"):
        check_finite(arrays[name], f"{name} holds non-finite values (NaN or infinity).")
    if problem:  # (the two passes check the same properties: never reached)
        raise AssertionError(f"model_arrays_problem found problem {problem}; the checks none.")


def _kernel_types(ptr, labels, index, arrays):
    """Whether the model arrays have the kernels' dtypes, contiguous (the usual case)."""
    return (
        ptr.dtype == np.int64
        and labels.dtype in (np.int32, np.int64)
        and index.dtype == np.int64
        and arrays["state_weights"].dtype == np.float64
        and arrays["transition_weights"].dtype == np.float64
        and all(
            a.flags.c_contiguous
            for a in (ptr, labels, index, arrays["state_weights"], arrays["transition_weights"])
        )
    )


def check_csr(ptr, columns, n_columns, not_rising, out_of_range, not_increasing):
    """Raise ValueError with the message of what is wrong with a CSR pattern.

    ``ptr`` must rise from 0 to ``len(columns)``, the columns lie in
    ``[0, n_columns)`` and increase strictly within a row (one compiled
    pass: opening a model checks every feature).
    """
    if columns.dtype not in (np.int32, np.int64):
        columns = np.asarray(columns, dtype=np.int64)
    problem = csr_problem(
        np.ascontiguousarray(ptr, dtype=np.int64), np.ascontiguousarray(columns), n_columns
    )
    messages = {
        PTR_NOT_RISING: not_rising,
        COLUMN_OUT_OF_RANGE: out_of_range,
        COLUMNS_NOT_INCREASING: not_increasing,
    }
    if problem:
        raise ValueError(messages[problem])


def check_finite(values, message):
    """Raise ValueError(message) unless every value is finite."""
    if not all_finite(np.ascontiguousarray(values, dtype=np.float64)):
        raise ValueError(message)
