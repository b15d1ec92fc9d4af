"""sample_weight and class_weight through the estimator, the metrics and scikit-learn.

The objective itself (value, gradient, brute force) is tested in
test_weighted_objective.py; here: a weight-0 sequence is the sequence
absent and a weight-2 sequence the sequence twice at the fitted model (to
1e-8), weights 1 are bit for bit the unweighted fit, the errors, score and
the metrics, early stopping, and scikit-learn's GridSearchCV,
cross_validate, Pipeline and CRFTaggerCV with and without metadata routing.
"""

import warnings

import numpy as np
import pytest
from sklearn import config_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.utils.class_weight import compute_class_weight
from test_sklearn_integration import WORDS, X, Y

from skcrf import CRFTagger, CRFTaggerCV, SequenceFeaturizer
from skcrf._training._objective import CRFObjective, select_features
from skcrf._training._weights import label_weights
from skcrf.metrics import (
    entity_classification_report,
    entity_f1_score,
    flat_accuracy_score,
    flat_f1_score,
    get_scorer,
    sequence_accuracy_score,
)

WEIGHTS = np.ones(len(X))
WEIGHTS[[3, 11]] = 0.0
WEIGHTS[[5, 7, 20]] = 2.0


def relative(a, b):
    return abs(a - b) / max(abs(a), abs(b))


def final_loss(tagger):
    return tagger.training_log_.last_iteration["loss"]


def assert_same_model(a, b, rtol=1e-8):
    fa, fb = a.state_features_, b.state_features_
    assert set(fa) == set(fb)
    scale = max(abs(v) for v in fb.values())
    assert max(abs(fa[k] - fb[k]) for k in fa) <= rtol * scale
    ta, tb = a.transition_features_, b.transition_features_
    assert set(ta) == set(tb)
    assert max(abs(ta[k] - tb[k]) for k in ta) <= rtol * max(abs(v) for v in tb.values())
    assert list(a.classes_) == list(b.classes_)


def expanded(X, y, weights):
    """The data with weight-0 sequences left out and weight-2 ones twice."""
    X2 = [x for x, w in zip(X, weights) if w > 0] + [x for x, w in zip(X, weights) if w == 2]
    y2 = [s for s, w in zip(y, weights) if w > 0] + [s for s, w in zip(y, weights) if w == 2]
    return X2, y2


def test_zero_and_two_are_absent_and_twice():
    weighted = CRFTagger(c2=0.1, epsilon=1e-8).fit(X, Y, sample_weight=WEIGHTS)
    plain = CRFTagger(c2=0.1, epsilon=1e-8).fit(*expanded(X, Y, WEIGHTS))
    assert relative(final_loss(weighted), final_loss(plain)) < 1e-8
    assert_same_model(weighted, plain, rtol=1e-6)
    assert weighted.predict(X) == plain.predict(X)


def test_zero_weight_sequence_adds_no_label_and_no_feature():
    X2 = [*X, [{"w": "zzz", "only": "here"}]]
    Y2 = [*Y, ["NEW"]]
    weights = np.append(np.ones(len(X)), 0.0)
    tagger = CRFTagger(c2=0.1).fit(X2, Y2, sample_weight=weights)
    assert "NEW" not in tagger.classes_
    assert not any(attr.startswith("only") for attr, _ in tagger.state_features_)
    assert_same_model(tagger, CRFTagger(c2=0.1).fit(X, Y), rtol=0)


def test_objective_equivalence_at_the_same_weights():
    # the objective and gradient of weight 2 and of the sequence twice, 1e-12
    tagger = CRFTagger(c2=0.1).fit(X, Y)
    model = tagger._model
    data_w = _encoded(tagger, X, Y)
    data_2 = _encoded(tagger, *expanded(X, Y, WEIGHTS))
    keep = WEIGHTS > 0
    sample = WEIGHTS[keep]
    enc_w, labels_w = _subset(data_w, keep)
    c = np.repeat(sample, enc_w.lengths)
    _, observed_w = select_features(
        enc_w, labels_w, model.classes, model.attributes, token_weights=c
    )
    _, observed_2 = select_features(data_2[0], data_2[1], model.classes, model.attributes)
    # the same features (chosen on the unweighted fit): observed counts align
    full_w = _observed_for(model, enc_w, labels_w, c)
    full_2 = _observed_for(model, data_2[0], data_2[1], None)
    np.testing.assert_allclose(full_w, full_2, rtol=1e-12, atol=1e-12)
    w = model.weights
    with CRFObjective(enc_w, model, full_w, c2=0.1, token_weights=c) as objective:
        loss_w, grad_w = objective.loss_gradient(w)
    with CRFObjective(data_2[0], model, full_2, c2=0.1) as objective:
        loss_2, grad_2 = objective.loss_gradient(w)
    assert relative(loss_w, loss_2) < 1e-12
    np.testing.assert_allclose(grad_w, grad_2, rtol=1e-12, atol=1e-12 * np.abs(grad_2).max())


def _encoded(tagger, X, y):
    from skcrf._featurize._labels import encode_labels

    encoded = tagger._predictor.vocabulary.encode(X, grow=False)
    labels, _ = encode_labels([t for s in y for t in s], tagger.classes_)
    return encoded, labels


def _subset(data, keep):
    from skcrf._training._weights import drop_sequences

    encoded, labels = data
    classes = np.arange(labels.max() + 1)
    enc, lab, _, _ = drop_sequences(encoded, labels, classes, None, keep, previous_classes=classes)
    return enc, lab


def _observed_for(model, encoded, labels, c):
    """The observed counts of ``model``'s features on the data (weighted by c)."""
    from skcrf._inference._blocks import StateLayout

    n_labels = model.n_labels
    weights = np.ones(len(labels)) if c is None else c
    state = np.zeros(model.n_states)
    layout = StateLayout(model.state_ptr, model.state_labels, n_labels)
    for r in range(len(labels)):
        for p in range(encoded.indptr[r], encoded.indptr[r + 1]):
            a = encoded.ids[p]
            for k in range(layout.state_ptr[a], layout.state_ptr[a + 1]):
                if layout.state_labels[k] == labels[r]:
                    state[k] += weights[r] * encoded.values[p]
    pairs = np.zeros(n_labels * n_labels)
    start = 0
    for length in encoded.lengths:
        for t in range(start + 1, start + length):
            pairs[labels[t - 1] * n_labels + labels[t]] += weights[t]
        start += length
    return np.concatenate([state, pairs[model.transition_index]])


def test_unit_weights_give_the_unweighted_fit_bit_for_bit():
    plain = CRFTagger(c2=0.1).fit(X, Y)
    ones = CRFTagger(c2=0.1).fit(X, Y, sample_weight=np.ones(len(X)))
    unit_classes = CRFTagger(c2=0.1, class_weight={"N": 1.0}).fit(X, Y)
    for other in (ones, unit_classes):
        assert (other.coef_ != plain.coef_).nnz == 0
        np.testing.assert_array_equal(other.transition_, plain.transition_)


@pytest.mark.parametrize(
    "weights, message",
    [
        (np.r_[np.ones(len(X) - 1), -1.0], rf"sample_weight\[{len(X) - 1}\] is -1.0"),
        (np.r_[np.nan, np.ones(len(X) - 1)], r"sample_weight\[0\] is nan"),
        (np.r_[np.ones(3), np.inf, np.ones(len(X) - 4)], r"sample_weight\[3\] is inf"),
        (np.ones(len(X) + 1), f"{len(X) + 1} weights for {len(X)} sequences"),
        (np.ones((len(X), 1)), "must be 1-D"),
        (np.zeros(len(X)), "0 for every sequence"),
        ("abc", "string"),
    ],
)
def test_bad_sample_weight_is_a_clear_error(weights, message):
    tagger = CRFTagger(c2=0.1)
    with pytest.raises((ValueError, TypeError), match=message):
        tagger.fit(X, Y, sample_weight=weights)
    assert not hasattr(tagger, "classes_")


@pytest.mark.parametrize(
    "params, fit_params, message",
    [
        ({"c2": 1e308}, {}, r"c2=1e\+308 is too large"),
        ({}, {"sample_weight": np.full(len(X), 1e308)}, r"largest weight of a token is 1e\+308"),
        ({"class_weight": {Y[0][0]: 1e308}}, {}, r"largest weight of a token is 1e\+308"),
    ],
)
def test_an_objective_that_overflows_at_the_start_names_its_cause(params, fit_params, message):
    # finite, accepted one by one, but the loss or gradient at w = 0 is not
    tagger = CRFTagger(c2=0.1, max_iterations=5).fit(X, Y)
    before = (tagger.state_features_, tagger.transition_features_, tagger.predict(X))
    tagger.set_params(**params)
    with pytest.raises(ValueError, match=r"Training cannot start.*overflows float64") as info:
        tagger.fit(X, Y, **fit_params)
    assert info.match(message)
    assert (tagger.state_features_, tagger.transition_features_, tagger.predict(X)) == before


def test_generator_length_is_checked_after_reading():
    with pytest.raises(ValueError, match=f"3 weights for {len(X)} sequences"):
        CRFTagger(c2=0.1).fit(iter(X), iter(Y), sample_weight=[1, 2, 3])
    tagger = CRFTagger(c2=0.1).fit(iter(X), iter(Y), sample_weight=WEIGHTS)
    assert_same_model(tagger, CRFTagger(c2=0.1).fit(X, Y, sample_weight=WEIGHTS), rtol=0)


def test_score_weights_each_token_by_its_sequence():
    tagger = CRFTagger(c2=10.0).fit(X, Y)
    predicted = tagger.predict(X)
    correct = np.array([a == b for s, p in zip(Y, predicted) for a, b in zip(s, p)])
    token_w = np.repeat(WEIGHTS, [len(s) for s in Y])
    expected = float((correct * token_w).sum() / token_w.sum())
    assert tagger.score(X, Y, sample_weight=WEIGHTS) == pytest.approx(expected, rel=1e-15)
    assert tagger.score(X, Y, sample_weight=np.ones(len(X))) == tagger.score(X, Y)
    with pytest.raises(ValueError, match="3 weights"):
        tagger.score(X, Y, sample_weight=[1, 2, 3])


def test_metrics_weight_tokens_and_entities_by_their_sequence():
    y_true = [["B-PER", "I-PER", "O"], ["B-LOC", "O"], ["O", "B-PER"]]
    y_pred = [["B-PER", "O", "O"], ["B-LOC", "O"], ["O", "O"]]
    weights = np.array([2.0, 0.0, 1.0])
    twice_true = [y_true[0], y_true[0], y_true[2]]
    twice_pred = [y_pred[0], y_pred[0], y_pred[2]]
    assert flat_accuracy_score(y_true, y_pred, sample_weight=weights) == pytest.approx(
        flat_accuracy_score(twice_true, twice_pred)
    )
    # (scikit-learn's macro average counts a label of weight 0 as a label:
    # compared with positive weights only)
    positive = np.array([2.0, 1.0, 1.0])
    assert flat_f1_score(y_true, y_pred, average="macro", sample_weight=positive) == pytest.approx(
        flat_f1_score([y_true[0], *y_true], [y_pred[0], *y_pred], average="macro")
    )
    assert sequence_accuracy_score(y_true, y_pred, sample_weight=weights) == pytest.approx(
        sequence_accuracy_score(twice_true, twice_pred)
    )
    for average in ("micro", "macro", "weighted"):
        assert entity_f1_score(
            y_true, y_pred, average=average, sample_weight=weights
        ) == pytest.approx(entity_f1_score(twice_true, twice_pred, average=average))
    report = entity_classification_report(y_true, y_pred, sample_weight=weights, output_dict=True)
    twice = entity_classification_report(twice_true, twice_pred, output_dict=True)
    assert report.keys() == twice.keys()
    for name, row in report.items():
        assert row == pytest.approx(twice[name])
    assert "3.00" in entity_classification_report(y_true, y_pred, sample_weight=weights)
    with pytest.raises(ValueError, match=r"sample_weight\[1\] is -1.0"):
        flat_accuracy_score(y_true, y_pred, sample_weight=[1, -1, 1])
    with pytest.raises(ValueError, match="2 weights for 3 sequences"):
        entity_f1_score(y_true, y_pred, sample_weight=[1, 1])


def test_early_stopping_validation_keeps_the_weights(monkeypatch):
    import skcrf._training._fit as fit_driver

    seen = {}
    original = fit_driver.DevEvaluator.__init__

    def spy(self, X_dev, y_dev, *args, sample_weight=None, **kwargs):
        seen.setdefault(kwargs.get("name", "dev"), sample_weight)
        original(self, X_dev, y_dev, *args, sample_weight=sample_weight, **kwargs)

    monkeypatch.setattr(fit_driver.DevEvaluator, "__init__", spy)
    tagger = CRFTagger(c2=0.1, early_stopping=True, validation_fraction=0.25, random_state=0)
    weights = np.arange(1.0, len(X) + 1)
    tagger.fit(X, Y, sample_weight=weights)
    held = seen["validation"]
    assert held is not None and len(held) == 12 and set(held) <= set(weights)
    seen.clear()
    CRFTagger(c2=0.1, early_stopping=True).fit(X, Y, X[:5], Y[:5], sample_weight=weights)
    assert seen["validation"] is None  # X_dev stays unweighted


def test_weighted_validation_accuracy():
    from skcrf._training._fit import DevEvaluator

    tagger = CRFTagger(c2=1.0).fit(X, Y)
    evaluator = DevEvaluator(
        X,
        Y,
        tagger._predictor.vocabulary,
        tagger._model,
        None,
        name="validation",
        sample_weight=WEIGHTS,
    )
    assert evaluator.accuracy(tagger._model.weights) == pytest.approx(
        tagger.score(X, Y, sample_weight=WEIGHTS), rel=1e-15
    )


# -- class_weight ---------------------------------------------------------------


def test_balanced_is_n_tokens_over_n_labels_times_count():
    flat = np.array([t for s in Y for t in s])
    classes = np.unique(flat).astype(object)
    index = np.searchsorted(classes, flat)
    got = label_weights("balanced", index, classes)
    np.testing.assert_allclose(
        got, compute_class_weight("balanced", classes=classes, y=flat), rtol=1e-15
    )
    # unknown labels (-1) do not count
    index_partial = index.copy()
    index_partial[:10] = -1
    kept = flat[10:]
    np.testing.assert_allclose(
        label_weights("balanced", index_partial, classes),
        compute_class_weight("balanced", classes=classes, y=kept),
        rtol=1e-15,
    )


def test_class_weight_dict_equals_the_token_weights_objective():
    weights = {"R": 3.0, "J": 0.5}
    with warnings.catch_warnings():
        # it stops on rounding errors, at a gradient near 1e-7 relative
        warnings.simplefilter("ignore", ConvergenceWarning)
        tagger = CRFTagger(c2=0.5, class_weight=weights, epsilon=1e-9, delta=0).fit(X, Y)
    base = CRFTagger(c2=0.5).fit(X, Y)
    assert tagger.classes_.tolist() == base.classes_.tolist()
    assert (tagger.coef_ != base.coef_).nnz > 0
    # the fitted weights are the minimum of the weighted objective: small gradient
    model = tagger._model
    encoded, labels = _encoded(tagger, X, Y)
    c = np.array([weights.get(t, 1.0) for s in Y for t in s])
    observed = _observed_for(model, encoded, labels, c)
    with CRFObjective(
        encoded, model, observed, c2=0.5, token_weights=c, labels=labels
    ) as objective:
        loss, gradient = objective.loss_gradient(model.weights)
    assert loss == pytest.approx(final_loss(tagger), rel=1e-10)
    assert np.linalg.norm(gradient) / max(1.0, np.linalg.norm(model.weights)) < 1e-6
    # and the unweighted model's weights are not a minimum of it
    with CRFObjective(
        encoded, model, observed, c2=0.5, token_weights=c, labels=labels
    ) as objective:
        _, gradient = objective.loss_gradient(base._model.weights)
    assert np.linalg.norm(gradient) / np.linalg.norm(base._model.weights) > 1e-2


def test_class_weight_raises_the_probability_of_a_rare_label():
    rare = "R"
    plain = CRFTagger(c2=5.0).fit(X, Y)
    weighted = CRFTagger(c2=5.0, class_weight={rare: 20.0}).fit(X, Y)

    def mean_probability(tagger):
        marginals = tagger.predict_marginals(X)
        return np.mean(
            [m[rare] for s, ms in zip(Y, marginals) for t, m in zip(s, ms) if t == rare]
        )

    assert mean_probability(weighted) > mean_probability(plain) + 0.05


@pytest.mark.parametrize(
    "class_weight, error, message",
    [
        ({"Q": 2.0}, ValueError, r"not in the training labels: \['Q'\]"),
        ({"N": -1.0}, ValueError, r"class_weight\['N'\] is -1.0"),
        ({"N": float("nan")}, ValueError, r"class_weight\['N'\] is nan"),
        ({"N": "2"}, ValueError, r"class_weight\['N'\] is '2'"),
        ("balance", ValueError, "class_weight"),
        (["N"], ValueError, "class_weight"),
    ],
)
def test_bad_class_weight_is_a_clear_error(class_weight, error, message):
    with pytest.raises(error, match=message):
        CRFTagger(c2=0.1, class_weight=class_weight).fit(X, Y)


def test_class_weight_with_missing_labels_leaves_partial_sequences_at_one():
    y = [list(s) for s in Y]
    y[0][1] = None
    y[1][0] = {"N", "J"}
    tagger = CRFTagger(c2=0.5, missing_label=None, class_weight="balanced")
    tagger.set_params(missing_label="?")
    y[0][1] = "?"
    tagger.fit(X, y)
    assert tagger.status_.converged


# -- scikit-learn ---------------------------------------------------------------


def test_grid_search_passes_sample_weight_without_routing():
    search = GridSearchCV(CRFTagger(), {"c2": [0.1, 1.0]}, cv=3, error_score="raise")
    search.fit(X, Y, sample_weight=WEIGHTS)
    best = CRFTagger(**search.best_params_).fit(X, Y, sample_weight=WEIGHTS)
    assert_same_model(search.best_estimator_, best, rtol=0)


def test_grid_search_with_metadata_routing():
    with config_context(enable_metadata_routing=True):
        tagger = (
            CRFTagger().set_fit_request(sample_weight=True).set_score_request(sample_weight=True)
        )
        search = GridSearchCV(tagger, {"c2": [0.1, 1.0]}, cv=3, error_score="raise")
        search.fit(X, Y, sample_weight=WEIGHTS)
        best = CRFTagger(**search.best_params_).fit(X, Y, sample_weight=WEIGHTS)
        assert_same_model(search.best_estimator_, best, rtol=0)
        # scores weighted: the first fold's test score, recomputed
        train, test = next(iter(KFold(3).split(X)))
        fold = CRFTagger(c2=search.param_grid["c2"][0]).fit(
            [X[i] for i in train], [Y[i] for i in train], sample_weight=WEIGHTS[train]
        )
        expected = fold.score(
            [X[i] for i in test], [Y[i] for i in test], sample_weight=WEIGHTS[test]
        )
        assert search.cv_results_["split0_test_score"][0] == pytest.approx(expected, rel=1e-12)


def test_cross_validate_with_and_without_routing():
    scoring = {"acc": get_scorer("flat_accuracy")}
    plain = cross_validate(
        CRFTagger(c2=0.5), X, Y, cv=3, params={"sample_weight": WEIGHTS}, scoring=scoring
    )
    train, test = next(iter(KFold(3).split(X)))
    fold = CRFTagger(c2=0.5).fit(
        [X[i] for i in train], [Y[i] for i in train], sample_weight=WEIGHTS[train]
    )
    unweighted_score = flat_accuracy_score(
        [Y[i] for i in test], fold.predict([X[i] for i in test])
    )
    assert plain["test_acc"][0] == pytest.approx(unweighted_score, rel=1e-12)
    with config_context(enable_metadata_routing=True):
        scorer = get_scorer("flat_accuracy").set_score_request(sample_weight=True)
        routed = cross_validate(
            CRFTagger(c2=0.5).set_fit_request(sample_weight=True),
            X,
            Y,
            cv=3,
            params={"sample_weight": WEIGHTS},
            scoring={"acc": scorer},
        )
    weighted_score = flat_accuracy_score(
        [Y[i] for i in test], fold.predict([X[i] for i in test]), sample_weight=WEIGHTS[test]
    )
    assert routed["test_acc"][0] == pytest.approx(weighted_score, rel=1e-12)


def test_pipeline_with_and_without_routing():
    features = SequenceFeaturizer().fit_transform(WORDS)
    expected = CRFTagger(c2=0.1).fit(features, Y, sample_weight=WEIGHTS)
    pipe = make_pipeline(SequenceFeaturizer(), CRFTagger(c2=0.1))
    pipe.fit(WORDS, Y, crftagger__sample_weight=WEIGHTS)
    assert_same_model(pipe[-1], expected, rtol=0)
    with config_context(enable_metadata_routing=True):
        pipe = make_pipeline(
            SequenceFeaturizer(), CRFTagger(c2=0.1).set_fit_request(sample_weight=True)
        )
        pipe.fit(WORDS, Y, sample_weight=WEIGHTS)
    assert_same_model(pipe[-1], expected, rtol=0)


def test_crftaggercv_with_and_without_routing():
    cv = CRFTaggerCV(c1=None, c2=[0.1, 1.0], cv=3).fit(X, Y, sample_weight=WEIGHTS)
    best = CRFTagger(c2=cv.c2_).fit(X, Y, sample_weight=WEIGHTS)
    assert_same_model(cv.best_estimator_, best, rtol=0)
    # the fold scores are weighted scores of weighted fits
    train, test = next(iter(KFold(3).split(X)))
    first = min(cv.c2s_)
    fold = CRFTagger(c2=first, warm_start=True).fit(
        [X[i] for i in train], [Y[i] for i in train], sample_weight=WEIGHTS[train]
    )
    assert fold.n_iter_ > 0
    with config_context(enable_metadata_routing=True):
        routed = cross_validate(
            CRFTaggerCV(c1=None, c2=[0.1, 1.0], cv=2)
            .set_fit_request(sample_weight=True)
            .set_score_request(sample_weight=True),
            X,
            Y,
            cv=2,
            params={"sample_weight": WEIGHTS},
        )
    assert len(routed["test_score"]) == 2


@pytest.mark.parametrize("algorithm", ["ap", "pa", "arow", "l2sgd"])
def test_online_weight_zero_is_absent_and_one_is_unweighted(algorithm):
    options = dict(algorithm=algorithm, max_iterations=3, random_state=0)
    plain = CRFTagger(**options).fit(X, Y)
    ones = CRFTagger(**options).fit(X, Y, sample_weight=np.ones(len(X)))
    assert (ones.coef_ != plain.coef_).nnz == 0
    weights = np.ones(len(X))
    weights[[3, 11]] = 0.0
    dropped = [i for i in range(len(X)) if weights[i] > 0]
    absent = CRFTagger(**options).fit([X[i] for i in dropped], [Y[i] for i in dropped])
    zero = CRFTagger(**options).fit(X, Y, sample_weight=weights)
    assert_same_model(zero, absent, rtol=0)


@pytest.mark.parametrize("algorithm", ["ap", "pa", "arow", "l2sgd"])
def test_online_update_is_scaled_by_the_sequence_weight(algorithm):
    # one epoch on one sequence of weight 3: the change of the weights is 3
    # times the unweighted one (the first update, from w = 0, for ap/pa/arow;
    # l2sgd's step from w = 0 is eta * s * gradient)
    one = [X[0]], [Y[0]]
    options = dict(algorithm=algorithm, max_iterations=1, random_state=0)
    if algorithm == "l2sgd":
        options.update(calibration_eta=0.01, calibration_max_trials=1, calibration_candidates=1)
    plain = CRFTagger(**options).fit(*one)
    weighted = CRFTagger(**options).fit(*one, sample_weight=[3.0])
    if algorithm == "l2sgd":
        assert weighted.coef_.nnz > 0  # moved; the exact step depends on calibration
        return
    np.testing.assert_allclose(weighted.coef_.toarray(), 3.0 * plain.coef_.toarray(), rtol=1e-12)
    np.testing.assert_allclose(weighted.transition_, 3.0 * plain.transition_, rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["ap", "pa", "arow"])
def test_online_class_weight_scales_each_tokens_terms(algorithm):
    # a class weight equal for every label is a sequence weight
    labels = sorted({t for s in Y for t in s})
    options = dict(algorithm=algorithm, max_iterations=2, random_state=0)
    by_class = CRFTagger(**options, class_weight={label: 2.5 for label in labels}).fit(X, Y)
    by_sample = CRFTagger(**options).fit(X, Y, sample_weight=np.full(len(X), 2.5))
    assert (by_class.coef_ != by_sample.coef_).nnz == 0
    skewed = CRFTagger(**options, class_weight={"R": 5.0}).fit(X, Y)
    assert (skewed.coef_ != CRFTagger(**options).fit(X, Y).coef_).nnz > 0


def test_l2sgd_rejects_class_weight():
    with pytest.raises(ValueError, match="l2sgd' does not support class_weight"):
        CRFTagger(algorithm="l2sgd", class_weight={"R": 2.0}).fit(X, Y)


def test_partial_fit_takes_sample_weight_and_a_class_weight_dict():
    labels = sorted({t for s in Y for t in s})
    weights = np.ones(len(X))
    weights[[3, 11]] = 0.0
    kept = [i for i in range(len(X)) if weights[i] > 0]
    a = CRFTagger(algorithm="pa", random_state=0, class_weight={"R": 2.0})
    a.partial_fit(X, Y, classes=labels, sample_weight=weights)
    b = CRFTagger(algorithm="pa", random_state=0, class_weight={"R": 2.0})
    b.partial_fit([X[i] for i in kept], [Y[i] for i in kept], classes=labels)
    assert_same_model(a, b, rtol=0)
    c = CRFTagger(algorithm="pa", random_state=0).partial_fit(
        [X[i] for i in kept], [Y[i] for i in kept], classes=labels
    )
    assert (c.coef_ != b.coef_).nnz > 0


def test_partial_fit_rejects_balanced():
    with pytest.raises(ValueError, match="'balanced' is not supported by partial_fit"):
        CRFTagger(algorithm="ap", class_weight="balanced").partial_fit(
            X, Y, classes=sorted({t for s in Y for t in s})
        )


def test_no_warning_from_weighted_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CRFTagger(c2=0.1, class_weight="balanced").fit(X, Y, sample_weight=WEIGHTS)


def test_weighted_score_from_eight_threads_is_the_sequential_answer():
    from concurrent.futures import ThreadPoolExecutor

    tagger = CRFTagger(c2=5.0).fit(X, Y)
    jobs = [WEIGHTS * (k + 1) if k % 2 else np.roll(WEIGHTS, k) for k in range(16)]
    sequential = [tagger.score(X, Y, sample_weight=w) for w in jobs]
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda w: tagger.score(X, Y, sample_weight=w), jobs))
    assert threaded == sequential


def test_zero_weight_with_partial_labels_is_the_sequence_absent():
    y = [list(s) for s in Y]
    y[2][0] = "?"  # partially labelled, weight 0
    y[4][1] = {"N", "J"}  # partially labelled, weight 2
    y[9] = ["?"] * len(y[9])  # no label at all
    weights = np.ones(len(X))
    weights[[2, 6]] = 0.0
    weights[4] = 2.0
    options = dict(c2=0.1, missing_label="?", epsilon=1e-8)
    weighted = CRFTagger(**options).fit(X, y, sample_weight=weights)
    rows = [i for i in range(len(X)) if weights[i] > 0] + [4]
    plain = CRFTagger(**options).fit([X[i] for i in rows], [y[i] for i in rows])
    assert relative(final_loss(weighted), final_loss(plain)) < 1e-8
    assert_same_model(weighted, plain, rtol=1e-6)


def test_vector_features_with_weights():
    # vector features ({'emb': array}) take the CSR path when weighted: the
    # same model as the sequences repeated, and class weights move it
    from test_dense import vector_data

    Xv, yv = vector_data(n=40, seed=2)
    # non-negative vector values: the value sums keep their sign when doubled
    Xv = [[{k: (np.abs(v) if k != "w" else v) for k, v in t.items()} for t in s] for s in Xv]
    weights = np.ones(len(Xv))
    weights[[1, 5]] = 2.0
    weights[3] = 0.0
    weighted = CRFTagger(c2=0.1, epsilon=1e-8).fit(Xv, yv, sample_weight=weights)
    plain = CRFTagger(c2=0.1, epsilon=1e-8).fit(*expanded(Xv, yv, weights))
    assert relative(final_loss(weighted), final_loss(plain)) < 1e-8
    assert_same_model(weighted, plain, rtol=1e-6)
    skewed = CRFTagger(c2=0.1, class_weight={"A": 3.0}).fit(Xv, yv)
    assert (skewed.coef_ != CRFTagger(c2=0.1).fit(Xv, yv).coef_).nnz > 0


@pytest.mark.parametrize("routing", [False, True])
@pytest.mark.parametrize("scoring", [None, "flat_f1_macro"])
def test_early_stopping_scores_the_held_out_sequences_with_their_weights(routing, scoring):
    from sklearn.utils import check_random_state

    from skcrf._training._fit import split_validation

    weights = np.where(np.arange(len(X)) % 3 == 0, 5.0, 0.2)
    options = dict(c2=0.1, early_stopping=True, scoring=scoring, random_state=0)
    seen = []
    with config_context(enable_metadata_routing=routing):
        tagger = CRFTagger(**options).fit(
            X, Y, sample_weight=weights, callback=lambda info: seen.append(info.weights.copy())
        )
    *_, (X_val, y_val, w_val) = split_validation(
        X, Y, 0.1, check_random_state(0), sample_weight=weights
    )
    probe = CRFTagger(**options)
    probe._set_fitted(
        tagger._model.with_weights(seen[0]), 0, None, None, tagger._predictor.vocabulary
    )
    scorer = get_scorer(scoring or "flat_accuracy")
    expected = scorer(probe, X_val, y_val, sample_weight=w_val)
    logged = tagger.training_log_.iterations[0]["validation_score"]
    assert logged == pytest.approx(expected, rel=1e-12)
    assert logged != pytest.approx(scorer(probe, X_val, y_val), rel=1e-6)


def test_posterior_early_stopping_scores_the_held_out_sequences_with_their_weights():
    # posterior decoding's early stopping goes through the estimator's score,
    # which takes the held-out sequences' weights too
    from sklearn.utils import check_random_state

    from skcrf._training._fit import split_validation

    weights = np.where(np.arange(len(X)) % 3 == 0, 5.0, 0.2)
    options = dict(c2=0.1, early_stopping=True, decoding="posterior", random_state=0)
    seen = []
    tagger = CRFTagger(**options).fit(
        X, Y, sample_weight=weights, callback=lambda info: seen.append(info.weights.copy())
    )
    *_, (X_val, y_val, w_val) = split_validation(
        X, Y, 0.1, check_random_state(0), sample_weight=weights
    )
    probe = CRFTagger(**options)
    probe._set_fitted(
        tagger._model.with_weights(seen[0]), 0, None, None, tagger._predictor.vocabulary
    )
    logged = tagger.training_log_.iterations[0]["validation_score"]
    assert logged == pytest.approx(probe.score(X_val, y_val, sample_weight=w_val), rel=1e-12)
