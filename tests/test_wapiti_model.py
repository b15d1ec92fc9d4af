"""Wapiti 1.5 models opened in skcrf, against ``wapiti label``.

``tests/data/wapiti`` holds a tiny model that Wapiti 1.5.0 trained (every
kind of pattern) and what ``wapiti label`` printed for it, Viterbi labels
and ``-p -s`` posteriors (``make_models.py`` there made them): those checks
run everywhere. With Wapiti built (``$SKCRF_WAPITI``: its source tree, as
for ``tests/test_template_syntaxes.py``, or ``wapiti`` on the PATH) the
same checks run live on models trained here, CRFsuite's chunking template
as Wapiti patterns on a CoNLL-2000-style file among them. Every token's
label must be Wapiti's, and every probability it prints equal to 1e-6.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_crfpp_model import read_columns

from skcrf import CRFTagger, TemplateFeaturizer
from skcrf._persist._wapiti_model import read_wapiti_model

DATA = Path(__file__).parent / "data" / "wapiti"
CRFPP_DATA = Path(__file__).parent / "data" / "crfpp"
TINY_TEST = CRFPP_DATA / "tiny_test.data"
TOLERANCE = 1e-6


def _blocks(output, sequences):
    blocks = [block.split("\n") for block in output.split("\n\n") if block.strip()]
    assert len(blocks) == len(sequences)
    return blocks


def assert_labels_as_wapiti(tagger, sequences, output):
    """``wapiti label``'s Viterbi labels (the last column): every one equal; tokens compared."""
    predicted = tagger.predict(sequences)
    n_tokens = 0
    for k, (block, sequence) in enumerate(zip(_blocks(output, sequences), sequences)):
        assert [line.split("\t")[-1] for line in block] == predicted[k], f"sequence {k}"
        assert [tuple(line.split("\t")[0].split()) for line in block] == sequence
        n_tokens += len(sequence)
    return n_tokens


def assert_posteriors_as_wapiti(tagger, sequences, output):
    """``wapiti label -p -s``: labels, marginals and scores to 1e-6; (tokens, largest difference)."""
    tagger = CRFTagger._from_fitted_state(tagger._get_fitted_state())
    tagger.set_params(decoding="posterior")
    predicted = tagger.predict(sequences)
    marginals = tagger.predict_marginals(sequences)
    n_tokens, largest = 0, 0.0
    for k, block in enumerate(_blocks(output, sequences)):
        assert block[0].startswith("# 0 ")
        # -p decodes each token's largest marginal; the score is their product
        score = np.prod([max(token.values()) for token in marginals[k]])
        largest = max(largest, abs(score - float(block[0].split()[2])))
        for line, label, ours in zip(block[1:], predicted[k], marginals[k], strict=True):
            theirs, probability = line.split("\t")[-1].rsplit("/", 1)
            assert theirs == label, f"sequence {k}"
            largest = max(largest, abs(ours[label] - float(probability)))
        n_tokens += len(predicted[k])
    assert largest <= TOLERANCE
    return n_tokens, largest


# ------------------------------------------------------------ the fixtures


def test_tiny_model_labels_as_wapiti():
    tagger = CRFTagger._from_fitted_state(read_wapiti_model(DATA / "tiny.model"))
    sequences = read_columns(TINY_TEST)
    output = (DATA / "tiny.labels").read_text(encoding="utf-8")
    assert assert_labels_as_wapiti(tagger, sequences, output) > 400


def test_tiny_model_posteriors_as_wapiti_p():
    tagger = CRFTagger._from_fitted_state(read_wapiti_model(DATA / "tiny.model"))
    sequences = read_columns(TINY_TEST)
    output = (DATA / "tiny.posteriors").read_text(encoding="utf-8")
    n_tokens, _ = assert_posteriors_as_wapiti(tagger, sequences, output)
    assert n_tokens == sum(map(len, sequences))


def _sections(path):
    """The tiny model's patterns, labels, observations and weights, as written."""
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    n_patterns = int(lines[1].split("#")[2].split("/")[0])
    patterns = [line.split(":", 1)[1][:-1] for line in lines[2 : 2 + n_patterns]]
    at = 2 + n_patterns
    n_labels = int(lines[at].split("#")[2])
    labels = [line.split(":", 1)[1][:-1] for line in lines[at + 1 : at + 1 + n_labels]]
    at += 1 + n_labels
    n_obs = int(lines[at].split("#")[2])
    observations = [line.split(":", 1)[1][:-1] for line in lines[at + 1 : at + 1 + n_obs]]
    weights = {}
    for line in lines[at + 1 + n_obs :]:
        if line:
            index, value = line.split("=")
            weights[int(index)] = float.fromhex(value)
    return patterns, labels, observations, weights


def test_model_holds_every_observation_and_the_patterns():
    state = read_wapiti_model(DATA / "tiny.model")
    model = state.model
    patterns, labels, observations, weights = _sections(DATA / "tiny.model")
    assert list(model.classes) == labels == ["B-NP", "I-NP", "O"]
    assert model.attributes == [o for o in observations if o[0] in "u*"]
    assert model.conditioned.attributes == [o for o in observations if o[0] in "b*"]
    # the plain transitions: the observations '*' and 'b' (their weights in
    # observation order, a '*' one's L*L after its L)
    n_labels, flat = (
        3,
        np.zeros(sum(3 if o[0] == "u" else 9 if o[0] == "b" else 12 for o in observations)),
    )
    for index, value in weights.items():
        flat[index] = value
    sizes = [3 if o[0] == "u" else 9 if o[0] == "b" else 12 for o in observations]
    offsets = np.cumsum(sizes) - sizes
    star, bee = observations.index("*"), observations.index("b")
    expected = (
        flat[offsets[star] + n_labels : offsets[star] + 12] + flat[offsets[bee] : offsets[bee] + 9]
    )
    np.testing.assert_array_equal(model.transition_matrix().ravel(), expected)
    featurizer = CRFTagger._from_fitted_state(state).featurizer
    assert isinstance(featurizer, TemplateFeaturizer)
    assert [f.source for f in featurizer.plan().features] == [p for p in patterns if p not in "b"]


def test_saved_model_keeps_the_patterns(tmp_path):
    tagger = CRFTagger._from_fitted_state(read_wapiti_model(DATA / "tiny.model"))
    sequences = read_columns(TINY_TEST)
    tagger.save(tmp_path / "tiny.skcrf")
    loaded = CRFTagger.load(tmp_path / "tiny.skcrf")
    assert loaded.predict(sequences) == tagger.predict(sequences)


def test_from_wapiti_classmethod():
    tagger = CRFTagger.from_wapiti(DATA / "tiny.model")
    output = (DATA / "tiny.labels").read_text(encoding="utf-8")
    assert_labels_as_wapiti(tagger, read_columns(TINY_TEST), output)


# ---------------------------------------------------------------- errors

GOOD = b"#mdl#2#1\n#rdr#2/1/0\n11:u:w=%x[0,0],\n1:b,\n#qrk#1\n1:O,\n#qrk#2\n5:u:w=a,\n1:b,\n0=0x1p+0\n"


@pytest.mark.parametrize(
    "old, new, message",
    [
        (b"", b"", "not a Wapiti model (it does not start with '#mdl#')"),
        (b"#mdl#2#", b"#mdl#1#", "line 1: a MEMM model (type 1)"),
        (b"#mdl#2#", b"#mdl#7#", "line 1: unknown model type 7"),
        (b"#rdr#2/1/0", b"#rdr#2/1/1", "line 2: a model trained with --me"),
        (b"#rdr#2/1/0\n11:u:w=%x[0,0],\n1:b,\n", b"#rdr#0/1/0\n", "without patterns"),
        (
            b"11:u:w=%x[0,0],",
            b"12:u:w=%x[0,0],",
            "line 3: pattern 0: its 12 bytes are not followed",
        ),
        (b"11:u:w=%x[0,0],", b"11:u:w=%y[0,0],", "unknown command"),
        (b"11:u:w=%x[0,0],", b"11:x:w=%x[0,0],", "starts with neither 'u', 'b' nor '*'"),
        (b"#qrk#1\n1:O,", b"#qrk#2\n1:O,\n1:O,", "a label appears twice"),
        (b"5:u:w=a,", b"5:q:w=a,", "line 8: the observation 'q:w=a' starts with neither"),
        (b"0=0x1p+0\n", b"2=0x1p+0\n", "line 10: weight 2 is beyond the model's 2 weights"),
        (b"0=0x1p+0\n", b"0=0x1p+2000\n", "line 10: weight 0 is '0x1p+2000', not a finite number"),
        (b"0=0x1p+0\n", b"0=nan\n", "line 10: b'0=nan' is not a weight 'F=VALUE'"),
        (b"#mdl#2#1", b"#mdl#2#2", "line 11: the file ends where a weight"),
        (b"0=0x1p+0\n", b"0=0x1p+0\n0=1\n", "line 11: 4 unexpected bytes after the 1 weights"),
        (b"#qrk#2\n", b"#qrk#99999\n", "99999 observations cannot fit"),
        (b"5:u:w=a,", b"5:u:w=\xff,", "observation 0 is not UTF-8"),
    ],
)
def test_bad_content_is_a_clear_error(old, new, message):
    content = GOOD.replace(old, new, 1) if old else b""
    assert content != GOOD
    with pytest.raises(ValueError, match=r"Cannot read Wapiti model \(bytes\): .*") as info:
        read_wapiti_model(content)
    assert message in str(info.value)


def test_good_content_reads():
    model = read_wapiti_model(GOOD).model
    assert model.attributes == ["u:w=a"] and model.conditioned is None
    np.testing.assert_array_equal(model.state_weights, [1.0])
    np.testing.assert_array_equal(model.transition_matrix(), [[0.0]])


def test_paths_that_are_not_regular_files(tmp_path):
    with pytest.raises(ValueError, match="a directory, not a regular file"):
        read_wapiti_model(tmp_path)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(ValueError, match="a FIFO"):
            read_wapiti_model(fifo)
    with pytest.raises(FileNotFoundError):
        read_wapiti_model(tmp_path / "missing.model")


# ------------------------------------------------------ live, with Wapiti


def wapiti_command():
    """The ``wapiti`` executable (``$SKCRF_WAPITI/wapiti``, or on the PATH), or None."""
    root = os.environ.get("SKCRF_WAPITI")
    if root and os.access(os.path.join(root, "wapiti"), os.X_OK):
        return os.path.join(root, "wapiti")
    return shutil.which("wapiti")


@pytest.fixture(scope="module")
def wapiti():
    exe = wapiti_command()
    if exe is None:
        pytest.skip("Wapiti is absent: set SKCRF_WAPITI to a built Wapiti 1.5.0 source tree")
    return exe


def _label(wapiti, model, data, *options):
    command = [wapiti, "label", *options, "-m", str(model), str(data)]
    return subprocess.run(command, check=True, capture_output=True).stdout.decode("utf-8")


def _train(wapiti, folder, patterns, train, *options):
    (folder / "patterns").write_text(patterns, encoding="utf-8")
    model = folder / "model"
    subprocess.run(
        [
            wapiti,
            "train",
            "-t",
            "1",
            *options,
            "-p",
            str(folder / "patterns"),
            str(train),
            str(model),
        ],
        check=True,
        capture_output=True,
    )
    return model


def test_live_chunking_model_labels_as_wapiti(wapiti, tmp_path):
    patterns = (DATA / "chunking.pat").read_text(encoding="utf-8")
    model = _train(wapiti, tmp_path, patterns, CRFPP_DATA / "train.data")
    test = CRFPP_DATA / "test.data"
    sequences = read_columns(test)
    tagger = CRFTagger._from_fitted_state(read_wapiti_model(model))
    assert len(tagger.classes_) > 20
    assert assert_labels_as_wapiti(tagger, sequences, _label(wapiti, model, test)) > 1000
    assert_posteriors_as_wapiti(tagger, sequences, _label(wapiti, model, test, "-p", "-s"))


LIVE_FORMS = {
    "maxent": ("u:w=%x[0,0]\n*:p=%x[0,1]\nb\n", ("-T", "maxent")),
    "sgd-l1, compact": ('u:w=%x[0,0]\nu:s=%m[0,0,"..$"]\nb:p=%x[0,1]\n', ("-a", "sgd-l1", "-c")),
    "no plain transitions": ("u:w=%x[0,0]\nb:w=%X[-1,0]\n", ()),
    "constant star, repeated": ("*\n*\nu:w=%x[0,0]\nu:w=%x[0,0]\n", ()),
}


@pytest.mark.parametrize("form", list(LIVE_FORMS))
def test_live_pattern_forms_label_as_wapiti(wapiti, tmp_path, form):
    patterns, options = LIVE_FORMS[form]
    sentences = (CRFPP_DATA / "train.data").read_text(encoding="utf-8").split("\n\n")[:60]
    train = tmp_path / "train.data"
    train.write_text("\n\n".join(sentences) + "\n\n", encoding="utf-8")
    model = _train(wapiti, tmp_path, patterns, train, *options)
    sequences = read_columns(TINY_TEST)
    tagger = CRFTagger._from_fitted_state(read_wapiti_model(model))
    assert_labels_as_wapiti(tagger, sequences, _label(wapiti, model, TINY_TEST))
    assert_posteriors_as_wapiti(tagger, sequences, _label(wapiti, model, TINY_TEST, "-p", "-s"))
