"""Atomic file writes: a reader sees the old file or the whole new one."""

import errno
import os
import stat
import tempfile


def _umask():
    """The process umask, read without changing it where possible."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - not Linux
    os.umask(mask)  # pragma: no cover
    return mask  # pragma: no cover


_SEPARATORS = tuple(sep for sep in (os.sep, os.altsep) if sep)


def write_atomically(path, write):
    """Call ``write(file)`` on a temp file next to ``path``, fsync it, rename it to ``path``.

    A reader never sees a half-written file, and a failed write leaves the
    old file. The file gets the permissions of a new file (``0o666`` less
    the umask), not the temp file's ``0o600``. ``path`` is taken as
    ``open(path, "wb")`` takes it: a symbolic link is written through (its
    target is replaced, the link stays), a directory (or a path ending in
    a separator) and an empty path are refused with ``open``'s errors, and
    a device, FIFO or socket (``/dev/null``) is written to as it is: there
    is no file to replace, and renaming over it would put a regular file in
    its place. Errors name ``path``, never the temp file.
    """
    path = os.fsdecode(path)
    if not path:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    try:
        mode = os.stat(path).st_mode  # (through links)
    except OSError:
        mode = None  # a new file (or one that open() would refuse too)
    if (mode is not None and stat.S_ISDIR(mode)) or path.endswith(_SEPARATORS):
        raise IsADirectoryError(
            errno.EISDIR, "Is a directory (give the name of a file to write)", path
        )
    if mode is not None and not stat.S_ISREG(mode):
        with open(path, "wb") as file:
            write(file)
        return
    if os.path.islink(path):
        path = os.path.realpath(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp_path = tempfile.mkstemp(
            prefix=f".{os.path.basename(path)[:100]}.", suffix=".tmp", dir=directory
        )
    except OSError as error:  # a missing or read-only folder: as open(path) words it
        raise type(error)(error.errno, error.strerror, path) from None
    try:
        with os.fdopen(fd, "wb") as file:
            if hasattr(os, "fchmod"):
                os.fchmod(file.fileno(), 0o666 & ~_umask())
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    # Make the rename itself durable (best effort; POSIX only).
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:  # pragma: no cover - file systems without directory fsync
        pass
    finally:
        os.close(dir_fd)
