"""CRF++ models (binary and ``crf_learn -t`` text) opened in skcrf, against ``crf_test``.

``tests/data/crfpp`` holds a tiny model that CRF++ 0.58's ``crf_learn`` (the
``crfpy`` wheel) trained, in both formats, and what ``crf_test -v2`` printed
for it (``make_models.py`` there made them): those checks run everywhere.
With ``crf_learn`` and ``crf_test`` at hand (on the PATH, beside the Python
running the tests, or the ``crfpy`` module) the same checks run live on
models trained here, CRFsuite's chunking template on a CoNLL-2000-style
file among them; ``SKCRF_REQUIRE_CRFPP=1`` (CI) makes their absence a
failure. Every token's tag must be ``crf_test``'s, and every probability it
prints (the sequence's, each label's marginal) equal to 1e-6.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skcrf import CRFTagger, TemplateFeaturizer
from skcrf._persist._crfpp_model import read_crfpp_model

DATA = Path(__file__).parent / "data" / "crfpp"
TOLERANCE = 1e-6


def read_columns(path):
    """A column file's sequences: tuples of its whitespace-separated columns."""
    sequences, current = [], []
    for line in Path(path).read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            if current:
                sequences.append(current)
            current = []
        else:
            current.append(tuple(line.split()))
    if current:
        sequences.append(current)
    return sequences


def parse_v2(text, sequences):
    """``crf_test -v2``'s output: per sequence (probability, tags, marginals)."""
    blocks = [block for block in text.split("\n\n") if block.strip()]
    assert len(blocks) == len(sequences)
    out = []
    for block, sequence in zip(blocks, sequences):
        lines = block.split("\n")
        assert lines[0].startswith("# ")
        tags, marginals = [], []
        for token, line in zip(sequence, lines[1:], strict=True):
            fields = line.split("\t")
            assert tuple(fields[: len(token)]) == token
            tags.append(fields[len(token)].rsplit("/", 1)[0])
            marginals.append(
                {
                    label: float(p)
                    for label, p in (f.rsplit("/", 1) for f in fields[len(token) + 1 :])
                }
            )
        out.append((float(lines[0][2:]), tags, marginals))
    return out


def assert_tags_as_crf_test(tagger, sequences, output):
    """Every tag equal, every probability to 1e-6; (tokens compared, largest difference)."""
    expected = parse_v2(output, sequences)
    predicted = tagger.predict(sequences)
    marginals = tagger.predict_marginals(sequences)
    log_proba = tagger.sequence_log_proba(sequences, predicted)
    n_tokens, largest = 0, 0.0
    for k, (probability, tags, their_marginals) in enumerate(expected):
        assert predicted[k] == tags, f"sequence {k}"
        largest = max(largest, abs(np.exp(log_proba[k]) - probability))
        for ours, theirs in zip(marginals[k], their_marginals, strict=True):
            assert set(ours) == set(theirs)
            largest = max(largest, max(abs(ours[label] - p) for label, p in theirs.items()))
        n_tokens += len(tags)
    assert largest <= TOLERANCE
    return n_tokens, largest


def assert_nbest_as_crf_test(tagger, sequences, output, n):
    """``crf_test -n N -v1``: the N best labellings, their probabilities and marginals.

    Labellings of equal probability (ties) may come in another order (CRF++
    pops them from a heap): one at rank k must be ours at a rank of the same
    probability. Returns the labellings compared.
    """
    blocks = [block.split("\n") for block in output.split("\n\n") if block.strip()]
    ours = tagger.predict_nbest(sequences, n + 2)  # (+2: a tie's partners past n)
    marginals = tagger.predict_marginals(sequences)
    at, n_paths = 0, 0
    for k in range(len(sequences)):
        n_here = min(n, len(ours[k]))
        for rank in range(n_here):
            head, *lines = blocks[at]
            at += 1
            assert head.startswith(f"# {rank} ")
            probability = float(head.split()[2])
            tags, token_probabilities = zip(
                *(line.split("\t")[-1].rsplit("/", 1) for line in lines)
            )
            log_p = ours[k][rank][1]
            assert abs(np.exp(log_p) - probability) <= TOLERANCE
            tied = [path for path, lp in ours[k] if abs(lp - log_p) <= 1e-9 * max(1.0, abs(log_p))]
            assert list(tags) in tied, f"sequence {k}, rank {rank}"
            for token, tag, p in zip(marginals[k], tags, token_probabilities, strict=True):
                assert abs(token[tag] - float(p)) <= TOLERANCE
            n_paths += 1
    assert at == len(blocks)
    return n_paths


# ------------------------------------------------------------ the fixtures


@pytest.mark.parametrize("name", ["tiny.model", "tiny.model.txt"])
def test_tiny_model_tags_as_crf_test(name):
    tagger = CRFTagger._from_fitted_state(read_crfpp_model(DATA / name))
    sequences = read_columns(DATA / "tiny_test.data")
    output = (DATA / "tiny.v2").read_text(encoding="utf-8")
    n_tokens, _ = assert_tags_as_crf_test(tagger, sequences, output)
    assert n_tokens == sum(map(len, sequences)) > 400


def test_tiny_model_nbest_as_crf_test():
    tagger = CRFTagger._from_fitted_state(read_crfpp_model(DATA / "tiny.model"))
    sequences = read_columns(DATA / "tiny_test.data")
    output = (DATA / "tiny.n3").read_text(encoding="utf-8")
    assert assert_nbest_as_crf_test(tagger, sequences, output, 3) == 3 * len(sequences)


def test_binary_and_text_give_the_same_model():
    binary = read_crfpp_model(DATA / "tiny.model").model
    text = read_crfpp_model((DATA / "tiny.model.txt").read_bytes()).model
    assert list(binary.classes) == list(text.classes) == ["B-NP", "I-NP", "O"]
    assert binary.attributes == text.attributes
    assert binary.conditioned.attributes == text.conditioned.attributes
    for a, b in [(binary, text), (binary.conditioned, text.conditioned)]:
        for name in ("state_weights", "transition_weights", "weights", "pairs", "ptr"):
            if hasattr(a, name):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_model_holds_every_string_and_its_template():
    state = read_crfpp_model(DATA / "tiny.model")
    model = state.model
    lines = [line.split(" ", 1) for line in _text_section(DATA / "tiny.model.txt", 3)]
    unigrams = {key for _, key in lines if key.startswith("U")}
    bigrams = {key for _, key in lines if key.startswith("B")}
    assert set(model.attributes) == unigrams and set(model.conditioned.attributes) == bigrams
    n_labels = 3
    assert model.n_states == n_labels * len(unigrams)
    assert model.n_conditioned == n_labels**2 * len(bigrams)
    # the plain transitions: the weights of the string "B", label i then label j
    weights = np.array(_text_section(DATA / "tiny.model.txt", 4), dtype=np.float64)
    first = next(int(i) for i, key in lines if key == "B")
    expected = weights[first : first + 9].astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(model.transition_matrix().ravel(), expected)
    tagger = CRFTagger._from_fitted_state(state)
    featurizer = tagger.featurizer
    assert isinstance(featurizer, TemplateFeaturizer)
    sources = [feature.source for feature in featurizer.plan().features]
    assert sources == [
        "U00:%x[0,0]",
        "U01:%x[-1,1]/%x[0,1]",
        "U02:%x[1,1]",
        "Ubias",
        "B01:%x[0,1]",
    ]
    assert featurizer.plan().transitions


def _text_section(path, index):
    return Path(path).read_text(encoding="utf-8").rstrip("\n").split("\n\n")[index].split("\n")


def test_saved_model_keeps_the_template(tmp_path):
    tagger = CRFTagger._from_fitted_state(read_crfpp_model(DATA / "tiny.model"))
    sequences = read_columns(DATA / "tiny_test.data")
    tagger.save(tmp_path / "tiny.skcrf")
    loaded = CRFTagger.load(tmp_path / "tiny.skcrf")
    assert loaded.predict(sequences) == tagger.predict(sequences)
    np.testing.assert_allclose(
        loaded.sequence_log_proba(sequences), tagger.sequence_log_proba(sequences), rtol=1e-12
    )


def test_cost_factor_multiplies_every_weight():
    base = read_crfpp_model(DATA / "tiny.model").model
    scaled = read_crfpp_model(DATA / "tiny.model", cost_factor=2.5).model
    np.testing.assert_array_equal(scaled.weights, 2.5 * base.weights)
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="cost_factor must be a positive number"):
            read_crfpp_model(DATA / "tiny.model", cost_factor=bad)


def test_from_crfpp_classmethod():
    tagger = CRFTagger.from_crfpp(DATA / "tiny.model")
    sequences = read_columns(DATA / "tiny_test.data")
    assert_tags_as_crf_test(tagger, sequences, (DATA / "tiny.v2").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "fewer than the 32-byte header"),
        (b"\x00" * 40, "model version 0"),
        (b"version: 100\n", "truncated: 1 of the 5 sections"),
        (b"version: 100\ncost-factor: 1\nmaxid: 1\nxsize: 1\n\nO\n\nU:%x[0,0]\n\n", "sections"),
        (
            b"version: 100\ncost-factor: 1\nmaxid: 1\nxsize: 1\n\nO\n\nU:%x[0,0]\n\n0 U:a\n\nx\n",
            "line 12: b'x' is not a finite number",
        ),
        (
            b"version: 100\ncost-factor: 1\nmaxid: 1\nxsize: 1\n\nO\n\nU:%x[0,0]\n\n0 U:a\n\nnan\n",
            "line 12: b'nan' is not a finite number",
        ),
        (
            b"version: 100\ncost-factor: 1\nmaxid: 2\nxsize: 1\n\nO\n\nU:%x[0,0]\n\n1 U:a\n\n0\n",
            "1 weights after the feature strings; maxid is 2",
        ),
        (
            b"version: 100\ncost-factor: 1\nmaxid: 1\nxsize: 1\n\nO\n\nU:%x[0,1]\n\n0 U:a\n\n0\n",
            "reads column 1; the model's xsize is 1",
        ),
        (
            b"version: 100\ncost-factor: 1\nmaxid: 1\nxsize: 2\n\nO\n\nU:%x[0,0]\n\n0 U:a\n\n0\n",
            "xsize is 2, but the template reads columns up to 0 (crf_learn writes 1)",
        ),
        (
            b"version: 100\ncost-factor: 1\nmaxid: 1\nxsize: 1\n\nO\n\nX:%x[0,0]\n\n0 U:a\n\n0\n",
            "starts with neither U nor B",
        ),
        (
            b"version: 100\ncost-factor: 1\nmaxid: 1\nxsize: 1\n\nO\n\nU:%x[0,0]\n\n1 U:a\n\n0\n",
            "has weights beyond the 1 of the model",
        ),
        (
            b"version: 100\nmaxid: 1\nxsize: 1\n\nO\n\nU:%x[0,0]\n\n0 U:a\n\n0\n",
            "the header has no cost-factor",
        ),
        (
            b"version: 100\ncost-factor: 1\nmaxid: 1\nxsize: 1\n\n\xff\n\nU:%x[0,0]\n\n0 U:a\n\n0\n",
            "line 6, a label, is not UTF-8",
        ),
    ],
)
def test_bad_content_is_a_clear_error(content, message):
    with pytest.raises(
        ValueError, match=r"Cannot read CRF\+\+ model \(bytes\): .*" + _re(message)
    ):
        read_crfpp_model(content)


def _re(text):
    import re

    return re.escape(text)


def test_truncated_binary_model_names_the_file(tmp_path):
    path = tmp_path / "cut.model"
    path.write_bytes((DATA / "tiny.model").read_bytes()[:-3])
    with pytest.raises(ValueError, match=r"cut\.model'.*truncated or corrupted"):
        read_crfpp_model(path)


def test_paths_that_are_not_regular_files(tmp_path):
    with pytest.raises(ValueError, match="a directory, not a regular file"):
        read_crfpp_model(tmp_path)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(ValueError, match="a FIFO"):
            read_crfpp_model(fifo)
    with pytest.raises(FileNotFoundError):
        read_crfpp_model(tmp_path / "missing.model")


# ------------------------------------------------------- live, with CRF++


def crfpp_command(name):
    """The command running CRF++'s ``crf_learn`` / ``crf_test``, or None."""
    exe = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if os.path.exists(exe):
        return [exe]
    if importlib.util.find_spec("CRFPP") is not None:  # the crfpy wheel, no script
        function = "crfpp_learn" if name == "crf_learn" else "crfpp_test"
        return [
            sys.executable,
            "-c",
            f"import sys; from CRFPP import {function}; {function}(sys.argv)",
        ]
    return None


@pytest.fixture(scope="module")
def crfpp():
    learn, test = crfpp_command("crf_learn"), crfpp_command("crf_test")
    if learn is None or test is None:
        if os.environ.get("SKCRF_REQUIRE_CRFPP"):
            pytest.fail("SKCRF_REQUIRE_CRFPP is set but crf_learn / crf_test are absent (crfpy)")
        pytest.skip("crf_learn / crf_test are absent (pip install crfpy ships CRF++)")
    return learn, test


def _learn(crfpp, folder, template, train, *options):
    template_path = folder / "template"
    template_path.write_bytes(template.encode("utf-8"))
    model = folder / "model"
    subprocess.run(
        [*crfpp[0], *options, "-t", str(template_path), str(train), str(model)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return model


def _crf_test(crfpp, model, data, *options):
    command = [*crfpp[1], *(options or ["-v2"]), "-m", str(model), str(data)]
    return subprocess.run(command, check=True, capture_output=True).stdout.decode("utf-8")


@pytest.fixture(scope="module")
def chunking_model(crfpp, tmp_path_factory):
    template = (DATA / "chunking.template").read_text(encoding="ascii")
    return _learn(crfpp, tmp_path_factory.mktemp("chunking"), template, DATA / "train.data")


@pytest.mark.parametrize("suffix", ["", ".txt"])
def test_live_chunking_model_tags_as_crf_test(crfpp, chunking_model, suffix):
    sequences = read_columns(DATA / "test.data")
    output = _crf_test(crfpp, chunking_model, DATA / "test.data")
    state = read_crfpp_model(f"{chunking_model}{suffix}")
    assert len(state.model.classes) > 20
    n_tokens, largest = assert_tags_as_crf_test(
        CRFTagger._from_fitted_state(state), sequences, output
    )
    assert n_tokens == sum(map(len, sequences)) > 1000
    output = _crf_test(crfpp, chunking_model, DATA / "test.data", "-n", "5", "-v1")
    assert_nbest_as_crf_test(CRFTagger._from_fitted_state(state), sequences, output, 5)


# Forms where CRF++'s strings count twice (a line given twice, a constant line
# a macro line also gives), bigram macros, a CRLF template (CRF++ keeps the
# CR in every string), a frequency cut-off.
LIVE_TEMPLATES = {
    "repeated lines": ("U00:%x[0,0]\nU00:%x[0,0]\nUbias\nUbias\nB\nB\n", ()),
    "colliding strings": ("UNN\nU%x[0,1]\nBNN\nB%x[0,1]\nU:%x[0,0]\nB\n", ()),
    "bigram macros": ("U00:%x[0,0]\nB\nB01:%x[0,1]\nB01:%x[0,1]\nB02:%x[-1,1]/%x[0,0]\n", ()),
    "bigram macros, no B": ("U00:%x[0,0]/%x[1,1]\nB01:%x[0,1]\n", ()),
    "CRLF": ("U00:%x[0,0]\r\nUb\r\nB01:%x[0,1]\r\nB\r\n", ()),
    "cut-off": ("U00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[0,1]\nB\n", ("-f", "3", "-c", "0.5")),
}


@pytest.mark.parametrize("form", list(LIVE_TEMPLATES))
def test_live_template_forms_tag_as_crf_test(crfpp, tmp_path, form):
    template, options = LIVE_TEMPLATES[form]
    train = tmp_path / "train.data"
    train.write_text(
        "".join("".join(" ".join(row) + "\n" for row in s) + "\n" for s in _first(60)),
        encoding="utf-8",
    )
    model = _learn(crfpp, tmp_path, template, train, *options)
    sequences = read_columns(DATA / "tiny_test.data")
    output = _crf_test(crfpp, model, DATA / "tiny_test.data")
    for path in (model, f"{model}.txt"):
        tagger = CRFTagger._from_fitted_state(read_crfpp_model(path))
        assert_tags_as_crf_test(tagger, sequences, output)


def _first(n):
    return read_columns(DATA / "train.data")[:n]


def test_live_cost_factor_as_crf_test_c(crfpp):
    sequences = read_columns(DATA / "tiny_test.data")
    for factor in (0.25, 3.0):
        output = _crf_test(
            crfpp, DATA / "tiny.model", DATA / "tiny_test.data", "-v2", "-c", str(factor)
        )
        state = read_crfpp_model(DATA / "tiny.model", cost_factor=factor)
        assert_tags_as_crf_test(CRFTagger._from_fitted_state(state), sequences, output)
