"""Model readers refuse paths that are not regular files (devices, FIFOs,
directories) with an error naming the path, before reading anything: such a
path never ends, or blocks until a writer comes. Model writers take a path as
``open(path, "wb")`` does: a link is written through, a device or FIFO is
written to (never replaced by a file), a directory is refused."""

import json
import os
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest

import skcrf
from skcrf import CRFTagger
from skcrf._model import CRFModel, FittedState
from skcrf._persist._crfsuite_file import read_crfsuite, write_crfsuite
from skcrf._persist._npz import load_state
from skcrf.io import load_model

unix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and /dev")


def _fitted_model():
    return CRFModel(
        classes=np.array(["A", "B"], dtype=object),
        attributes=["x"],
        state_ptr=np.array([0, 1]),
        state_labels=np.array([1], dtype=np.int32),
        state_weights=np.array([0.5]),
        transition_index=np.array([1]),
        transition_weights=np.array([-0.25]),
    )


def _predict_with_model_filename(path):
    return CRFTagger(model_filename=path).predict([[{"x": 1.0}]])


READERS = {
    "read_crfsuite": read_crfsuite,
    "from_crfsuite": CRFTagger.from_crfsuite,
    "model_filename": _predict_with_model_filename,
    "load_state": load_state,
    "load_model": load_model,
}
WHAT = {
    "read_crfsuite": "CRFsuite model",
    "from_crfsuite": "CRFsuite model",
    "model_filename": "CRFsuite model",
    "load_state": "skcrf model",
    "load_model": "skcrf model",
}

# Run in a child with a memory limit and a timeout: a reader that read a
# device to its "end" would fill the memory (it fails there, not the machine).
_CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
sys.path.insert(0, sys.argv[2])
import test_file_kinds as t
out = {}
for name, reader in t.READERS.items():
    try:
        reader(sys.argv[1])
        out[name] = "no error"
    except BaseException as exc:
        out[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


@unix_only
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_readers_refuse_a_device(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(skcrf.__file__)))
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, device, os.path.dirname(__file__)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    outcomes = json.loads(child.stdout.strip().splitlines()[-1])
    for name, outcome in outcomes.items():
        assert outcome.startswith("ValueError: Cannot read"), (name, outcome)
        assert f"{WHAT[name]} {device!r}: it is a character device" in outcome, (name, outcome)


def _call_with_timeout(fifo, reader, timeout=20):
    """``reader(fifo)`` in a thread: its outcome, or a writer unblocks it after ``timeout``."""
    outcome = {}

    def run():
        try:
            reader(fifo)
            outcome["result"] = "no error"
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():  # blocked opening the FIFO: open it for writing, then close
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout)
        pytest.fail(f"{reader} blocked on a FIFO")
    return outcome


@unix_only
@pytest.mark.parametrize("name", list(READERS))
def test_readers_refuse_a_fifo_without_blocking(tmp_path, name):
    fifo = str(tmp_path / "model.crfsuite")
    os.mkfifo(fifo)
    outcome = _call_with_timeout(fifo, READERS[name])
    error = outcome.get("error")
    assert isinstance(error, ValueError), outcome
    assert f"Cannot read {WHAT[name]} {fifo!r}: it is a FIFO (named pipe)" in str(error)


@pytest.mark.parametrize("name", [n for n in READERS if n != "model_filename"])
def test_readers_refuse_a_directory(tmp_path, name):
    with pytest.raises(ValueError, match="it is a directory, not a regular file"):
        READERS[name](tmp_path)


@unix_only
def test_a_path_swapped_for_a_fifo_after_the_check_does_not_block(tmp_path, monkeypatch):
    # the path passes os.stat, then is a FIFO when opened: opened without
    # waiting for a writer (O_NONBLOCK) and refused by fstat
    fifo = str(tmp_path / "swapped")
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: regular if p == fifo else real_stat(p))
    outcome = _call_with_timeout(fifo, read_crfsuite)
    assert "it is a FIFO (named pipe)" in str(outcome.get("error")), outcome


def test_a_crfsuite_file_larger_than_its_offsets_allow_is_not_read(tmp_path):
    path = tmp_path / "big.crfsuite"
    with open(path, "wb") as f:  # sparse where the file system allows
        f.truncate(2**32)
    with pytest.raises(ValueError, match=r"it has 4294967296 bytes; such files have 4294967295"):
        read_crfsuite(path)


def test_regular_files_still_read(tmp_path):
    from skcrf._persist import _files
    from skcrf._persist._npz import save_state

    model = _fitted_model()
    write_crfsuite(model, tmp_path / "m.crfsuite")
    assert read_crfsuite(tmp_path / "m.crfsuite").model.classes.tolist() == ["A", "B"]
    save_state(FittedState(params={}, model=model), tmp_path / "m.npz")
    assert load_state(tmp_path / "m.npz").model.classes.tolist() == ["A", "B"]
    assert _predict_with_model_filename(tmp_path / "m.crfsuite") == [["B"]]
    assert stat.S_ISREG(os.stat(tmp_path / "m.npz").st_mode)
    assert (
        _files.read_regular_file(tmp_path / "m.crfsuite", "x")
        == (tmp_path / "m.crfsuite").read_bytes()
    )
    with pytest.raises(FileNotFoundError):
        read_crfsuite(tmp_path / "missing.crfsuite")


# -- writers -------------------------------------------------------------------


def _save_npz(path):
    from skcrf._persist._npz import save_state

    save_state(FittedState(params={}, model=_fitted_model()), path)


WRITERS = {
    "write_crfsuite": lambda path: write_crfsuite(_fitted_model(), path),
    "save_state": _save_npz,
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_writers_refuse_a_directory_and_leave_no_temp_file(tmp_path, name):
    target = tmp_path / "models"
    target.mkdir()
    with pytest.raises(IsADirectoryError, match="Is a directory") as error:
        WRITERS[name](target)
    assert error.value.filename == str(target)  # the path given, not a temp file
    assert sorted(os.listdir(tmp_path)) == ["models"]
    assert os.listdir(target) == []


@pytest.mark.parametrize("name", list(WRITERS))
def test_writer_errors_name_the_path_given(tmp_path, name, monkeypatch):
    # the errors open(path, "wb") gives, on the path, with no temp file left
    # (a temp file next to "" or "dir/" would be in the parent folder)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    target = str(tmp_path / "missing" / "m.model")
    cases = [(target, FileNotFoundError), ("", FileNotFoundError)]
    cases += [(p + os.sep, IsADirectoryError) for p in ("new", str(tmp_path / "work" / "new"))]
    for path, kind in cases:
        with pytest.raises(kind) as error:
            WRITERS[name](path)
        assert error.value.filename == path
    assert os.listdir(tmp_path) == ["work"] and os.listdir(tmp_path / "work") == []


@unix_only
@pytest.mark.parametrize("name", list(WRITERS))
def test_writers_write_into_a_fifo_and_leave_it_a_fifo(tmp_path, name):
    # (as a device such as /dev/null: renaming a temp file over it would
    # have replaced the device by a regular file)
    WRITERS[name](tmp_path / "regular")
    expected = (tmp_path / "regular").read_bytes()
    fifo = str(tmp_path / "pipe")
    os.mkfifo(fifo)
    received = {}

    def read_all():
        with open(fifo, "rb") as f:
            received["data"] = f.read()

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    WRITERS[name](fifo)
    reader.join(20)
    assert not reader.is_alive()
    assert received["data"] == expected
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["pipe", "regular"]  # no temp file


@unix_only
@pytest.mark.parametrize("name", list(WRITERS))
def test_writers_replace_a_links_target_and_keep_the_link(tmp_path, name):
    WRITERS[name](tmp_path / "regular")
    expected = (tmp_path / "regular").read_bytes()
    (tmp_path / "store").mkdir()
    target = tmp_path / "store" / "v1.model"
    target.write_bytes(b"old model")
    link = tmp_path / "current.model"
    link.symlink_to(target)
    WRITERS[name](link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == expected
    assert os.listdir(tmp_path / "store") == ["v1.model"]  # the temp file went there
    dangling = tmp_path / "next.model"
    dangling.symlink_to(tmp_path / "store" / "v2.model")
    WRITERS[name](dangling)
    assert dangling.is_symlink() and (tmp_path / "store" / "v2.model").read_bytes() == expected
