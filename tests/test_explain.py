"""Explanations: explain(xseq) and top_features(n), plain data and pandas frames."""

import sys

import numpy as np
import pytest

from skcrf import CRFTagger

WORDS = ["the", "dog", "barks", "a", "cat", "sleeps", "loudly"]


@pytest.fixture(scope="module")
def tagger():
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(80):
        tags = ["DET", "NOUN", "VERB"] + (["ADV"] if rng.random() < 0.5 else [])
        words = {
            "DET": ["the", "a"],
            "NOUN": ["dog", "cat"],
            "VERB": ["barks", "sleeps"],
            "ADV": ["loudly"],
        }
        # a noisy task: some words get another tag, so runner-ups matter
        tags = [t if rng.random() > 0.15 else str(rng.choice(list(words))) for t in tags]
        X.append(
            [{"w": str(rng.choice(words[t])), "bias": 1.0, "len": len(t) / 3.0} for t in tags]
        )
        y.append(tags)
    return CRFTagger(c2=0.1, all_possible_transitions=True).fit(X, y)


SENTENCES = [
    [{"w": "the", "bias": 1.0}, {"w": "cat", "bias": 1.0}, {"w": "sleeps"}, {"w": "zzz"}],
    [{"w": "dog", "bias": 1.0, "len": 2.0}],
    [{"w": "a"}, {"w": "barks", "len": 0.5}, {"w": "loudly", "w2": "unseen"}],
]


def path_score(tagger, explanation):
    return sum(c for token in explanation for _, _, c in token["state"]) + sum(
        token["transition"][2] for token in explanation if token["transition"] is not None
    )


@pytest.mark.parametrize("k", range(len(SENTENCES)))
def test_contributions_sum_to_the_score_difference(tagger, k):
    xseq = SENTENCES[k]
    explanation = tagger.explain(xseq)
    labels = [token["label"] for token in explanation]
    assert labels == tagger.predict_single(xseq)
    marginals = tagger.predict_marginals_single(xseq)
    classes = tagger.classes_.tolist()
    T = tagger.transition_
    index = {c: i for i, c in enumerate(classes)}
    base = tagger.sequence_log_proba([xseq], [labels])[0]
    score = path_score(tagger, explanation)
    for t, token in enumerate(explanation):
        # the runner-up has the next highest marginal probability
        ranked = sorted(classes, key=lambda c: -marginals[t][c])
        assert token["runner_up"] != token["label"]
        assert marginals[t][token["runner_up"]] == marginals[t][ranked[1]]
        assert token["probability"] == pytest.approx(marginals[t][token["label"]])
        # swap the token's label for the runner-up: the explanation's terms give the
        # score difference, which the model's probabilities give independently
        other = list(labels)
        other[t] = token["runner_up"]
        swapped = score - sum(c for _, _, c in token["state"])
        swapped += sum(c for _, _, c in token["runner_up_state"])
        if t > 0:
            swapped += T[index[labels[t - 1]], index[other[t]]] - token["transition"][2]
        if t + 1 < len(labels):
            swapped += (
                T[index[other[t]], index[labels[t + 1]]] - explanation[t + 1]["transition"][2]
            )
        expected = base - tagger.sequence_log_proba([xseq], [other])[0]
        np.testing.assert_allclose(score - swapped, expected, rtol=1e-9, atol=1e-9)
        for attribute, label, c in token["state"]:
            assert label == token["label"] and c != 0
            assert attribute in tagger.attributes_


def test_state_terms_are_weight_times_value(tagger):
    explanation = tagger.explain([{"w": "dog", "len": 2.5}])
    weights = tagger.state_features_
    terms = {a: c for a, _, c in explanation[0]["state"]}
    label = explanation[0]["label"]
    assert terms["len"] == pytest.approx(2.5 * weights[("len", label)])
    assert terms["w:dog"] == pytest.approx(weights[("w:dog", label)])
    assert explanation[0]["transition"] is None


def test_top_features(tagger):
    top = tagger.top_features(5)
    state = sorted(tagger.state_features_.items(), key=lambda kv: -abs(kv[1]))[:5]
    assert [abs(w) for _, _, w in top["state"]] == [abs(w) for _, w in state]
    assert all(tagger.state_features_[(a, label)] == w for a, label, w in top["state"])
    trans = sorted(tagger.transition_features_.items(), key=lambda kv: -abs(kv[1]))[:5]
    assert [(a, b, w) for (a, b), w in trans] == top["transition"]
    assert len(tagger.top_features(10**6)["transition"]) == len(tagger.transition_features_)
    for n in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n must be"):
            tagger.top_features(n)


def test_frames(tagger):
    pd = pytest.importorskip("pandas", reason="pandas is optional")
    frame = tagger.explain(SENTENCES[0], as_frame=True)
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == [
        "position",
        "candidate",
        "kind",
        "attribute",
        "from_label",
        "label",
        "contribution",
    ]
    explanation = tagger.explain(SENTENCES[0])
    predicted = frame[frame.candidate == "predicted"]
    assert predicted.contribution.sum() == pytest.approx(path_score(tagger, explanation))
    top = tagger.top_features(3, as_frame=True)
    assert list(top.kind) == ["state"] * 3 + ["transition"] * 3


def test_frames_without_pandas(tagger, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    with pytest.raises(ImportError, match=r"explain\(as_frame=True\) needs pandas"):
        tagger.explain(SENTENCES[0], as_frame=True)
    with pytest.raises(ImportError, match=r"top_features\(as_frame=True\) needs pandas"):
        tagger.top_features(3, as_frame=True)
    assert isinstance(tagger.explain(SENTENCES[0]), list)


def test_explain_bad_input(tagger):
    with pytest.raises(ValueError, match=r"xseq\[0\]\[1\]: feature 'w'"):
        tagger.explain([{"w": "a"}, {"w": float("inf")}])
    with pytest.raises(TypeError, match="one sequence"):
        tagger.explain([[{"w": "a"}]])
    assert tagger.explain([]) == []


def test_explain_one_label():
    tagger = CRFTagger(c2=0.1).fit([[{"w": "a"}, {"w": "b"}]], [["X", "X"]])
    (token, _) = tagger.explain([{"w": "a"}, {"w": "b"}])
    assert token["runner_up"] is None and token["runner_up_state"] == []
