"""skcrf.nltk.CRFTagger against NLTK's nltk.tag.CRFTagger (python-crfsuite)."""

import os
import warnings

import pytest

nltk = pytest.importorskip("nltk")
pytest.importorskip("pycrfsuite")

from nltk.tag import CRFTagger as NLTKTagger  # noqa: E402
from nltk.tag.api import TaggerI  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from skcrf import CRFTagger as Estimator  # noqa: E402
from skcrf.nltk import TRAINING_OPTIONS, CRFTagger, estimator_params  # noqa: E402

TOY = [
    [("University", "Noun"), ("is", "Verb"), ("a", "Det"), ("good", "Adj"), ("place", "Noun")],
    [("dog", "Noun"), ("eat", "Verb"), ("meat", "Noun")],
    [("The", "Det"), ("3", "Num"), ("dogs", "Noun"), ("eat", "Verb"), (".", "Punct")],
]
TOKENS = [
    "The",
    "the",
    "THE",
    "a",
    "ab",
    "abc",
    "abcd",
    "3rd",
    "1,000",
    "2.5",
    "42",
    "",
    ".",
    "!?",
    "--",
    "``",
    "''",
    "...",
    "(",
    ")",
    "'s",
    "U.S.",
    "n't",
    "$",
    "%",
    "€",
    "Über",
    "naïve",
    "東京",
    "Σίσυφος",
    "٣",
    "²",
    "x²",
    "١٢",
    "ǅemal",
    "ǈ",
    "«»",
    "—",
    "-LRB-",
    "*T*-1",
    "well-known",
    "e-mail",
    "\u00a0",
    "a b",
    "🙂",
    "Ⅻ",
]


@pytest.fixture(scope="module")
def treebank():
    """(train, test): sentences of the first and the last files of NLTK's treebank
    sample (only those files are parsed: the whole corpus takes seconds).
    Missing data is a failure, never a skip."""
    try:
        corpus = nltk.corpus.treebank
        files = corpus.fileids()
        return list(corpus.tagged_sents(files[:30])), list(corpus.tagged_sents(files[185:]))
    except LookupError as exc:
        pytest.fail(f"the NLTK treebank sample is missing (set NLTK_DATA): {exc}")


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A folder NLTK's CRFTagger may write and read (NLTK 3.9+ confines its paths)."""
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)] + list(nltk.data.path))
    return tmp_path


# -- constructor, features -------------------------------------------------------


def test_constructor_defaults():
    tagger = CRFTagger()
    assert isinstance(tagger, TaggerI)
    assert tagger._model_file == ""
    assert tagger._verbose is False
    assert tagger._training_options == {}
    assert tagger._feature_func == tagger._get_features
    # positional, as NLTK's
    func = lambda tokens, i: [tokens[i]]  # noqa: E731
    tagger = CRFTagger(func, True, {"c2": 0.5})
    assert tagger._feature_func is func and tagger._verbose is True
    assert tagger._training_options == {"c2": 0.5}


def test_training_opt_is_copied():
    options = {"c2": 0.5}
    tagger = CRFTagger(training_opt=options)
    options["c2"] = 2.0
    assert tagger._training_options == {"c2": 0.5}


def test_default_features_equal_nltk():
    ours, theirs = CRFTagger(), NLTKTagger()
    for i in range(len(TOKENS)):
        assert ours._get_features(TOKENS, i) == theirs._get_features(TOKENS, i), TOKENS[i]
    # twice: the second answer comes from the cache, and is a fresh list
    first = ours._get_features(TOKENS, 0)
    first.append("junk")
    assert ours._get_features(TOKENS, 0) == theirs._get_features(TOKENS, 0)
    ours.clear_feature_cache()
    assert ours._feature_cache == {}


def test_feature_examples():
    features = CRFTagger()._get_features
    assert features(["Hello"], 0) == ["CAPITALIZATION", "SUF_o", "SUF_lo", "SUF_llo", "WORD_Hello"]
    assert features(["a"], 0) == ["WORD_a"]
    assert features(["!?"], 0) == ["PUNCTUATION", "SUF_?", "WORD_!?"]
    assert features([""], 0) == []


def test_custom_feature_func(sandbox):
    calls = []

    def feature_func(tokens, i):
        calls.append(i)
        return {"w": tokens[i].lower(), "first": i == 0}

    tagger = CRFTagger(feature_func=feature_func, training_opt={"c2": 0.1})
    tagger.train(TOY, None)
    assert calls
    attributes = set(tagger._estimator.attributes_)
    assert "w:dog" in attributes and "first" in attributes
    expected = [("dog", "Noun"), ("eat", "Verb"), ("meat", "Noun")]
    assert tagger.tag(["dog", "eat", "meat"]) == expected


def test_overridden_get_features_is_used():
    class Lowercased(CRFTagger):
        def _get_features(self, tokens, idx):
            return ["W=" + tokens[idx].lower()]

    tagger = Lowercased(training_opt={"c2": 0.1})
    tagger.train(TOY, None)
    assert set(tagger._estimator.attributes_) == {
        "W=" + w.lower() for sent in TOY for w, _ in sent
    }
    assert tagger.tag(["DOG", "EAT"]) == [("DOG", "Noun"), ("EAT", "Verb")]


# -- training options ------------------------------------------------------------


def test_training_opt_mapping():
    params = estimator_params(
        {
            "feature.minfreq": 2,
            "feature.possible_states": True,
            "feature.possible_transitions": 1,
            "c1": 0.1,
            "c2": "0.01",
            "max_iterations": 50,
            "num_memories": 8,
            "epsilon": 1e-4,
            "period": 5,
            "delta": 1e-6,
            "linesearch": "Backtracking",
            "max_linesearch": 30,
        }
    )
    assert params == {
        "min_freq": 2.0,
        "all_possible_states": True,
        "all_possible_transitions": True,
        "c1": 0.1,
        "c2": 0.01,
        "max_iterations": 50,
        "num_memories": 8,
        "epsilon": 1e-4,
        "period": 5,
        "delta": 1e-6,
        "linesearch": "Backtracking",
        "max_linesearch": 30,
    }
    assert estimator_params({"feature.possible_states": "0", "max_iterations": "7"}) == {
        "all_possible_states": False,
        "max_iterations": 7,
    }
    # every option names a parameter of the estimator
    names = Estimator._get_param_names()
    assert all(name in names for name, _ in TRAINING_OPTIONS.values())


@pytest.mark.parametrize(
    "options, match",
    [
        ({"bogus": 1}, r"training_opt\['bogus'\]: unknown CRFsuite training option.*c2"),
        ({"feature.min_freq": 1}, r"'feature.min_freq'\]: unknown"),
        ({"type": 1}, r"training_opt\['type'\] is an option of CRFsuite's pa.*L-BFGS"),
        ({"calibration.eta": 0.1}, r"'calibration.eta'\] is an option of CRFsuite's l2sgd"),
        ({"c1": "abc"}, r"training_opt\['c1'\] = 'abc' is invalid: 'abc' is not a number"),
        ({"c2": -1}, r"training_opt\['c2'\] = -1 is invalid"),
        ({"max_iterations": 2.5}, r"'max_iterations'\] = 2.5 is invalid: 2.5 is not an integer"),
        ({"linesearch": "Foo"}, r"'linesearch'\] = 'Foo' is invalid"),
        ({"feature.possible_transitions": "yes"}, r"is invalid: 'yes' is not a flag"),
    ],
)
def test_training_opt_errors(options, match):
    with pytest.raises(ValueError, match=match):
        CRFTagger(training_opt=options)


def test_training_opt_reaches_the_estimator():
    tagger = CRFTagger(
        training_opt={"c2": 0.05, "feature.possible_transitions": True, "max_iterations": 5}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # the limit was asked for
        tagger.train(TOY, None)
    params = tagger._estimator.get_params()
    assert params["c2"] == 0.05 and params["all_possible_transitions"] is True
    assert params["max_iterations"] == 5 and tagger._estimator.n_iter_ <= 5


# -- tagging API --------------------------------------------------------------------


def test_tag_before_a_model_is_set():
    with pytest.raises(RuntimeError, match=r"No model file set; call train\(\) or set_model_file"):
        CRFTagger().tag(["a", "dog"])


def test_tag_argument_errors():
    tagger = CRFTagger()
    with pytest.raises(TypeError, match="list of tokens"):
        tagger.tag("a dog")
    with pytest.raises(TypeError, match="not a single tokenized sentence"):
        tagger.tag_sents(["a", "dog"])
    with pytest.raises(TypeError, match="not a single string"):
        tagger.tag_sents("a dog")
    tagger.train(TOY, None)
    with pytest.raises(TypeError, match="not a single tokenized sentence"):
        tagger.tag_sents(iter(["a", "dog"]))


def test_train_tag_and_accuracy(tmp_path):
    tagger = CRFTagger(training_opt={"c2": 0.1})
    path = tmp_path / "model.crf.tagger"
    path.write_bytes(b"an old file that train replaces")
    tagger.train(TOY, str(path))
    assert tagger._model_file == str(path)
    assert path.read_bytes()[:4] == b"lCRF"
    assert tagger.tag(["dog", "is", "good"]) == [("dog", "Noun"), ("is", "Verb"), ("good", "Adj")]
    sents = [["dog", "is", "good"], ["Cat", "eat", "meat"], []]
    tagged = tagger.tag_sents(sents)
    assert tagged[2] == [] and [w for w, _ in tagged[1]] == ["Cat", "eat", "meat"]
    assert tagger.tag_sents(iter(sents)) == tagged  # a generator, as accuracy() passes
    with pytest.warns(DeprecationWarning):
        assert tagger.tag_sents(sents=sents) == tagged
    gold = [[("dog", "Noun"), ("is", "Verb"), ("good", "Adj")]]
    assert tagger.accuracy(gold) == 1.0
    with pytest.warns(DeprecationWarning):
        assert tagger.evaluate(gold) == 1.0
    # the loaded file tags the same as the trained tagger
    loaded = CRFTagger()
    loaded.set_model_file(str(path))
    assert loaded.tag_sents(sents) == tagged
    # the pycrfsuite-like tagger, where NLTK keeps its pycrfsuite.Tagger
    assert set(loaded._tagger.labels()) == {"Noun", "Verb", "Det", "Adj", "Num", "Punct"}


def test_verbose_prints_iterations(capfd):
    CRFTagger(verbose=True, training_opt={"max_iterations": 3}).train(TOY, None)
    captured = capfd.readouterr()
    assert captured.out + captured.err


def test_train_data_errors():
    with pytest.raises(ValueError, match=r"train_data\[0\]\[1\] must be a \(token, tag\) pair"):
        CRFTagger().train([[("a", "X"), "b"]], None)
    with pytest.raises(TypeError, match=r"train_data\[0\]\[1\]\[0\] is int 3: the default"):
        CRFTagger().train([[("a", "X"), (3, "Y")]], None)


@pytest.mark.parametrize("token", [None, 2, ["x"], b"dog"])
def test_tokens_that_are_not_str_are_named(token):
    # the default features read str: None would get none (an empty token's)
    # and be tagged, an int would fail inside them
    tagger = CRFTagger(training_opt={"max_iterations": 3})
    tagger.train(TOY, None)
    with pytest.raises(TypeError, match=r"sentences\[1\]\[2\] is .*: the default features"):
        tagger.tag_sents([["dog"], ["a", "dog", token]])
    with pytest.raises(TypeError, match=r"sentences\[0\]\[0\] is "):
        tagger.tag([token])
    assert [word for word, _ in tagger.tag(["dog", ""])] == ["dog", ""]  # an empty str is a token
    # a feature function of the user's takes any token
    custom = CRFTagger(feature_func=lambda tokens, i: [f"W_{tokens[i]}"])
    custom.train([[(token, "X"), ("dog", "Y")]], None)
    assert [tag for _, tag in custom.tag([token, "dog"])] == ["X", "Y"]


# -- against NLTK on the treebank ------------------------------------------------


@pytest.mark.treebank
def test_accuracy_close_to_nltk(treebank, sandbox):
    train, test = treebank
    options = {"c2": 0.1, "max_iterations": 100}
    theirs = NLTKTagger(training_opt=options)
    theirs.train(train, str(sandbox / "nltk.crf.tagger"))
    ours = CRFTagger(training_opt=options)
    ours.train(train, str(sandbox / "skcrf.crf.tagger"))
    a, b = ours.accuracy(test), theirs.accuracy(test)
    assert a > 0.8
    assert abs(a - b) <= 0.005, (a, b)


@pytest.mark.treebank
def test_model_files_move_both_ways(treebank, sandbox):
    train, test = treebank[0][:150], treebank[1][:100]
    sents = [[w for w, _ in s] for s in test]
    options = {"c1": 0.05, "c2": 0.05, "max_iterations": 60}

    # NLTK's model, read here
    nltk_path = str(sandbox / "nltk.crf.tagger")
    theirs = NLTKTagger(training_opt=options)
    theirs.train(train, nltk_path)
    ours = CRFTagger()
    ours.set_model_file(nltk_path)
    assert ours._model_file == nltk_path
    assert ours.tag_sents(sents) == theirs.tag_sents(sents)

    # our model, read by NLTK (python-crfsuite)
    skcrf_path = str(sandbox / "skcrf.crf.tagger")
    ours = CRFTagger(training_opt=options)
    ours.train(train, skcrf_path)
    theirs = NLTKTagger()
    theirs.set_model_file(skcrf_path)
    assert theirs.tag_sents(sents) == ours.tag_sents(sents)
    assert os.path.getsize(skcrf_path) > 0
