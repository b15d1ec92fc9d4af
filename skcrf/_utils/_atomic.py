"""Atomic file writes: a reader sees the old file or the whole new one."""

import os
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


def write_atomically(path, write):
    """Call ``write(file)`` on a temp file next to ``path``, fsync it, rename it to ``path``.

    A reader never sees a half-written file, and a failed write leaves the
    old file. The file gets the permissions of a new file (``0o666`` less
    the umask), not the temp file's ``0o600``.
    """
    path = os.fsdecode(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp_path = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)[:100]}.", suffix=".tmp", dir=directory
    )
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
