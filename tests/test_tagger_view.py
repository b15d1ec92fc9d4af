"""The pycrfsuite.Tagger look-alike (CRFTagger.tagger_) against pycrfsuite itself.

A model is trained by CRFsuite (pycrfsuite.Trainer); an skcrf model with
exactly its weights is built from the file (read here, independently of
skcrf's reader) and every method of the view must agree with
pycrfsuite.Tagger on that file to 1e-9.
"""

import io
import random
import struct

import numpy as np
import pytest

pycrfsuite = pytest.importorskip("pycrfsuite")

from pycrfsuite._dumpparser import CRFsuiteDumpParser  # noqa: E402

from skcrf import CRFTagger  # noqa: E402
from skcrf._model import CRFModel  # noqa: E402
from skcrf._tagger_view import CRFsuiteTagger, ParsedDump, UnknownLabelError  # noqa: E402

TOL = 1e-9
LABELS = ["DET", "NOUN", "VERB", "ADJ"]
WORDS = {
    "DET": ["the", "a", "this"],
    "NOUN": ["dog", "cat", "idea", "Paris", "3rd"],
    "VERB": ["runs", "sees", "is"],
    "ADJ": ["big", "green", "old"],
}


def _token(word, i, words, style):
    """Token features in each of python-crfsuite's formats."""
    if style == 0:
        return {
            "w": word.lower(),
            "suffix": word[-2:],
            "title": word.istitle(),
            "len": len(word) / 4,
            "prev": words[i - 1] if i else "<s>",
        }
    if style == 1:
        return [f"w={word.lower()}", f"suf={word[-1]}"] + (["first"] if i == 0 else [])
    return {
        "w": word.lower(),
        "ctx": {"next": words[i + 1] if i + 1 < len(words) else "</s>"},
        "tags": [word[:1], word[-1:]],
    }


def _data(n, seed):
    rng = random.Random(seed)
    X, y = [], []
    for s in range(n):
        tags = [rng.choice(LABELS) for _ in range(rng.randint(1, 7))]
        words = [rng.choice(WORDS[t]) for t in tags]
        X.append([_token(w, i, words, s % 3) for i, w in enumerate(words)])
        y.append(tags)
    return X, y


X_TRAIN, Y_TRAIN = _data(60, seed=0)
X_TEST, Y_TEST = _data(25, seed=1)
# unknown attributes, a one-token and an empty sequence, a number and a bool off
X_TEST += [[{"w": "zebra", "unseen": 1.0}], [], [{"w": "the", "title": False}, ["w=dog"]]]
Y_TEST += [["NOUN"], [], ["DET", "NOUN"]]


def _crfsuite_model_file(path, **params):
    trainer = pycrfsuite.Trainer(verbose=False)
    for xseq, yseq in zip(X_TRAIN, Y_TRAIN):
        trainer.append(xseq, yseq)
    trainer.set_params(params)
    trainer.train(str(path))
    return str(path)


def _model_from_file(path):
    """The CRFModel of a CRFsuite file: names from pycrfsuite, exact weights from
    the file's feature chunk (the dump prints only six decimals)."""
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    info = tagger.info()
    tagger.close()
    labels = sorted(info.labels, key=lambda name: int(info.labels[name]))
    attributes = sorted(info.attributes, key=lambda name: int(info.attributes[name]))
    data = open(path, "rb").read()
    off_features = struct.unpack_from("<I", data, 28)[0]
    assert data[off_features : off_features + 4] == b"FEAT"
    (n_features,) = struct.unpack_from("<I", data, off_features + 8)
    states, transitions = [], {}
    for k in range(n_features):
        kind, src, dst, weight = struct.unpack_from("<IIId", data, off_features + 12 + 20 * k)
        if kind == 0:
            states.append((src, dst, weight))
        else:
            transitions[src * len(labels) + dst] = weight
    states.sort()
    counts = np.bincount([a for a, _, _ in states], minlength=len(attributes))
    return CRFModel(
        classes=np.array(labels, dtype=object),
        attributes=attributes,
        state_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        state_labels=np.array([k for _, k, _ in states], dtype=np.int32),
        state_weights=np.array([w for _, _, w in states]),
        transition_index=np.array(sorted(transitions), dtype=np.int64),
        transition_weights=np.array([transitions[i] for i in sorted(transitions)]),
    )


def _parse(text):
    parser = CRFsuiteDumpParser()
    for line in io.StringIO(text):
        parser.feed(line)
    return parser.result


def _dump_text(tagger, path):
    tagger.dump(str(path))
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module", params=[{"c2": 0.1}, {"c1": 0.2, "c2": 0.01}], ids=["l2", "l1"])
def pair(request, tmp_path_factory):
    """(pycrfsuite.Tagger, CRFsuiteTagger) on the same CRFsuite model."""
    path = _crfsuite_model_file(tmp_path_factory.mktemp("model") / "m.crfsuite", **request.param)
    reference = pycrfsuite.Tagger()
    reference.open(path)
    yield reference, CRFsuiteTagger(_model_from_file(path)), path
    reference.close()


# -- agreement with pycrfsuite ---------------------------------------------------


def test_labels(pair):
    reference, view, _ = pair
    assert set(view.labels()) == set(reference.labels())
    assert view.labels() == reference.labels()  # the file's order, both
    assert all(type(label) is str for label in view.labels())


def test_tag(pair):
    reference, view, _ = pair
    for xseq in X_TEST:
        assert view.tag(xseq) == reference.tag(xseq)
        assert view.tag() == reference.tag()  # the sequence just set


def test_probability(pair):
    reference, view, _ = pair
    rng = random.Random(2)
    for xseq, yseq in zip(X_TEST, Y_TEST):
        reference.set(xseq)
        view.set(xseq)
        for labels in (yseq, reference.tag(), [rng.choice(LABELS) for _ in yseq]):
            assert view.probability(labels) == pytest.approx(
                reference.probability(labels), abs=TOL, rel=TOL
            )


def test_probabilities_sum_to_one(pair):
    _, view, _ = pair
    import itertools

    view.set(X_TEST[0][:4])
    total = sum(
        view.probability(list(labels))
        for labels in itertools.product(LABELS, repeat=len(X_TEST[0][:4]))
    )
    assert total == pytest.approx(1.0, abs=1e-12)


def test_marginal(pair):
    reference, view, _ = pair
    for xseq in X_TEST:
        reference.set(xseq)
        view.set(xseq)
        for pos in range(len(xseq)):
            for label in LABELS:
                assert view.marginal(label, pos) == pytest.approx(
                    reference.marginal(label, pos), abs=TOL
                )


def test_info(pair):
    reference, view, _ = pair
    expected, info = reference.info(), view.info()
    assert isinstance(info, ParsedDump)
    assert info.labels == expected.labels
    assert info.attributes == expected.attributes
    assert info.transitions == expected.transitions
    assert info.state_features == expected.state_features
    for key in ("magic", "type", "version", "num_features", "num_labels", "num_attrs"):
        assert info.header[key] == expected.header[key]
    assert set(info.header) == set(expected.header)
    assert all(type(v) is str for v in info.header.values())


def test_dump(pair, tmp_path):
    reference, view, _ = pair
    ours = _dump_text(view, tmp_path / "ours.txt")
    theirs = _dump_text(reference, tmp_path / "theirs.txt")
    # byte for byte after the header (sizes and offsets are the writer's)
    assert ours.split("LABELS = {", 1)[1] == theirs.split("LABELS = {", 1)[1]
    parsed = _parse(ours)
    assert parsed.state_features == _parse(theirs).state_features
    assert parsed.header.keys() == _parse(theirs).header.keys()


def test_from_crfsuite_view_agrees(pair):
    """The same through the estimator's reader and tagger_ (once both exist)."""
    reference, _, path = pair
    tagger = CRFTagger.from_crfsuite(path).tagger_
    assert tagger.labels() == reference.labels()
    assert tagger.info().state_features == reference.info().state_features
    for xseq in X_TEST:
        assert tagger.tag(xseq) == reference.tag(xseq)
        for pos in range(len(xseq)):
            assert tagger.marginal("NOUN", pos) == pytest.approx(
                reference.marginal("NOUN", pos), abs=TOL
            )


# -- an skcrf model, written with to_crfsuite, read by pycrfsuite ------------------


@pytest.fixture(scope="module")
def fitted():
    return CRFTagger(c1=0.2, c2=0.01, all_possible_transitions=True).fit(X_TRAIN, Y_TRAIN)


def _nonzero(weights):
    return {key: w for key, w in weights.items() if w != 0}


def test_skcrf_model_and_its_crfsuite_file(fitted, tmp_path):
    """pycrfsuite on the file of to_crfsuite tags, scores and weighs as the view."""
    path = str(tmp_path / "skcrf.crfsuite")
    fitted.to_crfsuite(path)
    reference = pycrfsuite.Tagger()
    reference.open(path)
    view = fitted.tagger_
    expected, info = reference.info(), view.info()
    assert info.labels == expected.labels
    assert info.state_features == _nonzero(expected.state_features)
    assert info.transitions == _nonzero(expected.transitions)
    rng = random.Random(3)
    for xseq in X_TEST:
        assert view.tag(xseq) == reference.tag(xseq) == fitted.predict_single(xseq)
        reference.set(xseq)
        for yseq in (view.tag(), [rng.choice(LABELS) for _ in xseq]):
            assert view.probability(yseq) == pytest.approx(reference.probability(yseq), abs=TOL)
        for pos in range(len(xseq)):
            assert view.marginal("VERB", pos) == pytest.approx(
                reference.marginal("VERB", pos), abs=TOL
            )


def test_view_shows_the_file_crfsuite_would_write(fitted, tmp_path):
    """The view is the model as CRFsuite stores it: a file of exactly that model
    gives pycrfsuite the same info() and dump, header included."""
    from skcrf._persist._crfsuite_file import write_crfsuite

    view = CRFsuiteTagger(fitted._model)
    assert (fitted._model.state_weights == 0).any()  # L1: there is something to drop
    path = str(tmp_path / "stored.crfsuite")
    write_crfsuite(view._stored(), path)
    reference = pycrfsuite.Tagger()
    reference.open(path)
    expected, info = reference.info(), view.info()
    assert info.header == expected.header
    assert info.labels == expected.labels
    assert info.attributes == expected.attributes
    assert info.transitions == expected.transitions
    assert info.state_features == expected.state_features
    assert _dump_text(view, tmp_path / "a.txt") == _dump_text(reference, tmp_path / "b.txt")
    for xseq in X_TEST:
        assert view.tag(xseq) == reference.tag(xseq)


def test_zero_weights_are_not_shown(pair):
    """Zero-weight features and attributes without a feature, added to CRFsuite's
    model, change nothing that pycrfsuite shows (CRFsuite's files never hold them)."""
    reference, view, _ = pair
    model = view.model
    n_labels = model.n_labels
    attributes = ["zero:first"] + list(model.attributes) + ["zero:last", "zero:none"]
    counts = [1] + np.diff(model.state_ptr).tolist() + [n_labels, 0]
    labels = [0] + model.state_labels.tolist() + list(range(n_labels))
    weights = [0.0] + model.state_weights.tolist() + [0.0] * n_labels
    padded = CRFModel(
        classes=model.classes,
        attributes=attributes,
        state_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        state_labels=np.array(labels, dtype=np.int32),
        state_weights=np.array(weights),
        transition_index=np.arange(n_labels * n_labels, dtype=np.int64),
        transition_weights=model.transition_matrix().ravel(),
    )
    padded_view = CRFsuiteTagger(padded)
    expected, info = reference.info(), padded_view.info()
    assert info.attributes == expected.attributes
    assert info.state_features == expected.state_features
    assert info.transitions == expected.transitions
    for key in ("num_attrs", "num_labels"):
        assert info.header[key] == expected.header[key]
    for xseq in X_TEST[:5]:
        assert padded_view.tag(xseq) == reference.tag(xseq)


def test_marginals_match_estimator(fitted):
    view = CRFsuiteTagger(fitted._model, fitted._predictor.vocabulary, fitted._predictor.decoder)
    for xseq in X_TEST[:10]:
        expected = fitted.predict_marginals_single(xseq)
        view.set(xseq)
        for pos, row in enumerate(expected):
            for label, p in row.items():
                assert view.marginal(label, pos) == pytest.approx(p, abs=1e-12)


# -- behaviour and errors ---------------------------------------------------------


def test_tag_before_set_is_an_error(fitted):
    view = CRFsuiteTagger(fitted._model)
    for call in (view.tag, lambda: view.probability(["DET"]), lambda: view.marginal("DET", 0)):
        with pytest.raises(ValueError, match=r"no sequence is set.*set\(xseq\)"):
            call()


def test_unknown_label(fitted):
    view = CRFsuiteTagger(fitted._model)
    view.set([{"w": "the"}, {"w": "dog"}])
    with pytest.raises(ValueError, match="'XX' is not a label of the model"):
        view.marginal("XX", 0)
    # pycrfsuite raises RuntimeError here: code catching it keeps working
    with pytest.raises(RuntimeError, match=r"yseq\[1\]: 'XX'"):
        view.probability(["DET", "XX"])
    assert issubclass(UnknownLabelError, ValueError)


def test_positions_and_lengths(fitted):
    view = CRFsuiteTagger(fitted._model)
    view.set(X_TEST[0])
    n = len(X_TEST[0])
    for pos in (n, -1):
        with pytest.raises(ValueError, match=f"position {pos} is out of range.*{n} items"):
            view.marginal("DET", pos)
    with pytest.raises(TypeError):
        view.marginal("DET", 0.5)
    assert view.marginal("DET", np.int64(0)) == view.marginal("DET", 0)
    with pytest.raises(ValueError, match="numbers of items and labels differ"):
        view.probability(["DET"] * (n + 1))


def test_empty_sequence(fitted):
    view = CRFsuiteTagger(fitted._model)
    assert view.tag([]) == []
    assert view.probability([]) == 0.0  # CRFsuite's answer
    with pytest.raises(ValueError, match="out of range"):
        view.marginal("DET", 0)


def test_input_formats(fitted):
    view = CRFsuiteTagger(fitted._model)
    xseq = X_TEST[1]
    expected = view.tag(xseq)
    assert view.tag(pycrfsuite.ItemSequence(xseq)) == expected
    assert view.tag(tuple(xseq)) == expected
    with pytest.raises(TypeError, match="one sequence"):
        view.set("the dog")
    with pytest.raises(TypeError, match="one sequence"):
        view.set({"w": "the"})


def test_set_replaces_the_sequence(fitted):
    view = CRFsuiteTagger(fitted._model)
    first = view.tag(X_TEST[0])
    view.set(X_TEST[1])
    assert view.tag() == fitted.predict_single(X_TEST[1])
    assert view.tag(X_TEST[0]) == first


def test_tag_scores_once_and_the_rest_follows(fitted):
    # tag(xseq) computes only the path; probability and marginal then give
    # what they give after set(xseq), and tag() the same path
    view = CRFsuiteTagger(fitted._model)
    for xseq in X_TEST:
        labels = view.tag(xseq)
        assert labels == fitted.predict_single(xseq)
        after_tag = (
            view.tag(),
            view.probability(labels),
            [view.marginal(label, pos) for pos in range(len(xseq)) for label in LABELS],
        )
        view.set(xseq)
        after_set = (
            view.tag(),
            view.probability(labels),
            [view.marginal(label, pos) for pos in range(len(xseq)) for label in LABELS],
        )
        assert after_tag == after_set


def test_scores_that_overflow_are_an_error_of_set_and_tag():
    view = CRFsuiteTagger(
        CRFModel(
            classes=np.array(["A", "B"], dtype=object),
            attributes=["big", "w:x"],
            state_ptr=np.array([0, 2, 3], dtype=np.int64),
            state_labels=np.array([0, 1, 0], dtype=np.int32),
            state_weights=np.array([10.0, -10.0, 1.0]),
            transition_index=np.arange(4, dtype=np.int64),
            transition_weights=np.array([0.5, -0.5, 0.0, 0.25]),
        )
    )
    view.set([{"w": "x"}, {"w": "y"}])
    for bad, where in (
        ([{"w": "x"}, {"big": 1e308}], r"xseq\[0\]\[1\]"),
        ([["w:x"], ["w:x", "big"], {"big": 1e308}], r"xseq\[0\]\[2\]"),
    ):
        for call in (view.set, view.tag):
            with pytest.raises(ValueError, match=where + ": the label scores .* not finite"):
                call(bad)
    assert view.tag() == ["A", "A"]  # still the sequence set before
    assert view.tag([{"big": 1e300}]) == ["A"]


def test_files_are_not_opened(fitted):
    view = CRFsuiteTagger(fitted._model)
    with pytest.raises(NotImplementedError, match="from_crfsuite"):
        view.open("model.crfsuite")
    with pytest.raises(NotImplementedError, match="from_crfsuite"):
        view.open_inmemory(b"lCRF")
    view.close()  # harmless
    assert view.labels()


def test_dump_to_stdout_and_replace(fitted, tmp_path, capsys):
    view = CRFsuiteTagger(fitted._model)
    view.dump()
    out = capsys.readouterr().out
    assert out.startswith("FILEHEADER = {\n") and "STATE_FEATURES = {" in out
    path = tmp_path / "dump.txt"
    path.write_text("x" * (len(out) + 1000))  # a longer file is replaced, not overwritten
    view.dump(path)
    assert path.read_text() == out


def test_info_is_a_copy(fitted):
    view = CRFsuiteTagger(fitted._model)
    info = view.info()
    info.labels.clear()
    info.state_features.clear()
    assert view.info().labels and view.info().state_features


def test_non_string_labels_are_returned_as_they_are(tmp_path):
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}, {"w": "c"}]]
    y = [[1, 2], [2, 1, 3]]
    crf = CRFTagger(c2=0.1).fit(X, y)
    view = CRFsuiteTagger(crf._model)
    assert view.labels() == [1, 2, 3]
    assert view.tag([{"w": "a"}, {"w": "b"}]) == [1, 2]
    assert view.marginal(1, 0) > 0.5
    info = view.info()
    assert info.labels == {1: "0", 2: "1", 3: "2"}
    assert all(type(label) is int for label, _ in info.transitions)
    text = _dump_text(view, tmp_path / "d.txt")
    assert "      0: 1\n" in text and "(0) w:a --> 1:" in text
    with pytest.raises(ValueError, match="'1' is not a label"):
        view.marginal("1", 0)


def test_info_of_labels_no_crfsuite_file_keeps(tmp_path):
    """Tuple labels cannot be kept in a CRFsuite file (the writer raises TypeError):
    info() and dump() still answer, with the counts and a zero size and offsets."""
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}]]
    y = [[("A", 1), ("B", 2)], [("B", 2), ("A", 1)]]
    crf = CRFTagger(c2=0.1).fit(X, y)
    view = crf.tagger_
    info = view.info()
    assert info.labels == {("A", 1): "0", ("B", 2): "1"}
    assert info.header["num_labels"] == "2" and info.header["size"] == "0"
    assert info.state_features
    text = _dump_text(view, tmp_path / "d.txt")
    assert "  size: 0\n" in text and "LABELS = {" in text


def test_a_view_without_a_model_is_closed(fitted):
    from skcrf._tagger_view import TaggerClosedError

    view = CRFsuiteTagger()
    assert view.model is None and "closed" in repr(view)
    for call in (view.labels, view.info, view.tag, lambda: view.set([{"w": "the"}])):
        with pytest.raises(TaggerClosedError, match="no model"):
            call()
    view._load(fitted._model)
    assert view.labels() == list(fitted.classes_)
