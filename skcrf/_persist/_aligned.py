"""Zip archives of stored .npy members whose data start on 64-byte boundaries.

The container of the skcrf model formats 5 and 6 (specified in :mod:`skcrf.io`): a
plain zip file that :func:`numpy.load` reads as an ``.npz``, written so that
each array's bytes lie, uncompressed and aligned, at a known offset. A
reader can then use them where they lie (:func:`numpy.frombuffer` over an
:class:`mmap.mmap`) instead of copying them.

Layout written by :func:`aligned_npz_bytes`: for each array, in order, a
local file header (no data descriptor, method 0 "stored", the CRC-32 and both
sizes filled in) whose extra field is padding (id ``0xD935``, zipalign's) so
that the member's data start at a multiple of 64 from the start of the file,
then the member: a ``.npy`` version 1.0 header (whose length numpy pads to a
multiple of 64) and the array's bytes, little-endian, C order. Then the
central directory and the end of central directory record (no comment, no
zip64: the whole file is below 4 GiB).

:func:`read_aligned_members` parses such an archive from a buffer with
``struct`` alone, checking every offset and size against the buffer before
using it. :func:`is_aligned_archive` tells such an archive by its first
bytes (its first member, ``metadata.npy``, has the padding extra field: an
archive written by :func:`numpy.savez` has none), so that a caller reads
other zip files (older skcrf formats) as before.
"""

import re
import struct

import numpy as np

from .._utils._array_checks import crc32
from ._member_scan import scan_members

__all__ = [
    "ALIGNMENT",
    "HEAD_SIZE",
    "aligned_npz_bytes",
    "is_aligned_archive",
    "member_crc_problem",
    "read_aligned_members",
]

#: Every member's data (and so every array's bytes) start at a multiple of this.
ALIGNMENT = 64
_PADDING_ID = 0xD935
_LOCAL = struct.Struct("<4s5H3I2H")  # 30 bytes
_CENTRAL = struct.Struct("<4s6H3I5H2I")  # 46 bytes
_END = struct.Struct("<4s4H2IH")  # 22 bytes
_LOCAL_MAGIC, _CENTRAL_MAGIC, _END_MAGIC = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"
_DOS_DATE = (2026 - 1980) << 9 | 1 << 5 | 1  # a fixed date: the same model, the same bytes
_MAX_SIZE = 2**32 - 1
#: The dtypes a member may have (little-endian), as .npy headers spell them.
DESCRIPTORS = {
    "|u1": np.uint8,
    "<u2": np.uint16,
    "<u4": np.uint32,
    "<u8": np.uint64,
    "<i4": np.int32,
    "<i8": np.int64,
    "<f4": np.float32,
    "<f8": np.float64,
}
_NPY_MAGIC = b"\x93NUMPY\x01\x00"
_NPY_HEADER = re.compile(
    rb"\{'descr': '(\|u1|<u2|<u4|<u8|<i4|<i8|<f4|<f8)', 'fortran_order': False, "
    rb"'shape': \(([0-9]{1,19}),\), \} *\n"
)


def _npy_header(descr, length):
    """The .npy 1.0 header of a 1-D array, padded so its data start at 64."""
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({length},), }}"
    size = len(_NPY_MAGIC) + 2 + len(text) + 1
    text += " " * (-size % ALIGNMENT) + "\n"
    return _NPY_MAGIC + struct.pack("<H", len(text)) + text.encode("ascii")


_FIRST_NAME = b"metadata.npy"
#: The bytes :func:`is_aligned_archive` reads.
HEAD_SIZE = _LOCAL.size + len(_FIRST_NAME) + 4


def is_aligned_archive(head):
    """Whether ``head`` (a file's first :data:`HEAD_SIZE` bytes) starts an aligned archive.

    That is, a zip whose first member is ``metadata.npy`` with a padding
    extra field.
    """
    if len(head) < HEAD_SIZE or head[:4] != _LOCAL_MAGIC:
        return False
    name_len, extra_len = struct.unpack_from("<HH", head, 26)
    padding_id = struct.unpack_from("<H", head, _LOCAL.size + len(_FIRST_NAME))[0]
    return (
        head[_LOCAL.size : _LOCAL.size + name_len] == _FIRST_NAME
        and extra_len >= 4
        and padding_id == _PADDING_ID
    )


def aligned_npz_bytes(arrays):
    """The archive of ``arrays`` (name -> 1-D array of a :data:`DESCRIPTORS` dtype).

    Raises
    ------
    ValueError
        If the archive would reach 4 GiB (this container has no zip64).
    """
    parts, central, offset = [], [], 0
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        descr = array.dtype.newbyteorder("<").str
        assert descr in DESCRIPTORS and array.ndim == 1, (name, descr)
        data = _npy_header(descr, len(array)) + array.astype(descr, copy=False).tobytes()
        filename = f"{name}.npy".encode("ascii")
        pad = -(offset + _LOCAL.size + len(filename)) % ALIGNMENT
        if 0 < pad < 4:  # an extra field has a 4-byte header
            pad += ALIGNMENT
        extra = struct.pack("<HH", _PADDING_ID, pad - 4) + bytes(pad - 4) if pad else b""
        crc = crc32(data)
        fields = (0, 0, 0, _DOS_DATE, crc, len(data), len(data), len(filename))
        parts += [
            _LOCAL.pack(_LOCAL_MAGIC, 20, *fields, len(extra)),
            filename,
            extra,
            data,
        ]
        central.append(
            _CENTRAL.pack(_CENTRAL_MAGIC, 20, 20, *fields, 0, 0, 0, 0, 0, offset) + filename
        )
        offset += _LOCAL.size + len(filename) + len(extra) + len(data)
        if offset > _MAX_SIZE:
            raise ValueError("the model file would reach 4 GiB, the limit of formats 5 and 6")
    directory = b"".join(central)
    n = len(central)
    end = _END.pack(_END_MAGIC, 0, 0, n, n, len(directory), offset, 0)
    if offset + len(directory) > _MAX_SIZE:
        raise ValueError("the model file would reach 4 GiB, the limit of formats 5 and 6")
    return b"".join([*parts, directory, end])


def read_aligned_members(buffer, *layouts):
    """Where each array of an aligned archive lies in ``buffer``.

    Parameters
    ----------
    buffer : bytes-like
        The whole file (a :class:`mmap.mmap`, ``bytes`` or ``bytearray``),
        one :func:`is_aligned_archive` accepts.
    *layouts : collection of str
        The array names of each layout the caller reads (one per format
        version), in their order: the archive has one of them.

    Returns
    -------
    members : dict
        ``{name: (dtype, length, offset, member_offset, member_size, crc)}``
        in file order: ``length`` items of ``dtype`` at ``offset``, inside
        the member's bytes ``[member_offset, member_offset + member_size)``
        whose CRC-32 the directory says is ``crc`` (not checked here: see
        :func:`member_crc_problem`).

    Raises
    ------
    ValueError
        If the archive does not hold exactly the arrays of a layout, laid out as this
        container lays them out (stored, aligned, in order, inside the
        buffer, each header as written here); the message says which member
        and what.
    """
    members = scan_members(buffer, layouts)  # (the compiled route of the writer's layout)
    if members is not None:
        return members
    view = memoryview(buffer)
    size = len(view)
    if size < _END.size:
        raise ValueError(f"the file ({size} bytes) is truncated (no zip end record).")
    end = _END.unpack_from(view, size - _END.size)
    magic, disk, start_disk, n_here, n_total, dir_size, dir_offset, comment = end
    if magic != _END_MAGIC or comment:
        raise ValueError("the file does not end with a zip end record (truncated?).")
    if disk or start_disk or n_here != n_total or dir_offset + dir_size != size - _END.size:
        raise ValueError("the zip directory is not where its end record says (truncated?).")
    entries, at = [], dir_offset
    for _ in range(n_total):
        if at + _CENTRAL.size > dir_offset + dir_size:
            raise ValueError("the zip directory is truncated.")
        fields = _CENTRAL.unpack_from(view, at)
        name_len, extra_len, comment_len = fields[10:13]
        name_end = at + _CENTRAL.size + name_len
        if fields[0] != _CENTRAL_MAGIC or name_end > dir_offset + dir_size:
            raise ValueError("the zip directory is damaged.")
        entries.append((bytes(view[at + _CENTRAL.size : name_end]), fields))
        at = name_end + extra_len + comment_len
    if at != dir_offset + dir_size:
        raise ValueError("the zip directory's size is not its entries'.")
    filenames = [filename for filename, _ in entries]
    expected = [[f"{name}.npy".encode("ascii") for name in names] for names in layouts]
    if filenames not in expected:
        got = [filename.decode("ascii", "replace") for filename in filenames]
        raise ValueError(
            f"the archive must hold exactly the arrays {list(layouts[-1])}, in that order; it "
            f"has {got[:20]!r:.300}."
        )
    members, previous_end = {}, 0
    for filename, fields in entries:
        name = filename[:-4].decode("ascii")
        flags, method, crc, packed, unpacked = (
            fields[3],
            fields[4],
            fields[7],
            fields[8],
            fields[9],
        )
        local_offset = fields[-1]
        where = f"array {name!r}"
        if flags & ~0x800 or method != 0 or packed != unpacked:
            raise ValueError(f"{where} is not stored as formats 5 and 6 store it (uncompressed).")
        if local_offset != previous_end or local_offset + _LOCAL.size > dir_offset:
            raise ValueError(f"{where}: its local header lies outside the archive's data.")
        local = _LOCAL.unpack_from(view, local_offset)
        if (
            local[0] != _LOCAL_MAGIC
            or local[2:4] != (flags, method)
            or local[6:9]
            != (
                crc,
                packed,
                unpacked,
            )
        ):
            raise ValueError(f"{where}: its local header differs from the zip directory.")
        start = local_offset + _LOCAL.size + local[9] + local[10]
        if bytes(view[local_offset + _LOCAL.size : local_offset + _LOCAL.size + local[9]]) != (
            filename
        ):
            raise ValueError(f"{where}: its local header names another file.")
        if start % ALIGNMENT:
            raise ValueError(f"{where}: its data are not {ALIGNMENT}-byte aligned.")
        if start + packed > dir_offset:
            raise ValueError(
                f"{where}: its {packed} bytes at offset {start} run past the archive's data "
                f"(the file has {size} bytes: truncated?)."
            )
        dtype, length, header = _member_header(view, start, packed, where)
        members[name] = (dtype, length, start + header, start, packed, crc)
        previous_end = start + packed
    if previous_end != dir_offset:
        raise ValueError("the archive has bytes between its last array and its directory.")
    return members


def _member_header(view, start, size, where):
    """``(dtype, length, header size)`` of the .npy member at ``start``."""
    head = bytes(view[start : start + min(size, 256)])
    if len(head) < 10 or head[:8] != _NPY_MAGIC:
        raise ValueError(f"{where} is not a .npy 1.0 array.")
    (header_len,) = struct.unpack_from("<H", head, 8)
    match = _NPY_HEADER.fullmatch(head[10 : 10 + header_len])
    if match is None or (10 + header_len) % ALIGNMENT:
        raise ValueError(f"{where} has a .npy header of another kind than formats 5 and 6's.")
    dtype = np.dtype(DESCRIPTORS[match.group(1).decode("ascii")])
    length = int(match.group(2))
    if 10 + header_len + length * dtype.itemsize != size:
        raise ValueError(
            f"{where}: its header claims {length} items of {dtype}, which does not match its "
            f"stored size ({size} bytes)."
        )
    return dtype, length, 10 + header_len


def member_crc_problem(buffer, member):
    """None if the member's bytes have the CRC-32 the directory gives, else why not."""
    _, _, _, start, size, crc = member
    if crc32(memoryview(buffer)[start : start + size]) != crc:
        return "is corrupted (CRC mismatch)"
    return None
