"""Entity spans: the exact probability that a labelling holds a given entity.

Labels follow a tagging scheme (see :mod:`skcrf._inference._constraints`:
roles ``O``, ``B``, ``I``, ``E``, ``S`` and a type). Under the scheme's
rules (its allowed pairs and first and last labels, which the caller puts
in the constraints, with any other constraint of the call), a labelling's
entities are those the entity metrics read (conlleval's rules); the span
``[start, end)`` is exactly an entity of type ``T`` when

``'IOB2'``
    ``y[start]`` is ``B-T``, ``y[start+1:end]`` are ``I-T`` and ``y[end]``
    (if any) is not ``I-T``;
``'IOB1'``
    as IOB2, or ``y[start]`` is ``I-T`` and ``y[start-1]`` (if any) is
    neither ``B-T`` nor ``I-T`` (two disjoint events);
``'IOBES'``, ``'BMES'``
    ``y[start]`` is ``S-T`` (one token), or ``B-T``, then ``I-T``, and
    ``y[end-1]`` is ``E-T`` (a valid labelling closes the entity there).

Each event fixes the labels allowed at a few consecutive positions, so
``p(event | x, constraints) = Z_event / Z`` where ``Z_event`` sums the
allowed labellings that also satisfy the event. With the log-domain forward
and backward tables of the sequence under the constraints, ``Z_event`` is a
forward pass over the event's positions only, between ``alpha`` at its
first position and ``beta`` at its last: O(span length x n_labels ** 2) per
entity, for all the entities of a block at once (one pass per length).
"""

import numpy as np

from ._conditioned import log_messages_rows
from ._constraints import NoValidLabelling
from ._logspace import _log_messages, _row_blocks
from ._logspace import logsumexp as _logsumexp
from ._structured import _block_emissions

__all__ = ["RoleMasks", "span_log_proba"]


class RoleMasks:
    """The labels of each role and type, as bool masks over the labels.

    Parameters
    ----------
    scheme : str
        A canonical scheme name (``'IOB2'``, ``'IOB1'``, ``'IOBES'``, ``'BMES'``).
    roles : list of (role, type)
        One per label, from :func:`skcrf._inference._constraints.scheme_roles`.
    """

    def __init__(self, scheme, roles):
        self.scheme = scheme
        self.n_labels = len(roles)
        self._masks = {}
        for j, (role, kind) in enumerate(roles):
            if role == "O":
                continue
            masks = self._masks.setdefault(kind, {r: np.zeros(len(roles), bool) for r in "BIES"})
            masks[role][j] = True

    def role(self, kind, role):
        """Mask of the labels of role ``role`` and type ``kind``."""
        masks = self._masks.get(kind)
        return np.zeros(self.n_labels, bool) if masks is None else masks[role]

    def events(self, start, end, kind, length):
        """The disjoint events "``[start, end)`` is exactly an entity of type ``kind``".

        Returns
        -------
        list of (first, masks)
            ``masks[k]``: the labels allowed at position ``first + k``.
        """
        begin, inside = self.role(kind, "B"), self.role(kind, "I")
        events = []
        if self.scheme in ("IOB2", "IOB1"):
            body = [begin] + [inside] * (end - start - 1)
            after = [~inside] if end < length else []
            events.append((start, body + after))
            if self.scheme == "IOB1":
                before = [~(begin | inside)] if start > 0 else []
                events.append((start - len(before), before + [inside] * (end - start) + after))
        elif end - start == 1:
            events.append((start, [self.role(kind, "S")]))
        else:
            body = [begin] + [inside] * (end - start - 2) + [self.role(kind, "E")]
            events.append((start, body))
        return events


def _events_log_z(emissions, transitions, log_alpha, log_beta, rows, masks):
    """``log Z_event`` of events of one length ``m``, all at once.

    ``rows[e, k]`` is the packed row of event ``e``'s position ``k``,
    ``masks[e, k]`` the labels allowed there (shapes ``(E, m)`` and
    ``(E, m, L)``); a forward pass from ``alpha`` at the first position to
    ``beta`` at the last, through the masked positions. ``transitions``:
    ``(L, L)``, or one matrix per packed row ``(n_rows, L, L)`` (the matrix
    into that row: input-conditioned transitions).
    """
    n_labels = transitions.shape[-1]
    out = np.empty(len(rows))
    for lo, hi in _row_blocks(len(rows), n_labels):
        r, allowed = rows[lo:hi], masks[lo:hi]
        v = np.where(allowed[:, 0], log_alpha[r[:, 0]], -np.inf)
        for k in range(1, r.shape[1]):
            into = transitions if transitions.ndim == 2 else transitions[r[:, k]]
            v = _logsumexp(v[:, :, None] + into, axis=1) + emissions[r[:, k]]
            v = np.where(allowed[:, k], v, -np.inf)
        out[lo:hi] = _logsumexp(v + log_beta[r[:, -1]], axis=1)
    return out


def span_log_proba(decoder, encoded, spans, role_masks, n_threads=1, constraints=None, name="X"):
    """``log p(span is exactly an entity | x, constraints)`` of given spans.

    Parameters
    ----------
    decoder : Decoder
    encoded : Encoded
    spans : list of list of (start, end, type)
        Per sequence (in ``encoded``'s order) the spans, ``end`` exclusive,
        ``0 <= start < end <= length``.
    role_masks : RoleMasks
    n_threads : int
    constraints : Constraints or None
        Should hold the scheme's rules: the events above mean "exactly this
        entity" only among labellings valid in the scheme.
    name : str

    Returns
    -------
    list of ndarray
        Per sequence, the log-probability of each span (``-inf`` for a span
        no allowed labelling holds).

    Raises
    ------
    NoValidLabelling
        When a sequence with spans has no allowed labelling.
    """
    arrays = decoder.constrained_arrays(constraints)
    transitions = arrays.transitions
    out = [np.zeros(len(s)) for s in spans]
    wanted = np.array([len(s) > 0 for s in spans] + [False])

    def decode_block(block, workspace):
        if not wanted[block.sequences].any():
            return
        masks = constraints.emission_masks(block) if constraints is not None else []
        emissions = _block_emissions(decoder, block, workspace, arrays, masks)
        block_transitions = transitions
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if decoder.conditioned is not None:
                block_transitions = decoder.row_transitions(block, transitions)
                log_alpha, log_beta, log_z = log_messages_rows(
                    emissions, block_transitions, block.batch_sizes
                )
            else:
                log_alpha, log_beta, log_z, _ = _log_messages(
                    emissions, transitions, block.batch_sizes
                )
            offsets = np.concatenate([[0], np.cumsum(block.batch_sizes)])
            lengths = block.lengths
            # every event of every span of the block, grouped by length
            groups = {}
            owners = []  # (sequence, span index, column) of each span
            for column, sequence in enumerate(block.sequences.tolist()):
                if not spans[sequence]:
                    continue
                if not np.isfinite(log_z[column]):
                    raise NoValidLabelling(sequence, name)
                length = int(lengths[column])
                rows = offsets[:length] + column
                for k, (start, end, kind) in enumerate(spans[sequence]):
                    for first, event in role_masks.events(start, end, kind, length):
                        group = groups.setdefault(len(event), ([], [], []))
                        group[0].append(rows[first : first + len(event)])
                        group[1].append(event)
                        group[2].append(len(owners))
                    owners.append((sequence, k, column))
            span_log_z = np.full(len(owners), -np.inf)
            for event_rows, event_masks, span in groups.values():
                values = _events_log_z(
                    emissions,
                    block_transitions,
                    log_alpha,
                    log_beta,
                    np.array(event_rows),
                    np.array(event_masks),
                )
                np.logaddexp.at(span_log_z, np.array(span), values)
            for (sequence, k, column), value in zip(owners, span_log_z.tolist()):
                out[sequence][k] = value - log_z[column]

    decoder._run(encoded, n_threads, decode_block, None, name)
    return out
