"""``skcrf wapiti train``, ``label`` and ``dump``: Wapiti 1.5's modes on skcrf.

``tests/data/wapiti`` holds a tiny model that Wapiti 1.5.0 trained and what
``wapiti label`` (plain, ``-p -s``, ``-s``, ``-n 3``, ``-c``'s statistics)
and ``wapiti dump`` printed for it (``make_models.py`` there made them):
those checks run everywhere. With Wapiti built (``$SKCRF_WAPITI``, or
``wapiti`` on the PATH, as in ``tests/test_wapiti_model.py``) the live
tests train the same patterns and data with both and compare.
"""

import math
import os
import re
import subprocess
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from test_wapiti_model import wapiti_command

from skcrf import CRFTagger, TemplateFeaturizer
from skcrf._cli import main
from skcrf._cli._wapiti import _hex, regularization
from skcrf.io import read_columns

HERE = os.path.dirname(os.path.abspath(__file__))
WAPITI_DATA = os.path.join(HERE, "data", "wapiti")
TINY_MODEL = os.path.join(WAPITI_DATA, "tiny.model")
TINY_TEST = os.path.join(HERE, "data", "crfpp", "tiny_test.data")
N_TRAIN = 40


def run(capsys, *argv):
    """``skcrf ARGV``: (exit status, stdout, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _read(name):
    with open(os.path.join(WAPITI_DATA, name), encoding="utf-8") as f:
        return f.read()


def _np_only(text):
    """The column file's text with every chunk but NP's labelled ``O`` (as make_models.py)."""
    out = []
    for line in text.split("\n"):
        columns = line.split()
        if columns and not columns[-1].endswith("-NP"):
            columns[-1] = "O"
        out.append(" ".join(columns))
    return "\n".join(out)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small training file and a development file (NP chunks), and the patterns."""
    folder = tmp_path_factory.mktemp("wapiti_cli")
    with open(os.path.join(HERE, "data", "crfpp", "train.data"), encoding="utf-8") as f:
        sentences = f.read().split("\n\n")
    train, devel = folder / "train.data", folder / "devel.data"
    train.write_text(_np_only("\n\n".join(sentences[:N_TRAIN])) + "\n\n", encoding="utf-8")
    devel.write_text(
        _np_only("\n\n".join(sentences[N_TRAIN : N_TRAIN + 20])) + "\n\n", encoding="utf-8"
    )
    nobare = folder / "nobare.pat"
    nobare.write_text("u:w=%x[0,0]\nb:p=%x[-1,1]\n", encoding="utf-8")
    return {
        "nobare": str(nobare),
        "folder": folder,
        "train": str(train),
        "devel": str(devel),
        "tiny": os.path.join(WAPITI_DATA, "tiny.pat"),
        "chunking": os.path.join(WAPITI_DATA, "chunking.pat"),
    }


def _columns(path, labelled=True):
    X, y = [], []
    for sequence in read_columns(path, labelled=labelled):
        X.append(sequence.tokens)
        y.append(sequence.labels)
    return X, y


# -- label and dump: wapiti's outputs on the model it trained -----------------------------


@pytest.mark.parametrize(
    "options, expected",
    [
        ([], "tiny.labels"),
        (["-p", "-s"], "tiny.posteriors"),
        (["-n", "3"], "tiny.nbest3"),
    ],
)
def test_label_equals_wapiti_label(capsys, options, expected):
    status, out, err = run(capsys, "wapiti", "label", *options, "-m", TINY_MODEL, TINY_TEST)
    assert status == 0, err
    assert out == _read(expected)


@pytest.mark.parametrize(
    "options, expected", [(["-s"], "tiny.scores"), (["-s", "-n", "3"], "tiny.nbest3_scores")]
)
def test_label_scores_equal_wapiti_label_s(capsys, options, expected):
    # -s without -p: each labelling's unnormalised score and each token's
    # part of it (sums of weights: equal to the printed digits, but for the
    # last one's rounding)
    status, out, err = run(capsys, "wapiti", "label", *options, "-m", TINY_MODEL, TINY_TEST)
    assert status == 0, err
    expected = _read(expected)
    figure = re.compile(r"-?\d+\.\d{6}")
    assert figure.sub("F", out) == figure.sub("F", expected)
    ours = np.array([float(v) for v in figure.findall(out)])
    theirs = np.array([float(v) for v in figure.findall(expected)])
    assert ours.size == theirs.size > 400
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-6)


def test_label_check_and_labels_only(capsys, tmp_path):
    status, out, err = run(capsys, "wapiti", "label", "-c", "-m", TINY_MODEL, TINY_TEST)
    assert status == 0
    assert out == _read("tiny.labels")
    assert err == _read("tiny.check")  # error rates and per-label Pr / Rc / F1
    status, out, _ = run(capsys, "wapiti", "label", "-l", "-m", TINY_MODEL, TINY_TEST)
    assert status == 0
    expected = [line.rsplit("\t", 1)[-1] for line in _read("tiny.labels").split("\n")]
    assert out.split("\n") == expected
    # OUTPUT as the second file name
    output = tmp_path / "labelled.txt"
    status, out, _ = run(capsys, "wapiti", "label", "-m", TINY_MODEL, TINY_TEST, str(output))
    assert status == 0 and out == ""
    assert output.read_text(encoding="utf-8") == _read("tiny.labels")


def test_label_writes_each_line_as_read(capsys, tmp_path):
    # TABs, runs of spaces and trailing space are kept (what wapiti label
    # printed for this file: WAPITI_LINES)
    data = tmp_path / "tabs.data"
    data.write_bytes(b"But\tCC  \nthe  DT\n\n\nnew\tJJ\t \n")
    status, out, err = run(capsys, "wapiti", "label", "-m", TINY_MODEL, str(data))
    assert status == 0, err
    assert out == WAPITI_LINES


WAPITI_LINES = "But\tCC  \tO\nthe  DT\tO\n\nnew\tJJ\t \tO\n\n"


def test_check_statistics_count_as_wapiti(capsys, tmp_path):
    # a label the model does not know is not counted (but its token is); a
    # label never predicted has 0/0 ratios, printed as glibc prints x86's
    # default NaN. WAPITI_CHECK: what wapiti label -c printed for this file.
    data = tmp_path / "d.data"
    data.write_text("But CC UNSEEN\nthe DT B-NP\n\nnew JJ O\n", encoding="utf-8")
    status, out, err = run(capsys, "wapiti", "label", "-c", "-m", TINY_MODEL, str(data))
    assert status == 0
    assert out == "But CC UNSEEN\tO\nthe DT B-NP\tO\n\nnew JJ O\tO\n\n"
    assert err == WAPITI_CHECK


WAPITI_CHECK = """\
* Load model
* Label sequences
    Nb sequences  : 2
    Token error   : 33.33%
    Sequence error: 50.00%
* Per label statistics
    B-NP    Pr=-nan  Rc=0.00  F1=-nan
    I-NP    Pr=-nan  Rc=-nan  F1=-nan
    O       Pr=0.50  Rc=1.00  F1=0.67
* Done
"""


def test_check_statistics_of_no_sequence(capsys, tmp_path):
    # wapiti label -c on an empty file: its 0/0 ratios are x86's default NaN
    empty = tmp_path / "empty.data"
    empty.write_bytes(b"")
    status, out, err = run(capsys, "wapiti", "label", "-c", "-m", TINY_MODEL, str(empty))
    assert status == 0 and out == ""
    assert "    Token error   :  -nan%\n    Sequence error:  -nan%\n" in err
    assert err.count("Pr=-nan  Rc=-nan  F1=-nan\n") == 3


def test_outputs_never_overwrite_what_the_command_reads(capsys, tmp_path):
    # opening the output truncates it: the model or the input would be lost
    model, data = tmp_path / "m.wapiti", tmp_path / "in.data"
    model.write_bytes(open(TINY_MODEL, "rb").read())
    data.write_bytes(open(TINY_TEST, "rb").read())
    before = model.read_bytes(), data.read_bytes()
    link = tmp_path / "link"
    link.symlink_to(data)
    for argv, read in [
        (["label", "-m", str(model), str(data), str(model)], model),
        (["label", "-m", str(model), str(data), str(link)], data),
        (["dump", str(model), str(tmp_path / "." / "m.wapiti")], model),
    ]:
        status, out, err = run(capsys, "wapiti", *argv)
        assert status == 1 and out == "", argv
        assert f"is {read}, which the command reads" in err, err
    assert (model.read_bytes(), data.read_bytes()) == before


def test_dump_holds_wapiti_dumps_blocks(capsys, tmp_path):
    # the same blocks (an observation's nonzero weights), in skcrf's order
    status, out, err = run(capsys, "wapiti", "dump", TINY_MODEL)
    assert status == 0, err
    ours = out.split("\n\n")
    theirs = _read("tiny.dump").split("\n\n")
    assert len(ours) == len(theirs) > 100
    assert sorted(ours) == sorted(theirs)
    status, out, _ = run(capsys, "wapiti", "dump", "-p", "2", TINY_MODEL, str(tmp_path / "d"))
    assert status == 0 and out == ""
    first = (tmp_path / "d").read_text(encoding="utf-8").split("\n")[0]
    assert re.fullmatch(r"[^\t]+\t(#|[^\t]+)\t[^\t]+\t-?\d+\.\d\d", first)


# -- train: Wapiti's objective, through CRFTagger -----------------------------------------


def test_rho_is_crfsuite_regularization():
    # Wapiti: NLL + rho1 ||w||_1 + rho2 / 2 ||w||^2; CRFsuite: NLL + c1 ||w||_1 + c2 ||w||^2
    assert regularization(0.5, 0.0001) == {"c1": 0.5, "c2": 0.00005}
    assert regularization(0.0, 3.0) == {"c1": 0.0, "c2": 1.5}


def _objective(tagger, X, y, rho1, rho2):
    """Wapiti's objective of a fitted tagger: NLL + rho1 ||w||_1 + rho2 / 2 ||w||^2."""
    nll = -float(np.sum(tagger.sequence_log_proba(X, y)))
    weights = np.array(
        [
            *tagger.state_features_.values(),
            *tagger.transition_features_.values(),
            *tagger.conditioned_transition_features_.values(),
        ]
    )
    return nll + rho1 * np.abs(weights).sum() + rho2 / 2 * (weights**2).sum()


@pytest.mark.parametrize("rho1, rho2", [(0.0, 1.0), (0.5, 0.0001)])
def test_train_minimises_wapitis_objective(capsys, files, tmp_path, rho1, rho2):
    model = str(tmp_path / "m.skcrf")
    status, out, err = run(
        capsys, "wapiti", "train", "-p", files["chunking"], "-1", str(rho1), "-2", str(rho2),
        "-e", "0", "-i", "300", files["train"], model,
    )  # fmt: skip
    assert status == 0, err
    assert out == ""  # the log goes to the standard error, as wapiti's
    logged = float(re.findall(r" obj=(\S+) ", err)[-1])
    tagger = CRFTagger.load(model)
    assert isinstance(tagger.featurizer, TemplateFeaturizer)
    X, y = _columns(files["train"])
    assert _objective(tagger, X, y, rho1, rho2) == pytest.approx(logged, abs=0.006)
    # the CLI is CRFTagger with the mapped parameters
    direct = CRFTagger(
        featurizer=TemplateFeaturizer(_read("chunking.pat"), syntax="wapiti"),
        c1=rho1,
        c2=rho2 / 2,
        max_iterations=300,
        epsilon=1e-5,
        period=4,
        delta=0.0,
        num_memories=5,
        max_linesearch=40,
        all_possible_states=True,
        all_possible_transitions=True,
        all_possible_conditioned_transitions=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        direct.fit(X, y)
    # (the saved model keeps the nonzero weights only)
    for name in ("state_features_", "transition_features_", "conditioned_transition_features_"):
        ours = {k: v for k, v in getattr(tagger, name).items() if v != 0}
        theirs = {k: v for k, v in getattr(direct, name).items() if v != 0}
        assert ours.keys() == theirs.keys() and len(ours) > 0
        np.testing.assert_allclose([ours[k] for k in theirs], list(theirs.values()), atol=1e-12)
    # and labels with what it trained
    status, out, err = run(capsys, "wapiti", "label", "-m", model, files["devel"])
    assert status == 0, err
    Xd, _ = _columns(files["devel"], labelled=False)
    expected = [label for path in direct.predict(Xd) for label in path]
    assert [line.rsplit("\t", 1)[1] for line in out.split("\n") if line] == expected


def test_train_options_devel_and_notes(capsys, files, tmp_path):
    model = str(tmp_path / "m.skcrf")
    status, _, err = run(
        capsys, "wapiti", "train", "-p", files["tiny"], "-a", "sgd-l1", "-t", "2", "-i", "5",
        "-d", files["devel"], files["train"], model,
    )  # fmt: skip
    assert status == 0, err
    assert "sgd-l1's objective is minimised by L-BFGS" in err
    assert "-w 5 (the error-rate window) is not applied" in err
    assert "nb devel:    20" in err
    match = re.search(r"devel error: +([\d.]+)%/ *([\d.]+)%", err)
    tagger = CRFTagger.load(model)
    assert tagger.n_iter_ == 5
    Xd, yd = _columns(files["devel"])
    paths = tagger.predict(Xd)
    wrong = sum(p != r for path, ref in zip(paths, yd) for p, r in zip(path, ref))
    assert float(match.group(1)) == pytest.approx(100 * wrong / sum(map(len, yd)), abs=0.006)
    status, _, err = run(capsys, "wapiti", "train", "-p", files["tiny"], "-w", "0", "-i", "1",
                         files["train"], model)  # fmt: skip
    assert status == 0 and "not applied" not in err
    assert "no bare b or * pattern" not in err  # tiny.pat has them
    status, _, err = run(capsys, "wapiti", "train", "-p", files["nobare"], "-i", "1",
                         files["train"], model)  # fmt: skip
    assert status == 0 and "no bare b or * pattern: skcrf learns label pairs" in err


def _same_figures(ours, theirs):
    """Equal text, and figures equal but for the last printed digit's rounding."""
    figure = re.compile(r"-?\d+\.\d{6}")
    assert figure.sub("F", ours) == figure.sub("F", theirs)
    a = np.array([float(v) for v in figure.findall(ours)])
    b = np.array([float(v) for v in figure.findall(theirs)])
    np.testing.assert_allclose(a, b, rtol=0, atol=2e-6)


def test_c_hex_floats():
    assert [_hex(v) for v in (3.0, 1.0, -0.125, 0.1)] == [
        "0x1.8p+1",
        "0x1p+0",
        "-0x1p-3",
        "0x1.999999999999ap-4",
    ]
    assert float.fromhex(_hex(-1.2345e-300)) == -1.2345e-300


@pytest.mark.parametrize("patterns", ["tiny", "chunking"])
def test_train_writes_wapiti_models(capsys, files, tmp_path, patterns):
    # -W: the same model in Wapiti's format; from_wapiti reads it back and
    # labels (and scores) as the skcrf model file does
    ours, wapiti_format = str(tmp_path / "m.skcrf"), str(tmp_path / "m.wapiti")
    mask = os.umask(0o027)
    try:
        for options, model in (([], ours), (["-W"], wapiti_format)):
            status, _, err = run(capsys, "wapiti", "train", *options, "-i", "30", "-p",
                                 files[patterns], files["train"], model)  # fmt: skip
            assert status == 0, err
            # a new file's permissions (not a temp file's 0o600)
            assert os.stat(model).st_mode & 0o777 == 0o640
    finally:
        os.umask(mask)
    with open(wapiti_format, "rb") as f:
        assert f.read(7) == b"#mdl#2#"  # a crf model
    outputs = []
    for model in (ours, wapiti_format):
        status, out, err = run(capsys, "wapiti", "label", "-s", "-n", "2", "-m", model,
                               files["devel"])  # fmt: skip
        assert status == 0, err
        outputs.append(out)
    _same_figures(outputs[1], outputs[0])
    assert CRFTagger.from_wapiti(wapiti_format).classes_.tolist() == ["B-NP", "I-NP", "O"]


def test_train_and_label_errors(capsys, files, tmp_path):
    model = tmp_path / "m"
    bad = tmp_path / "bad.data"
    bad.write_text("a B-NP x\nb O\n", encoding="utf-8")
    train = files["train"]
    for argv, message in [
        (["train", train, str(model)], "give the patterns with -p"),
        (["train", "-p", files["tiny"], train], "give the MODEL file"),
        (["train", "-p", files["tiny"], "-T", "maxent", train, str(model)], "crf) only"),
        (["train", "-p", files["tiny"], "-a", "bcd", train, str(model)], "bcd and rprop"),
        (["train", "-p", files["tiny"], "-2", "nan", train, str(model)], "-2 (rho2) must be"),
        (["train", "-p", files["tiny"], "-o", "1", train, str(model)], "a window of at least"),
        (["train", "-p", files["tiny"], str(bad), str(model)], "bad.data"),
        (["label", TINY_TEST], "give the model with -m"),
        (["label", "-m", TINY_MODEL, "-n", "0", TINY_TEST], "-n takes a count"),
        (["label", "-m", TINY_MODEL, "-p", "-n", "2", TINY_TEST], "give -n 1"),
        (["label", "-m", files["tiny"], TINY_TEST], "not a model file"),
        (["dump"], "give MODEL [OUTPUT]"),
        (["train", "-W", "-p", files["nobare"], train, str(model)], "needs a bare b"),
        (["update"], "update is not available"),
    ]:
        status, _, err = run(capsys, "wapiti", *argv)
        assert status == 1 and message in err, (argv, err)
    assert not model.exists()
    # the patterns read a column the file does not have
    narrow = tmp_path / "narrow.data"
    narrow.write_text("a B-NP\n", encoding="utf-8")
    status, _, err = run(capsys, "wapiti", "train", "-p", files["tiny"], str(narrow), str(model))
    assert status == 1 and "narrow.data" in err and "reads a column" in err
    assert not model.exists()


def test_label_reads_standard_input(capsys, monkeypatch):
    import io
    import sys

    with open(TINY_TEST, "rb") as f:
        data = f.read()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    status, out, err = run(capsys, "wapiti", "label", "-m", TINY_MODEL)
    assert status == 0, err
    assert out == _read("tiny.labels")


def test_usage(capsys):
    for argv, start in [
        (["wapiti", "-h"], "usage: skcrf wapiti train"),
        (["wapiti", "train", "-h"], "usage: skcrf wapiti train"),
        (["wapiti", "label", "-h"], "usage: skcrf wapiti label"),
        (["wapiti", "dump", "-h"], "usage: skcrf wapiti dump"),
    ]:
        status, out, _ = run(capsys, *argv)
        assert status == 0 and out.startswith(start), argv
    status, _, err = run(capsys, "wapiti")
    assert status == 1 and err.startswith("usage: skcrf wapiti")
    assert "wapiti" in run(capsys, "-h")[1]


# -- live, with Wapiti ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def wapiti():
    exe = wapiti_command()
    if exe is None:
        pytest.skip("Wapiti is absent: set SKCRF_WAPITI to a built Wapiti 1.5.0 source tree")
    return exe


def _wapiti(wapiti, *argv):
    return subprocess.run([wapiti, *argv], check=True, capture_output=True, text=True)


def test_live_train_reaches_wapitis_objective(capsys, wapiti, files, tmp_path):
    # the same patterns and data, L2 (-1 0 -2 1) to convergence: the same
    # number of features and objective (wapiti prints 2 decimals), the same labels
    theirs = str(tmp_path / "wapiti.model")
    done = _wapiti(
        wapiti, "train", "-t", "1", "-1", "0", "-2", "1", "-e", "0", "-w", "0", "-i", "1000",
        "-p", files["chunking"], files["train"], theirs,
    )  # fmt: skip
    wapiti_objective = float(re.findall(r" obj=(\S+) ", done.stderr)[-1])
    wapiti_features = int(re.search(r"nb features: (\d+)", done.stderr).group(1))
    ours = str(tmp_path / "ours.skcrf")
    status, _, err = run(
        capsys, "wapiti", "train", "-1", "0", "-2", "1", "-e", "0", "-i", "1000",
        "-p", files["chunking"], files["train"], ours,
    )  # fmt: skip
    assert status == 0, err
    assert int(re.search(r"nb features: (\d+)", err).group(1)) == wapiti_features
    assert float(re.findall(r" obj=(\S+) ", err)[-1]) == pytest.approx(wapiti_objective, abs=0.011)
    expected = _wapiti(wapiti, "label", "-m", theirs, files["devel"]).stdout
    status, out, err = run(capsys, "wapiti", "label", "-m", ours, files["devel"])
    assert status == 0, err
    assert out == expected


@pytest.mark.parametrize("options", [[], ["-s"], ["-p", "-s"], ["-n", "4"], ["-c"], ["-l"]])
def test_live_label_equals_wapiti_label(capsys, wapiti, files, tmp_path, options):
    model = tmp_path / "wapiti.model"
    if not model.exists():
        _wapiti(wapiti, "train", "-t", "1", "-i", "40", "-p", files["tiny"], files["train"],
                str(model))  # fmt: skip
    done = _wapiti(wapiti, "label", *options, "-m", str(model), files["devel"])
    status, out, err = run(capsys, "wapiti", "label", *options, "-m", str(model), files["devel"])
    assert status == 0, err
    if "-s" in options and "-p" not in options:
        figure = re.compile(r"-?\d+\.\d{6}")
        assert figure.sub("F", out) == figure.sub("F", done.stdout)
        ours = [float(v) for v in figure.findall(out)]
        theirs = [float(v) for v in figure.findall(done.stdout)]
        assert all(math.isclose(a, b, abs_tol=2e-6) for a, b in zip(ours, theirs))
    elif "-n" in options:
        # labellings of equal score may come in another order (Wapiti's
        # n-best Viterbi breaks ties its own way): equal up to that
        scored = _wapiti(wapiti, "label", "-s", *options, "-m", str(model), files["devel"])
        _same_nbest(out, done.stdout, scored.stdout, int(options[1]))
    else:
        assert out == done.stdout
    if "-c" in options:
        assert err == done.stderr


def _same_nbest(ours, theirs, scored, n):
    """The same labellings, in the same order but among labellings of equal score."""
    scores = [float(line.split()[2]) for line in scored.split("\n") if line.startswith("# ")]
    ours_blocks, their_blocks = ours.split("\n\n")[:-1], theirs.split("\n\n")[:-1]
    assert len(ours_blocks) == len(their_blocks) == len(scores)
    ties = 0
    for k, (a, b) in enumerate(zip(ours_blocks, their_blocks)):
        if a != b:
            first = k - k % n  # the sequence's labellings
            tied = [j for j in range(first, first + n) if scores[j] == scores[k]]
            assert len(tied) > 1 and a in [their_blocks[j] for j in tied], k
            ties += 1
    assert ties < len(scores) // 10


def test_live_wapiti_labels_the_models_train_W_writes(capsys, wapiti, files, tmp_path):
    # wapiti label reads the model skcrf wrote with -W and labels (and
    # scores) as skcrf wapiti label does with the skcrf model file
    ours, wapiti_format = str(tmp_path / "m.skcrf"), str(tmp_path / "m.wapiti")
    for options, model in (([], ours), (["-W"], wapiti_format)):
        status, _, err = run(capsys, "wapiti", "train", *options, "-i", "30", "-p",
                             files["chunking"], files["train"], model)  # fmt: skip
        assert status == 0, err
    for options in ([], ["-s", "-n", "2"], ["-p", "-s"]):
        theirs = _wapiti(wapiti, "label", *options, "-m", wapiti_format, files["devel"]).stdout
        status, out, err = run(capsys, "wapiti", "label", *options, "-m", ours, files["devel"])
        assert status == 0, err
        _same_figures(out, theirs)
