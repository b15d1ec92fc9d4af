r"""Streaming readers of the other toolkits' data files, errors naming file and line.

Two formats:

- CRFsuite's data format (:func:`read_crfsuite_data`), read as CRFsuite's
  frontend reads it (``frontend/iwa.c``): one token per line, its fields
  separated by TABs (runs of TABs are one separator; a space is part of a
  field), the first field the label and the others attributes
  ``name[:scale]`` (``\:`` and ``\\`` escape a colon and a backslash; any
  other backslash is kept); a blank line ends a sequence; ``@weight:W`` in
  place of the label, before it, sets the sequence's weight.
- Column files (:func:`read_columns`): CoNLL, CRF++ and Wapiti training and
  test files. One token per line, whitespace-separated columns (the last one
  the label when the file is labelled), the same number of columns on every
  line; a blank line ends a sequence, and in CRF++'s convention
  (``sequence_break='crfpp'``) so does a line that starts with a space or a
  TAB, as ``crf_learn`` and ``crf_test`` read it.

Both read one line at a time and yield one sequence at a time. Files are
read as bytes and decoded line by line (UTF-8 by default); a trailing
``\r`` (a CRLF file) is dropped. What these readers refuse, naming the
file and the line, where CRFsuite or CRF++ read on silently: a line
longer than ``max_line_bytes`` (CRF++ stops at 8191 bytes), NUL bytes
(binary files), text that is not in the encoding, a scale that is not a
finite number (CRFsuite's ``atof`` reads ``1x`` as 1 and ``x`` as 0), a
colon in a label or a second unescaped colon in an attribute (CRFsuite
would cut the label at it, or read a second attribute with an empty name),
an unknown ``@`` declaration, and a line whose number of columns is not
the file's. Paths that are not regular files (directories, FIFOs,
devices) are refused before they are opened: ``"-"`` reads the standard
input.
"""

import io
import math
import os
import re
import stat
import sys
from collections.abc import Iterator
from typing import IO, Any, NamedTuple

__all__ = [
    "MAX_LINE_BYTES",
    "ColumnSequence",
    "CRFsuiteInstance",
    "DataFileError",
    "read_columns",
    "read_crfsuite_data",
]

#: The default limit on a line's length, in bytes (newline excluded).
MAX_LINE_BYTES = 1 << 24


class DataFileError(ValueError):
    """A data file that cannot be read: ``str(error)`` is ``'path:line: what is wrong'``.

    Attributes
    ----------
    path : str
        The file (``'<stdin>'`` for the standard input).
    line : int or None
        The 1-based line number, None for the file as a whole.
    """

    def __init__(self, path: str, line: "int | None", message: str) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class CRFsuiteInstance(NamedTuple):
    """A sequence of a CRFsuite data file (what :func:`read_crfsuite_data` yields).

    Attributes
    ----------
    tokens : list of dict
        One ``{attribute: scale}`` dict per token (the scales of an
        attribute listed twice are summed): the token format of
        :class:`~skcrf.CRFTagger`.
    labels : list of str
        The first field of each line: the labels to train on, or the
        reference labels of a test file.
    weight : float
        The ``@weight`` of the sequence (1.0 without one): its
        ``sample_weight``.
    line : int
        The line of the sequence's first token.
    """

    tokens: list[dict[str, float]]
    labels: list[str]
    weight: float
    line: int


class ColumnSequence(NamedTuple):
    """A sequence of a column file (what :func:`read_columns` yields).

    Attributes
    ----------
    tokens : list of tuple of str
        One tuple of columns per token, without the label column of a
        labelled file: the raw tokens a :class:`~skcrf.TemplateFeaturizer`
        reads.
    labels : list of str or None
        The last column of each line of a labelled file; None otherwise.
    line : int
        The line of the sequence's first token.
    """

    tokens: list[tuple[str, ...]]
    labels: "list[str] | None"
    line: int


def display_name(source: Any) -> str:
    if isinstance(source, (str, bytes, os.PathLike)):
        path = os.fsdecode(source)
        return "<stdin>" if path == "-" else path
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else "<stream>"


def check_regular_file(path: Any, name: str, what: str = "a data file") -> int:
    """The size of the regular file ``path``; a :class:`DataFileError` for anything else.

    Checked with ``stat``, before opening: opening a FIFO would wait for a
    writer, and a device never ends.
    """
    info = os.stat(path)
    mode = info.st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        raise DataFileError(name, None, f"is {kind}, not {what}")
    return info.st_size


def open_binary(source: Any, name: str) -> "tuple[IO[bytes], bool]":
    """``(file, owned)``: the binary stream to read; owned ones are closed by the caller."""
    if not isinstance(source, (str, bytes, os.PathLike)):
        if not hasattr(source, "readline"):
            raise TypeError(
                f"a data file must be a path or a file object; got {type(source).__name__}"
            )
        return getattr(source, "buffer", source), False
    if os.fsdecode(source) == "-":
        return sys.stdin.buffer, False
    check_regular_file(source, name)
    return open(source, "rb"), True


#: Bytes asked of a file per read (``read1``: what a pipe has, up to this).
_READ_SIZE = 1 << 20


def _lines(source: Any, encoding: str, max_line_bytes: int) -> Iterator[tuple[int, str]]:
    r"""``(line number, text)`` of each line, the newline (and a ``\r`` before it) removed."""
    if not isinstance(max_line_bytes, int) or max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be a positive int; got {max_line_bytes!r}")
    name = display_name(source)
    file, owned = open_binary(source, name)
    try:
        if isinstance(file, io.TextIOBase) or not hasattr(file, "read1"):
            yield from _lines_one_by_one(file, name, encoding, max_line_bytes)
        else:
            yield from _lines_in_blocks(file, name, encoding, max_line_bytes)
    finally:
        if owned:
            file.close()


def _lines_in_blocks(file, name, encoding, max_line_bytes):
    """:func:`_lines` of a binary file, a block of whole lines at a time.

    The checks and the decoding run once per block (C loops), not once per
    line; a block with a problem is read again line by line, so that the
    lines before it come out and the error names the first bad line.
    ``read1`` returns what a pipe holds: lines still arrive as written.
    """
    number, tail = 0, b""
    while True:
        chunk = file.read1(_READ_SIZE)
        if not chunk:
            break
        data = tail + chunk if tail else chunk
        cut = data.rfind(b"\n") + 1
        block, tail = data[:cut], data[cut:]
        if len(tail) > max_line_bytes:  # a line not ended within the limit
            lines, block, tail = None, data, b""
        else:
            lines = _block_lines(block, encoding, max_line_bytes)
        if lines is None:
            for raw in io.BytesIO(block):  # (each line with its newline, if it has one)
                number += 1
                yield number, _line_text(raw, name, number, encoding, max_line_bytes)
        else:
            yield from enumerate(lines, number + 1)
            number += len(lines)
    if tail:
        number += 1
        yield number, _line_text(tail, name, number, encoding, max_line_bytes)


def _block_lines(block, encoding, max_line_bytes):
    """The lines of ``block`` (whole lines, each ending with a newline).

    None if one of them would be refused (too long, a NUL byte, not text).
    """
    if b"\0" in block:
        return None
    # (only a block longer than the limit can hold a line that is)
    if len(block) > max_line_bytes and max(map(len, block.split(b"\n"))) > max_line_bytes:
        return None
    try:
        text = block.decode(encoding)
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")
    lines.pop()
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


def _line_text(raw, name, number, encoding, max_line_bytes):
    """The text of line ``number``, read as ``raw`` (its newline included, if any)."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if len(raw) > max_line_bytes:
        raise DataFileError(
            name,
            number,
            f"the line is longer than {max_line_bytes} bytes (max_line_bytes); "
            "is this a data file?",
        )
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    nul = raw.find(b"\0")
    if nul >= 0:
        raise DataFileError(
            name,
            number,
            f"NUL byte at byte {nul + 1} of the line: a binary file, not a text data file",
        )
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DataFileError(
            name,
            number,
            f"bytes {raw[exc.start : exc.start + 4]!r} at byte {exc.start + 1} of the "
            f"line are not {encoding} text",
        ) from None


def _lines_one_by_one(file, name, encoding, max_line_bytes):
    """:func:`_lines` of a text stream, or of a file object without ``read1``."""
    number = 0
    while True:
        raw = file.readline(max_line_bytes + 1)
        if not raw:
            return
        number += 1
        if isinstance(raw, str):  # a text stream: encode back to check it alike
            raw = raw.encode(encoding, "surrogateescape")
        yield number, _line_text(raw, name, number, encoding, max_line_bytes)


# -- CRFsuite's data format ---------------------------------------------------------

_ESCAPED_PIECES = re.compile(r"\\[:\\]|:|[^:\\]+|\\")


def _split_colons(field: str) -> list[str]:
    r"""``field`` cut at its unescaped colons, ``\:`` and ``\\`` unescaped."""
    if "\\" not in field:
        return field.split(":")
    parts = [""]
    for piece in _ESCAPED_PIECES.findall(field):
        if piece == ":":
            parts.append("")
        elif piece in ("\\:", "\\\\"):
            parts[-1] += piece[1]
        else:
            parts[-1] += piece
    return parts


def _number(text: str) -> float:
    """``float(text)``; 1 for an empty text, NaN for one that is not a number."""
    if not text:
        return 1.0
    try:
        return float(text)
    except ValueError:
        return math.nan


def _scale(text: str, name: str, number: int, attribute: str) -> float:
    value = _number(text)
    if not math.isfinite(value):
        raise DataFileError(
            name,
            number,
            f"the scale of attribute {attribute!r} is {text!r}, not a finite number "
            r"(write a colon in a name as '\:')",
        )
    return value


def _sequence_weight(text: str, name: str, number: int) -> float:
    """The ``W`` of ``@weight:W``: a finite number >= 0 (1 when empty)."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0.0):
        raise DataFileError(
            name,
            number,
            f"the sequence weight '@weight:{text}' is not a finite number >= 0",
        )
    return value


def read_crfsuite_data(
    source: Any,
    *,
    encoding: str = "utf-8",
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[CRFsuiteInstance]:
    r"""The sequences of a file in CRFsuite's data format, one at a time.

    The format CRFsuite's frontend reads (``crfsuite learn`` and ``crfsuite
    tag``): one token per line, fields separated by TABs, the first field
    the label and each other one an attribute ``name`` or ``name:scale``
    (scale 1 when omitted; ``\:`` and ``\\`` in a name or a label stand for
    a colon and a backslash); a blank line ends a sequence. A field
    ``@weight:W`` before the label sets the sequence's weight (the last one
    given counts); a line with only declarations adds no token.

    Parameters
    ----------
    source : str, os.PathLike or binary file
        The file (``'-'``: the standard input), or a file object open for
        reading.
    encoding : str, default='utf-8'
        The encoding of the text.
    max_line_bytes : int, default=16 MiB
        The longest line accepted.

    Yields
    ------
    CRFsuiteInstance
        ``(tokens, labels, weight, line)``: token dicts ready for
        :meth:`skcrf.CRFTagger.fit` and ``predict``, the labels, the
        sequence's weight and the line where it starts. Empty sequences
        (several blank lines in a row) are not yielded.

    Raises
    ------
    DataFileError
        A :class:`ValueError` naming the file and the line: see the module
        notes (``skcrf.io``) for what is refused.
    OSError
        If the file cannot be opened.

    Examples
    --------
    >>> import io
    >>> data = b"B-NP\tw=He\tcap\n\nO\tw=.:0.5\tp\\:q\n"
    >>> for seq in read_crfsuite_data(io.BytesIO(data)):
    ...     print(seq.labels, seq.tokens, seq.line)
    ['B-NP'] [{'w=He': 1.0, 'cap': 1.0}] 1
    ['O'] [{'w=.': 0.5, 'p:q': 1.0}] 3
    """
    name = display_name(source)
    tokens: list[dict[str, float]] = []
    labels: list[str] = []
    weight, start = 1.0, 0
    for number, text in _lines(source, encoding, max_line_bytes):
        if not text:
            if tokens:
                yield CRFsuiteInstance(tokens, labels, weight, start)
            tokens, labels, weight = [], [], 1.0
            continue
        label = None
        token: dict[str, float] = {}
        for field in text.split("\t"):
            if not field:
                continue  # a run of TABs is one separator
            parts = _split_colons(field)
            if label is None:
                if parts[0].startswith("@") and not field.startswith("\\"):
                    if parts[0] != "@weight" or len(parts) != 2:
                        raise DataFileError(
                            name,
                            number,
                            f"unknown declaration {field!r} (CRFsuite knows '@weight:W' only)",
                        )
                    weight = _sequence_weight(parts[1], name, number)
                    continue
                if len(parts) != 1:
                    raise DataFileError(
                        name,
                        number,
                        f"the label {field!r} has an unescaped ':' (write it as '\\:')",
                    )
                label = parts[0]
                continue
            if len(parts) > 2:
                raise DataFileError(
                    name,
                    number,
                    f"the attribute {field!r} has more than one unescaped ':' "
                    "(write a colon in a name as '\\:')",
                )
            scale = _scale(parts[1], name, number, parts[0]) if len(parts) == 2 else 1.0
            token[parts[0]] = token.get(parts[0], 0.0) + scale
        if label is None:
            continue  # declarations only (or TABs only)
        if not tokens:
            start = number
        tokens.append(token)
        labels.append(label)
    if tokens:
        yield CRFsuiteInstance(tokens, labels, weight, start)


# -- column files ---------------------------------------------------------------------


def read_columns(
    source: Any,
    *,
    labelled: bool = True,
    n_columns: "int | None" = None,
    sequence_break: str = "blank",
    encoding: str = "utf-8",
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[ColumnSequence]:
    r"""The sequences of a column file (CoNLL, CRF++, Wapiti), one at a time.

    One token per line, its columns separated by spaces or TABs (runs of
    them are one separator), the same number of columns on every line; a
    blank line ends a sequence.

    Parameters
    ----------
    source : str, os.PathLike or binary file
        The file (``'-'``: the standard input), or a file object open for
        reading.
    labelled : bool, default=True
        Whether the last column is the label (training files, and test
        files with their reference labels).
    n_columns : int, optional
        The number of columns of every line, the label's included. None:
        the first token line's.
    sequence_break : {'blank', 'crfpp'}, default='blank'
        'blank': only a blank (or whitespace-only) line ends a sequence.
        'crfpp': as CRF++ reads files, so does any line that starts with a
        space or a TAB (what follows on it is ignored).
    encoding : str, default='utf-8'
        The encoding of the text.
    max_line_bytes : int, default=16 MiB
        The longest line accepted.

    Yields
    ------
    ColumnSequence
        ``(tokens, labels, line)``: the tokens as tuples of column strings
        (without the label), the labels (None when not ``labelled``) and
        the line where the sequence starts. Empty sequences are not yielded.

    Raises
    ------
    DataFileError
        A :class:`ValueError` naming the file and the line (a line with
        another number of columns, a labelled line with one column, and
        the problems of any line: see the module notes of ``skcrf.io``).
    OSError
        If the file cannot be opened.

    Examples
    --------
    >>> import io
    >>> data = b"He PRP B-NP\nran VBD B-VP\n\n. . O\n"
    >>> for seq in read_columns(io.BytesIO(data)):
    ...     print(seq.tokens, seq.labels, seq.line)
    [('He', 'PRP'), ('ran', 'VBD')] ['B-NP', 'B-VP'] 1
    [('.', '.')] ['O'] 4
    """
    for sequence, _ in column_sequences(
        source,
        labelled=labelled,
        n_columns=n_columns,
        sequence_break=sequence_break,
        encoding=encoding,
        max_line_bytes=max_line_bytes,
    ):
        yield sequence


def column_sequences(
    source: Any,
    *,
    labelled: bool = True,
    n_columns: "int | None" = None,
    sequence_break: str = "blank",
    encoding: str = "utf-8",
    max_line_bytes: int = MAX_LINE_BYTES,
    keep_text: bool = False,
) -> Iterator[tuple[ColumnSequence, "list[str] | None"]]:
    """:func:`read_columns`' sequences, each with its lines' text when ``keep_text``.

    The text is each line as read, its newline removed (``wapiti label``
    writes it back); None without ``keep_text``.
    """
    if sequence_break not in ("blank", "crfpp"):
        raise ValueError(f"sequence_break must be 'blank' or 'crfpp'; got {sequence_break!r}")
    if n_columns is not None and (not isinstance(n_columns, int) or n_columns < 1):
        raise ValueError(f"n_columns must be a positive int or None; got {n_columns!r}")
    name = display_name(source)
    crfpp = sequence_break == "crfpp"
    expected, first_line = n_columns, None
    if labelled and expected == 1:
        raise ValueError("n_columns=1 leaves no column besides the label (labelled=True)")
    tokens: list[tuple[str, ...]] = []
    labels: list[str] = []
    texts: list[str] = []
    start = 0
    for number, text in _lines(source, encoding, max_line_bytes):
        columns = text.split()
        if not columns or (crfpp and text[0] in " \t"):
            if tokens:
                yield (
                    ColumnSequence(tokens, labels if labelled else None, start),
                    texts if keep_text else None,
                )
            tokens, labels, texts = [], [], []
            continue
        if expected is None:
            if labelled and len(columns) == 1:
                raise DataFileError(
                    name,
                    number,
                    f"one column ({text[:60]!r}): a labelled file needs a label column "
                    "after the token's columns",
                )
            expected, first_line = len(columns), number
        elif len(columns) != expected:
            since = f"line {first_line}'s" if first_line is not None else "n_columns"
            raise DataFileError(
                name,
                number,
                f"{len(columns)} column(s) where the file has {expected} ({since}): "
                f"{text[:60]!r}; a truncated or mixed file?",
            )
        if not tokens:
            start = number
        if labelled:
            labels.append(columns.pop())
        tokens.append(tuple(columns))
        if keep_text:
            texts.append(text)
    if tokens:
        yield (
            ColumnSequence(tokens, labels if labelled else None, start),
            texts if keep_text else None,
        )
