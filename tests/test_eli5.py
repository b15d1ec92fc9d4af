"""eli5 support: ``eli5.explain_weights(tagger)``, registered without skcrf importing eli5.

skcrf puts a finder on ``sys.meta_path`` that registers its explainer right
after ``import eli5`` (or registers at once when eli5 was imported first).
The hook itself is tested against a stand-in ``eli5`` package in a
subprocess (no eli5 needed); the explanations against the real eli5, which
must give for a ``CRFTagger`` what it gives for a ``sklearn_crfsuite.CRF``
trained with the same settings on the same data.
"""

import os
import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import skcrf
from skcrf import CRFTagger

ROOT = os.path.dirname(os.path.dirname(skcrf.__file__))
SETTINGS = dict(algorithm="lbfgs", c1=0.0, c2=1.0, all_possible_transitions=True)


@pytest.fixture(scope="module")
def eli5():
    # not pytest.importorskip: since pytest 8.2 it skips only a missing module,
    # and an eli5 that cannot import (with this scikit-learn) should skip too
    try:
        import eli5
    except ImportError as exc:
        pytest.skip(f"eli5 is not importable ({exc}); pip install eli5")
    return eli5


def run_python(script, *path, then=""):
    """Run ``script``, then ``then``, in a fresh interpreter (skcrf and ``path`` importable).

    Returns its stdout.
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*map(str, path), ROOT]))
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script) + textwrap.dedent(then)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return child.stdout


# -- the hook, against a stand-in eli5 --------------------------------------

FAKE_INIT = """\
import os, time
time.sleep(float(os.environ.get("FAKE_ELI5_SLEEP", "0")))
flag = os.environ.get("FAKE_ELI5_FAIL_ONCE")
if flag and not os.path.exists(flag):
    open(flag, "w").close()
    raise ImportError("the stand-in eli5 fails its first import")
from .explain import explain_weights
"""
FAKE_EXPLAIN = """\
from functools import singledispatch

@singledispatch
def explain_weights(estimator, **kwargs):
    return "not supported"
"""

CHECK_REGISTERED = """
    import eli5, importlib.machinery, sys
    from skcrf import CRFTagger
    from skcrf._interop._eli5 import explain_weights_crftagger
    assert eli5.explain_weights.dispatch(CRFTagger) is explain_weights_crftagger
    # the finder is gone, and eli5 keeps its own loader
    assert not any("Eli5" in type(f).__name__ for f in sys.meta_path), sys.meta_path
    assert type(eli5.__loader__) is importlib.machinery.SourceFileLoader, eli5.__loader__
    assert eli5.__spec__.loader is eli5.__loader__
"""


@pytest.fixture
def fake_eli5(tmp_path):
    package = tmp_path / "eli5"
    package.mkdir()
    (package / "__init__.py").write_text(FAKE_INIT)
    (package / "explain.py").write_text(FAKE_EXPLAIN)
    return tmp_path


def test_skcrf_waits_for_eli5_without_importing_it(fake_eli5):
    run_python(
        """
        import sys, skcrf
        assert "eli5" not in sys.modules
        assert type(sys.meta_path[0]).__name__ == "_Eli5Finder"
        """,
        fake_eli5,
        then=CHECK_REGISTERED,
    )


def test_eli5_imported_before_skcrf_is_registered_at_once(fake_eli5):
    run_python(
        """
        import sys, eli5, skcrf
        """,
        fake_eli5,
        then=CHECK_REGISTERED,
    )


def test_a_failed_import_of_eli5_leaves_the_hook_for_the_next(fake_eli5):
    flag = fake_eli5 / "failed-once"
    run_python(
        f"""
        import os, sys, skcrf
        os.environ["FAKE_ELI5_FAIL_ONCE"] = {str(flag)!r}
        try:
            import eli5
        except ImportError as exc:
            assert "first import" in str(exc)
        else:
            raise AssertionError("the stand-in eli5 should fail once")
        assert "eli5" not in sys.modules
        assert type(sys.meta_path[0]).__name__ == "_Eli5Finder"
        """,
        fake_eli5,
        then=CHECK_REGISTERED,
    )


def test_looking_eli5_up_without_importing_it_keeps_the_hook(fake_eli5):
    run_python(
        """
        import importlib.util, sys, skcrf
        assert importlib.util.find_spec("eli5") is not None
        assert "eli5" not in sys.modules
        assert type(sys.meta_path[0]).__name__ == "_Eli5Finder"
        """,
        fake_eli5,
        then=CHECK_REGISTERED,
    )


def test_a_lazily_loaded_eli5_registers_when_it_loads(fake_eli5):
    run_python(
        """
        import importlib.util, sys, skcrf
        spec = importlib.util.find_spec("eli5")
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules["eli5"] = module
        spec.loader.exec_module(module)
        assert type(sys.meta_path[0]).__name__ == "_Eli5Finder"  # not loaded yet
        module.explain_weights  # loads it
        """,
        fake_eli5,
        then=CHECK_REGISTERED,
    )


def test_a_failed_registration_warns_and_eli5_still_imports(fake_eli5):
    out = run_python(
        """
        import warnings, skcrf
        import skcrf._interop._eli5 as hook

        def broken():
            raise RuntimeError("no luck")

        hook.register = broken
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import eli5
        assert eli5.explain_weights(skcrf.CRFTagger()) == "not supported"
        (warning,) = caught
        assert warning.category is RuntimeWarning
        print(warning.message)
        """,
        fake_eli5,
    )
    assert "could not register eli5.explain_weights" in out and "no luck" in out


def test_threads_importing_eli5_at_once_register_once(fake_eli5):
    run_python(
        """
        import os, sys, threading, warnings
        warnings.simplefilter("error")
        import skcrf
        os.environ["FAKE_ELI5_SLEEP"] = "0.2"  # the others wait while one imports
        seen, errors = [], []

        def work():
            try:
                import eli5
                seen.append(eli5.explain_weights.dispatch(skcrf.CRFTagger).__name__)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert seen == ["explain_weights_crftagger"] * 8, seen
        """,
        fake_eli5,
        then=CHECK_REGISTERED,
    )


# -- explanations, with the real eli5 ----------------------------------------

WORDS = {
    "the": "O",
    "a": "O",
    "in": "O",
    "visited": "O",
    "met": "O",
    "lives": "O",
    "John": "B-PER",
    "Mary": "B-PER",
    "Smith": "I-PER",
    "Jones": "I-PER",
    "Paris": "B-LOC",
    "New": "B-LOC",
    "York": "I-LOC",
    "Acme": "B-ORG",
    "Corp": "I-ORG",
}
TEMPLATES = [
    ["John", "Smith", "visited", "Paris"],
    ["Mary", "lives", "in", "New", "York"],
    ["the", "Acme", "Corp", "met", "Mary", "Jones"],
    ["John", "met", "a", "Acme", "Corp"],
    ["Mary", "Smith", "visited", "the", "New", "York", "Acme", "Corp"],
    ["Paris", "lives"],
]


def token_features(sentence, i):
    word = sentence[i]
    features = {"bias": 1.0, "w": word, "w.lower": word.lower(), "suffix": word[-2:]}
    features["title"] = word.istitle()
    features["prev"] = sentence[i - 1].lower() if i else "<s>"
    return features


def make_data(n=40, seed=0):
    rng = random.Random(seed)
    sentences = [rng.choice(TEMPLATES) for _ in range(n)]
    X = [[token_features(s, i) for i in range(len(s))] for s in sentences]
    y = [[WORDS[w] for w in s] for s in sentences]
    return X, y


@pytest.fixture(scope="module")
def tagger():
    X, y = make_data()
    return CRFTagger(**SETTINGS).fit(X, y)


@pytest.fixture(scope="module")
def reference():
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    X, y = make_data()
    return sklearn_crfsuite.CRF(**SETTINGS).fit(X, y)


def weight_lists(feature_weights):
    return [(fw.feature, fw.weight) for fw in feature_weights.pos], [
        (fw.feature, fw.weight) for fw in feature_weights.neg
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"top": 3},
        {"top": None},
        {"top": (4, 2)},
        {"targets": ["B-PER", "O", "I-LOC"]},
        {"target_names": {"O": "outside"}, "targets": ["outside", "B-ORG"]},
        {"feature_re": "^w:"},
        {"feature_filter": lambda name: name.startswith("suffix")},
        {"feature_re": "^no-such-feature"},
    ],
    ids=lambda kwargs: ",".join(kwargs) or "defaults",
)
def test_same_explanation_as_for_sklearn_crfsuite(eli5, tagger, reference, kwargs):
    ours = eli5.explain_weights(tagger, **kwargs)
    theirs = eli5.explain_weights(reference, **kwargs)
    assert ours.error is None and ours.method == theirs.method == "CRF"
    assert ours.estimator == repr(tagger)
    assert [t.target for t in ours.targets] == [t.target for t in theirs.targets]
    reference_weights = reference.state_features_  # rounded to 6 decimals
    for mine, other in zip(ours.targets, theirs.targets):
        label = {"outside": "O"}.get(mine.target, mine.target)
        assert mine.feature_weights.pos_remaining == other.feature_weights.pos_remaining
        assert mine.feature_weights.neg_remaining == other.feature_weights.neg_remaining
        for shown, shown_theirs in zip(
            weight_lists(mine.feature_weights), weight_lists(other.feature_weights)
        ):
            assert len(shown) == len(shown_theirs)
            # the same weights in the same order (features of equal weight may
            # come in another order), each the weight of its feature
            np.testing.assert_allclose(
                [w for _, w in shown], [w for _, w in shown_theirs], atol=2e-6
            )
            for name, weight in shown:
                assert weight == pytest.approx(reference_weights[name, label], abs=2e-6)
        if mine.feature_weights.pos_remaining == mine.feature_weights.neg_remaining == 0:
            # every feature shown: the same ones
            assert {fw.feature for fw in mine.feature_weights.pos + mine.feature_weights.neg} == {
                fw.feature for fw in other.feature_weights.pos + other.feature_weights.neg
            }
    assert ours.transition_features.class_names == theirs.transition_features.class_names
    np.testing.assert_allclose(
        ours.transition_features.coef, theirs.transition_features.coef, atol=2e-6
    )


def test_the_explanation_holds_every_weight(eli5, tagger):
    explanation = eli5.explain_weights(tagger, top=None)
    # eli5's NER order: O first, then each entity's B- and I- together
    assert [t.target for t in explanation.targets] == [
        "O",
        "B-LOC",
        "I-LOC",
        "B-ORG",
        "I-ORG",
        "B-PER",
        "I-PER",
    ]
    shown = {
        (fw.feature, t.target): fw.weight
        for t in explanation.targets
        for fw in t.feature_weights.pos + t.feature_weights.neg
    }
    assert shown == tagger.state_features_
    for t in explanation.targets:
        weights = [fw.weight for fw in t.feature_weights.pos + t.feature_weights.neg]
        assert weights[: len(t.feature_weights.pos)] == sorted(
            weights[: len(t.feature_weights.pos)], reverse=True
        )
        assert t.feature_weights.pos_remaining == t.feature_weights.neg_remaining == 0
    index = [tagger.classes_.tolist().index(t.target) for t in explanation.targets]
    np.testing.assert_array_equal(
        explanation.transition_features.coef, tagger.transition_[np.ix_(index, index)]
    )
    names = explanation.transition_features.class_names
    b_to_i = explanation.transition_features.coef[names.index("B-PER"), names.index("I-PER")]
    assert b_to_i == tagger.transition_features_["B-PER", "I-PER"]


def test_top_targets_and_filters(eli5, tagger):
    explanation = eli5.explain_weights(tagger, top=2, targets=["I-PER", "B-PER"])
    assert [t.target for t in explanation.targets] == ["I-PER", "B-PER"]
    assert explanation.transition_features.class_names == ["I-PER", "B-PER"]
    assert explanation.transition_features.coef.shape == (2, 2)
    for t in explanation.targets:
        fw = t.feature_weights
        assert len(fw.pos) + len(fw.neg) == 2
        assert fw.pos_remaining + fw.neg_remaining > 0

    explanation = eli5.explain_weights(tagger, top=(1, 1), targets=["B-LOC"])
    (target,) = explanation.targets
    assert len(target.feature_weights.pos) == len(target.feature_weights.neg) == 1
    assert target.feature_weights.pos[0].weight > 0 > target.feature_weights.neg[0].weight

    for kwargs, keep in [
        ({"feature_re": re.compile(r"^prev:")}, lambda name: name.startswith("prev:")),
        ({"feature_filter": lambda name: "title" in name}, lambda name: "title" in name),
    ]:
        explanation = eli5.explain_weights(tagger, top=None, **kwargs)
        names = {fw.feature for t in explanation.targets for fw in t.feature_weights.pos}
        assert names and all(keep(name) for name in names)
        expected = {a for (a, _), w in tagger.state_features_.items() if keep(a) and w > 0}
        assert names == expected
    with pytest.raises(ValueError, match="either feature_filter or feature_re"):
        eli5.explain_weights(tagger, feature_re="w", feature_filter=lambda name: True)
    with pytest.raises(ValueError, match="targets is empty"):
        eli5.explain_weights(tagger, targets=[])


def test_formatters_render_it(eli5, tagger):
    text = eli5.format_as_text(eli5.explain_weights(tagger, top=3))
    assert "Transition features:" in text and "y='B-PER' top features" in text
    assert re.search(r"^\+0\.\d{3}  w:Smith ", text, re.MULTILINE)
    html = eli5.format_as_html(eli5.explain_weights(tagger, top=3))
    assert "B-PER" in html and "w:Smith" in html


def test_labels_that_are_not_strings(eli5):
    X, y = make_data(n=20)
    numbers = {label: k for k, label in enumerate(sorted({t for s in y for t in s}))}
    tagger = CRFTagger(**SETTINGS).fit(X, [[numbers[t] for t in s] for s in y])
    explanation = eli5.explain_weights(tagger, top=2)
    assert [t.target for t in explanation.targets] == list(range(len(numbers)))
    assert "y=0 top features" in eli5.format_as_text(explanation)


def test_an_unfitted_tagger_is_an_error(eli5):
    with pytest.raises(NotFittedError):
        eli5.explain_weights(CRFTagger())


@pytest.mark.parametrize("eli5_first", [False, True], ids=["skcrf-first", "eli5-first"])
def test_real_eli5_in_either_import_order(eli5, eli5_first):
    imports = "import eli5, skcrf" if eli5_first else "import skcrf"
    out = run_python(
        f"""
        import sys
        {imports}
        assert {eli5_first!r} or "eli5" not in sys.modules
        import eli5
        X = [[{{"w": "a"}}, {{"w": "b"}}]] * 3
        y = [["A", "B"]] * 3
        tagger = skcrf.CRFTagger(max_iterations=20).fit(X, y)
        print(eli5.format_as_text(eli5.explain_weights(tagger)))
        """
    )
    assert "Transition features:" in out and "y='A' top features" in out and "w:a" in out


def test_real_eli5_without_sklearn_crfsuite(eli5):
    out = run_python(
        """
        import sys
        sys.modules["sklearn_crfsuite"] = None  # not installed
        import eli5, skcrf
        assert not hasattr(eli5, "explain_weights_sklearn_crfsuite")
        tagger = skcrf.CRFTagger(max_iterations=20).fit([[{"w": "a"}, {"w": "b"}]], [["A", "B"]])
        print(eli5.format_as_text(eli5.explain_weights(tagger)))
        """
    )
    assert "Transition features:" in out and "y='B' top features" in out
