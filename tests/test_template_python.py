"""The Pythonic template spec (syntax='python'): its plans give the feature functions' dicts.

For each well-known feature function written as a spec (skcrf._template._recipes),
the reference expander's dicts equal the function's, token by token: the same keys
in the same order, equal values of the same types (a bool stays a bool, a str a
str). On every token type of the NLTK Treebank sample and one sentence in eight
(a failure in CI when it is missing) and on hostile strings (empty, Unicode case
and digits, titlecase, hyphens). Then the errors a bad spec gets, naming the
feature, and the determinism of parse_python.
"""

import copy
import importlib.util
import pickle
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, clone

from skcrf import Embeddings, SequenceFeaturizer
from skcrf._template._plan import Plan, TemplateError, columns_read, uses_python
from skcrf._template._python import (
    BOS,
    EOS,
    Col,
    feature_dicts,
    is_first,
    is_last,
    outside,
    parse_python,
    transition,
    window,
    word,
)
from skcrf._template._recipes import (
    sequence_featurizer_spec,
    treebank_seed_spec,
    treebank_window_spec,
    tutorial_spec,
)
from skcrf._template._reference import expand_dicts
from skcrf.datasets import treebank_token_features

ROOT = Path(__file__).resolve().parent.parent


def _benchmark_tasks():
    """benchmarks/_tasks.py: the window and tutorial features as the benchmark computes them."""
    spec = importlib.util.spec_from_file_location(
        "_skcrf_benchmark_tasks", ROOT / "benchmarks" / "_tasks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_TASKS = _benchmark_tasks()
window_token_features = _TASKS.window_token_features
# sklearn-crfsuite's CoNLL 2002 tutorial word2features, as the tutorial writes it
tutorial_word2features = _TASKS.tutorial_word2features


def by_function(function, X):
    return [[function(seq, i) for i in range(len(seq))] for seq in X]


def assert_same_dicts(got, expected):
    """Equal dicts token by token: keys in the same order, equal values of the same types."""
    assert len(got) == len(expected)
    for i, (got_seq, expected_seq) in enumerate(zip(got, expected)):
        assert len(got_seq) == len(expected_seq), f"X[{i}]"
        for t, (g, e) in enumerate(zip(got_seq, expected_seq)):
            assert list(g) == list(e), f"X[{i}][{t}]: keys {list(g)} != {list(e)}"
            for key in e:
                assert g[key] == e[key] and type(g[key]) is type(e[key]), (
                    f"X[{i}][{t}][{key!r}]: {g[key]!r} != {e[key]!r}"
                )


# the four feature functions: (spec, the dict function, tokens as str or (word, tag))
CASES = {
    "tutorial": (tutorial_spec, tutorial_word2features, "tuples"),
    "seed": (treebank_seed_spec, treebank_token_features, "words"),
    "window": (treebank_window_spec, window_token_features, "words"),
    "sequence_featurizer": (sequence_featurizer_spec, None, "words"),
    "sequence_featurizer_columns": (
        lambda: sequence_featurizer_spec(window=2, affix_length=4, n_columns=1),
        None,
        "tuples",
    ),
}


def expected_dicts(case, X):
    _, function, _ = CASES[case]
    if function is not None:
        return by_function(function, X)
    if case == "sequence_featurizer":
        return SequenceFeaturizer().transform(X)
    return SequenceFeaturizer(window=2, affix_length=4).transform(X)


def case_input(case, tagged):
    """The case's tokens of tagged sentences: words, or (word, tag) tuples."""
    if CASES[case][2] == "words":
        return [[w for w, _ in s] for s in tagged]
    return [[(w, t) for w, t in s] for s in tagged]


def every_type_and_some_contexts(X, sentence_step=8, length=25):
    """Every distinct token of ``X`` and one sentence in ``sentence_step``.

    The distinct tokens, in the order they first occur, make sentences of
    ``length`` tokens: each is featurized as a token and, inside its
    neighbours' windows, at every offset. The real sentences keep real
    contexts (sentence starts and ends, repeated neighbours). A quarter of the
    Treebank's tokens, as many types: the plain-Python reference expander is
    what this test spends its time in.
    """
    types = list(dict.fromkeys(token for seq in X for token in seq))
    chunks = [types[k : k + length] for k in range(0, len(types), length)]
    return chunks + X[::sentence_step]


@pytest.mark.treebank
@pytest.mark.parametrize("case", sorted(CASES))
def test_specs_give_the_feature_functions_dicts_on_the_treebank(case, treebank):
    train, test = treebank
    X = every_type_and_some_contexts(case_input(case, train + test))
    plan = parse_python(CASES[case][0]())
    assert_same_dicts(expand_dicts(plan, X), expected_dicts(case, X))


# every kind of string the str methods treat unusually
HOSTILE = [
    "",
    "ÉCOLE",
    "école",
    "ǅ",  # titlecase letter: neither upper nor lower
    "ǅemal",
    "ǄEMAL",
    "ß",  # upper() is 'SS'
    "STRASSE",
    "İ",  # lower() is 'i' + a combining dot (two characters)
    "İstanbul",
    "ı",
    "²",  # isdigit, not a decimal
    "٣",  # an Arabic-Indic digit
    "x²",
    "１２３",
    "Ⅻ",  # a Roman numeral: upper, not a digit
    "ﬁ",  # upper() is 'FI'
    "ŉ",
    "well-known",
    "-",
    "--",
    "U.S.-based",
    "ΣΑΣ",
    "ὈΔΥΣΣΕΎΣ",
    "e\u0301",  # a combining mark
    "日本",
    "😀",
    " ",
    "\t",
    "A",
    "Hello",
    "iPhone",
    "1984",
    "a:b",
]
TAGS = ["NN", "", "NNP", "ß", "İ", "-NONE-", "x", "ǅ"]


def hostile_sequences(with_empty=True):
    words = [w for w in HOSTILE if with_empty or w]
    X = [[w] for w in words]  # alone: first and last
    X += [[a, b] for a, b in zip(words, words[1:])]
    X += [words, words[::-1]]
    return X


def as_tuples(X):
    return [[(w, TAGS[(i + j) % len(TAGS)]) for j, w in enumerate(seq)] for i, seq in enumerate(X)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_specs_give_the_feature_functions_dicts_on_hostile_strings(case):
    # the seed function fails on an empty word (word[0]): checked on its own below
    X = hostile_sequences(with_empty=case != "seed")
    if CASES[case][2] == "tuples":
        X = as_tuples(X)
    plan = parse_python(CASES[case][0]())
    assert_same_dicts(expand_dicts(plan, X), expected_dicts(case, X))


def test_seed_spec_on_an_empty_word_gives_the_documented_values():
    # treebank_token_features fails on '' (word[0]); the spec's word[0] is word[0:1]
    (tokens,) = feature_dicts(treebank_seed_spec(), [["", "a"]])
    with pytest.raises(IndexError):
        treebank_token_features(["", "a"], 0)
    assert tokens[0]["is_capitalized"] is True  # ''.upper() == ''
    assert tokens[0]["prefix-1"] == "" and tokens[0]["capitals_inside"] is False
    assert tokens[1]["prev_word"] == ""


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(st.lists(st.lists(st.text(max_size=6), min_size=1, max_size=5), min_size=1, max_size=3))
def test_specs_give_the_feature_functions_dicts_on_any_text(X):
    for case in ("tutorial", "window", "sequence_featurizer"):
        data = as_tuples(X) if CASES[case][2] == "tuples" else X
        assert_same_dicts(feature_dicts(CASES[case][0](), data), expected_dicts(case, data))
    if all(w for seq in X for w in seq):
        assert_same_dicts(
            feature_dicts(treebank_seed_spec(), X), by_function(treebank_token_features, X)
        )


# -- the expressions one by one --------------------------------------------------


def one(value, X, **kwargs):
    """The values of one feature 'f' at every token (None where it is left out)."""
    return [[token.get("f") for token in seq] for seq in feature_dicts({"f": value}, X, **kwargs)]


@pytest.mark.parametrize(
    "expr, function",
    [
        (word.lower(), str.lower),
        (word.upper(), str.upper),
        (word[:3], lambda s: s[:3]),
        (word[-3:], lambda s: s[-3:]),
        (word[1:-1], lambda s: s[1:-1]),
        (word[2], lambda s: s[2:3]),
        (word[-1], lambda s: s[-1:]),
        (word[-2], lambda s: s[-2:-1]),
        (word.lower()[-2:], lambda s: s.lower()[-2:]),
        (word.isupper(), str.isupper),
        (word.islower(), str.islower),
        (word.istitle(), str.istitle),
        (word.isdigit(), str.isdigit),
        (word.isalpha(), str.isalpha),
        (word.length(), len),
        (word.upper().length(), lambda s: len(s.upper())),
        (word.has_digit(), lambda s: any(c.isdigit() for c in s)),
        (word.contains("-"), lambda s: "-" in s),
        (word.contains(""), lambda s: "" in s),
        (word.upper() == word, lambda s: s.upper() == s),
        (word == word.upper(), lambda s: s.upper() == s),
        (word.lower() != word, lambda s: s.lower() != s),
        (word[1:].lower() != word[1:], lambda s: s[1:].lower() != s[1:]),
        (word[0].upper() == word[0], lambda s: s[:1].upper() == s[:1]),
        (word == "ß", lambda s: s == "ß"),
        (word.lower() != "the", lambda s: s.lower() != "the"),
        ("the" == word, lambda s: s == "the"),
        (~word.isupper(), lambda s: not s.isupper()),
        (word.in_set(["ß", "A", "x"]), lambda s: s in {"ß", "A", "x"}),
        (word.shape(), None),
        (word.char_shape(), None),
        (word + "|" + word.lower(), lambda s: s + "|" + s.lower()),
        ("<" + word + ">", lambda s: "<" + s + ">"),
    ],
    # (a lambda's repr holds its address: the ids must be the same in every process)
    ids=lambda value: "reference" if isinstance(value, types.FunctionType) else repr(value),
)
def test_each_expression_follows_python(expr, function):
    from skcrf._featurize._featurizer import word_shape

    if function is None:
        if "char_shape" in repr(expr):
            function = _benchmark_tasks().word_shape
        else:
            function = word_shape
    words = [w for w in HOSTILE]
    got = one(expr, [words])[0]
    assert got == [function(w) for w in words]
    assert [type(v) for v in got] == [type(function(w)) for w in words]


def test_positions_outside_the_sequence_leave_the_feature_out_or_give_the_text():
    X = [["a", "b", "c"]]
    assert one(word.at(-1), X) == [[None, "a", "b"]]
    assert one(word.at(2), X) == [["c", None, None]]
    assert one(word.at(-1, outside=""), X) == [["", "a", "b"]]
    # the outside text is used as given: no step applies to it
    assert one(word.at(1, outside="</S>").upper(), X) == [["B", "C", "</S>"]]
    assert one(word.upper().at(1, outside="</S>"), X) == [["B", "C", "</S>"]]
    assert one(word.at(-1).isupper(), [["A", "b"]]) == [[None, True]]
    assert one(word.at(-1).at(-1), X) == [[None, None, "a"]]
    # absolute positions: 0 the first token, -1 the last; a relative at does not move them
    assert one(word.at(0, absolute=True), X) == [["a", "a", "a"]]
    assert one(word.at(-1, absolute=True).at(-1), X) == [["c", "c", "c"]]
    assert one(word.at(5, absolute=True), X) == [[None, None, None]]
    # a join: left out when a part is outside, unless they share an outside text
    assert one(word.at(-1) + "|" + word, X) == [[None, "a|b", "b|c"]]
    assert one(word.at(-1, outside="^") + "|" + word.at(1, outside="^"), X) == [
        ["^|b", "a|c", "b|^"]
    ]
    assert one((word + "/" + word.at(1)).at(-1), X) == [[None, "a/b", "b/c"]]
    # CRF++'s numbered boundaries
    from skcrf._template._plan import Boundary

    assert one(word.at(-2, outside=Boundary("_B-", "_B+")), X) == [["_B-2", "_B-1", "a"]]


def test_constants_markers_and_position_bools():
    X = [["a", "b", "c"], ["z"]]
    spec = {
        "bias": 1.0,
        "one": 1,
        "yes": True,
        "no": False,
        "half": 0.5,
        "lang": "en",
        "BOS": BOS,
        "EOS": EOS,
        "first": is_first,
        "last": is_last,
        "-2:BOS": outside(-2, marker=True),
        "far": outside(2),
    }
    got = feature_dicts(spec, X)
    assert got[1] == [
        {
            "bias": 1.0, "one": 1, "yes": True, "no": False, "half": 0.5, "lang": "en",
            "BOS": True, "EOS": True, "first": True, "last": True, "-2:BOS": True, "far": True,
        }
    ]  # fmt: skip
    assert [list(t) for t in got[0]][1] == [
        "bias", "one", "yes", "no", "half", "lang", "first", "last", "-2:BOS", "far",
    ]  # fmt: skip
    assert [t["first"] for t in got[0]] == [True, False, False]
    assert [t["last"] for t in got[0]] == [False, False, True]
    assert [t["far"] for t in got[0]] == [False, True, True]
    assert [type(t["yes"]) for t in got[0]] == [bool] * 3
    assert [type(t["one"]) for t in got[0]] == [int] * 3


def test_columns_by_index_and_by_name():
    X = [[("Dogs", "NNS", "dog"), ("bark", "VBP", "bark")]]
    columns = ("word", "pos", "lemma")
    got = feature_dicts(
        {"w": word, "pos": Col("pos"), "lemma": Col(2), "p|l": Col("pos") + "|" + Col("lemma")},
        X,
        columns=columns,
    )
    assert got == [
        [
            {"w": "Dogs", "pos": "NNS", "lemma": "dog", "p|l": "NNS|dog"},
            {"w": "bark", "pos": "VBP", "lemma": "bark", "p|l": "VBP|bark"},
        ]
    ]
    assert columns_read(parse_python({"pos": Col("pos")}, columns=columns)) == 1


def test_lookups_and_sets_are_copied_when_the_expression_is_made():
    clusters = {"paris": "0110"}
    cities = {"paris"}
    spec = {"c": word.lower().lookup(clusters), "city": word.lower().in_set(cities)}
    clusters["is"], cities = "1", cities.add("is")
    assert feature_dicts(spec, [["Paris", "is"]]) == [
        [{"c": "0110", "city": True}, {"city": False}]
    ]


def test_transition_features():
    X = [["The", "Cat", "sat"]]
    got = feature_dicts(
        {
            "w": word,
            "tw": transition(word.lower()),
            "both": transition(word.isupper(), also_state=True),
        },
        X,
    )
    assert got == [
        [
            {"w": "The", "both": False},
            {"w": "Cat", "both": False, "__transition__": {"tw": "cat", "both": False}},
            {"w": "sat", "both": False, "__transition__": {"tw": "sat", "both": False}},
        ]
    ]
    plan = parse_python({"tw": transition(word), "b": transition(1.0, also_state=True)})
    assert [f.kind for f in plan.features] == ["transition", "both"]
    assert window(transition(word), [-1], key="t{offset}")["t-1"].value.offset == -1


def test_apply_runs_python_and_marks_the_plan():
    def initial(text):
        return text[:1] or None

    spec = {"i": word.apply(initial), "n": word.apply(len, returns=int)}
    assert feature_dicts(spec, [["ab", ""]]) == [[{"i": "a", "n": 2}, {"n": 0}]]
    assert uses_python(parse_python(spec))
    assert not any(uses_python(parse_python(f())) for f, _, _ in CASES.values())


def test_window_keys():
    spec = window(word.lower(), range(-2, 3), key="{offset:+d}:word.lower()")
    assert list(spec) == [f"{k:+d}:word.lower()" for k in range(-2, 3)]
    assert [e.offset for e in spec.values()] == [-2, -1, 0, 1, 2]
    with pytest.raises(ValueError, match="same key 'w' twice"):
        window(word, [0, 1], key="w")
    with pytest.raises(TypeError, match="not a str"):
        window(word, [0], key=lambda k: k)


# -- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, columns, message",
    [
        (
            {"postag": Col("pos")},
            ("word", "tag"),
            r"feature 'postag': unknown column 'pos'.*\('word', 'tag'\)",
        ),
        (
            {"postag": Col("pos")[:2]},
            None,
            r"feature 'postag': Col\('pos'\)\[:2\] names the column 'pos', but no columns=",
        ),
        (
            {"x": word.isupper() + "|" + word},
            None,
            r"feature 'x': word.isupper\(\) gives a bool, not text",
        ),
        (
            {"x": "w=" + word.length()},
            None,
            r"feature 'x': word.length\(\) gives an int, not text",
        ),
        ({1: word}, None, r"feature keys are str, got 1 \(int\) for word"),
        ({("a", "b"): word}, None, r"feature keys are str, got \('a', 'b'\) \(tuple\)"),
        (
            {"emb": Embeddings({"a": [1.0, 2.0]})},
            None,
            r"feature 'emb': word vectors \(skcrf.Embeddings\) are not supported",
        ),
        ({"emb": transition(Embeddings({"a": [1.0]}))}, None, r"feature 'emb': word vectors"),
        ({"x": None}, None, r"feature 'x': a spec value is an expression.*got NoneType None"),
        ({"x": ["a", "b"]}, None, r"feature 'x': .*got list"),
        ({"x": {"a": 1}}, None, r"feature 'x': .*got dict"),
        ({"x": float("nan")}, None, r"feature 'x': a constant must be finite"),
        ({"": word}, None, r"feature '': an empty key"),
        ({"__transition__": word}, None, r"feature '__transition__': the key .* is reserved"),
        (
            {"x": word.at(-1, outside="").isupper()},
            None,
            r"feature 'x': .* gives a bool: outside= is text",
        ),
        (
            {"x": word.at(-1, outside="a") + word.at(1, outside="b")},
            None,
            r"feature 'x': the parts that can fall outside .* share one outside= text",
        ),
        (
            {"x": word.at(-1, outside="a") + word.at(1)},
            None,
            r"feature 'x': the parts .* share one outside=",
        ),
        ([("a", word), ("a", word.lower())], None, r"feature 'a': the key is given twice"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_bad_specs_get_an_error_naming_the_feature(spec, columns, message):
    with pytest.raises(TemplateError, match=message):
        parse_python(spec, columns=columns)


def test_misused_expressions_fail_at_once_with_a_clear_message():
    with pytest.raises(TypeError, match="no truth value"):
        if word.isupper():
            pass
    with pytest.raises(TypeError, match="no truth value"):
        word.isupper() and word.istitle()  # noqa: B015
    with pytest.raises(TypeError, match="join expressions with \\+"):
        f"{word}|{Col('pos')}"  # noqa: B021
    with pytest.raises(TypeError, match="join expressions with \\+"):
        str(word)
    with pytest.raises(TypeError, match="supported comparisons"):
        word.lower() == word.upper()  # noqa: B015
    with pytest.raises(TypeError, match="supported comparisons"):
        word.at(-1).upper() == word  # noqa: B015
    with pytest.raises(TypeError, match="gives a bool; .isupper\\(\\) takes text"):
        word.isupper().isupper()
    with pytest.raises(TypeError, match="gives an int; .lower\\(\\) takes text"):
        word.length().lower()
    with pytest.raises(TypeError, match="must be the last step"):
        word.apply(str.strip).lower()
    with pytest.raises(TypeError, match="slice step"):
        word[::2]
    with pytest.raises(TypeError, match="~ negates a bool"):
        ~word  # noqa: B018
    with pytest.raises(TemplateError, match="Embeddings"):
        word.lookup(Embeddings({"a": [1.0]}))
    with pytest.raises(TypeError, match="mapping of str to str"):
        word.lookup({"a": 1})
    with pytest.raises(TypeError, match="set of str"):
        word.in_set("abc")
    with pytest.raises(
        TypeError, match="a dict \\(or a list of \\(key, value\\) pairs\\).*syntax='crfpp'"
    ):
        parse_python("U00:%x[0,0]")
    with pytest.raises(ValueError, match="outside\\(0\\)"):
        outside(0)
    with pytest.raises(TypeError, match="already a transition"):
        transition(transition(word))
    with pytest.raises(TypeError, match="cannot be compared"):
        BOS == True  # noqa: B015, E712


# -- determinism, copies -------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_parse_python_is_deterministic(case):
    make = CASES[case][0]
    plans = [parse_python(make()) for _ in range(3)]
    assert isinstance(plans[0], Plan) and plans[0].syntax == "python"
    assert plans[0] == plans[1] == plans[2]
    spec = make()
    assert parse_python(pickle.loads(pickle.dumps(spec))) == plans[0]
    assert parse_python(copy.deepcopy(spec)) == plans[0]
    assert [f.source for f in plans[0].features] == [f.source for f in plans[1].features]


def test_plans_are_the_same_in_another_process():
    code = (
        "from skcrf._template._python import parse_python\n"
        "from skcrf._template._recipes import treebank_window_spec, tutorial_spec\n"
        "from skcrf._template._python import word\n"
        "spec = {**tutorial_spec(), 'g': word.in_set({'a', 'b', 'c', 'd'})}\n"
        "print(repr(parse_python(treebank_window_spec())))\n"
        "print(sorted(parse_python(spec).features[-1].weight.steps[0][1]))\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "", **_pythonpath()},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def _pythonpath():
    import os

    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": path} if path else {}


def test_expressions_are_immutable_and_shared_by_copies():
    spec = {"w": word.lower(), "j": word + "|" + word.at(1), "b": BOS, "t": transition(word)}
    copied = copy.deepcopy(spec)
    assert all(copied[k] is spec[k] for k in spec)
    base = word.lower()
    base.at(-1)
    base[:2]
    assert repr(base) == "word.lower()" and base.offset == 0 and base.steps == (("lower",),)
    for expr in spec.values():
        assert repr(pickle.loads(pickle.dumps(expr))) == repr(expr)


class _Holder(BaseEstimator):
    """An estimator holding a spec as a parameter, as TemplateFeaturizer will."""

    def __init__(self, templates=None):
        self.templates = templates


def test_a_spec_in_an_estimators_parameters_survives_clone_and_repr():
    spec = tutorial_spec()
    holder = _Holder(spec)
    cloned = clone(holder)  # deep-copies the dict; the expressions are shared
    assert cloned.templates is not spec
    assert all(cloned.templates[k] is spec[k] for k in spec)
    assert parse_python(cloned.templates) == parse_python(spec)
    assert "word.lower()" in repr(holder)


def test_reprs_read_as_the_spec_is_written():
    assert repr(word[0].upper() == word[0]) == "(word[0].upper() == word[0])"
    assert repr(word.at(-1, outside="").lower()) == "word.at(-1, outside='').lower()"
    assert repr(Col("pos")[:2] + "|" + word) == "Col('pos')[:2] + '|' + word"
    assert repr(word.lower().lookup({"a": "b"})) == "word.lower().lookup(<dict of 1>)"
    assert repr([BOS, EOS, is_first, is_last, outside(2, marker=True)]) == (
        "[BOS, EOS, is_first, is_last, outside(2, marker=True)]"
    )
    assert [f.source for f in parse_python({"a": word.isupper(), "b": 1.0}).features] == [
        "'a': word.isupper()",
        "'b': 1.0",
    ]
