r"""Reading CoNLL-style column files, block by block, without Dask.

:func:`skcrf.dask.read_conll` makes one Dask partition per block that
:func:`conll_blocks` returns and reads it with :func:`read_block` on a
worker; without Dask the same functions are a plain generator
(:func:`iter_conll`).

Conventions
-----------
- One token per line, its fields separated by whitespace (or ``delimiter``);
  a blank (whitespace-only) line ends a sequence; lines starting with
  ``comment`` (``#`` by default) and ``-DOCSTART-`` lines (CoNLL-2003's
  document markers) are skipped. A run of lines with no token line gives no
  sequence.
- A file is read as a whole (``blocksize=None``) or in blocks of about
  ``blocksize`` bytes. The boundary between two blocks is the first blank
  line starting at or after the byte offset that separates them: a block
  skips everything up to it (the previous block's last sequence) and reads
  on past its end up to the next boundary, so every sequence is read exactly
  once, whatever the block size. Blocks need an ASCII-compatible encoding
  (a newline is the byte ``\n``).
"""

import glob
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

__all__ = ["conll_blocks", "iter_conll", "read_block"]

DOCSTART = "-DOCSTART-"

#: What ``paths`` of :func:`skcrf.dask.read_conll` takes: a path, a glob or a
#: URL, or a list of them.
PathsLike = str | bytes | os.PathLike[str] | Iterable[str | bytes | os.PathLike[str]]

#: A block of a file: ``(path, start, end)``, ``end`` None for the last block.
Block = tuple[str, int, int | None]


def _is_url(path):
    return "://" in path


def expand_paths(paths: PathsLike) -> list[str]:
    """The files named by ``paths`` (a path, a glob or a list of them), in order.

    Globs are expanded and sorted; a path or glob that names no file is an
    error. URLs (``s3://...``) are expanded by fsspec, when installed.
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    files: list[str] = []
    for item in paths:
        path = os.fsdecode(item)
        if _is_url(path):
            import fsspec  # optional: only for remote files

            matches = [
                f.full_name if hasattr(f, "full_name") else f.path for f in fsspec.open_files(path)
            ]
            protocol = path.split("://", 1)[0]
            matches = [m if _is_url(m) else f"{protocol}://{m}" for m in matches]
        elif glob.has_magic(path):
            matches = sorted(glob.glob(path))
        else:
            matches = [path] if os.path.isfile(path) else []
        if not matches:
            raise FileNotFoundError(f"read_conll: no file matches {path!r}.")
        files.extend(matches)
    return files


def _open(path):
    if _is_url(path):
        import fsspec

        return fsspec.open(path, "rb").open()
    return open(path, "rb")


def _size(path):
    if _is_url(path):
        import fsspec

        fs, _, (name,) = fsspec.get_fs_token_paths(path)
        return fs.size(name)
    return os.path.getsize(path)


def conll_blocks(paths: PathsLike, blocksize: int | None = None) -> list[Block]:
    """``(path, start, end)`` of every block: one per file, or per ``blocksize`` bytes.

    ``end`` is None for the last block of a file.
    """
    if blocksize is not None and (not isinstance(blocksize, int) or blocksize < 1):
        raise ValueError(f"blocksize must be a positive int or None; got {blocksize!r}.")
    blocks: list[Block] = []
    for path in expand_paths(paths):
        if blocksize is None:
            blocks.append((path, 0, None))
            continue
        size = _size(path)
        starts = list(range(0, max(size, 1), blocksize))
        stops: list[int | None] = [*starts[1:], None]
        for start, stop in zip(starts, stops):
            blocks.append((path, start, stop))
    return blocks


def _check_options(columns, label_column):
    if isinstance(columns, str) or not hasattr(columns, "__iter__"):
        raise TypeError(
            "columns must be a list of column names, e.g. ('word', 'pos', 'tag'); "
            f"got {columns!r}."
        )
    columns = tuple(columns)
    if not columns or len(set(columns)) != len(columns):
        raise ValueError(f"columns must be distinct names, at least one; got {columns!r}.")
    if label_column is not None and label_column not in columns:
        raise ValueError(f"label_column={label_column!r} is not one of columns {columns!r}.")
    return columns


def read_block(
    path: str,
    start: int,
    end: int | None,
    columns: Sequence[str],
    *,
    label_column: str | None = None,
    feature_func: Callable[[list[dict[str, str]]], Any] | None = None,
    comment: str | None = "#",
    delimiter: str | None = None,
    encoding: str = "utf-8",
) -> Iterator[Any]:
    """The sequences of one block (see the module's conventions), one at a time.

    Yields
    ------
    sequence or (sequence, labels)
        ``feature_func(rows)`` (or the rows themselves), where ``rows`` is
        the list of the sequence's tokens as ``{column: value}`` dicts
        without the label column; with ``label_column``, a pair of that and
        the list of labels.
    """
    columns = _check_options(columns, label_column)
    with _open(path) as f:
        line_no = 0 if start == 0 else None  # line numbers are known from the start only
        if start > 0:
            f.seek(start - 1)
            f.readline()  # now at the first line starting at or after `start`
            while True:  # skip to the boundary: the first blank line from here
                position = f.tell()
                line = f.readline()
                if not line or (end is not None and position >= end and not line.strip()):
                    return  # no boundary in this block: it owns no sequence
                if not line.strip():
                    break
        rows: list[dict[str, str]] = []
        where: str | None = None
        while True:
            position = f.tell()
            line = f.readline()
            if line_no is not None:
                line_no += 1
            blank = not line.strip()
            if rows and blank:
                yield _sequence(rows, where, label_column, feature_func)
                rows = []
            if not line or (blank and end is not None and position >= end):
                return  # end of file, or the next block's boundary
            if blank:
                continue
            text = line.decode(encoding).rstrip("\r\n")
            if (comment and text.startswith(comment)) or text.startswith(DOCSTART):
                continue
            fields = text.split(delimiter)
            if len(fields) != len(columns) or not rows:
                here = f"{path}:{line_no}" if line_no is not None else f"{path} (byte {position})"
            if len(fields) != len(columns):
                raise ValueError(
                    f"{here}: the line has {len(fields)} fields but columns names "
                    f"{len(columns)} ({', '.join(columns)}): {text[:80]!r}."
                )
            if not rows:
                where = here
            rows.append(dict(zip(columns, fields)))


def _sequence(rows, where, label_column, feature_func):
    labels = None
    if label_column is not None:
        labels = [row.pop(label_column) for row in rows]
    x = rows
    if feature_func is not None:
        try:
            x = feature_func(rows)
        except Exception as exc:
            if hasattr(exc, "add_note"):
                exc.add_note(f"(in feature_func, for the sequence starting at {where})")
            raise
    return x if labels is None else (x, labels)


def read_blocks(blocks: Iterable[Block], **options: Any) -> list[Any]:
    """All the sequences of some blocks, as a list (a Dask partition)."""
    return [item for block in blocks for item in read_block(*block, **options)]


def iter_conll(
    paths: PathsLike,
    columns: Sequence[str],
    *,
    label_column: str | None = None,
    feature_func: Callable[[list[dict[str, str]]], Any] | None = None,
    comment: str | None = "#",
    delimiter: str | None = None,
    encoding: str = "utf-8",
) -> Iterator[Any]:
    """Sequences of CoNLL-style files, one at a time, without Dask: a generator.

    Parameters and items as :func:`skcrf.dask.read_conll`. The paths and
    options are checked now; the files are read as the generator is consumed.
    """
    columns = _check_options(columns, label_column)
    files = expand_paths(paths)
    options: dict[str, Any] = dict(
        label_column=label_column,
        feature_func=feature_func,
        comment=comment,
        delimiter=delimiter,
        encoding=encoding,
    )
    return (item for path in files for item in read_block(path, 0, None, columns, **options))
