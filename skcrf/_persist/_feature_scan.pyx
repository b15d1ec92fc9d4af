"""One compiled pass over a CRFsuite file's features and reference chunks.

The fast route of :func:`skcrf._persist._crfsuite_file.read_crfsuite` for
files in CRFsuite's own order (every file CRFsuite and skcrf write): the
features chunk gives the model's CSR arrays directly, and the reference
chunks are checked against it, with the checks of the general (numpy)
reader. Anything unusual (another order, a repeated feature, a bad id, a
reference list that does not match) makes these functions answer None /
-1 instead of raising: the general reader then runs and either reads the
file or names exactly what is wrong, so the messages live in one place.

Layouts (see :mod:`skcrf._persist._crfsuite_file`): a feature is 20 bytes,
``type, src, dst`` (uint32) and ``weight`` (float64), little-endian.
"""

import numpy as np

cimport numpy as cnp
from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

cnp.import_array()

__all__ = ["check_references", "scan_features"]

cdef enum:
    _RECORD = 20
    _STATE = 0
    _TRANSITION = 1


cdef inline uint32_t _u32(const uint8_t *p) noexcept nogil:
    return (<uint32_t> p[0]) | (<uint32_t> p[1] << 8) | (<uint32_t> p[2] << 16) | (
        <uint32_t> p[3] << 24)


cdef inline double _f64(const uint8_t *p) noexcept nogil:
    cdef double x
    # (little-endian machines; the general reader handles the others)
    memcpy(&x, p, 8)
    return x


cdef bint _little_endian() noexcept nogil:
    cdef uint32_t one = 1
    return (<const uint8_t *> &one)[0] == 1


def scan_features(const uint8_t[::1] data, Py_ssize_t offset, Py_ssize_t n_features,
                  Py_ssize_t n_labels, Py_ssize_t n_attributes):
    """The model arrays of a features chunk in CRFsuite's order, or None.

    Parameters
    ----------
    data : bytes-like
        The whole file.
    offset : int
        The first feature record (after the chunk's 12-byte header); the
        caller has checked that ``n_features`` records fit in the file.
    n_features, n_labels, n_attributes : int

    Returns
    -------
    (dict, int) or None
        ``state_ptr``, ``state_labels``, ``state_weights``,
        ``transition_index``, ``transition_weights`` (the arrays of
        :class:`~skcrf._model.CRFModel`, with every invariant that
        ``check_model_arrays`` checks), when every feature has a known type,
        a finite weight and ids in range, and the state features (by
        ``(attribute, label)``) and the transitions (by ``(from, to)``) each
        come in strictly increasing order; else None. With it, the id of
        the first state feature when the state features are contiguous (as
        CRFsuite writes them: then the ``r``-th state feature, of the
        attribute ``a`` with ``state_ptr[a] <= r < state_ptr[a + 1]``, has
        the id ``first + r``), else -1.
    """
    cdef const uint8_t *p
    cdef Py_ssize_t k, n_states = 0, n_transitions = 0, first_state = -1, last_state_id = -1
    cdef Py_ssize_t transition_capacity = min(n_features, n_labels * n_labels)
    cdef uint32_t kind, src, dst
    cdef int64_t key, last_state = -1, last_transition = -1
    cdef double weight
    cdef int64_t *ptr
    cdef int32_t *labels
    cdef double *state_weights
    cdef int64_t *index
    cdef double *transition_weights
    if not _little_endian() or offset < 0 or n_features > (data.shape[0] - offset) // _RECORD:
        return None
    # One pass: checked and copied at once. The state arrays get room for
    # every feature (the few transitions' share is left unused).
    state_ptr = np.zeros(n_attributes + 1, dtype=np.int64)
    state_labels = np.empty(n_features, dtype=np.int32)
    state_weight_array = np.empty(n_features, dtype=np.float64)
    transition_index = np.empty(transition_capacity, dtype=np.int64)
    transition_weight_array = np.empty(transition_capacity, dtype=np.float64)
    ptr = <int64_t *> cnp.PyArray_DATA(state_ptr)
    labels = <int32_t *> cnp.PyArray_DATA(state_labels)
    state_weights = <double *> cnp.PyArray_DATA(state_weight_array)
    index = <int64_t *> cnp.PyArray_DATA(transition_index)
    transition_weights = <double *> cnp.PyArray_DATA(transition_weight_array)
    with nogil:
        for k in range(n_features):
            p = &data[offset] + _RECORD * k
            kind = _u32(p)
            src = _u32(p + 4)
            dst = _u32(p + 8)
            weight = _f64(p + 12)
            if not isfinite(weight) or dst >= n_labels:
                break
            if kind == _STATE:
                if src >= n_attributes:
                    break
                key = <int64_t> src * n_labels + dst
                if key <= last_state:
                    break
                last_state = key
                if first_state < 0:
                    first_state = k
                last_state_id = k
                ptr[src + 1] += 1
                labels[n_states] = <int32_t> dst
                state_weights[n_states] = weight
                n_states += 1
            elif kind == _TRANSITION:
                if src >= n_labels:
                    break
                key = <int64_t> src * n_labels + dst
                if key <= last_transition:
                    break
                last_transition = key
                index[n_transitions] = key
                transition_weights[n_transitions] = weight
                n_transitions += 1
            else:
                break
        for k in range(n_attributes):
            ptr[k + 1] += ptr[k]
    if n_states + n_transitions != n_features:
        return None
    state_labels = state_labels[:n_states]
    state_weight_array = state_weight_array[:n_states]
    transition_index = transition_index[:n_transitions]
    transition_weight_array = transition_weight_array[:n_transitions]
    arrays = {
        "state_ptr": state_ptr,
        "state_labels": state_labels,
        "state_weights": state_weight_array,
        "transition_index": transition_index,
        "transition_weights": transition_weight_array,
    }
    if n_states and last_state_id - first_state + 1 != n_states:
        first_state = -1  # (transitions among the state features)
    return arrays, first_state


cdef Py_ssize_t _count_references(const uint8_t *data, Py_ssize_t offset, Py_ssize_t size,
                                  Py_ssize_t first, Py_ssize_t n_owners, Py_ssize_t kind,
                                  const uint8_t *features, Py_ssize_t n_features,
                                  uint8_t *seen) noexcept nogil:
    """The features the owners' lists name (each once, of its owner), or -1."""
    cdef Py_ssize_t a, list_at, count, i, total = 0
    cdef uint32_t fid
    cdef const uint8_t *record
    for a in range(n_owners):
        list_at = _u32(data + offset + 12 + 4 * a)
        if list_at < first or list_at > offset + size - 4 or (list_at - offset) % 4:
            return -1
        count = _u32(data + list_at)
        if count > (offset + size - list_at - 4) // 4:
            return -1
        total += count
        for i in range(count):
            fid = _u32(data + list_at + 4 + 4 * i)
            if fid >= n_features or seen[fid]:
                return -1
            seen[fid] = 1
            record = features + _RECORD * <Py_ssize_t> fid
            if _u32(record) != kind or _u32(record + 4) != a:
                return -1
    return total


cdef bint _references_in_order(const uint8_t *data, Py_ssize_t offset, Py_ssize_t size,
                               Py_ssize_t first, Py_ssize_t n_owners,
                               const int64_t *ptr, Py_ssize_t first_id) noexcept nogil:
    """Whether each owner ``a``'s list is inside the chunk and names, in
    order, the features ``first_id + ptr[a] .. first_id + ptr[a + 1] - 1``
    (what CRFsuite writes for state features that are contiguous from
    ``first_id`` and ordered by attribute, ``ptr`` their CSR pointers): no
    feature record is read."""
    cdef Py_ssize_t a, list_at, count, i
    cdef uint32_t expected
    cdef const uint8_t *entry
    for a in range(n_owners):
        list_at = _u32(data + offset + 12 + 4 * a)
        if list_at < first or list_at > offset + size - 4 or (list_at - offset) % 4:
            return False
        count = _u32(data + list_at)
        if count != ptr[a + 1] - ptr[a] or count > (offset + size - list_at - 4) // 4:
            return False
        expected = <uint32_t> (first_id + ptr[a])
        entry = data + list_at + 4
        for i in range(count):
            if _u32(entry + 4 * i) != expected + <uint32_t> i:
                return False
    return True


def check_references(const uint8_t[::1] data, Py_ssize_t offset, bytes magic,
                     Py_ssize_t n_owners, Py_ssize_t kind, Py_ssize_t features,
                     Py_ssize_t n_features, Py_ssize_t n_kind, state_ptr=None,
                     Py_ssize_t first_state=-1):
    """The end of a valid reference chunk at ``offset``, or -1.

    Valid as the general reader's ``_read_refs`` requires: the chunk id
    ``magic``, a size inside the file, 4-byte alignment, at least
    ``n_owners`` entries, each owner's list inside the chunk, and the lists
    naming every feature of type ``kind`` (``n_kind`` of them) exactly
    once, each in the list of its ``src``. ``features`` is the offset of
    the first of the ``n_features`` feature records (checked to fit).

    For the state features' references, ``state_ptr`` (the int64 CSR
    pointers of :func:`scan_features`, ``n_owners + 1`` of them) and
    ``first_state`` (its contiguous first state feature, else -1): lists
    naming each attribute's features in order, as CRFsuite writes them, are
    then checked without reading the feature records (the same verdict:
    those features are of that kind and that attribute); any other lists
    are checked one feature at a time.
    """
    cdef Py_ssize_t n_bytes = data.shape[0], size, num, first, total
    cdef const uint8_t *base
    cdef uint8_t[::1] seen
    cdef const int64_t[::1] ptr
    cdef bint in_order = False
    cdef const char *tag = magic
    if offset < 48 or offset > n_bytes - 12 or offset % 4 or len(magic) != 4:
        return -1
    base = &data[offset]
    if (base[0] != <uint8_t> tag[0] or base[1] != <uint8_t> tag[1]
            or base[2] != <uint8_t> tag[2] or base[3] != <uint8_t> tag[3]):
        return -1
    size = _u32(base + 4)
    num = _u32(base + 8)
    if size < 12 or size > n_bytes - offset or num < n_owners or num > (size - 12) // 4:
        return -1
    first = offset + 12 + 4 * num
    if (kind == _STATE and state_ptr is not None and first_state >= 0
            and len(state_ptr) == n_owners + 1 and state_ptr[n_owners] == n_kind
            and first_state + n_kind <= n_features):
        ptr = state_ptr
        with nogil:
            in_order = _references_in_order(&data[0], offset, size, first, n_owners,
                                            &ptr[0], first_state)
        if in_order:
            return offset + size
    seen = np.zeros(n_features, dtype=np.uint8)
    with nogil:
        total = _count_references(&data[0], offset, size, first, n_owners, kind,
                                  &data[features] if n_features else NULL, n_features,
                                  &seen[0] if n_features else NULL)
    if total != n_kind:
        return -1
    return offset + size
