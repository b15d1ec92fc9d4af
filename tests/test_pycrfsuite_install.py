"""skcrf.pycrfsuite in python-crfsuite's layout, and ``import pycrfsuite`` served by it.

- The submodules ``_pycrfsuite``, ``_logparser`` and ``_dumpparser`` have
  the public names python-crfsuite's have there, and each class is one
  object whichever path names it (old pickles name ``skcrf.pycrfsuite.X``).
- ``CRFsuiteDumpParser`` reads a dump as ``Tagger.info()`` sees the model.
- ``install()`` registers the package as ``pycrfsuite`` (submodules too),
  refuses when python-crfsuite's is imported; ``python -m skcrf.pycrfsuite``
  runs a program with it.
- Pickles of ``sklearn_crfsuite.CRF`` made by sklearn-crfsuite 0.3.6 and
  0.5.0 with real python-crfsuite (``tests/data/sklearn_crfsuite_log_*.pkl``,
  made by ``tests/data/make_sklearn_crfsuite_log_pickles.py``) load where
  real pycrfsuite cannot be imported, and predict what they predicted.

``install()`` changes ``sys.modules`` for good: it runs in subprocesses.
"""

import importlib.util
import inspect
import io
import json
import os
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest

import skcrf
import skcrf.pycrfsuite as ours
from skcrf._training._training_log import LabelScore

DATA = Path(__file__).parent / "data"
EXPECTED = json.loads((DATA / "sklearn_crfsuite_log_expected.json").read_text("utf-8"))
RELEASES = sorted(k for k in EXPECTED if k != "X_test")
SUBMODULES = ["_pycrfsuite", "_logparser", "_dumpparser"]
SKCRF_ROOT = str(Path(skcrf.__file__).resolve().parent.parent)

# Code run first in the subprocesses: real pycrfsuite cannot be imported
# (whether or not python-crfsuite is installed), and skcrf is this checkout's.
NO_REAL_PYCRFSUITE = f"""
import importlib.abc, sys

class _NoRealPycrfsuite(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pycrfsuite" or name.startswith("pycrfsuite."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _NoRealPycrfsuite())
try:
    import pycrfsuite
except ModuleNotFoundError:
    pass
else:
    raise AssertionError("pycrfsuite is importable")

import skcrf
from pathlib import Path
assert str(Path(skcrf.__file__).resolve().parent.parent) == {SKCRF_ROOT!r}, skcrf.__file__
"""


def _run(code, *args, cwd=None):
    """Run ``code`` in a fresh interpreter; its stdout (fails on a non-zero exit)."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _public(module):
    """The names a module defines itself (no imported modules, functions or features)."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and getattr(value, "__module__", module.__name__) == module.__name__
    }


# -- the layout ------------------------------------------------------------------------

# python-crfsuite 0.9.x's public names, module by module (0.9.7 to 0.9.12)
PYCRFSUITE_NAMES = {
    "_pycrfsuite": {
        "BaseTrainer",
        "CRFSUITE_VERSION",
        "CRFSuiteError",
        "ItemSequence",
        "Tagger",
        "Trainer",
    },
    "_logparser": {"LabelScore", "TrainLogParser"},
    "_dumpparser": {"CRFsuiteDumpParser", "ParsedDump"},
}


@pytest.mark.parametrize("submodule", SUBMODULES)
def test_submodules_have_python_crfsuites_names(submodule):
    module = getattr(ours, submodule)
    assert module is sys.modules[f"skcrf.pycrfsuite.{submodule}"]
    for name in PYCRFSUITE_NAMES[submodule]:
        assert hasattr(module, name), f"skcrf.pycrfsuite.{submodule}.{name}"
        if hasattr(ours, name):  # one object whichever path names it
            assert getattr(module, name) is getattr(ours, name), name


@pytest.mark.parametrize("submodule", SUBMODULES)
def test_names_match_the_installed_python_crfsuite(submodule):
    real = pytest.importorskip(f"pycrfsuite.{submodule}")
    assert _public(real) == PYCRFSUITE_NAMES[submodule]
    assert PYCRFSUITE_NAMES[submodule] <= set(vars(getattr(ours, submodule)))


def _global(module, name):
    """What a pickle naming ``module.name`` loads (a protocol-0 GLOBAL, then STOP)."""
    return pickle.loads(f"c{module}\n{name}\n.".encode())


def test_every_class_is_one_object_whichever_path_names_it():
    assert ours._logparser.LabelScore is LabelScore
    for name in sorted(set(ours.__all__) - {"install", "CRFSUITE_VERSION"}):
        obj = getattr(ours, name)
        # the old path (skcrf.pycrfsuite was one module) and the class's own
        assert _global("skcrf.pycrfsuite", name) is obj, name
        assert _global(obj.__module__, obj.__qualname__) is obj, name
        for sub in SUBMODULES:
            if name in vars(getattr(ours, sub)):
                assert _global(f"skcrf.pycrfsuite.{sub}", name) is obj, (sub, name)


def test_a_parser_pickled_under_the_old_path_loads():
    parser = ours.TrainLogParser()
    for line in ["Feature generation\n", "type: CRF1d\n"]:
        parser.feed(line)
    data = pickle.dumps(parser, protocol=0)  # names as text: c<module>\n<name>\n
    old = data.replace(b"cskcrf.pycrfsuite._logparser\n", b"cskcrf.pycrfsuite\n")
    assert old != data
    loaded = pickle.loads(old)
    assert type(loaded) is ours.TrainLogParser and vars(loaded) == vars(parser)


# -- CRFsuiteDumpParser -------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    """A CRFsuite file whose names hold ' --> ' and ': ' (as the dump prints them)."""
    trainer = ours.Trainer(verbose=False)
    trainer.set_params({"c2": 0.01, "max_iterations": 20, "feature.possible_transitions": True})
    X = [
        [{"w": "a --> b"}, {"w": "x: y", "cap": 1.0}, ["plain"]],
        [{"w": "x: y"}, {"w": "a --> b", "n": 0.5}],
        [["plain", "w:a --> b"], {"w": "z"}],
    ]
    y = [["B --> I", "I", "O"], ["I", "B --> I"], ["O", "O: x"]]
    for xseq, yseq in zip(X, y):
        trainer.append(xseq, yseq)
    path = tmp_path_factory.mktemp("dump") / "model.crfsuite"
    trainer.train(str(path))
    return path


def _parse(text):
    parser = ours._dumpparser.CRFsuiteDumpParser()
    for line in io.StringIO(text):
        parser.feed(line)
    return parser


def _dump_text(tagger, path):
    tagger.dump(path)
    return path.read_text("utf-8")


def test_dump_parser_reads_what_info_shows(model_path, tmp_path):
    tagger = ours.Tagger()
    tagger.open(str(model_path))
    text = _dump_text(tagger, tmp_path / "dump.txt")
    parser = _parse(text)
    assert parser.state is None
    result, info = parser.result, tagger.info()
    assert type(result) is ours.ParsedDump
    for name in ("header", "labels", "transitions", "state_features"):
        assert getattr(result, name) == getattr(info, name), name
    assert {a for a, _ in info.state_features} <= result.attributes.keys()
    assert ("B --> I", "O: x") in result.transitions or ("B --> I", "I") in result.transitions
    assert any(a == "w:a --> b" for a, _ in result.state_features)


def test_dump_parser_agrees_with_python_crfsuites(model_path, tmp_path):
    real = pytest.importorskip("pycrfsuite._dumpparser")
    tagger = ours.Tagger()
    tagger.open(str(model_path))
    text = _dump_text(tagger, tmp_path / "dump.txt")
    # pycrfsuite's parser cannot read labels holding ' --> ': compare on the others
    lines = [line for line in text.splitlines(keepends=True) if "B --> I" not in line]
    theirs, mine = real.CRFsuiteDumpParser(), ours._dumpparser.CRFsuiteDumpParser()
    for line in lines:
        theirs.feed(line)
        mine.feed(line)
    for name in ("header", "labels", "attributes", "transitions", "state_features"):
        assert getattr(mine.result, name) == getattr(theirs.result, name), name


@pytest.mark.parametrize(
    "lines, message",
    [
        (["  0: B"], "outside"),
        (["LABELS = {", "  0 B"], "Not a 'LABELS' line"),
        (["LABELS = {", "  0: B", "}", "TRANSITIONS = {", "  (1) B --> C: 1.0"], "undeclared"),
        (["LABELS = {", "  0: B", "}", "TRANSITIONS = {", "  (1) B --> B: x"], "Not a"),
        (["LABELS = {", "  0: B", "}", "TRANSITIONS = {", "  B --> B: 1.0"], "Not a"),
    ],
)
def test_dump_parser_errors(lines, message):
    parser = ours._dumpparser.CRFsuiteDumpParser()
    with pytest.raises(ValueError, match=message):
        for line in lines:
            parser.feed(line + "\n")


# -- install() ----------------------------------------------------------------------------


def test_install_serves_pycrfsuite_and_its_submodules():
    code = NO_REAL_PYCRFSUITE + (
        "import skcrf.pycrfsuite as ours\n"
        "ours.install()\n"
        "ours.install()  # again: nothing changes\n"
        "import pycrfsuite\n"
        "from pycrfsuite._logparser import LabelScore, TrainLogParser\n"
        "from pycrfsuite._dumpparser import CRFsuiteDumpParser, ParsedDump\n"
        "from pycrfsuite._pycrfsuite import Tagger, Trainer, ItemSequence\n"
        "assert pycrfsuite is ours\n"
        "for sub in ('_pycrfsuite', '_logparser', '_dumpparser'):\n"
        "    assert sys.modules['pycrfsuite.' + sub] is getattr(ours, sub), sub\n"
        "    assert getattr(pycrfsuite, sub) is getattr(ours, sub), sub\n"
        "assert TrainLogParser is ours.TrainLogParser and Tagger is ours.Tagger\n"
        "assert ParsedDump is ours.ParsedDump and Trainer is ours.Trainer\n"
        "print('ok')\n"
    )
    assert _run(code).strip() == "ok"


def test_install_refuses_when_python_crfsuites_is_imported():
    pytest.importorskip("pycrfsuite")
    code = (
        "import sys\n"
        "import pycrfsuite\n"
        "real = pycrfsuite\n"
        "import skcrf.pycrfsuite as ours\n"
        "try:\n"
        "    ours.install()\n"
        "except RuntimeError as error:\n"
        "    print(error)\n"
        "assert sys.modules['pycrfsuite'] is real\n"
        "assert sys.modules['pycrfsuite._logparser'] is not ours._logparser\n"
    )
    out = _run(code)
    assert out.startswith("pycrfsuite is already imported (from ")
    assert "call install() before anything imports pycrfsuite" in out


@pytest.mark.parametrize("name", ["pycrfsuite", "pycrfsuite._logparser"])
def test_install_refuses_any_other_pycrfsuite_and_registers_nothing(monkeypatch, name):
    served = ["pycrfsuite"] + [f"pycrfsuite.{sub}" for sub in SUBMODULES]
    for module in served:  # restored after the test, whatever install() does
        monkeypatch.delitem(sys.modules, module, raising=False)
    other = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, other)
    with pytest.raises(RuntimeError, match=rf"^{name} is already imported"):
        ours.install()
    assert sys.modules[name] is other
    assert [m for m in served if m in sys.modules] == [name]


# -- python -m skcrf.pycrfsuite -----------------------------------------------------------

PROGRAM = """\
import sys
import pycrfsuite
import pycrfsuite._logparser
import skcrf.pycrfsuite
assert pycrfsuite is skcrf.pycrfsuite, pycrfsuite
print(__name__, sys.argv[1:], pycrfsuite._logparser.TrainLogParser.__module__)
sys.exit(int(sys.argv[1]))
"""


def _runner(args, cwd):
    """``python -m skcrf.pycrfsuite *args`` with skcrf from this checkout."""
    return subprocess.run(
        [sys.executable, "-m", "skcrf.pycrfsuite", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": SKCRF_ROOT},
    )


@pytest.mark.parametrize("form", ["script", "module"])
def test_runner_serves_pycrfsuite_to_a_program(tmp_path, form):
    (tmp_path / "program.py").write_text(PROGRAM, encoding="utf-8")
    target = [str(tmp_path / "program.py")] if form == "script" else ["-m", "program"]
    result = _runner([*target, "0", "x y"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "__main__ ['0', 'x y'] skcrf.pycrfsuite._logparser\n"
    assert _runner([*target, "3"], tmp_path).returncode == 3  # the program's exit status


def test_runner_usage(tmp_path):
    for args, status in [([], 2), (["--help"], 0), (["-m"], 2)]:
        result = _runner(args, tmp_path)
        assert result.returncode == status
        assert "usage: python -m skcrf.pycrfsuite" in result.stdout + result.stderr


# -- pickles of sklearn_crfsuite.CRF made with real pycrfsuite ---------------------------

LOAD_PICKLES = """
import importlib.util, json, pickle
from fractions import Fraction

import skcrf.pycrfsuite as ours
ours.install()
import sklearn_crfsuite  # imports pycrfsuite: skcrf's

def plain(value):
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value

def fitted(crf):
    # from a pickle (a version number), or fitted here ("refit")
    if crf != "refit":
        with open(f"{data}/sklearn_crfsuite_log_{crf}.pkl", "rb") as f:
            return pickle.load(f)
    # as the fixtures' script fits, on the served pycrfsuite
    spec = importlib.util.spec_from_file_location(
        "make_pickles", f"{data}/make_sklearn_crfsuite_log_pickles.py"
    )
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    crf = sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=0.05, c2=0.01, max_iterations=15, all_possible_transitions=True
    )
    return crf.fit(*make.split(make.SENTENCES), *make.split(make.DEV))

data, releases = sys.argv[1], sys.argv[2:]
X = json.load(open(data + "/sklearn_crfsuite_log_expected.json"))["X_test"]
out = {}
for release in releases + ["refit"]:
    crf = fitted(release)
    log = crf.training_log_
    scores = log.last_iteration["scores"]
    out[release] = {
        "log_type": type(log).__module__ + "." + type(log).__qualname__,
        "score_types": sorted({type(s).__module__ + "." + type(s).__qualname__
                               for s in scores.values()}),
        "log_is_ours": type(log) is ours.TrainLogParser,
        "tagger_is_ours": type(crf.tagger_) is ours.Tagger,
        "predict": [[str(label) for label in seq] for seq in crf.predict(X)],
        "marginals": [list(seq) for seq in crf.predict_marginals(X)],
        "transitions": [[a, b, w] for (a, b), w in sorted(crf.transition_features_.items())],
        "last_log": log.last_log,
        "log": {
            "n_iterations": len(log.iterations),
            "n_messages": len(log.log),
            "events": [event for event, _, _ in log.events],
            "featgen_num_features": log.featgen_num_features,
            "last_iteration": plain(log.last_iteration),
        },
    }
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def unpickled():
    """What the fixtures give, loaded in a process where pycrfsuite is skcrf's."""
    pytest.importorskip("sklearn_crfsuite")
    if importlib.util.find_spec("tabulate") is None:  # sklearn_crfsuite needs it
        pytest.skip("sklearn_crfsuite's dependencies are not installed")
    return json.loads(_run(NO_REAL_PYCRFSUITE + LOAD_PICKLES, str(DATA), *RELEASES))


def test_fixtures_name_pycrfsuites_logparser_classes():
    for release in RELEASES:
        named = EXPECTED[release]["globals"]
        assert "pycrfsuite._logparser.TrainLogParser" in named, release
        assert "pycrfsuite._logparser.LabelScore" in named, release
    assert set(RELEASES) == {"0.3.6", "0.5.0"}


@pytest.mark.parametrize("release", RELEASES)
def test_sklearn_crfsuite_pickles_load_and_predict_as_they_did(unpickled, release):
    got, expected = unpickled[release], EXPECTED[release]
    assert got["log_is_ours"] and got["tagger_is_ours"]
    assert got["log_type"] == "skcrf.pycrfsuite._logparser.TrainLogParser"
    assert got["score_types"] == ["skcrf._training._training_log.LabelScore"]
    assert got["predict"] == expected["predict"]
    for seq, expected_seq in zip(got["marginals"], expected["marginals"], strict=True):
        for token, expected_token in zip(seq, expected_seq, strict=True):
            assert token.keys() == expected_token.keys()
            for label, p in expected_token.items():
                assert token[label] == pytest.approx(p, abs=1e-9), (label, p)
    assert got["transitions"] == expected["transitions"]
    assert got["log"] == expected["log"]  # the training log, as it was pickled
    assert got["last_log"].startswith("Storing the model")


def test_sklearn_crfsuite_fits_on_the_served_pycrfsuite_as_on_python_crfsuite(unpickled):
    """sklearn-crfsuite's own fit, on skcrf's Trainer, gives the model the pickles hold."""
    got, expected = unpickled["refit"], EXPECTED["0.5.0"]
    assert got["log_is_ours"] and got["tagger_is_ours"]
    assert got["predict"] == expected["predict"]
    for seq, expected_seq in zip(got["marginals"], expected["marginals"], strict=True):
        for token, expected_token in zip(seq, expected_seq, strict=True):
            for label, p in expected_token.items():
                assert token[label] == pytest.approx(p, abs=1e-6), (label, p)
    for (a, b, w), (a0, b0, w0) in zip(got["transitions"], expected["transitions"], strict=True):
        assert (a, b) == (a0, b0) and w == pytest.approx(w0, abs=2e-6)
    log, expected_log = got["log"], expected["log"]
    assert log["events"] == expected_log["events"]
    assert log["featgen_num_features"] == expected_log["featgen_num_features"]
    last, expected_last = log["last_iteration"], expected_log["last_iteration"]
    assert last["scores"] == expected_last["scores"]
    for key in ("num", "item_accuracy", "instance_accuracy", "active_features"):
        assert last[key] == expected_last[key], key
    assert last["loss"] == pytest.approx(expected_last["loss"], abs=1e-5)
