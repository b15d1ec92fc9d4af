"""One compiled pass over an aligned archive's zip records (formats 5 and 6).

The fast route of :func:`skcrf._persist._aligned.read_aligned_members`:
opening a small mapped model spent a seventh of its time parsing the zip
directory and the .npy headers in Python. :func:`scan_members` accepts
only archives laid out exactly as :func:`~skcrf._persist._aligned.aligned_npz_bytes`
writes them, and answers None for anything else: the Python reader then
runs and either reads the archive or names exactly what is wrong, so the
messages live in one place. Every offset is checked against the buffer
before it is read.
"""

import numpy as np

from libc.stdint cimport uint8_t
from libc.string cimport memcmp

__all__ = ["scan_members"]

cdef enum:
    _LOCAL_SIZE = 30
    _CENTRAL_SIZE = 46
    _END_SIZE = 22
    _ALIGNMENT = 64
    _HEAD_CAP = 256  # the Python reader's look at a member's .npy header
    _MAX_MEMBERS = 64

# A .npy 1.0 header of a 1-D little-endian array as aligned_npz_bytes writes it:
# _PREFIX, a 3-byte descr, _MIDDLE, 1 to 19 digits, _SUFFIX, spaces, "\n".
cdef bytes _NPY_MAGIC = b"\x93NUMPY\x01\x00"
cdef bytes _PREFIX = b"{'descr': '"
cdef bytes _MIDDLE = b"', 'fortran_order': False, 'shape': ("
cdef bytes _SUFFIX = b",), }"
_DTYPES = {
    descr: np.dtype(kind)
    for descr, kind in {
        b"|u1": np.uint8, b"<u2": np.uint16, b"<u4": np.uint32, b"<u8": np.uint64,
        b"<i4": np.int32, b"<i8": np.int64, b"<f4": np.float32, b"<f8": np.float64,
    }.items()
}


cdef inline Py_ssize_t _u16(const uint8_t *p) noexcept nogil:
    return p[0] | (<Py_ssize_t> p[1]) << 8


cdef inline Py_ssize_t _u32(const uint8_t *p) noexcept nogil:
    return (p[0] | (<Py_ssize_t> p[1]) << 8 | (<Py_ssize_t> p[2]) << 16
            | (<Py_ssize_t> p[3]) << 24)


cdef inline bint _has(const uint8_t *p, bytes text) noexcept:
    return memcmp(p, <const char *> text, len(text)) == 0


cdef object _npy_header(const uint8_t *p, Py_ssize_t size):
    """``(dtype, length, header size)`` of the member's .npy header, or None."""
    cdef Py_ssize_t n, at, digits_at, end
    if size < 10 or not _has(p, _NPY_MAGIC):
        return None
    n = _u16(p + 8)
    end = 10 + n
    if end > size or end > _HEAD_CAP or end % _ALIGNMENT or p[end - 1] != 10:  # "\n"
        return None
    at = 10
    if at + len(_PREFIX) + 3 + len(_MIDDLE) > end or not _has(p + at, _PREFIX):
        return None
    at += len(_PREFIX)
    dtype = _DTYPES.get((<const char *> p)[at:at + 3])
    at += 3
    if dtype is None or not _has(p + at, _MIDDLE):
        return None
    at += len(_MIDDLE)
    digits_at = at
    while at < end and 48 <= p[at] <= 57:  # "0" to "9"
        at += 1
    if not 1 <= at - digits_at <= 19 or at + len(_SUFFIX) > end or not _has(p + at, _SUFFIX):
        return None
    length = int((<const char *> p)[digits_at:at])
    at += len(_SUFFIX)
    while at < end - 1 and p[at] == 32:  # " "
        at += 1
    if at != end - 1 or end + length * dtype.itemsize != size:
        return None
    return dtype, length, end


def scan_members(buffer, layouts):
    """The members of an aligned archive laid out exactly as written, or None.

    Parameters
    ----------
    buffer : bytes-like
        The whole file.
    layouts : sequence of sequence of str
        The array names of each layout the caller reads.

    Returns
    -------
    members : dict or None
        What :func:`~skcrf._persist._aligned.read_aligned_members` returns
        for it; None if anything differs from the writer's layout (the
        Python reader then decides).
    """
    cdef const uint8_t[::1] view = memoryview(buffer).cast("B")
    cdef Py_ssize_t size = view.shape[0], n, _, at, name_len, local, start, previous_end = 0
    cdef Py_ssize_t dir_size, dir_offset, dir_end, packed
    cdef const uint8_t *base
    cdef const uint8_t *record
    if size < _END_SIZE:
        return None
    base = &view[0]
    record = base + size - _END_SIZE
    if memcmp(record, b"PK\x05\x06", 4) != 0 or _u16(record + 20) != 0:
        return None
    n = _u16(record + 10)
    dir_size, dir_offset = _u32(record + 12), _u32(record + 16)
    dir_end = size - _END_SIZE
    if (_u16(record + 4) or _u16(record + 6) or _u16(record + 8) != n or n > _MAX_MEMBERS
            or dir_offset + dir_size != dir_end):
        return None
    entries, at = [], dir_offset
    for _ in range(n):
        if at + _CENTRAL_SIZE > dir_end:
            return None
        record = base + at
        name_len = _u16(record + 28)
        if (memcmp(record, b"PK\x01\x02", 4) != 0 or at + _CENTRAL_SIZE + name_len > dir_end
                or _u16(record + 30) or _u16(record + 32)):
            return None
        entries.append((bytes(view[at + _CENTRAL_SIZE:at + _CENTRAL_SIZE + name_len]), at))
        at += _CENTRAL_SIZE + name_len
    if at != dir_end:
        return None
    filenames = [filename for filename, _ in entries]
    if not any(filenames == [f"{name}.npy".encode("ascii") for name in names]
               for names in layouts):
        return None
    members = {}
    for filename, at in entries:
        record = base + at
        packed = _u32(record + 20)
        local = _u32(record + 42)
        name_len = len(filename)
        # stored, no flags but UTF-8, sizes equal, local header right after the last member
        if (_u16(record + 8) & ~0x800 or _u16(record + 10) or packed != _u32(record + 24)
                or local != previous_end or local + _LOCAL_SIZE + name_len > dir_offset):
            return None
        if (memcmp(base + local, b"PK\x03\x04", 4) != 0
                or memcmp(base + local + 6, record + 8, 4) != 0  # flags, method
                or memcmp(base + local + 14, record + 16, 12) != 0  # CRC, sizes
                or _u16(base + local + 26) != name_len
                or memcmp(base + local + _LOCAL_SIZE, record + _CENTRAL_SIZE, name_len) != 0):
            return None
        start = local + _LOCAL_SIZE + name_len + _u16(base + local + 28)
        if start % _ALIGNMENT or start + packed > dir_offset:
            return None
        header = _npy_header(base + start, packed)
        if header is None:
            return None
        dtype, length, header_size = header
        name = filename[:name_len - 4].decode("ascii")  # (without ".npy")
        members[name] = (dtype, length, start + header_size, start, packed, _u32(record + 16))
        previous_end = start + packed
    if previous_end != dir_offset:
        return None
    return members
