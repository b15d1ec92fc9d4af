"""Decoding constraints as masks on the scores.

Allowed transitions (pairs or a tagging scheme) and partial labels.

A :class:`Constraints` holds, for one model's labels and one batch of
sequences, what decoding may use: a transition mask (forbidden label pairs),
the labels allowed at the first and at the last token, and per token the
labels allowed there (partial labels). The kernels see them as scores of
``-inf`` (Viterbi, k-best) or probabilities of zero (forward-backward).

Conventions
-----------
- ``allowed[i, j]`` (bool, ``(n_labels, n_labels)``): label ``i`` may be
  followed by label ``j``; labels in ``classes`` order (``T[i, j]`` as
  everywhere).
- ``start[j]`` / ``end[j]`` (bool, ``(n_labels,)``): label ``j`` may begin /
  end a sequence.
- Token masks: ``token_index[row]`` (int32, one per token in flat order) is
  -1 for a free token, else the row of ``token_masks`` (bool,
  ``(n_masked, n_labels)``) that lists the labels allowed there.
- Tagging schemes (labels are ``'O'`` or ``'<prefix>-<type>'``; a bare
  prefix such as ``'B'`` is a prefix with no type):

  ``'BIO'`` = ``'IOB2'``
      ``I-x`` only after ``B-x`` or ``I-x``; it cannot begin a sequence.
  ``'IOB1'``
      ``B-x`` only after ``B-x`` or ``I-x`` (it separates two chunks of one
      type); it cannot begin a sequence. ``I-x`` and ``O`` anywhere.
  ``'IOBES'`` = ``'BIOUL'`` (``E`` = ``L``, ``S`` = ``U``: either letters)
      after ``B-x`` or ``I-x`` only ``I-x`` or ``E-x``; after ``O``, ``E-x``
      or ``S-x`` only ``O``, ``B-y`` or ``S-y``; a sequence begins with
      ``O``, ``B`` or ``S`` and ends with ``O``, ``E`` or ``S``.
  ``'BMES'``
      as ``'IOBES'`` with ``M`` for ``I`` (an ``'O'`` label, if any, acts as
      outside).
"""

from functools import lru_cache

import numpy as np

from .._featurize._labels import PLAIN_LABEL_TYPES, check_partial_labels, same_label

__all__ = [
    "SCHEMES",
    "Constraints",
    "NoValidLabelling",
    "combine_transitions",
    "scheme_roles",
    "scheme_transitions",
    "transition_constraints",
]


class NoValidLabelling(ValueError):
    """No labelling of a sequence satisfies the constraints.

    Parameters
    ----------
    sequence : int
        The sequence's index in the call.
    name : str
        How the caller calls its input (``X``, ``xseq``).
    """

    def __init__(self, sequence, name="X"):
        self.sequence = sequence
        where = name if name == "xseq" else f"{name}[{sequence}]"
        super().__init__(
            f"No labelling of {where} satisfies the constraints: the allowed "
            "transitions and partial labels leave no allowed label sequence for it. "
            "Check its partial labels against allowed_transitions."
        )


#: Accepted scheme names (case-insensitive) and the scheme each one means.
SCHEMES = {
    "BIO": "IOB2",
    "IOB2": "IOB2",
    "IOB1": "IOB1",
    "IOBES": "IOBES",
    "BIOUL": "IOBES",
    "BMES": "BMES",
}

# Prefix letters of each scheme, mapped to their role: B(egin), I(nside),
# E(nd), S(ingle).
_ROLES = {
    "IOB2": {"B": "B", "I": "I"},
    "IOB1": {"B": "B", "I": "I"},
    "IOBES": {"B": "B", "I": "I", "E": "E", "L": "E", "S": "S", "U": "S"},
    "BMES": {"B": "B", "M": "I", "E": "E", "S": "S"},
}


def scheme_name(scheme):
    """The canonical name of a scheme name (``'BIO'`` -> ``'IOB2'``), or None."""
    if not isinstance(scheme, str):
        return None
    return SCHEMES.get(scheme.upper())


def _parse(label, scheme, context=None, shown=None):
    """``(role, type)`` of a label under ``scheme``; role ``'O'`` for outside.

    ``context`` names the caller in the error message (default: the
    ``allowed_transitions`` argument), ``shown`` the scheme as the caller
    gave it (default: ``scheme``).
    """
    if label == "O":
        return "O", None
    if isinstance(label, str):
        prefix, sep, kind = label.partition("-")
        role = _ROLES[scheme].get(prefix)
        if role is not None and (sep or not kind):
            return role, kind if sep else None
    prefixes = ", ".join(f"{p}-" for p in _ROLES[scheme])
    advice = (
        " Give the allowed pairs instead of a scheme name for other labels."
        if context is None
        else ""
    )
    raise ValueError(
        f"{context or 'allowed_transitions'}={shown or scheme!r}: the model's label {label!r:.60} "
        f"does not follow the scheme: labels must be 'O' or a prefix ({prefixes}) and a "
        f"type, e.g. '{next(iter(_ROLES[scheme]))}-PER'.{advice}"
    )


def scheme_roles(classes, scheme, context="scheme"):
    """``(role, type)`` of every label under a tagging scheme.

    Roles are ``'O'`` (outside), ``'B'`` (begin), ``'I'`` (inside, ``M`` of
    BMES), ``'E'`` (end, ``L`` of BIOUL) and ``'S'`` (single, ``U`` of
    BIOUL); every label other than ``'O'`` must have a type.

    Parameters
    ----------
    classes : sequence of labels
    scheme : str
        One of :data:`SCHEMES` (case-insensitive).
    context : str
        How the caller names the scheme argument in error messages.

    Returns
    -------
    name : str
        The canonical scheme name (``'BIO'`` -> ``'IOB2'``).
    roles : list of (str, str or None)

    Raises
    ------
    ValueError
        On an unknown scheme, or a label that does not follow it (the
        message names the label).
    """
    name = scheme_name(scheme)
    if name is None:
        raise ValueError(
            f"{context}={scheme!r}: unknown tagging scheme; expected one of {sorted(SCHEMES)}."
        )
    roles = []
    for label in classes:
        role, kind = _parse(label, name, context, shown=scheme)
        if role != "O" and not kind:
            raise ValueError(
                f"{context}={scheme!r}: the model's label {label!r:.60} has no entity type "
                f"(expected a prefix and a type, e.g. '{role}-PER')."
            )
        roles.append((role, kind))
    return name, roles


def combine_transitions(first, second):
    """The ``(allowed, start, end)`` that both constraints allow (None: no constraint)."""
    if first is None:
        return second
    if second is None:
        return first
    return tuple(a & b for a, b in zip(first, second))


def scheme_transitions(classes, scheme):
    """Allowed pairs, first labels and last labels of a tagging scheme.

    Parameters
    ----------
    classes : sequence of labels
    scheme : str
        One of :data:`SCHEMES` (case-insensitive).

    Returns
    -------
    allowed : ndarray of bool, shape (n_labels, n_labels)
    start, end : ndarray of bool, shape (n_labels,)

    Examples
    --------
    >>> allowed, start, end = scheme_transitions(["B-X", "I-X", "O"], "BIO")
    >>> allowed.astype(int).tolist(), start.tolist(), end.tolist()
    ([[1, 1, 1], [1, 1, 1], [1, 0, 1]], [True, False, True], [True, True, True])
    """
    name = scheme_name(scheme)
    if name is None:
        raise ValueError(f"Unknown tagging scheme {scheme!r}; expected one of {sorted(SCHEMES)}.")
    parsed = [_parse(label, name) for label in classes]
    n = len(parsed)
    allowed = np.zeros((n, n), dtype=bool)
    start = np.zeros(n, dtype=bool)
    end = np.zeros(n, dtype=bool)
    for j, (role, kind) in enumerate(parsed):
        if name == "IOB2":
            start[j] = role != "I"
            end[j] = True
        elif name == "IOB1":
            start[j] = role != "B"
            end[j] = True
        else:
            start[j] = role in ("O", "B", "S")
            end[j] = role in ("O", "E", "S")
        for i, (from_role, from_kind) in enumerate(parsed):
            same = from_kind == kind
            if name == "IOB2":
                ok = role != "I" or (from_role in ("B", "I") and same)
            elif name == "IOB1":
                ok = role != "B" or (from_role in ("B", "I") and same)
            elif from_role in ("B", "I"):
                ok = role in ("I", "E") and same
            else:
                ok = role in ("O", "B", "S")
            allowed[i, j] = ok
    return allowed, start, end


@lru_cache(maxsize=32)
def _cached_scheme(classes, scheme):
    return scheme_transitions(classes, scheme)


def transition_constraints(classes, allowed_transitions):
    """``(allowed, start, end)`` of an ``allowed_transitions`` argument, or None.

    Parameters
    ----------
    classes : ndarray of object
    allowed_transitions : None, str or collection of (from_label, to_label)
        None: no constraint. A scheme name (see :data:`SCHEMES`). Or the
        allowed pairs (every label may then begin and end a sequence).

    Raises
    ------
    ValueError
        On an unknown scheme, a label that does not follow the scheme, or a
        pair naming a label the model does not know.
    """
    if allowed_transitions is None:
        return None
    if isinstance(allowed_transitions, str):
        try:
            key = tuple(classes.tolist())
            hash(key)
        except TypeError:
            return scheme_transitions(classes, allowed_transitions)
        # cached: a default scheme is parsed once, not at every predict_single
        allowed, start, end = _cached_scheme(key, allowed_transitions)
        return allowed.copy(), start.copy(), end.copy()
    if isinstance(allowed_transitions, (bytes, dict)) or not hasattr(
        allowed_transitions, "__iter__"
    ):
        raise TypeError(
            "allowed_transitions must be None, a scheme name "
            f"({', '.join(repr(s) for s in SCHEMES)}) or a collection of "
            f"(from_label, to_label) pairs; got {type(allowed_transitions).__name__}."
        )
    labels = classes.tolist()
    index = {label: k for k, label in enumerate(labels)}
    n = len(index)
    # labels all of one plain type (str, int, ...): a pair of two labels of
    # that type needs only the index (same_label holds); any other pair is
    # checked in full
    kinds = {type(label) for label in labels}
    plain = kinds.pop() if len(kinds) == 1 and kinds <= PLAIN_LABEL_TYPES else None
    rows, columns = [], []
    for pair in allowed_transitions:
        if type(pair) is tuple and len(pair) == 2:
            first, second = pair
            if type(first) is plain and type(second) is plain:
                i, j = index.get(first), index.get(second)
                if i is not None and j is not None:
                    rows.append(i)
                    columns.append(j)
                    continue
        i, j = _pair_indices(pair, index, classes)
        rows.append(i)
        columns.append(j)
    allowed = np.zeros((n, n), dtype=bool)
    allowed[rows, columns] = True
    return allowed, np.ones(n, dtype=bool), np.ones(n, dtype=bool)


def _pair_indices(pair, index, classes):
    """The label indices of one ``allowed_transitions`` pair, every check made."""
    if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
        raise TypeError(f"allowed_transitions: {pair!r:.60} is not a (from_label, to_label) pair.")
    ends = []
    for label in pair:
        try:
            k = index[label]
        except (KeyError, TypeError):
            raise ValueError(
                f"allowed_transitions: the pair {tuple(pair)!r:.100} names the label "
                f"{label!r:.60}, which is not one of the model's labels "
                f"{list(classes)!r:.200}."
            ) from None
        if not same_label(classes[k], label):
            raise ValueError(
                f"allowed_transitions: the pair {tuple(pair)!r:.100} names the label "
                f"{label!r:.60} ({type(label).__name__}), which is equal in Python to "
                f"the model's label {classes[k]!r:.60} ({type(classes[k]).__name__}) "
                "but not the same label; use the labels of classes_."
            )
        ends.append(k)
    return ends[0], ends[1]


class Constraints:
    """The constraints of one decoding call, as masks.

    Parameters
    ----------
    n_labels : int
    transitions : tuple (allowed, start, end) or None
        From :func:`transition_constraints`.
    token_index, token_masks : ndarray or None
        Per-token allowed labels (see the module's conventions).
    """

    def __init__(self, n_labels, transitions=None, token_index=None, token_masks=None):
        self.n_labels = n_labels
        self.allowed = self.start = self.end = None
        if transitions is not None:
            allowed, start, end = transitions
            self.allowed = None if allowed.all() else allowed
            self.start = None if start.all() else start
            self.end = None if end.all() else end
        self.token_index = token_index
        self.token_masks = token_masks

    @classmethod
    def build(
        cls,
        classes,
        lengths,
        allowed_transitions=None,
        partial_labels=None,
        name="partial_labels",
        scheme=None,
    ):
        """The constraints of a call, or None when there are none.

        Parameters
        ----------
        classes : ndarray of object
        lengths : ndarray of int
            Tokens of each sequence.
        allowed_transitions : see :func:`transition_constraints`
        partial_labels : list or None
            Per sequence None or a list with, per token, None, a label, or a
            set / frozenset of labels (checked by
            :func:`skcrf._featurize._labels.check_partial_labels`).
        scheme : str or None
            A tagging scheme whose rules hold too (both it and
            ``allowed_transitions`` then constrain the labellings).
        """
        transitions = transition_constraints(classes, allowed_transitions)
        if scheme is not None:
            transitions = combine_transitions(transitions, transition_constraints(classes, scheme))
        token_index = token_masks = None
        if partial_labels is not None:
            token_index, token_masks = check_partial_labels(
                partial_labels, lengths, classes, name=name
            )
        constraints = cls(len(classes), transitions, token_index, token_masks)
        if constraints.empty:
            return None
        constraints.check_tokens(lengths)
        return constraints

    @property
    def empty(self):
        return (
            self.allowed is None
            and self.start is None
            and self.end is None
            and self.token_index is None
        )

    @property
    def has_transitions(self):
        """Whether some label pair is forbidden (the k-best kernel is needed)."""
        return self.allowed is not None

    def masked_transitions(self, transitions):
        """``transitions`` with ``-inf`` at the forbidden pairs."""
        if self.allowed is None:
            return transitions
        return np.where(self.allowed, transitions, -np.inf)

    def check_tokens(self, lengths):
        """Raise when a token has no allowed label; the message names it.

        That is its partial label against the allowed first or last labels.
        """
        if self.token_index is None or (self.start is None and self.end is None):
            return
        lengths = np.asarray(lengths)
        nonempty = np.flatnonzero(lengths)
        firsts = (np.cumsum(lengths) - lengths)[nonempty]
        lasts = firsts + lengths[nonempty] - 1
        for rows, allowed, where in ((firsts, self.start, "first"), (lasts, self.end, "last")):
            if allowed is None:
                continue
            index = self.token_index[rows]
            masked = np.flatnonzero(index >= 0)
            bad = ~(self.token_masks[index[masked]] & allowed).any(axis=1)
            if bad.any():
                i = int(nonempty[masked[np.argmax(bad)]])
                j = 0 if where == "first" else int(lengths[i]) - 1
                raise ValueError(
                    f"No labelling of sequence {i} satisfies the constraints: the "
                    f"partial label of token {j} allows no label that may be the "
                    f"{where} of a sequence under allowed_transitions (or the "
                    "tagging scheme of the call)."
                )

    def emission_masks(self, block):
        """``[(rows, allowed), ...]``: block rows and the labels allowed there."""
        masks = []
        n_sequences = int(block.batch_sizes[0]) if len(block.batch_sizes) else 0
        if self.start is not None and n_sequences:
            masks.append((np.arange(n_sequences), self.start[None, :]))
        if self.end is not None and n_sequences:
            batch_sizes = np.asarray(block.batch_sizes)
            columns = np.arange(n_sequences)
            lengths = np.searchsorted(-batch_sizes, -columns, side="left")
            offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
            masks.append((offsets[lengths - 1] + columns, self.end[None, :]))
        if self.token_index is not None:
            index = self.token_index[block.rows]
            rows = np.flatnonzero(index >= 0)
            if len(rows):
                masks.append((rows, self.token_masks[index[rows]]))
        return masks


def apply_log_masks(emissions, masks):
    """Set the scores of the labels not allowed to ``-inf`` (in place)."""
    for rows, allowed in masks:
        emissions[rows] = np.where(allowed, emissions[rows], -np.inf)


def apply_zero_masks(psi, masks):
    """Set the probabilities of the labels not allowed to 0 (in place)."""
    for rows, allowed in masks:
        psi[rows] = np.where(allowed, psi[rows], 0.0)
