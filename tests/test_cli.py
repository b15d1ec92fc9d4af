"""The ``skcrf`` command: CRFsuite's frontend (learn, tag, dump) and CRF++'s tools."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from skcrf import CRFTagger
from skcrf._cli import main
from skcrf._cli._crfsuite import _GlibcRandom
from skcrf.io import read_crfsuite_data

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "data", "cli")


def _fixtures_module():
    spec = importlib.util.spec_from_file_location(
        "cli_fixtures", os.path.join(FIXTURES, "make_fixtures.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIXTURE_SCRIPT = _fixtures_module()


def _crfsuite():
    """CRFsuite 0.12's frontend, when built (SKCRF_CRFSUITE, PATH or the project's tools)."""
    for candidate in (
        os.environ.get("SKCRF_CRFSUITE"),
        shutil.which("crfsuite"),
        "/work/scratch/tools/crfsuite-src/crfsuite",
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("CRFsuite's frontend (crfsuite) is not built here")


def run(capsys, *argv):
    """``skcrf ARGV``: (exit status, stdout, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope="module")
def seed_files(treebank, tmp_path_factory):
    """The fixtures' CRFsuite data files (Treebank seed features), written again."""
    folder = tmp_path_factory.mktemp("seed")
    return FIXTURE_SCRIPT.seed_files(str(folder))


def _expected(name):
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read().decode("utf-8")


# -- tag and dump: CRFsuite's outputs byte for byte --------------------------------------


@pytest.mark.treebank
@pytest.mark.parametrize("name", sorted(FIXTURE_SCRIPT.TAG_OPTIONS))
def test_tag_outputs_equal_crfsuite_tag(capsys, seed_files, name):
    options = FIXTURE_SCRIPT.TAG_OPTIONS[name]
    model = os.path.join(FIXTURES, "seed.crfsuite")
    status, out, err = run(capsys, "tag", "-m", model, *options, seed_files[1])
    assert status == 0, err
    if "-t" in options:
        assert re.search(r"\nElapsed time: \d+\.\d{6} \[sec\] \(\S+ \[instance/sec\]\)\n$", out)
        out = out[: out.rindex("Elapsed time")]
    assert out == _expected(f"tag_{name}.txt")


def test_dump_equals_crfsuite_dump(capsys):
    status, out, _ = run(capsys, "dump", os.path.join(FIXTURES, "seed.crfsuite"))
    assert status == 0
    assert out == _expected("seed.dump")


def test_dump_equals_pycrfsuite_dump_of_its_model(capsys, tmp_path):
    pycrfsuite = pytest.importorskip("pycrfsuite")
    trainer = pycrfsuite.Trainer(verbose=False)
    trainer.append([{"w": "the", "x": 1.5}, {"w": "dog"}], ["D", "N"])
    trainer.append([{"w": "a:b"}, {"w": "cat"}, {"w": "runs"}], ["D", "N", "V"])
    trainer.set("max_iterations", 20)
    path = str(tmp_path / "py.crfsuite")
    trainer.train(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    tagger.dump(str(tmp_path / "py.dump"))
    status, out, _ = run(capsys, "dump", path)
    assert status == 0
    assert out == (tmp_path / "py.dump").read_text(encoding="utf-8")


def test_dump_of_an_skcrf_model_file(capsys, tmp_path):
    X, y = [[{"w": "a"}, {"w": "b"}]] * 2, [["A", "B"]] * 2
    tagger = CRFTagger(max_iterations=10).fit(X, y)
    tagger.save(tmp_path / "m.skcrf")
    tagger.to_crfsuite(tmp_path / "m.crfsuite")
    _, from_skcrf, _ = run(capsys, "dump", str(tmp_path / "m.skcrf"))
    _, from_crfsuite, _ = run(capsys, "dump", str(tmp_path / "m.crfsuite"))
    assert "LABELS = {" in from_skcrf
    # the same features and weights (the file header's offsets aside)
    assert from_skcrf.split("LABELS = {")[1] == from_crfsuite.split("LABELS = {")[1]


# -- learn: the model CRFTagger trains --------------------------------------------------


@pytest.mark.treebank
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_learn_gives_the_model_crftagger_gives(capsys, seed_files, tmp_path):
    model = str(tmp_path / "m.crfsuite")
    status, out, err = run(
        capsys, "learn", "-p", "c2=0.5", "-p", "max_iterations=30", "-m", model, seed_files[0]
    )
    assert status == 0, err
    assert "Number of instances: 30\n" in out and "Number of labels:" in out
    assert re.search(r"End time of the training: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n\n$", out)
    data = list(read_crfsuite_data(seed_files[0]))
    tagger = CRFTagger(c2=0.5, max_iterations=30).fit(
        [s.tokens for s in data], [s.labels for s in data]
    )
    losses = re.findall(r"\nLoss: (\S+)\n", out)
    assert len(losses) == 30
    assert float(losses[-1]) == pytest.approx(tagger.training_log_.last_iteration["loss"], 1e-9)
    learned = CRFTagger.from_crfsuite(model)
    expected = tagger.state_features_
    assert learned.state_features_.keys() <= expected.keys()
    for key, weight in learned.state_features_.items():
        assert weight == pytest.approx(expected[key], abs=1e-12)
    X = [s.tokens for s in data]
    assert learned.predict(X) == tagger.predict(X)


def test_learn_weights_count_as_repeats(capsys, tmp_path):
    once = "A\tx\tz\nB\ty\n\nB\tx\nA\ty:0.5\n\n"
    weighted = tmp_path / "weighted.txt"
    weighted.write_text("@weight:3\n" + once, encoding="utf-8")
    repeated = tmp_path / "repeated.txt"
    repeated.write_text(("A\tx\tz\nB\ty\n\n" * 3) + "B\tx\nA\ty:0.5\n\n", encoding="utf-8")
    models = []
    for data in (weighted, repeated):
        path = str(tmp_path / f"{data.stem}.crfsuite")
        status, _, err = run(capsys, "learn", "-m", path, str(data))
        assert status == 0, err
        models.append(CRFTagger.from_crfsuite(path))
    a, b = (m.state_features_ for m in models)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == pytest.approx(b[key], abs=1e-6)
    # and without the weight, another model
    plain = tmp_path / "plain.txt"
    plain.write_text(once, encoding="utf-8")
    status, _, _ = run(capsys, "learn", "-m", str(tmp_path / "plain.crfsuite"), str(plain))
    c = CRFTagger.from_crfsuite(str(tmp_path / "plain.crfsuite")).state_features_
    assert max(abs(a[key] - c[key]) for key in a) > 0.01


def test_glibc_rand_sequence():
    # glibc's rand() from its default seed (srand(1)): what crfsuite learn -g shuffles with
    rand = _GlibcRandom()
    assert [rand() for _ in range(5)] == [
        1804289383,
        846930886,
        1681692777,
        1714636915,
        1957747793,
    ]


def test_learn_help_parameters_and_cross_validation(capsys, tmp_path):
    status, out, _ = run(capsys, "learn", "-a", "pa", "-H")
    assert status == 0
    assert out.startswith("PARAMETERS for passive-aggressive (crf1d):\n\n")
    assert "int type = 1;\n" in out and "float c = 1.000000;\n" in out
    data = tmp_path / "d.txt"
    data.write_text("A\tx\nB\ty\n\n" * 4 + "B\tx\nA\ty\n\n" * 2, encoding="utf-8")
    status, out, err = run(capsys, "learn", "-g", "2", "-x", "-p", "max_iterations=2", str(data))
    assert status == 0, err
    assert "===== Cross validation (1/2) =====" in out
    assert "===== Cross validation (2/2) =====" in out
    assert "Number of data sets (groups): 2\n" in out
    assert out.count("Item accuracy:") == 4  # two iterations per fold
    assert not list(tmp_path.glob("*.crfsuite"))  # -x stores no model
    status, out, _ = run(capsys, "learn", "-h")
    assert status == 0 and out.startswith("usage: skcrf learn")


def test_learn_log_to_file(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.txt").write_text("A\tx\nB\ty\n", encoding="utf-8")
    status, out, err = run(capsys, "learn", "-l", "-L", "run", "-p", "c2=2", "d.txt")
    assert status == 0, err
    log = (tmp_path / "run_lbfgs_c2=2").read_text(encoding="utf-8")
    assert "c2: 2.000000\n" in log and "Reading the data set(s)" in log
    assert "Reading the data set(s)" not in out


# -- errors: a message naming the file and line, status 1, no model ------------------------


@pytest.mark.parametrize(
    "content, message",
    [
        (b"A\tx\n\nB\ty:abc\n", r"bad\.txt:3: the scale of attribute 'y' is 'abc'"),
        (b"A\tx\n\x00\x01\x02binary\n", r"bad\.txt:2: NUL byte"),
        (b"A\tx\n\xff\xfe\n", r"bad\.txt:2: bytes .* are not utf-8 text"),
        (b"@foo:1\nA\tx\n", r"bad\.txt:1: unknown declaration '@foo:1'"),
    ],
)
def test_learn_bad_data_file(capsys, tmp_path, content, message):
    (tmp_path / "bad.txt").write_bytes(content)
    model = tmp_path / "m.crfsuite"
    model.write_bytes(b"the previous model")
    status, _, err = run(capsys, "learn", "-m", str(model), str(tmp_path / "bad.txt"))
    assert status == 1
    assert re.search(message, err)
    assert model.read_bytes() == b"the previous model"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "m.crfsuite"]


def test_learn_and_tag_refuse_paths_that_are_not_files(capsys, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in (
        ["learn", str(fifo)],
        ["learn", str(tmp_path)],
        ["learn", "/dev/zero"],
        ["tag", "-m", str(fifo), "x"],
        ["dump", "/dev/zero"],
    ):
        status, _, err = run(capsys, *argv)
        assert status == 1
        assert re.search(r"is a (FIFO|directory|device), not a (data|model) file", err), err


def test_command_errors(capsys, tmp_path):
    data = tmp_path / "d.txt"
    data.write_text("A\tx\n", encoding="utf-8")
    cases = [
        (["learn", "-p", "nosuch=1", str(data)], "no parameter 'nosuch' for lbfgs"),
        (["learn", "-p", "c2", str(data)], "-p takes NAME=VALUE"),
        (["learn", "-a", "sgd", str(data)], "unknown algorithm: sgd"),
        (["learn", "-p", "c2=-1", str(data)], "c2"),
        (["tag", str(data)], "give the model with -m"),
        (["tag", "-m", str(tmp_path / "none"), str(data)], "none: No such file"),
        (["tag", "-m", str(data), str(data)], "not a model file that skcrf reads"),
        (["dump"], "give one model file"),
        (["nosuch"], "unknown command 'nosuch'"),
        (["learn", "--bogus"], "unrecognized arguments: --bogus"),
    ]
    for argv, message in cases:
        status, out, err = run(capsys, *argv)
        assert status == 1, argv
        assert message in err, (argv, err)


def test_tag_reads_skcrf_model_files_and_stdin(capsys, tmp_path, monkeypatch):
    import io

    X, y = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}]] * 2, [["A", "B"], ["B"]] * 2
    tagger = CRFTagger(max_iterations=20).fit(X, y)
    tagger.save(tmp_path / "m.skcrf")
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(b"?\tw\\:a\n?\tw\\:b\n\nB\tw\\:b\n"))
    )
    status, out, err = run(capsys, "tag", "-m", str(tmp_path / "m.skcrf"), "-r")
    assert status == 0, err
    assert out == "(null)\tA\n(null)\tB\n\nB\tB\n\n"


def test_python_dash_m_skcrf_and_version():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-m", "skcrf", "--help"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0
    assert done.stdout.startswith("usage: skcrf COMMAND")
    done = subprocess.run([sys.executable, "-m", "skcrf"], capture_output=True, text=True, env=env)
    assert done.returncode == 1 and "usage: skcrf" in done.stderr


def test_the_command_exits_at_once_with_everything_written(capsys, tmp_path):
    # console_main skips Python's teardown: what the command wrote must all be
    # out (through a pipe, and into -o's file), with the command's status
    template = tmp_path / "template"
    template.write_text("U00:%x[0,0]\nB\n", encoding="utf-8")
    train = tmp_path / "train.txt"
    train.write_text("the D\ndog N\n\na D\ncat N\n", encoding="utf-8")
    model = tmp_path / "m.skcrf"
    assert run(capsys, "crfpp", "learn", str(template), str(train), str(model))[0] == 0
    test = tmp_path / "test.txt"
    test.write_text("the\ncat\n\n" * 20000, encoding="utf-8")  # ~300 kB of output
    status, expected, err = run(capsys, "crfpp", "test", "-m", str(model), str(test))
    assert status == 0, err
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("PYTHONUNBUFFERED", None)  # (buffered: what a flush must write is there)
    command = [sys.executable, "-m", "skcrf", "crfpp", "test", "-m", str(model)]
    done = subprocess.run([*command, str(test)], capture_output=True, text=True, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, expected, "")
    output = tmp_path / "out.txt"
    done = subprocess.run([*command, "-o", str(output), str(test)], capture_output=True, env=env)
    assert done.returncode == 0 and output.read_text(encoding="utf-8") == expected
    done = subprocess.run([*command, str(tmp_path / "nosuch")], capture_output=True, env=env)
    assert done.returncode == 1 and b"nosuch" in done.stderr
    # a reader that stops early (`| head -1`): status 1, no traceback
    reader = subprocess.Popen(
        [*command, str(test)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert reader.stdout.readline() == b"the\tD\n"
    reader.stdout.close()
    assert reader.wait(timeout=60) == 1
    assert b"Traceback" not in reader.stderr.read()
    reader.stderr.close()


# -- against CRFsuite's frontend, when built ------------------------------------------------


@pytest.mark.treebank
def test_tag_report_equals_crfsuite_on_a_model_skcrf_learns(capsys, seed_files, tmp_path):
    crfsuite = _crfsuite()
    model = str(tmp_path / "m.crfsuite")
    status, _, err = run(capsys, "learn", "-p", "max_iterations=20", "-m", model, seed_files[0])
    assert status == 0, err
    for options in (["-t", "-q"], ["-r", "-p", "-i"]):
        expected = subprocess.run(
            [crfsuite, "tag", "-m", model, *options, seed_files[1]],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
        status, out, _ = run(capsys, "tag", "-m", model, *options, seed_files[1])
        assert status == 0
        strip = lambda text: re.sub(r"Elapsed time: .*\n", "", text)  # noqa: E731
        assert strip(out) == strip(expected)
    dumped = subprocess.run([crfsuite, "dump", model], capture_output=True, check=True).stdout
    _, out, _ = run(capsys, "dump", model)
    assert out.encode("utf-8") == dumped


@pytest.mark.treebank
def test_learn_log_and_groups_equal_crfsuite(capsys, seed_files, tmp_path):
    crfsuite = _crfsuite()
    argv = ["learn", "-g", "3", "-e", "2", "-p", "max_iterations=3", seed_files[0]]
    expected = subprocess.run([crfsuite, *argv], capture_output=True, check=True, text=True).stdout
    _, out, _ = run(capsys, *argv)

    def refs(log):  # the held-out group's reference counts per label: the same groups
        return re.findall(r"\n    (\S+): \(\d+, \d+, (\d+)\)", log)

    assert refs(out) == refs(expected) and refs(out)
    assert "Number of data sets (groups): 3\n" in out
    stats = lambda log: re.findall(r"Number of (items|attributes|labels): (\d+)", log)  # noqa: E731
    assert stats(out) == stats(expected)


def test_weights_are_sample_weights():
    # what the reader yields fits as CRFTagger's sample_weight
    import io

    data = b"@weight:2\nA\tx\nB\ty\n\nB\tx\nA\ty\n"
    seqs = list(read_crfsuite_data(io.BytesIO(data)))
    w = np.array([s.weight for s in seqs])
    tagger = CRFTagger(max_iterations=5).fit(
        [s.tokens for s in seqs], [s.labels for s in seqs], sample_weight=w
    )
    assert tagger.predict([seqs[0].tokens]) == [["A", "B"]]


# -- skcrf crfpp: CRF++'s crf_learn and crf_test ---------------------------------------------

CRFPP_TEMPLATE = """\
# Unigram
U00:%x[-1,0]
U01:%x[0,0]
U02:%x[1,0]
U03:%x[-1,0]/%x[0,0]
U10:%x[0,1]
U11:%x[-1,1]/%x[0,1]

# Bigram
B
"""


def _crfpp_tool(name):
    for candidate in (shutil.which(name), os.path.join(os.path.dirname(sys.executable), name)):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    if os.environ.get("SKCRF_REQUIRE_CRFPP"):
        pytest.fail(f"SKCRF_REQUIRE_CRFPP is set but CRF++'s {name} is absent (crfpy)")
    pytest.skip(f"CRF++'s {name} is not installed (pip install crfpy)")


def _write_columns(path, sentences):
    """Column file: word, its lower-cased 3-letter suffix, the POS tag (the label)."""
    with open(path, "w", encoding="utf-8") as f:
        for sentence in sentences:
            for word, tag in sentence:
                f.write(f"{word} {word[-3:].lower()} {tag}\n")
            f.write("\n")


@pytest.fixture(scope="module")
def crfpp_files(treebank, tmp_path_factory):
    folder = tmp_path_factory.mktemp("crfpp")
    train, test = treebank
    paths = {name: str(folder / f"{name}.txt") for name in ("template", "train", "test")}
    with open(paths["template"], "w", encoding="utf-8") as f:
        f.write(CRFPP_TEMPLATE)
    _write_columns(paths["train"], train[:150])
    _write_columns(paths["test"], test[:60])
    return paths


def test_crfpp_cost_is_crfsuite_regularization():
    from skcrf._cli._crfpp import regularization

    assert regularization("CRF-L2", 4.0) == {"c1": 0.0, "c2": 0.125}
    assert regularization("CRF-L1", 4.0) == {"c1": 0.25, "c2": 0.0}


def _objective(X, y, tagger, cost):
    """crf_learn's CRF-L2 objective at the tagger's weights: NLL + ||w||^2 / (2C)."""
    nll = -float(np.sum(tagger.sequence_log_proba(X, y)))
    weights = np.concatenate(
        [list(tagger.state_features_.values()), list(tagger.transition_features_.values())]
    )
    return nll + float(weights @ weights) / (2 * cost)


@pytest.mark.treebank
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_crfpp_learn_minimises_crf_learns_objective(capsys, crfpp_files, tmp_path):
    from skcrf.io import read_columns

    crf_learn = _crfpp_tool("crf_learn")
    model = str(tmp_path / "m.skcrf")
    status, out, err = run(
        capsys,
        "crfpp", "learn", "-c", "2", "-e", "1e-7", "-p", "2",
        crfpp_files["template"], crfpp_files["train"], model,
    )  # fmt: skip
    assert status == 0, err
    done = subprocess.run(
        [crf_learn, "-c", "2", "-e", "1e-7", "-p", "2", crfpp_files["template"],
         crfpp_files["train"], str(tmp_path / "crfpp.model")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    crfpp_objective = float(re.findall(r" obj=(\S+) ", done.stdout)[-1])
    n_features = int(re.search(r"Number of features: +(\d+)", done.stdout).group(1))
    tagger = CRFTagger.load(model)
    assert tagger.n_features_ == n_features  # every label for each unigram, pairs for B
    data = list(read_columns(crfpp_files["train"], sequence_break="crfpp"))
    ours = _objective([s.tokens for s in data], [s.labels for s in data], tagger, 2.0)
    # the same objective, both at its minimum
    assert ours == pytest.approx(crfpp_objective, rel=1e-4)
    assert float(re.findall(r" obj=(\S+) ", out)[-1]) == pytest.approx(ours, rel=1e-7)


@pytest.mark.treebank
def test_crfpp_test_outputs_as_crf_test(capsys, crfpp_files, tmp_path):
    crf_learn, crf_test = _crfpp_tool("crf_learn"), _crfpp_tool("crf_test")
    model = str(tmp_path / "m.skcrf")
    status, _, err = run(
        capsys, "crfpp", "learn", "-c", "4", "-e", "1e-6",
        crfpp_files["template"], crfpp_files["train"], model,
    )  # fmt: skip
    assert status == 0, err
    crfpp_model = str(tmp_path / "crfpp.model")
    subprocess.run(
        [crf_learn, "-c", "4", "-e", "1e-6", crfpp_files["template"], crfpp_files["train"],
         crfpp_model],
        capture_output=True, check=True,
    )  # fmt: skip
    number = re.compile(r"\d+\.\d{6}")

    def accuracy(text):
        rows = [line.split("\t") for line in text.splitlines() if line and line[0] != "#"]
        return sum(row[2] == row[3].split("/")[0] for row in rows) / len(rows)

    for options in ([], ["-v1"], ["-v2"], ["-n", "2"], ["-n", "2", "-v1"]):
        expected = subprocess.run(
            [crf_test, "-m", crfpp_model, *options, crfpp_files["test"]],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        status, out, err = run(capsys, "crfpp", "test", "-m", model, *options, crfpp_files["test"])
        assert status == 0, err
        # the same lines: columns, labels and where the figures go; figures close
        assert accuracy(out) == pytest.approx(accuracy(expected), abs=0.002)
        ours, theirs = out.splitlines(), expected.splitlines()
        assert len(ours) == len(theirs)
        same = [a for a, b in zip(ours, theirs) if number.sub("P", a) == number.sub("P", b)]
        assert len(same) >= 0.99 * len(ours), options
        for a, b in zip(ours, theirs):
            if number.sub("P", a) == number.sub("P", b):
                figures = [float(v) for v in number.findall(a)]
                assert figures == pytest.approx([float(v) for v in number.findall(b)], abs=0.02)


def test_crfpp_learn_and_test_round_trip(capsys, tmp_path):
    template = tmp_path / "template"
    template.write_text("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nB\n", encoding="utf-8")
    train = tmp_path / "train.txt"
    # CRF++'s sentence break: a blank line, or one starting with a space
    train.write_text("the D\ndog N\n  ignored\na D\ncat N\nruns V\n\n" * 3, encoding="utf-8")
    model = tmp_path / "m.skcrf"
    status, out, err = run(
        capsys, "crfpp", "learn", "-a", "CRF-L1", "-c", "10", str(template), str(train), str(model)
    )
    assert status == 0, err
    assert "Number of sentences: 6\n" in out
    assert re.search(r"\niter=0 act=\d+ obj=\d+\.\d{5} diff=1.00000\n", out)
    test = tmp_path / "test.txt"
    test.write_text("a\ndog\n\nthe\tcat\truns\n", encoding="utf-8")
    status, out, err = run(capsys, "crfpp", "test", "-m", str(model), str(test))
    assert status == 1 and "test.txt:4: 3 column(s) where the file has 1" in err
    test.write_text("a\ndog\n\nthe\ncat\nruns\n", encoding="utf-8")
    status, out, err = run(capsys, "crfpp", "test", "-m", str(model), str(test))
    assert status == 0, err
    assert out == "a\tD\ndog\tN\n\nthe\tD\ncat\tN\nruns\tV\n\n"
    status, written, err = run(
        capsys, "crfpp", "test", "-m", str(model), "-o", str(tmp_path / "o"), str(test)
    )
    assert status == 0 and written == "" and (tmp_path / "o").read_text() == out
    # never onto the model or an input (opening it would truncate it)
    kept = model.read_bytes(), test.read_bytes()
    for output, read in [(model, model), (tmp_path / "." / "test.txt", test)]:
        status, written, err = run(
            capsys, "crfpp", "test", "-m", str(model), "-o", str(output), str(test)
        )
        assert status == 1 and written == "" and f"is {read}, which the command reads" in err
    assert (model.read_bytes(), test.read_bytes()) == kept
    status, out, _ = run(capsys, "crfpp", "test", "-m", str(model), "-v1", str(test))
    assert re.fullmatch(r"# \d\.\d{6}\na\tD/\d\.\d{6}\ndog\tN/\d\.\d{6}\n\n# .*", out, re.S)
    status, out, _ = run(capsys, "crfpp", "test", "-m", str(model), "-n", "3", str(test))
    assert out.startswith("# 0 ") and "\n# 2 " in out
    # errors
    for argv, message in [
        (["learn", str(template), str(train)], "give TEMPLATE TRAIN MODEL"),
        (["learn", "-a", "MIRA", str(template), str(train), "x"], "MIRA is not available"),
        (["learn", "-c", "0", str(template), str(train), "x"], "-c must be a positive"),
        (["test", str(test)], "give the model with -m"),
        (["test", "-m", str(model), "-v", "3", str(test)], "-v takes 0, 1 or 2"),
        (["nosuch"], "unknown command 'nosuch'"),
    ]:
        status, _, err = run(capsys, "crfpp", *argv)
        assert status == 1 and message in err, (argv, err)
    assert not (tmp_path / "x").exists()


def test_tag_shows_a_progress_bar_on_a_terminal(capsys, tmp_path, monkeypatch):
    pytest.importorskip("tqdm")
    X, y = [[{"w": "a"}, {"w": "b"}]] * 2, [["A", "B"]] * 2
    CRFTagger(max_iterations=5).fit(X, y).to_crfsuite(tmp_path / "m.crfsuite")
    data = tmp_path / "d.txt"
    data.write_text("A\tw\\:a\nB\tw\\:b\n\n" * 600, encoding="utf-8")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    status, out, err = run(capsys, "tag", "-m", str(tmp_path / "m.crfsuite"), "-q", str(data))
    assert status == 0 and out == ""
    assert "d.txt" in err and "B/s" in err  # tqdm's bar, over the file's bytes
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    status, out, err = run(capsys, "tag", "-m", str(tmp_path / "m.crfsuite"), "-q", str(data))
    assert status == 0 and err == ""


def test_usage_and_version(capsys):
    from skcrf import __version__

    assert run(capsys, "-V") == (0, f"skcrf {__version__}\n", "")
    status, out, err = run(capsys)
    assert status == 1 and out == "" and err.startswith("usage: skcrf COMMAND")
    for argv, start in [
        (["-h"], "usage: skcrf COMMAND"),
        (["tag", "-h"], "usage: skcrf tag"),
        (["dump", "-h"], "usage: skcrf dump"),
        (["crfpp", "-h"], "usage: skcrf crfpp learn"),
        (["crfpp", "learn", "-h"], "usage: skcrf crfpp learn"),
        (["crfpp", "test", "-h"], "usage: skcrf crfpp test"),
    ]:
        status, out, _ = run(capsys, *argv)
        assert status == 0 and out.startswith(start), argv
    status, _, err = run(capsys, "crfpp")
    assert status == 1 and err.startswith("usage: skcrf crfpp")


CRFPP_DATA = os.path.join(HERE, "data", "crfpp")


def _same_but_rounding(ours, theirs, tolerance=2e-6):
    """Equal text but for the last digit of the figures (CRF++ keeps float32 weights)."""
    figure = re.compile(r"\d+\.\d{6}")
    assert figure.sub("F", ours) == figure.sub("F", theirs)
    a = np.array([float(v) for v in figure.findall(ours)])
    b = np.array([float(v) for v in figure.findall(theirs)])
    assert np.abs(a - b).max(initial=0.0) <= tolerance


@pytest.mark.parametrize("model", ["tiny.model", "tiny.model.txt"])
def test_crfpp_test_opens_crf_learns_models(capsys, model):
    # tiny.v2: what crf_test -v2 printed (tests/data/crfpp/make_models.py)
    path = os.path.join(CRFPP_DATA, model)
    data = os.path.join(CRFPP_DATA, "tiny_test.data")
    status, out, err = run(capsys, "crfpp", "test", "-v2", "-m", path, data)
    assert status == 0, err
    _same_but_rounding(out, _read(os.path.join(CRFPP_DATA, "tiny.v2")))


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("options", [[], ["-v1", "-c", "2"], ["-v2", "-c", "0.5"]])
def test_crfpp_test_equals_crf_test_on_its_model(capsys, options):
    crf_test = _crfpp_tool("crf_test")
    model = os.path.join(CRFPP_DATA, "tiny.model")
    data = os.path.join(CRFPP_DATA, "tiny_test.data")
    expected = subprocess.run(
        [crf_test, *options, "-m", model, data], capture_output=True, text=True, check=True
    ).stdout
    status, out, err = run(capsys, "crfpp", "test", *options, "-m", model, data)
    assert status == 0, err
    if options:
        _same_but_rounding(out, expected)
    else:
        assert out == expected


def test_crfpp_test_on_a_wapiti_model_and_refusals(capsys, tmp_path):
    # tiny.labels: what wapiti label printed (tests/data/wapiti/make_models.py):
    # each input line, a TAB and the label
    model = os.path.join(HERE, "data", "wapiti", "tiny.model")
    data = os.path.join(CRFPP_DATA, "tiny_test.data")
    status, out, err = run(capsys, "crfpp", "test", "-m", model, data)
    assert status == 0, err
    expected = _read(os.path.join(HERE, "data", "wapiti", "tiny.labels"))
    labels = [line.rsplit("\t", 1)[-1] for line in expected.splitlines()]
    assert [line.rsplit("\t", 1)[-1] for line in out.splitlines()] == labels
    assert any(labels)
    status, _, err = run(capsys, "crfpp", "test", "-c", "2", "-m", model, data)
    assert status == 1 and "applies to CRF++ models only" in err
    crfsuite_model = os.path.join(FIXTURES, "seed.crfsuite")
    status, _, err = run(capsys, "crfpp", "test", "-m", crfsuite_model, data)
    assert status == 1 and "the model has no template" in err
    # and the other way round: a template's model reads no CRFsuite data
    attributes = tmp_path / "attributes.txt"
    attributes.write_text("B-NP\tw=He\n", encoding="utf-8")
    status, out, err = run(capsys, "tag", "-m", model, str(attributes))
    assert status == 1 and out == ""
    assert "the model featurizes raw tokens with a template" in err
    assert "skcrf crfpp test or skcrf wapiti label" in err
    garbage = tmp_path / "garbage.model"
    garbage.write_bytes(b"\x00\x01garbage")
    status, _, err = run(capsys, "crfpp", "test", "-m", str(garbage), data)
    assert status == 1 and "not a model file that skcrf reads" in err


# -- what the commands import -----------------------------------------------------------

_MODULES_AFTER = """
import contextlib, json, os, sys
from skcrf._cli import main

with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), \\
        contextlib.redirect_stderr(sink):
    status = main(sys.argv[1:])
print(json.dumps([status, sorted(m for m in sys.modules if m.split(".")[0] in
                                 ("sklearn", "scipy"))]))
"""


def _imported_by(*argv, code=_MODULES_AFTER):
    """(exit status, the scikit-learn and SciPy modules loaded) of ``skcrf ARGV`` in a new process."""
    import json

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_commands_import_neither_scikit_learn_nor_scipy(tmp_path):
    # scikit-learn and SciPy cost more than tagging a file: the commands run
    # on skcrf's own modules (the estimator is not imported)
    template = os.path.join(CRFPP_DATA, "tiny.template")
    plain = tmp_path / "plain.template"  # no conditioned transitions: -t can dump it
    plain.write_text("U00:%x[0,0]\nU01:%x[-1,1]/%x[0,1]\nB\n", encoding="utf-8")
    data = os.path.join(CRFPP_DATA, "tiny_test.data")
    model = str(tmp_path / "m.skcrf")
    crfsuite_data = tmp_path / "data.txt"
    crfsuite_data.write_text("B-NP\tw[0]=the\nI-NP\tw[0]=dog\n\n", encoding="utf-8")
    crfsuite_model = os.path.join(FIXTURES, "seed.crfsuite")
    # learning and probabilities (marginals, n-best) need SciPy's BLAS, loaded alone
    blas_only = _imported_by(
        code="import json, sys\nfrom skcrf._utils._blas import cython_blas\ncython_blas()\n"
        "print(json.dumps([0, sorted(m for m in sys.modules if m.startswith('scipy'))]))"
    )[1]
    assert "scipy.linalg.cython_blas" in blas_only and "scipy.linalg" not in blas_only
    for argv, allowed in [
        (["crfpp", "learn", "-m", "5", "-t", str(plain), data, model], blas_only),
        (
            ["wapiti", "train", "-p", template, "-i", "3", data, str(tmp_path / "w.skcrf")],
            blas_only,
        ),
        (["crfpp", "test", "-m", model, data], []),
        (["crfpp", "test", "-v2", "-m", model, data], blas_only),
        (
            ["crfpp", "test", "-n", "2", "-m", os.path.join(CRFPP_DATA, "tiny.model"), data],
            blas_only,
        ),
        (["wapiti", "label", "-s", "-m", model, data], []),
        (["wapiti", "label", "-p", "-s", "-m", str(tmp_path / "w.skcrf"), data], blas_only),
        (["wapiti", "dump", model], []),
        (["tag", "-r", "-m", crfsuite_model, str(crfsuite_data)], []),
        (["tag", "-r", "-p", "-i", "-l", "-m", crfsuite_model, str(crfsuite_data)], blas_only),
        (["tag", "-t", "-q", "-m", crfsuite_model, str(crfsuite_data)], []),
        (["dump", crfsuite_model], []),
        (["dump", model], []),
    ]:
        status, modules = _imported_by(*argv)
        assert status == 0, argv
        assert not any(m.startswith("sklearn") for m in modules), (argv, modules)
        assert set(modules) <= set(allowed), (argv, sorted(set(modules) - set(allowed)))


def test_cython_blas_loaded_alone_is_scipys_module():
    # the extension loaded from its file, without scipy.linalg; a later
    # import of scipy.linalg uses it (one module, the same dgemm)
    code = (
        "import json, sys\n"
        "from skcrf._utils._blas import cython_blas\n"
        "light = cython_blas()\n"
        "alone = 'scipy.linalg' not in sys.modules\n"
        "from scipy.linalg import cython_blas as full\n"
        "print(json.dumps([alone, light is full, 'dgemm' in light.__pyx_capi__]))"
    )
    assert _imported_by(code=code) == [True, True, True]


def test_the_blas_limit_covers_scipys_blas_loaded_alone():
    # the kernels load SciPy's BLAS on first use: the one-thread limit must
    # reach it even when nothing had loaded it before (or its threads would
    # compete with the shards': training three times slower here)
    code = (
        "import json, sys\n"
        "import threadpoolctl\n"
        "from skcrf._utils._threads import single_blas_thread\n"
        "with single_blas_thread():\n"
        "    inside = [(i['filepath'], i['num_threads']) for i in "
        "threadpoolctl.threadpool_info() if i['user_api'] == 'blas']\n"
        "print(json.dumps([inside, 'scipy.linalg.cython_blas' in sys.modules]))"
    )
    inside, loaded = _imported_by(code=code)
    assert loaded
    assert any("scipy" in path for path, _ in inside), inside
    assert all(threads == 1 for _, threads in inside), inside
