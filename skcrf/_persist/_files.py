"""Model files opened for reading: regular files only, of a known size.

A path naming a device (``/dev/zero``, ``/dev/urandom``), a FIFO or a socket
never ends, or blocks until a writer comes: reading "the whole file" from it
would block forever or fill the memory. Every reader of model files opens
them here, and reads at most the size found when opening.
"""

import os
import stat

__all__ = ["open_regular_file", "read_regular_file"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
# Opening a FIFO for reading must not wait for a writer (when the path is
# swapped for one after the first check); the flag changes nothing on a
# regular file.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def _check(status, path, what, max_size):
    if not stat.S_ISREG(status.st_mode):
        kind = next((name for test, name in _KINDS if test(status.st_mode)), "not a file")
        raise ValueError(
            f"Cannot read {what} {path!r}: it is {kind}, not a regular file "
            "(reading it might never end)."
        )
    if max_size is not None and status.st_size > max_size:
        raise ValueError(
            f"Cannot read {what} {path!r}: it has {status.st_size} bytes; such files "
            f"have {max_size} at most."
        )


def open_regular_file(path, what, max_size=None):
    """Open ``path`` for binary reading if it is a regular file.

    Checked twice: the path before it is opened (so no device or FIFO is
    opened at all), then the file opened (a path swapped in between is
    caught without blocking).

    Parameters
    ----------
    path : str or os.PathLike
    what : str
        What the file should be, for the messages (``"CRFsuite model"``).
    max_size : int or None
        The largest size accepted, in bytes.

    Returns
    -------
    file : binary file object, open
    size : int
        Its size when opened: read no more than that.

    Raises
    ------
    ValueError
        If ``path`` is not a regular file, or is larger than ``max_size``;
        the message names the path.
    OSError
        If it cannot be opened (FileNotFoundError, PermissionError, ...).
    """
    path = os.fsdecode(path)
    _check(os.stat(path), path, what, max_size)
    fd = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(fd)
        _check(status, path, what, max_size)
        file = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return file, status.st_size


def read_regular_file(path, what, max_size=None):
    """The content of the regular file ``path`` (see :func:`open_regular_file`).

    Reads at most its size when opened; a file that grows meanwhile is an
    error.
    """
    file, size = open_regular_file(path, what, max_size)
    with file:
        data = file.read(size + 1)
    if len(data) > size:
        raise ValueError(
            f"Cannot read {what} {os.fsdecode(path)!r}: it grew while it was read "
            f"(from {size} bytes)."
        )
    return data
