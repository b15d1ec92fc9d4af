"""The compiled template path: expander, byte index, TemplateFeaturizer and CRFTagger(featurizer=).

The oracle is the dict path: the reference expander's feature dicts
(``skcrf._template._reference``, plain Python) encoded by the tagger's usual
vocabulary must give exactly the compiled path's attribute ids, values and
transition rows; a tagger fitted from raw tokens must equal one fitted on
those dicts bit for bit.
"""

import pickle
import random
import threading

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV
from test_template_python import every_type_and_some_contexts

import skcrf
from skcrf import CRFTagger, TemplateFeaturizer
from skcrf._featurize._transitions import TransitionParts, with_transitions
from skcrf._featurize._vocabulary import Vocabulary
from skcrf._template._expand import CompiledPlan, expand
from skcrf._template._plan import (
    Boundary,
    Feature,
    Plan,
    Ref,
    TemplateError,
    check_plan,
    plan_from_data,
    plan_to_data,
)
from skcrf._template._python import parse_python
from skcrf._template._recipes import treebank_seed_spec
from skcrf._template._reference import expand_dicts
from skcrf._template._vocabulary import TemplateVocabulary
from skcrf._utils._byte_index import ByteIndex
from skcrf._utils._cqdb_index import LazyNames


def W(offset=0, *steps, column=0):
    return Ref(offset, column, tuple(steps))


def _reverse(text):
    return text[::-1]


#: Every step, boundaries, conditions, absolute refs and all three kinds.
TORTURE = check_plan(
    Plan(
        features=(
            Feature(key=("bias",)),
            Feature(key=("w",), value=(W(0, ("lower",)),)),
            Feature(key=("W",), value=(W(0, ("upper",)),)),
            Feature(key=("p3",), value=(W(0, ("slice", None, 3)),)),
            Feature(key=("s3",), value=(W(0, ("slice", -3, None)),)),
            Feature(key=("mid",), value=(W(0, ("slice", 1, -1)),)),
            Feature(key=("s3l",), value=(W(0, ("slice", -3, None), ("lower",)),)),
            Feature(key=("up",), weight=W(0, ("is_upper",))),
            Feature(key=("ti",), weight=W(0, ("is_title",))),
            Feature(key=("lo",), weight=W(0, ("is_lower",))),
            Feature(key=("dg",), weight=W(0, ("is_digit",))),
            Feature(key=("al",), weight=W(0, ("is_alpha",))),
            Feature(key=("hd",), weight=W(0, ("has_digit",))),
            Feature(key=("hy",), weight=W(0, ("contains", "-"))),
            Feature(key=("hé",), weight=W(0, ("contains", "é"))),
            Feature(key=("eu",), weight=W(0, ("equals_upper",))),
            Feature(key=("ci",), weight=W(0, ("slice", 1, None), ("equals_lower",), ("not",))),
            Feature(key=("cap",), weight=W(0, ("slice", None, 1), ("equals_upper",))),
            Feature(key=("len",), weight=W(0, ("length",))),
            Feature(key=("sh",), value=(W(0, ("shape",)),)),
            Feature(key=("shc",), value=(W(0, ("shape_collapsed",)),)),
            Feature(key=("asl",), value=(W(0, ("ascii_lower",)),)),
            Feature(key=("pos",), value=(W(0, column=1),)),
            Feature(key=("pos2",), value=(W(0, ("slice", None, 2), column=1),)),
            Feature(key=("-1:w",), value=(W(-1, ("lower",)),)),
            Feature(key=("w[-1]|w[0]",), value=(W(-1, ("lower",)), "|", W(0, ("lower",)))),
            Feature(key=("prev",), value=(W(-1),), outside=Boundary("", "", False)),
            Feature(key=("U01:", W(-2), "/", W(2)), outside=Boundary("_B-", "_B+")),
            Feature(key=("gz",), weight=W(0, ("in_set", frozenset({"the", "a"})))),
            Feature(key=("cl",), value=(W(0, ("lookup", {"the": "0101", "cat": "11"})),)),
            Feature(key=("fn",), value=(W(0, ("call", _reverse)),)),
            Feature(key=("BOS",), when_outside=-1),
            Feature(key=("EOS",), when_outside=1),
            Feature(key=("+2:EOS",), when_outside=2),
            Feature(key=("first",), value=(Ref(0, 0, (), True),)),
            Feature(key=("last",), value=(Ref(-1, 0, (), True),)),
            Feature(key=("B:", W(0, ("lower",))), kind="transition"),
            Feature(key=("*:", W(-1)), kind="both", outside=Boundary("_x-", "_x+")),
        )
    )
)

# ASCII, Unicode case (titlecase, ß, Turkish İ, ligatures), non-ASCII digits,
# combining marks, spaces and separators
ALPHABET = [*"abcXYZ019-._ |:", "é", "É", "ß", "ǅ", "²", "٣", "İ", "ﬁ", "Σ", "\u0301", "日"]


def _word(rng):
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 7)))


def _tokens(rng, n_sequences, columns=2):
    return [
        [tuple(_word(rng) for _ in range(columns)) for _ in range(rng.randint(0, 9))]
        for _ in range(n_sequences)
    ]


def _dict_path(plan, X, vocabulary, transitions, grow):
    parts = TransitionParts()
    encoded = vocabulary.encode(expand_dicts(plan, X), grow=grow, transitions=parts)
    return with_transitions(encoded, parts, transitions, grow=grow)


def _assert_same_rows(a, b):
    assert np.array_equal(a.indptr, b.indptr)
    assert np.array_equal(a.ids, b.ids)
    assert np.array_equal(a.values, b.values)


@pytest.mark.parametrize("seed", range(3))
def test_compiled_expander_equals_the_dict_path_on_unicode_tokens(seed):
    rng = random.Random(seed)
    X = _tokens(rng, 300) + [[("The", "DT"), ("cat", "NN"), ("SAT", "VBD")]]
    vocabulary, transitions = Vocabulary(), Vocabulary()
    expected = _dict_path(TORTURE, X, vocabulary, transitions, grow=True)
    compiled = CompiledPlan(TORTURE)
    index, transition_index = ByteIndex(), ByteIndex()
    got = expand(compiled, X, index, transition_index, grow=True)
    assert index.names() == vocabulary.attributes
    assert transition_index.names() == transitions.attributes
    _assert_same_rows(got, expected)
    _assert_same_rows(got.transitions, expected.transitions)
    # prediction: unseen attributes skipped, the same as the dict path
    X_new = _tokens(rng, 200)
    expected = _dict_path(TORTURE, X_new, vocabulary, transitions, grow=False)
    got = expand(compiled, X_new, index, transition_index)
    _assert_same_rows(got, expected)
    _assert_same_rows(got.transitions, expected.transitions)
    assert len(index) == len(vocabulary.attributes)  # nothing added


@pytest.mark.parametrize("seed", range(2))
def test_repeated_tokens_give_the_rows_the_dict_path_gives(seed):
    # A call looks a local feature (one token read) up once per distinct
    # token: tokens from a small pool repeat at every offset, at the edges,
    # with features that drop and names the index does not hold.
    rng = random.Random(seed)
    pool = [tuple(_word(rng) for _ in range(2)) for _ in range(12)]
    X = [[rng.choice(pool) for _ in range(rng.randint(0, 9))] for _ in range(300)]
    vocabulary, transitions = Vocabulary(), Vocabulary()
    expected = _dict_path(TORTURE, X[:150], vocabulary, transitions, grow=True)
    compiled = CompiledPlan(TORTURE)
    index, transition_index = ByteIndex(), ByteIndex()
    got = expand(compiled, X[:150], index, transition_index, grow=True)
    assert index.names() == vocabulary.attributes
    _assert_same_rows(got, expected)
    _assert_same_rows(got.transitions, expected.transitions)
    pool += [tuple(_word(rng) for _ in range(2)) for _ in range(12)]  # unseen tokens
    X_new = [[rng.choice(pool) for _ in range(rng.randint(0, 9))] for _ in range(300)]
    expected = _dict_path(TORTURE, X_new, vocabulary, transitions, grow=False)
    for constant_ids in (None, compiled.constant_ids(index)):
        got = expand(compiled, X_new, index, transition_index, constant_ids=constant_ids)
        _assert_same_rows(got, expected)
        _assert_same_rows(got.transitions, expected.transitions)
        # one sequence at a time gives the same rows
        alone = [expand(compiled, [x], index, transition_index) for x in X_new]
        assert np.array_equal(np.concatenate([a.ids for a in alone]), expected.ids)


def test_str_tokens_read_as_column_zero_and_missing_columns_are_named():
    plan = Plan(features=(Feature(key=("w",), value=(W(0),)),))
    compiled = CompiledPlan(plan)
    index = ByteIndex()
    encoded = expand(compiled, [["a", "b"], [], ["a"]], index, grow=True)
    assert index.names() == ["w:a", "w:b"]
    assert encoded.ids.tolist() == [0, 1, 0]
    two = CompiledPlan(Plan(features=(Feature(key=("p",), value=(W(0, column=1),)),)))
    with pytest.raises(IndexError, match=r"X\[1\]\[0\] has 1 column"):
        expand(two, [[("a", "b")], [("c",)]], ByteIndex(), grow=True)
    with pytest.raises(IndexError, match=r"X\[0\]\[1\] is a str"):
        expand(two, [[("a", "b"), "c"]], ByteIndex(), grow=True)
    with pytest.raises(TypeError, match=r"X\[0\]\[0\]\[1\] must be a str"):
        expand(two, [[("a", 3)]], ByteIndex(), grow=True)
    with pytest.raises(ValueError, match=r"X\[0\]\[0\].*not valid text"):
        expand(compiled, [["\ud800"]], ByteIndex(), grow=True)


def test_byte_index_numbers_names_and_forgets_a_failed_fits_additions():
    rng = random.Random(0)
    names = [_word(rng) * rng.randint(1, 5) for _ in range(5000)] + ["", "a\0b", "a"]
    index = ByteIndex(names)
    first = {}
    for name in names:
        first.setdefault(name, len(first))
    assert len(index) == len(first)
    assert index.names() == list(first)
    assert all(index.lookup(name) == k for name, k in first.items())
    assert index.lookup("not there\0") == -1
    assert pickle.loads(pickle.dumps(index)).names() == index.names()
    index.truncate(10)
    assert index.names() == list(first)[:10]
    assert index.lookup(list(first)[10]) == -1
    assert index.add_str(list(first)[10]) == 10


def test_byte_index_adds_packed_names_and_refuses_a_repeated_one():
    rng = random.Random(1)
    words = [_word(rng) * rng.randint(1, 5) for _ in range(3000)]
    names = list(dict.fromkeys([*words, "", "a\0b"]))
    text = np.frombuffer("".join(names).encode(), dtype=np.uint8)
    starts = np.concatenate([[0], np.cumsum([len(n.encode()) for n in names])])
    index = ByteIndex(["first"])
    index.add_packed(text, starts[:1])  # no name
    index.add_packed(text, starts)
    assert index.names() == ["first", *names]
    assert all(index.lookup(name) == k + 1 for k, name in enumerate(names))
    repeated = np.concatenate([starts, starts[-1] + np.cumsum([len(names[3].encode())])])
    text_again = np.frombuffer("".join([*names, names[3]]).encode(), dtype=np.uint8)
    fresh = ByteIndex(["first"])
    with pytest.raises(ValueError, match=f"name {len(names)} is the same as name 3"):
        fresh.add_packed(text_again, repeated)
    assert fresh.names() == ["first"]  # (what it added is forgotten)


def test_plan_data_round_trip_and_functions_refused():
    plan = Plan(features=tuple(f for f in TORTURE.features if f.key != ("fn",)))
    assert plan_from_data(pickle.loads(pickle.dumps(plan_to_data(plan)))) == plan
    with pytest.raises(TemplateError, match="cannot be saved without pickle"):
        plan_to_data(TORTURE)
    with pytest.raises(TemplateError, match="not valid"):
        plan_from_data({"features": [{"key": ["a"]}]})


def _window_plan():
    features = [Feature(key=("bias",))]
    features += [Feature(key=(f"w[{k}]",), value=(W(k, ("lower",)),)) for k in range(-2, 3)]
    features += [
        Feature(key=(f"w[{k}]|w[{k + 1}]",), value=(W(k, ("lower",)), "|", W(k + 1, ("lower",))))
        for k in range(-2, 2)
    ]
    features += [Feature(key=(f"p{m}",), value=(W(0, ("slice", None, m)),)) for m in (1, 2, 3)]
    features += [Feature(key=(f"s{m}",), value=(W(0, ("slice", -m, None)),)) for m in (1, 2, 3)]
    features += [
        Feature(key=("shape",), value=(W(0, ("shape",)),)),
        Feature(key=("is_title",), weight=W(0, ("is_title",))),
        Feature(key=("is_upper",), weight=W(0, ("is_upper",))),
        Feature(key=("BOS",), when_outside=-1),
        Feature(key=("EOS",), when_outside=1),
        Feature(key=("T:", W(0, ("shape_collapsed",))), kind="transition"),
    ]
    return Plan(features=tuple(features))


@pytest.fixture(scope="module")
def small_treebank(treebank):
    train, test = treebank
    words = [[w for w, _ in s] for s in train[:300]]
    tags = [[t for _, t in s] for s in train[:300]]
    test_words = [[w for w, _ in s] for s in test[:100]]
    test_tags = [[t for _, t in s] for s in test[:100]]
    return words, tags, test_words, test_tags


SETTINGS = {"c1": 0.05, "c2": 0.05, "max_iterations": 20, "all_possible_transitions": True}


@pytest.fixture(scope="module")
def fitted_pair(small_treebank):
    words, tags, test_words, _ = small_treebank
    plan = _window_plan()
    with pytest.warns(Warning):  # stops at max_iterations
        by_dicts = CRFTagger(**SETTINGS).fit(expand_dicts(plan, words), tags)
    with pytest.warns(Warning):
        by_template = CRFTagger(featurizer=TemplateFeaturizer(plan), **SETTINGS).fit(words, tags)
    return plan, by_dicts, by_template


def test_fit_from_raw_tokens_equals_the_dict_path_bit_for_bit(fitted_pair, small_treebank):
    plan, by_dicts, by_template = fitted_pair
    _, _, test_words, test_tags = small_treebank
    assert by_template.attributes_ == by_dicts.attributes_
    assert by_template._model.conditioned.attributes == by_dicts._model.conditioned.attributes
    assert (
        by_template.training_log_.last_iteration["loss"]
        == (by_dicts.training_log_.last_iteration["loss"])
    )
    assert np.array_equal(by_template._model.weights, by_dicts._model.weights)
    test_dicts = expand_dicts(plan, test_words)
    assert by_template.predict(test_words) == by_dicts.predict(test_dicts)
    assert by_template.predict_single(test_words[3]) == by_dicts.predict_single(test_dicts[3])
    assert by_template.predict_marginals(test_words[:5]) == by_dicts.predict_marginals(
        test_dicts[:5]
    )
    assert by_template.score(test_words, test_tags) == by_dicts.score(test_dicts, test_tags)
    assert by_template.predict_nbest(test_words[:3], 2) == by_dicts.predict_nbest(
        test_dicts[:3], 2
    )
    # a generator of raw sentences is read as a list
    assert by_template.predict(iter(test_words)) == by_dicts.predict(test_dicts)


def test_a_template_tagger_refuses_feature_dicts_and_names_the_token(fitted_pair):
    _, _, by_template = fitted_pair
    with pytest.raises(TypeError, match=r"X\[0\]\[0\].*give it the tokens, not feature dicts"):
        by_template.predict([[{"w": "a"}]])


def test_the_model_carries_its_template(fitted_pair, small_treebank, tmp_path):
    plan, _, by_template = fitted_pair
    _, _, test_words, _ = small_treebank
    expected = by_template.predict(test_words)
    assert pickle.loads(pickle.dumps(by_template)).predict(test_words) == expected
    path = tmp_path / "model.skcrf"
    by_template.save(path)
    loaded = CRFTagger.load(path)
    assert loaded.predict(test_words) == expected
    # the file's packed names are read into the byte index, never listed as str
    names = loaded._fitted_model().attributes
    assert isinstance(names, LazyNames) and names._names is None
    assert loaded._fitted().vocabulary.index.names() == names.tolist()
    assert isinstance(loaded.featurizer, TemplateFeaturizer)
    assert loaded.featurizer.plan() == plan
    # a clone of the loaded tagger refits on raw tokens with the same template
    assert clone(loaded).featurizer.plan() == plan


def test_prediction_threads_give_the_sequential_answers(fitted_pair, small_treebank):
    _, _, by_template = fitted_pair
    _, _, test_words, _ = small_treebank
    data = test_words * 4  # ~10k tokens: 2 featurizing threads and 2 decoding
    expected = by_template.predict(data)
    two = clone(by_template).set_params(n_jobs=2)
    two.__dict__.update({k: v for k, v in by_template.__dict__.items() if k.startswith("_")})
    assert two.predict(data) == expected
    results, errors = {}, []

    def work(k):
        try:
            if k % 2:
                results[k] = by_template.predict(data[: 50 + k])
            else:
                results[k] = [by_template.predict_single(s) for s in test_words[:40]]
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for k, got in results.items():
        if k % 2:
            assert got == expected[: 50 + k]
        else:
            assert got == expected[:40]


def test_shard_errors_name_the_sequence_of_the_whole_data(fitted_pair, small_treebank):
    _, _, by_template = fitted_pair
    _, _, test_words, _ = small_treebank
    data = [list(s) for s in test_words * 30]
    data[2500][1] = 7
    tagger = clone(by_template).set_params(n_jobs=2)
    tagger.__dict__.update({k: v for k, v in by_template.__dict__.items() if k.startswith("_")})
    with pytest.raises(TypeError, match=r"X\[2500\]\[1\]"):
        tagger.predict(data)


def test_a_failed_fit_leaves_a_warm_started_tagger_as_it_was(fitted_pair, small_treebank):
    _, _, by_template = fitted_pair
    words, tags, test_words, _ = small_treebank
    tagger = pickle.loads(pickle.dumps(by_template)).set_params(warm_start=True)
    before = tagger.predict(test_words)
    bad = [list(s) for s in words]
    bad[-1][0] = None
    with pytest.raises(TypeError, match=rf"X\[{len(bad) - 1}\]\[0\]"):
        tagger.fit(bad, tags)
    assert tagger.predict(test_words) == before
    assert tagger.attributes_ == by_template.attributes_


def test_grid_search_tunes_the_template_beside_c1(small_treebank):
    words, tags, _, _ = small_treebank
    small = Plan(features=(Feature(key=("w",), value=(W(0, ("lower",)),)),))
    search = GridSearchCV(
        CRFTagger(featurizer=TemplateFeaturizer(small), max_iterations=5),
        {"featurizer__templates": [small, _window_plan()], "c1": [0.0, 0.1]},
        cv=2,
    )
    with pytest.warns(Warning):
        search.fit(words[:120], tags[:120])
    assert search.best_params_["featurizer__templates"] == _window_plan()
    assert search.best_estimator_.featurizer.templates == _window_plan()


def test_template_featurizer_transform_gives_the_dicts():
    plan = _window_plan()
    X = [["The", "Cat", "sat"], ["A"]]
    assert TemplateFeaturizer(plan).transform(X) == expand_dicts(plan, X)
    assert TemplateFeaturizer(plan).fit_transform(X) == expand_dicts(plan, X)
    assert skcrf.TemplateFeaturizer is TemplateFeaturizer
    with pytest.raises(TemplateError, match="needs templates"):
        TemplateFeaturizer().fit()


def test_template_vocabulary_pickles_with_its_names():
    plan = _window_plan()
    vocabulary = TemplateVocabulary(CompiledPlan(plan))
    vocabulary.encode([["The", "cat"]], grow=True)
    copy = pickle.loads(pickle.dumps(vocabulary))
    assert copy.attributes == vocabulary.attributes
    assert copy.index.names() == vocabulary.index.names()


def _syntax_plans():
    import json
    from pathlib import Path

    from skcrf._template._crfpp import parse_crfpp
    from skcrf._template._wapiti import parse_wapiti

    data = Path(__file__).parent / "data" / "templates"
    crfpp = json.loads((data / "crfpp.json").read_text(encoding="utf-8"))["template"]
    wapiti = json.loads((data / "wapiti.json").read_text(encoding="utf-8"))["patterns"]
    return {"crfpp": parse_crfpp(crfpp), "wapiti": parse_wapiti(wapiti)}


@pytest.mark.parametrize("syntax", ["crfpp", "wapiti", "crfsuite"])
def test_compiled_expander_equals_the_dict_path_for_each_syntax(syntax):
    if syntax == "crfsuite":
        from skcrf._template._crfsuite import parse_crfsuite

        plan = parse_crfsuite(
            [(("w", 0),), (("w", -1), ("w", 0)), (("pos", 1), ("w", 2)), (("pos", -2),)],
            columns=("w", "pos", "chunk"),
        )
    else:
        plan = _syntax_plans()[syntax]
    rng = random.Random(7)
    X = _tokens(rng, 200, columns=3) + [[("a:b\\c", "x", "é")] * 12]
    vocabulary, transitions = Vocabulary(), Vocabulary()
    expected = _dict_path(plan, X, vocabulary, transitions, grow=True)
    index, transition_index = ByteIndex(), ByteIndex()
    got = expand(CompiledPlan(plan), X, index, transition_index, grow=True)
    assert index.names() == vocabulary.attributes
    assert transition_index.names() == transitions.attributes
    _assert_same_rows(got, expected)
    if expected.transitions is not None:
        _assert_same_rows(got.transitions, expected.transitions)


@pytest.mark.parametrize("recipe", ["tutorial", "seed", "window", "sequence_featurizer"])
def test_compiled_expander_equals_the_dict_functions_on_the_treebank(recipe, treebank):
    from skcrf._template import _recipes

    spec = {
        "tutorial": _recipes.tutorial_spec,
        "seed": _recipes.treebank_seed_spec,
        "window": _recipes.treebank_window_spec,
        "sequence_featurizer": lambda: _recipes.sequence_featurizer_spec(n_columns=1),
    }[recipe]()
    plan = parse_python(spec)
    train, _ = treebank
    if recipe in ("tutorial", "sequence_featurizer"):
        X = [list(s) for s in train]  # (word, tag) tokens: the tag as a column
    else:
        X = [[w for w, _ in s] for s in train]
    X = every_type_and_some_contexts(X)
    rng = random.Random(3)
    hostile = [[_word(rng) or "x" for _ in range(6)] for _ in range(100)]
    if recipe in ("tutorial", "sequence_featurizer"):
        hostile = [[(w, _word(rng)) for w in s] for s in hostile]
    X += hostile
    vocabulary, transitions = Vocabulary(), Vocabulary()
    expected = _dict_path(plan, X, vocabulary, transitions, grow=True)
    index = ByteIndex()
    got = expand(CompiledPlan(plan), X, index, ByteIndex(), grow=True)
    assert index.names() == vocabulary.attributes
    _assert_same_rows(got, expected)


def test_crfsuite_files_hold_the_weights_and_say_the_template_is_not_there(
    small_treebank, tmp_path
):
    words, tags, test_words, _ = small_treebank
    plan = Plan(features=_window_plan().features[:-1])  # no transition features
    settings = {**SETTINGS, "max_iterations": 5}
    target = tmp_path / "fitted.crfsuite"
    with pytest.warns(Warning):
        tagger = CRFTagger(
            featurizer=TemplateFeaturizer(plan), model_filename=target, **settings
        ).fit(words, tags)
    expected = tagger.predict(test_words)
    path = tmp_path / "model.crfsuite"
    with pytest.warns(UserWarning, match="not its template"):
        tagger.to_crfsuite(path)
    # the file tags the template's dicts as the template tagger tags raw tokens
    from_file = CRFTagger.from_crfsuite(path)
    assert from_file.predict(TemplateFeaturizer(plan).transform(test_words)) == expected
    # model_filename: the weights from the file, the template from the parameter
    reader = CRFTagger(featurizer=TemplateFeaturizer(plan), model_filename=target)
    assert reader.predict(test_words) == expected


def test_raw_tokens_stream_into_fit_and_predict(fitted_pair, small_treebank):
    _, _, by_template = fitted_pair
    words, tags, test_words, _ = small_treebank
    with pytest.warns(Warning):
        streamed = clone(by_template).fit((s for s in words), (t for t in tags))
    assert np.array_equal(streamed._model.weights, by_template._model.weights)
    assert streamed.predict(s for s in test_words) == by_template.predict(test_words)
    # every decoding method takes raw tokens
    assert len(streamed.sequence_log_proba(test_words[:3])) == 3
    assert len(streamed.predict_transition_marginals(test_words[:2])) == 2


def test_one_sentence_decoded_in_one_call_gives_the_encoded_path(small_treebank):
    # predict_single featurizes and decodes a state-only template's tokens in
    # one compiled call: the same labels as the rows encoded, then decoded
    words, tags, test_words, _ = small_treebank
    plan = parse_python(treebank_seed_spec())
    with pytest.warns(Warning):  # stops at max_iterations
        tagger = CRFTagger(featurizer=TemplateFeaturizer(plan), **SETTINGS).fit(words, tags)
    predictor = tagger._fitted()
    assert tagger._model.conditioned is None
    for tokens in [*test_words, [], ["unseen-word"]]:
        encoded = predictor.encode_single(tokens)
        path = predictor.decoder.viterbi_single(encoded)
        assert tagger.predict_single(tokens) == predictor.classes[path].tolist()
    assert [tagger.predict_single(s) for s in test_words] == tagger.predict(test_words)
    assert tagger.predict_single(tuple(test_words[0])) == tagger.predict_single(test_words[0])
    with pytest.raises(TypeError, match=r"xseq\[0\]\[1\]"):
        tagger.predict_single(["a", 3])


def test_scores_that_overflow_name_the_token_of_one_sentence():
    # a weight read from the token: finite at fit, overflowing at predict
    plan = Plan(
        features=(
            Feature(key=("a",), weight=W(0, ("call", float), column=0)),
            Feature(key=("b",), weight=W(0, ("call", float), column=1)),
            Feature(key=("w",), value=(W(0, column=2),)),
        )
    )
    X = [[("1", "1", "x"), ("0", "0", "y")]] * 2
    tagger = CRFTagger(featurizer=TemplateFeaturizer(plan), c2=0.01).fit(X, [["A", "B"]] * 2)
    assert tagger.predict_single([("0", "0", "y"), ("1", "1", "x")]) == ["B", "A"]
    with pytest.raises(ValueError, match=r"xseq\[0\]\[1\].*not finite"):
        tagger.predict_single([("0", "0", "y"), ("inf", "-inf", "x")])
