"""The data-file readers of skcrf.io: CRFsuite's data format and column files."""

import io
import os

import pytest

from skcrf.io import DataFileError, read_columns, read_crfsuite_data


def _write(tmp_path, data, name="data.txt"):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


# -- CRFsuite's data format ----------------------------------------------------------


def test_crfsuite_data_fields_scales_and_sequences(tmp_path):
    data = (
        b"B-NP\tw=He\tpos=PRP:2.5\n"
        b"B-VP\t\tw=ran\tw=ran:0.5\n"  # a run of TABs is one separator; repeats summed
        b"\n\n"
        b"O\n"  # a label alone: a token with no attribute
    )
    seqs = list(read_crfsuite_data(_write(tmp_path, data)))
    assert [s.labels for s in seqs] == [["B-NP", "B-VP"], ["O"]]
    assert seqs[0].tokens == [{"w=He": 1.0, "pos=PRP": 2.5}, {"w=ran": 1.5}]
    assert seqs[1].tokens == [{}]
    assert [s.line for s in seqs] == [1, 5]
    assert [s.weight for s in seqs] == [1.0, 1.0]


def test_crfsuite_data_escapes_as_crfsuite():
    # \: and \\ are escapes; any other backslash stays; a space is part of a field
    data = b"a\\:b\tx\\:y:2\tback\\\\slash\tkeep\\n\tsp ace\tend:\n"
    (seq,) = read_crfsuite_data(io.BytesIO(data))
    assert seq.labels == ["a:b"]
    assert seq.tokens == [
        {"x:y": 2.0, "back\\slash": 1.0, "keep\\n": 1.0, "sp ace": 1.0, "end": 1.0}
    ]


def test_crfsuite_data_weights_crlf_and_no_final_newline():
    data = b"@weight:2.5\r\nA\tf\r\nB\tg\r\n\r\n@weight:0.5\tC\th"
    seqs = list(read_crfsuite_data(io.BytesIO(data)))
    assert [(s.labels, s.weight, s.line) for s in seqs] == [
        (["A", "B"], 2.5, 2),
        (["C"], 0.5, 5),
    ]
    assert seqs[0].tokens == [{"f": 1.0}, {"g": 1.0}]


@pytest.mark.parametrize(
    "line, message",
    [
        (b"A\tf:abc", "scale of attribute 'f' is 'abc'"),
        (b"A\tf:nan", "not a finite number"),
        (b"A\tf:1:2", "more than one unescaped ':'"),
        (b"B:X\tf", "label 'B:X' has an unescaped ':'"),
        (b"@weigth:2\tA\tf", "unknown declaration '@weigth:2'"),
        (b"@weight:x\tA", "sequence weight '@weight:x' is not a finite number >= 0"),
        (b"@weight:-1\tA", "sequence weight '@weight:-1' is not a finite number >= 0"),
        (b"@weight:inf\tA", "sequence weight '@weight:inf' is not a finite number >= 0"),
        (b"A\tf\x00g", "NUL byte at byte 4"),
        (b"A\t\xff\xfe", "are not utf-8 text"),
    ],
)
def test_crfsuite_data_errors_name_file_and_line(tmp_path, line, message):
    path = _write(tmp_path, b"O\tok\n\n" + line + b"\n")
    with pytest.raises(DataFileError, match=message) as info:
        list(read_crfsuite_data(path))
    assert str(info.value).startswith(f"{path}:3: ")
    assert (info.value.path, info.value.line) == (path, 3)
    assert isinstance(info.value, ValueError)


def test_long_line_refused_without_reading_it_whole(tmp_path):
    path = _write(tmp_path, b"A\tf\n\n" + b"x" * 5000 + b"\n")
    with pytest.raises(DataFileError, match=r":3: the line is longer than 4096 bytes"):
        list(read_crfsuite_data(path, max_line_bytes=4096))
    # at the limit it is read
    (_, seq) = read_crfsuite_data(path, max_line_bytes=5000)
    assert seq.labels == ["x" * 5000]


def test_default_line_limit(tmp_path):
    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        f.write(b"A\tf\n")
        f.write(b"y" * ((1 << 24) + 10))
    with pytest.raises(DataFileError, match=r"big.txt:2: the line is longer than 16777216"):
        list(read_columns(str(path), labelled=False))


@pytest.mark.parametrize("reader", [read_crfsuite_data, read_columns])
def test_paths_that_are_not_files(tmp_path, reader):
    with pytest.raises(DataFileError, match=r"is a directory, not a data file"):
        list(reader(str(tmp_path)))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # refused before opening: opening a FIFO would block for a writer
    with pytest.raises(DataFileError, match=r"fifo: is a FIFO, not a data file"):
        list(reader(str(fifo)))
    with pytest.raises(DataFileError, match=r"^/dev/null: is a device"):
        list(reader("/dev/null"))
    with pytest.raises(FileNotFoundError):
        list(reader(str(tmp_path / "missing")))


def test_binary_garbage_is_refused(tmp_path):
    garbage = bytes(range(256)) * 4
    path = _write(tmp_path, garbage)
    for reader in (read_crfsuite_data, read_columns):
        with pytest.raises(DataFileError, match=r"data.txt:\d+: (NUL byte|bytes .* are not)"):
            list(reader(path))


# -- column files ------------------------------------------------------------------


def test_columns_labelled_and_not():
    data = b"He  PRP\tB-NP\nran VBD B-VP\n \t\n. . O\n\n\n"
    seqs = list(read_columns(io.BytesIO(data)))
    assert [(s.tokens, s.labels, s.line) for s in seqs] == [
        ([("He", "PRP"), ("ran", "VBD")], ["B-NP", "B-VP"], 1),
        ([(".", ".")], ["O"], 4),
    ]
    seqs = list(read_columns(io.BytesIO(data), labelled=False))
    assert seqs[0].tokens == [("He", "PRP", "B-NP"), ("ran", "VBD", "B-VP")]
    assert seqs[0].labels is None


def test_columns_crfpp_breaks_on_leading_space():
    data = b"a X\nb Y\n  anything\nc X\n\td e\nf Y\n"
    seqs = list(read_columns(io.BytesIO(data), sequence_break="crfpp"))
    assert [s.labels for s in seqs] == [["X", "Y"], ["X"], ["Y"]]
    assert [s.line for s in seqs] == [1, 4, 6]
    # in the default convention those lines are tokens, of another column count
    with pytest.raises(DataFileError, match=r":3: 1 column\(s\) where the file has 2"):
        list(read_columns(io.BytesIO(data)))


def test_columns_wrong_count_and_truncation(tmp_path):
    path = _write(tmp_path, b"a b X\nc d Y\n\ne f")  # truncated last line
    with pytest.raises(DataFileError) as info:
        list(read_columns(path))
    assert str(info.value).startswith(f"{path}:4: 2 column(s) where the file has 3 (line 1's)")
    with pytest.raises(
        DataFileError, match=r":1: 3 column\(s\) where the file has 4 \(n_columns\)"
    ):
        list(read_columns(path, n_columns=4))
    with pytest.raises(DataFileError, match=r":1: one column"):
        list(read_columns(io.BytesIO(b"word\n")))
    assert next(read_columns(io.BytesIO(b"word\n"), labelled=False)).tokens == [("word",)]


def test_reader_arguments_checked():
    with pytest.raises(ValueError, match="sequence_break"):
        list(read_columns(io.BytesIO(b""), sequence_break="conll"))
    with pytest.raises(ValueError, match="n_columns"):
        list(read_columns(io.BytesIO(b""), n_columns=0))
    with pytest.raises(ValueError, match="max_line_bytes"):
        list(read_crfsuite_data(io.BytesIO(b""), max_line_bytes=0))
    with pytest.raises(TypeError, match="a path or a file object"):
        list(read_crfsuite_data(3))


def test_text_streams_and_stdin(monkeypatch):
    assert next(read_columns(io.StringIO("é x\n"))).tokens == [("é",)]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"A\tf\n")))
    (seq,) = read_crfsuite_data("-")
    assert seq.labels == ["A"]


def test_streaming_reads_lazily():
    # the first sequence comes before the bad line is read
    reader = read_columns(io.BytesIO(b"a X\n\nb c d\n"))
    assert next(reader).labels == ["X"]
    with pytest.raises(DataFileError, match="<stream>:3:"):
        next(reader)


class _LineByLine:
    """A binary file object without ``read1``: read a line at a time (the oracle)."""

    def __init__(self, data):
        self._file = io.BytesIO(data)

    def readline(self, size=-1):
        return self._file.readline(size)


def _read_all(source, max_line_bytes):
    from skcrf._utils._data_files import _lines

    lines = []
    try:
        lines.extend(_lines(source, "utf-8", max_line_bytes))
    except DataFileError as exc:
        lines.append(("error", exc.line, str(exc).split(": ", 1)[1]))
    return lines


@pytest.mark.parametrize("read_size", [1, 3, 16, 1 << 20])
def test_lines_read_in_blocks_equal_lines_read_one_by_one(monkeypatch, read_size):
    """Blocks of lines (checked and decoded at once) give the lines and the
    first error of a line-at-a-time reading, wherever the reads end."""
    import random

    from skcrf._utils import _data_files

    monkeypatch.setattr(_data_files, "_READ_SIZE", read_size)
    rng = random.Random(read_size)
    pieces = [
        b"a",
        b"b",
        b" ",
        b"\t",
        b"\n",
        b"\n",
        b"\r",
        "é".encode(),
        b"\xff",
        b"\0",
        "字".encode(),
    ]
    kinds = set()
    for _ in range(1500):
        clean = rng.random() < 0.7
        data = b"".join(
            rng.choice(pieces[:8] if clean else pieces) for _ in range(rng.randrange(40))
        )
        max_line_bytes = rng.choice([1, 2, 5, 10, 100])
        want = _read_all(_LineByLine(data), max_line_bytes)
        assert _read_all(io.BytesIO(data), max_line_bytes) == want, (data, max_line_bytes)
        kinds.add(want[-1][2].split()[0] if want and want[-1][0] == "error" else "ok")
    assert kinds == {"ok", "the", "NUL", "bytes"}  # every kind of error was met
