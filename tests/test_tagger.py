"""CRFTagger: the public API, token formats, labels, logs and warnings."""

import os
import sys
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import threadpoolctl
from sklearn.exceptions import ConvergenceWarning, NotFittedError

import skcrf._training._objective
import skcrf._utils._threads
from skcrf import CRFTagger
from skcrf._training._lbfgs import LBFGSStatus

# quick, run-time dependencies only: tools/build_wheels.py runs these against each wheel
pytestmark = pytest.mark.wheel

X_TOY = [
    [{"w": "the"}, {"w": "dog"}, {"w": "barks"}],
    [{"w": "a"}, {"w": "cat"}],
    [{"w": "the"}, {"w": "cat"}, {"w": "sleeps"}],
    [{"w": "a"}, {"w": "dog"}, {"w": "sleeps"}],
]
Y_TOY = [["D", "N", "V"], ["D", "N"], ["D", "N", "V"], ["D", "N", "V"]]


def fit_quietly(tagger, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return tagger.fit(X, y, **kwargs)


def assert_same_coef(a, b):
    """Sparse coef_ with the same stored entries (features) and weights."""
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)


def test_fit_predict_and_fitted_attributes():
    tagger = CRFTagger(c2=0.01).fit(X_TOY, Y_TOY)
    assert tagger.predict(X_TOY) == Y_TOY
    assert tagger.score(X_TOY, Y_TOY) == 1.0
    assert tagger.classes_.tolist() == ["D", "N", "V"]
    assert tagger.coef_.shape == (len(tagger.vectorizer_.feature_names_), 3)
    assert tagger.transition_.shape == (3, 3)
    assert tagger.status_.converged and tagger.training_log_.converged
    assert tagger.n_iter_ == len(tagger.training_log_.iterations) > 0
    entry = tagger.training_log_.last_iteration
    for key in (
        "loss",
        "feature_norm",
        "error_norm",
        "active_features",
        "linesearch_trials",
        "linesearch_step",
        "time",
    ):
        assert key in entry
    # only transitions seen in training exist: D->N, N->V
    assert set(tagger.transition_features_) == {("D", "N"), ("N", "V")}
    assert all(w != 0 for w in tagger.state_features_.values())
    # CRFsuite's attribute names: key:value
    assert ("w:dog", "N") in tagger.state_features_
    # ids in order of first appearance, and coef_ a CSR matrix with one
    # stored entry per state feature (zero weights included)
    assert tagger.attributes_ == ["w:the", "w:dog", "w:barks", "w:a", "w:cat", "w:sleeps"]
    assert tagger.vectorizer_.feature_names_ == tagger.attributes_
    assert sp.issparse(tagger.coef_) and tagger.coef_.format == "csr"
    n_transitions = len(tagger.transition_features_)
    assert tagger.coef_.nnz == tagger.n_features_ - n_transitions
    coef = tagger.coef_.toarray()
    for (name, label), weight in tagger.state_features_.items():
        a = tagger.attributes_.index(name)
        k = tagger.classes_.tolist().index(label)
        assert coef[a, k] == weight


def test_predict_returns_lists_even_for_equal_lengths():
    tagger = CRFTagger().fit(X_TOY, Y_TOY)
    predicted = tagger.predict([X_TOY[0], X_TOY[2]])
    assert isinstance(predicted, list) and all(isinstance(p, list) for p in predicted)
    assert tagger.predict_single(X_TOY[1]) == ["D", "N"]
    assert tagger.predict([]) == []
    assert tagger.predict([[], X_TOY[1]]) == [[], ["D", "N"]]


def test_marginals_are_distributions_and_agree_with_viterbi():
    tagger = CRFTagger(c2=0.1).fit(X_TOY, Y_TOY)
    marginals = tagger.predict_marginals(X_TOY)
    for seq_marginals, seq in zip(marginals, X_TOY):
        assert len(seq_marginals) == len(seq)
        for token in seq_marginals:
            assert set(token) == {"D", "N", "V"}
            assert sum(token.values()) == pytest.approx(1.0, abs=1e-12)
    single = tagger.predict_marginals_single(X_TOY[0])
    assert max(single[1], key=single[1].get) == "N"


def test_labels_of_any_hashable_type_come_back_as_given():
    y_int = [[0, 1, 2], [0, 1], [0, 1, 2], [0, 1, 2]]
    tagger = CRFTagger(c2=0.01).fit(X_TOY, y_int)
    predicted = tagger.predict(X_TOY)
    assert predicted == y_int
    assert all(type(label) is int for seq in predicted for label in seq)

    y_mixed = [["D", 1, ("v",)], ["D", 1], ["D", 1, ("v",)], ["D", 1, ("v",)]]
    tagger = CRFTagger(c2=0.01).fit(X_TOY, y_mixed)
    assert tagger.predict(X_TOY) == y_mixed


def test_token_formats_follow_python_crfsuite():
    # The same information as dicts, as feature-name lists, nested and as
    # list values gives the same model.
    as_dicts = [[{"a": 1.0, "b": True}], [{"a": 1.0, "c": True}]]
    as_lists = [[["a", "b"]], [["a", "c"]]]
    y = [["X"], ["Y"]]
    t_dicts = CRFTagger().fit(as_dicts, y)
    t_lists = CRFTagger().fit(as_lists, y)
    assert t_dicts.attributes_ == t_lists.attributes_ == ["a", "b", "c"]
    assert_same_coef(t_dicts.coef_, t_lists.coef_)

    # "c": False stores c with value 0, which still creates the feature
    # (c, X) as in CRFsuite; c = 1 at the Y token then pushes its weight down.
    with_false = [[{"a": 1.0, "b": True, "c": False}], [{"a": 1.0, "c": True}]]
    t_false = CRFTagger().fit(with_false, y)
    assert t_false.n_features_ == t_lists.n_features_ + 1
    assert t_false.state_features_[("c", "X")] < 0
    assert ("c", "X") not in t_lists.state_features_

    nested = [[{"n": {"a": 1, "b": "x"}, "l": ["p", "q"]}], [{"n": {"a": 2}}]]
    tagger = CRFTagger().fit(nested, y)
    names = set(tagger.vectorizer_.feature_names_)
    assert names == {"n:a", "n:b:x", "l:p", "l:q"}


def test_dev_data_is_logged_but_does_not_change_the_model():
    X_dev = [[{"w": "a"}, {"w": "dog"}], [{"w": "the"}, {"w": "bird"}]]
    y_dev = [["D", "N"], ["D", "UNSEEN"]]
    plain = CRFTagger(c2=0.1).fit(X_TOY, Y_TOY)
    with_dev = CRFTagger(c2=0.1).fit(X_TOY, Y_TOY, X_dev=X_dev, y_dev=y_dev)
    assert_same_coef(plain.coef_, with_dev.coef_)
    np.testing.assert_array_equal(plain.transition_, with_dev.transition_)
    # "bird" (dev only) never joins the vocabulary
    assert plain.attributes_ == with_dev.attributes_
    assert "UNSEEN" not in with_dev.classes_.tolist()
    accuracies = [it["dev_accuracy"] for it in with_dev.training_log_.iterations]
    assert accuracies[-1] == 0.75  # the unseen label is always wrong
    with pytest.raises(ValueError, match="together"):
        CRFTagger().fit(X_TOY, Y_TOY, X_dev=X_dev)


def test_max_iterations_warns_and_keeps_last_weights():
    tagger = CRFTagger(max_iterations=2)
    with pytest.warns(ConvergenceWarning, match="MAX_ITERATIONS"):
        tagger.fit(X_TOY, Y_TOY)
    assert tagger.n_iter_ == 2
    assert tagger.status_ is LBFGSStatus.MAX_ITERATIONS
    assert not tagger.training_log_.converged


@pytest.mark.parametrize("linesearch", ["MoreThuente", "Backtracking", "StrongBacktracking"])
def test_line_searches_reach_the_same_optimum(linesearch):
    reference = CRFTagger(c2=0.5, epsilon=1e-7, period=0).fit(X_TOY, Y_TOY)
    tagger = CRFTagger(c2=0.5, linesearch=linesearch, epsilon=1e-7, period=0).fit(X_TOY, Y_TOY)
    assert tagger.status_ is LBFGSStatus.CONVERGED
    assert tagger.training_log_.last_iteration["loss"] == pytest.approx(
        reference.training_log_.last_iteration["loss"], rel=1e-10
    )


def test_l1_gives_sparse_weights():
    dense = CRFTagger(c1=0.0, c2=0.01).fit(X_TOY, Y_TOY)
    sparse = CRFTagger(c1=1.0, c2=0.01).fit(X_TOY, Y_TOY)
    assert sparse.training_log_.last_iteration["active_features"] < dense.n_features_
    assert len(sparse.state_features_) < len(dense.state_features_)


def test_n_jobs_gives_the_same_model(monkeypatch):
    # one thread evaluates the shards of two: the same model, to the bit
    monkeypatch.setattr(skcrf._utils._threads, "usable_cores", lambda: 2)
    one = CRFTagger(n_jobs=1).fit(X_TOY * 3, Y_TOY * 3)
    two = CRFTagger(n_jobs=2).fit(X_TOY * 3, Y_TOY * 3)
    assert one._model.weights.tobytes() == two._model.weights.tobytes()
    losses = [[it["loss"] for it in m.training_log_.iterations] for m in (one, two)]
    assert losses[0] == losses[1]


def _record_thread_pools(monkeypatch):
    """The threads of every multi-threaded step skcrf runs: the ``max_workers``
    of the fit's pool, the threads a prediction's ``thread_map`` asks for."""
    import concurrent.futures

    import skcrf._inference._decode
    import skcrf._template._vocabulary
    from skcrf._utils._threads import thread_map

    sizes = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers=None, *args, **kwargs):
            sizes.append(max_workers)
            super().__init__(max_workers, *args, **kwargs)

    def recording_map(function, n_threads, *iterables):
        if n_threads > 1:
            sizes.append(n_threads)
        return thread_map(function, n_threads, *iterables)

    monkeypatch.setattr(skcrf._training._objective, "ThreadPoolExecutor", Recording)
    monkeypatch.setattr(skcrf._inference._decode, "thread_map", recording_map)
    monkeypatch.setattr(skcrf._template._vocabulary, "thread_map", recording_map)
    return sizes


def _worker_threads():
    return sum(t.name.startswith("ThreadPoolExecutor") for t in threading.enumerate())


@pytest.mark.parametrize("n_empty", [0, 200])
def test_n_jobs_far_above_the_work_starts_no_idle_threads(monkeypatch, n_empty):
    # 3 sequences with tokens (and empty ones, which are no work): at most 3 threads
    X, y = X_TOY[:3] + [[]] * n_empty, Y_TOY[:3] + [[]] * n_empty
    sizes = _record_thread_pools(monkeypatch)
    workers = []

    def count(info):
        workers.append(_worker_threads())

    many = CRFTagger(n_jobs=500).fit(X, y, callback=count)
    assert sizes and max(sizes) <= 3
    assert max(workers) <= 3
    assert many.n_iter_ == len(workers)
    # the same model as n_jobs equal to the work (the same shards), bit for bit
    exact = CRFTagger(n_jobs=3).fit(X, y)
    np.testing.assert_array_equal(many._model.weights, exact._model.weights)
    one = CRFTagger(n_jobs=1).fit(X, y)
    np.testing.assert_allclose(many._model.weights, one._model.weights, rtol=1e-9, atol=1e-12)
    assert many.predict(X) == one.predict(X)


def test_n_jobs_far_above_the_blocks_decodes_on_as_many_threads(monkeypatch):
    # 12,000 tokens of 3 labels: past the tokens-per-thread threshold for 3
    # threads, but one block of work (BLOCK_ELEMENTS tokens x labels)
    from skcrf._inference._blocks import count_blocks

    rng = np.random.default_rng(0)
    words = ["the", "a", "dog", "cat", "barks", "sleeps"]
    X = [[{"w": words[k]} for k in rng.integers(0, 6, size=4000)] for _ in range(3)]
    tagger = CRFTagger(max_iterations=20).fit(X_TOY, Y_TOY)
    assert count_blocks([4000] * 3, len(tagger.classes_)) == 1
    expected = tagger.predict(X)
    expected_marginals = tagger.predict_marginals(X)
    sizes = _record_thread_pools(monkeypatch)
    tagger.set_params(n_jobs=500)
    assert tagger.predict_marginals(X) == expected_marginals
    tagger.predict_nbest(X, 2)
    tagger.sequence_log_proba(X)
    assert sizes == []  # one block: decoded on the calling thread
    # Viterbi decodes sequence by sequence: no more threads than sequences,
    # nor than the usable cores, each with 4000 tokens at least
    from skcrf._utils._threads import usable_cores

    assert tagger.predict(X) == expected
    threads = min(3, usable_cores())
    assert sizes == ([threads] if threads > 1 else [])
    assert tagger.predict(X[:1]) == expected[:1]
    assert sizes == ([threads] if threads > 1 else [])  # one sequence: the calling thread
    # more blocks: no more threads than blocks
    sizes.clear()
    X_more = X * 8  # 96,000 tokens: 5 blocks of 21,845 tokens at most
    n_blocks = count_blocks([4000] * 24, len(tagger.classes_))
    assert 1 < n_blocks < 96_000 // 4000
    assert tagger.predict_marginals(X_more) == expected_marginals * 8
    assert sizes and max(sizes) <= n_blocks


@pytest.mark.parametrize("n_jobs", [10**9, 7, -1])
def test_n_jobs_above_the_usable_cores_starts_as_many_threads_as_cores(monkeypatch, n_jobs):
    import skcrf._utils._threads as threads

    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    X = X_TOY * 4  # more sequences (and blocks to decode) than cores
    sizes = _record_thread_pools(monkeypatch)
    workers = []
    tagger = CRFTagger(n_jobs=n_jobs, max_iterations=5)
    tagger.fit(X, Y_TOY * 4, callback=lambda info: workers.append(_worker_threads()))
    assert sizes == [2]  # the objective's pool: one thread per usable core
    assert max(workers) <= 2
    two = CRFTagger(n_jobs=2, max_iterations=5).fit(X, Y_TOY * 4)
    np.testing.assert_array_equal(tagger._model.weights, two._model.weights)


@pytest.mark.parametrize(
    ("n_jobs", "cores", "threads"),
    [
        (None, 8, 1),
        (1, 8, 1),
        (3, 8, 3),
        (30, 8, 8),
        (-1, 8, 8),
        (-2, 8, 7),
        (-8, 8, 1),
        (-50, 8, 1),
        (5, 1, 1),
        (-1, 1, 1),
    ],
)
def test_effective_n_threads_counts_from_the_usable_cores(monkeypatch, n_jobs, cores, threads):
    import skcrf._utils._threads as threads_module

    monkeypatch.setattr(threads_module, "usable_cores", lambda: cores)
    assert threads_module.effective_n_threads(n_jobs) == threads


@pytest.mark.parametrize(
    ("files", "limit"),
    [
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "150000 100000\n"}, 2),
        ({"cpu.max": "50000 100000\n"}, 1),
        ({"cpu.max": "400000 100000\n"}, 4),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
        ({}, None),
        ({"cpu.max": "garbage"}, None),
    ],
)
def test_cgroup_cpu_quota_is_read_from_v2_and_v1_files(tmp_path, files, limit):
    from skcrf._utils._threads import _cgroup_cpu_limit

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _cgroup_cpu_limit(str(tmp_path)) == limit


def test_usable_cores_is_the_affinity_within_the_quota(monkeypatch):
    import skcrf._utils._threads as threads

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(threads, "_cpu_quota", lambda: None)
    assert threads.usable_cores() == affinity
    monkeypatch.setattr(threads, "_cpu_quota", lambda: 1)
    assert threads.usable_cores() == 1
    monkeypatch.setattr(threads, "_cpu_quota", lambda: affinity + 5)
    assert threads.usable_cores() == affinity


def test_usable_cores_follow_the_calling_threads_affinity(monkeypatch):
    # (as documented for n_jobs: a thread pinned to one core gets one thread)
    import threading

    import skcrf._utils._threads as threads

    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs CPU affinity and two usable cores")
    monkeypatch.setattr(threads, "_cpu_quota", lambda: None)
    seen = {}

    def pinned():
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        seen["pinned"] = threads.usable_cores()

    worker = threading.Thread(target=pinned)
    worker.start()
    worker.join()
    assert seen == {"pinned": 1}
    assert threads.usable_cores() == len(os.sched_getaffinity(0)) >= 2


def test_training_is_deterministic():
    a = CRFTagger(c1=0.05, c2=0.1).fit(X_TOY, Y_TOY)
    b = CRFTagger(c1=0.05, c2=0.1).fit(X_TOY, Y_TOY)
    assert_same_coef(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.transition_, b.transition_)


def test_not_fitted_error_before_fit():
    tagger = CRFTagger()
    for method in (tagger.predict, tagger.predict_marginals):
        with pytest.raises(NotFittedError):
            method(X_TOY)
    with pytest.raises(NotFittedError):
        tagger.state_features_  # noqa: B018 - the access is the test


def test_unseen_features_and_single_label():
    tagger = CRFTagger().fit([[{"w": "x"}], [{"w": "y"}]], [["only"], ["only"]])
    assert tagger.predict([[{"never": "seen"}, {"w": "x"}]]) == [["only", "only"]]


def test_parameter_validation_names_the_range():
    with pytest.raises(ValueError, match="'c1' parameter.*range"):
        CRFTagger(c1=-1).fit(X_TOY, Y_TOY)
    with pytest.raises(ValueError, match="'num_memories'"):
        CRFTagger(num_memories=0).fit(X_TOY, Y_TOY)
    with pytest.raises(ValueError, match="'linesearch'.*MoreThuente"):
        CRFTagger(linesearch="Bogus").fit(X_TOY, Y_TOY)


# -- the constructor: sklearn_crfsuite.CRF's signature -------------------------


def test_algorithm_is_the_first_positional_parameter():
    tagger = CRFTagger("lbfgs", 0, False, True, 0.0, 0.01)
    params = tagger.get_params()
    assert params["algorithm"] == "lbfgs" and params["c2"] == 0.01
    assert params["all_possible_transitions"] is True
    tagger.fit(X_TOY, Y_TOY)
    reference = CRFTagger(algorithm="lbfgs", c2=0.01, all_possible_transitions=True)
    reference.fit(X_TOY, Y_TOY)
    assert_same_coef(tagger.coef_, reference.coef_)
    # all_possible_transitions: every label pair has a feature
    assert tagger.n_features_ == tagger.coef_.nnz + 9
    with pytest.raises(TypeError):
        CRFTagger("lbfgs", *[None] * 27, 2)  # n_jobs is keyword-only


@pytest.mark.parametrize(
    "params, owners",
    [
        ({"pa_type": 1}, "'pa'"),
        ({"c": 0.5}, "'pa'"),
        ({"variance": 2.0}, "'arow'"),
        ({"calibration_eta": 0.5}, "'asgd', 'l2sgd'"),
        ({"algorithm": "lbfgs", "averaging": False}, "'pa'"),
        ({"algorithm": "ap", "c1": 0.1}, "'lbfgs'"),
        ({"algorithm": "ap", "c2": 0.1}, "'asgd', 'l2sgd', 'lbfgs'"),
        ({"algorithm": "pa", "num_memories": 3}, "'lbfgs'"),
        ({"algorithm": "l2sgd", "epsilon": 0.1}, "'ap', 'arow', 'lbfgs', 'pa'"),
    ],
)
def test_a_parameter_of_another_algorithm_is_an_error(params, owners):
    algorithm = params.get("algorithm", "lbfgs")
    ((name, value),) = ((k, v) for k, v in params.items() if k != "algorithm")
    message = (
        rf"{name}={value!r} does not apply to algorithm='{algorithm}': it is a "
        rf"parameter of {owners}\."
    )
    with pytest.raises(ValueError, match=message):
        CRFTagger(**params).fit(X_TOY, Y_TOY)


@pytest.mark.parametrize("algorithm", ["l2sgd", "ap", "pa", "arow"])
def test_other_algorithms_train_with_their_own_parameters(algorithm):
    own = {
        "l2sgd": {"c2": 0.01},
        "ap": {"epsilon": 0.0},
        "pa": {"pa_type": 2},
        "arow": {"gamma": 0.5},
    }[algorithm]
    tagger = CRFTagger(algorithm=algorithm, random_state=0, **own).fit(X_TOY, Y_TOY)
    assert tagger.predict(X_TOY) == Y_TOY
    assert tagger.n_iter_ >= 1 and len(tagger.training_log_) == tagger.n_iter_


def test_n_jobs_zero_is_an_error():
    with pytest.raises(ValueError, match="n_jobs == 0"):
        CRFTagger(n_jobs=0).fit(X_TOY, Y_TOY)
    CRFTagger(n_jobs=-1).fit(X_TOY, Y_TOY)  # all cores: accepted


def test_trainer_cls_is_rejected_and_keep_tempfiles_accepted():
    class Trainer:
        pass

    with pytest.raises(ValueError, match="trainer_cls is not supported"):
        CRFTagger(trainer_cls=Trainer).fit(X_TOY, Y_TOY)
    # keep_tempfiles is accepted (there are no temporary files)
    CRFTagger(keep_tempfiles=True).fit(X_TOY, Y_TOY)


# -- threads ---------------------------------------------------------------------


def _blas_threads():
    return sorted(
        (info["filepath"], info["num_threads"])
        for info in threadpoolctl.threadpool_info()
        if info["user_api"] == "blas"
    )


def test_concurrent_fits_give_the_models_of_sequential_fits(monkeypatch):
    rng = np.random.default_rng(3)
    datasets = []
    for _ in range(2):
        X = [
            [
                {"w": f"w{rng.integers(30)}", "x": float(rng.normal())}
                for _ in range(rng.integers(1, 12))
            ]
            for _ in range(150)
        ]
        y = [[f"L{rng.integers(5)}" for _ in seq] for seq in X]
        datasets.append((X, y))
    params = [{"c2": 0.1, "n_jobs": 2}, {"c1": 0.05, "c2": 0.01}]

    def fit(k):
        X, y = datasets[k]
        return fit_quietly(
            CRFTagger(max_iterations=15, **params[k]), X, y, X_dev=X[:20], y_dev=y[:20]
        )

    before = _blas_threads()
    assert before, "no BLAS library loaded: the test would check nothing"
    sequential = [fit(0), fit(1)]
    assert _blas_threads() == before

    # Both fits wait for each other at their first objective evaluation, so
    # their optimizations (and their BLAS limits) overlap.
    original = skcrf._training._objective.CRFObjective.loss_gradient
    barrier = threading.Barrier(2, timeout=60)
    users = []

    def loss_gradient(self, w):
        if not getattr(self, "_met", False):
            self._met = True
            barrier.wait()
            users.append(skcrf._utils._threads._blas_users)
            barrier.wait()
        return original(self, w)

    monkeypatch.setattr(skcrf._training._objective.CRFObjective, "loss_gradient", loss_gradient)
    results, errors = [None, None], []

    def run(k):
        try:
            results[k] = fit(k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert users == [2, 2]  # one shared, counted limit
    assert _blas_threads() == before  # restored once both have ended

    for concurrent, alone in zip(results, sequential):
        assert concurrent.attributes_ == alone.attributes_
        assert concurrent.classes_.tolist() == alone.classes_.tolist()
        assert_same_coef(concurrent.coef_, alone.coef_)
        np.testing.assert_array_equal(concurrent.transition_, alone.transition_)
        assert [e["loss"] for e in concurrent.training_log_.iterations] == [
            e["loss"] for e in alone.training_log_.iterations
        ]
        assert [e["dev_accuracy"] for e in concurrent.training_log_.iterations] == [
            e["dev_accuracy"] for e in alone.training_log_.iterations
        ]


def test_single_blas_thread_nests_and_restores():
    from skcrf._utils._threads import single_blas_thread

    before = _blas_threads()
    with single_blas_thread():
        assert all(n == 1 for _, n in _blas_threads())
        with single_blas_thread():
            assert skcrf._utils._threads._blas_users == 2
        assert all(n == 1 for _, n in _blas_threads())  # still limited
    assert skcrf._utils._threads._blas_users == 0
    assert _blas_threads() == before


def test_blas_controller_is_kept_until_a_module_is_imported(monkeypatch):
    # making threadpoolctl's controller scans every loaded library (ms); a
    # new BLAS comes with a new module, so an import makes it again
    import types

    from skcrf._utils import _threads

    with _threads._blas_lock:
        first = _threads._blas_controller()
        assert _threads._blas_controller() is first
        monkeypatch.setitem(sys.modules, "skcrf_test_new_module", types.ModuleType("new"))
        second = _threads._blas_controller()
        assert second is not first
        assert _threads._blas_controller() is second
        assert [lib.filepath for lib in second.lib_controllers] == [
            lib.filepath for lib in first.lib_controllers
        ]


@pytest.fixture
def restore_blas():
    """Put BLAS back as it was, whatever the test did to it."""
    before = threadpoolctl.threadpool_info()
    yield
    controller = getattr(threadpoolctl, "OpenBLASController", None)
    clear = getattr(controller, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)
    for info in before:
        if info["user_api"] == "blas":
            threadpoolctl.threadpool_limits(limits={info["filepath"]: info["num_threads"]})
    if clear is not None:
        clear(force=True)


def test_blas_limit_holds_in_any_thread_and_is_always_restored(restore_blas):
    from concurrent.futures import ThreadPoolExecutor

    from skcrf._utils._threads import single_blas_thread

    before = _blas_threads()
    assert before and any(n > 1 for _, n in before), "needs multithreaded BLAS"
    seen = []
    # the main thread uses the limit once, then a worker thread
    with single_blas_thread():
        seen.append(("main", _blas_threads()))

    def worker():
        with single_blas_thread():
            seen.append(("worker", _blas_threads()))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    # two overlapping users on long-lived pool threads: A enters first, B ends last
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with single_blas_thread():
            a_in.set()
            assert b_in.wait(30)
            seen.append(("overlap", _blas_threads()))
        a_out.set()

    def last():
        assert a_in.wait(30)
        with single_blas_thread():
            b_in.set()
            assert a_out.wait(30)
            seen.append(("last", _blas_threads()))

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(first), pool.submit(last)]
        for future in futures:
            future.result()
        after_with_pool_alive = _blas_threads()
    for where, blas in seen:
        assert all(n == 1 for _, n in blas), (where, blas)
    assert after_with_pool_alive == before
    assert _blas_threads() == before


# -- vectorizer_ and coef_ agree with the encoding --------------------------------


def _random_flat_tokens(seed, n_sequences=30):
    """Flat dict tokens: str, bool (False is an explicit 0), float and int values."""
    rng = np.random.default_rng(seed)
    words = ["a", "b", "c=d", "", "é", "x:y"]
    X = []
    for _ in range(n_sequences):
        sequence = []
        for _ in range(rng.integers(0, 6)):
            token = {}
            for key in rng.choice(["w", "p", "n", "k=v", "f", "g"], size=rng.integers(0, 5)):
                kind = rng.integers(0, 4)
                if kind == 0:
                    token[key] = str(rng.choice(words))
                elif kind == 1:
                    token[key] = bool(rng.integers(0, 2))
                elif kind == 2:
                    token[key] = float(rng.normal())
                else:
                    token[key] = int(rng.integers(-3, 4))
            sequence.append(token)
        X.append(sequence)
    return X


@pytest.mark.parametrize("seed", range(4))
def test_vectorizer_transforms_flat_tokens_as_the_encoder_does(seed):
    from sklearn.feature_extraction import DictVectorizer

    from skcrf._featurize._vocabulary import Vocabulary

    X, X_new = _random_flat_tokens(seed), _random_flat_tokens(seed + 100)
    X[0] = X[0] + [{"w": "a"}]  # at least one token
    y = [["A" if k % 2 else "B" for k in range(len(seq))] for seq in X]
    tagger = fit_quietly(CRFTagger(c2=0.1, max_iterations=10), X, y)
    vectorizer = tagger.vectorizer_
    assert isinstance(vectorizer, DictVectorizer) and vectorizer.separator == ":"
    assert vectorizer.feature_names_ == tagger.attributes_
    # DictVectorizer(separator=':') names attributes as the encoder does
    reference = DictVectorizer(separator=":", sort=False)
    reference.fit([token for seq in X for token in seq])
    assert reference.feature_names_ == tagger.attributes_
    vocabulary = Vocabulary(tagger.attributes_)
    for data in (X, X_new):
        flat = [token for seq in data for token in seq]
        if not flat:
            continue
        encoded = vocabulary.encode(data, grow=False)
        rows = sp.csr_matrix(
            (encoded.values, encoded.ids, encoded.indptr),
            shape=(len(flat), len(tagger.attributes_)),
        )
        expected = vectorizer.transform(flat)
        np.testing.assert_array_equal(rows.indptr, expected.indptr)  # explicit zeros too
        np.testing.assert_array_equal(rows.toarray(), expected.toarray())
        # and the state scores decoding uses are X @ coef_: one-token sequences'
        # marginals are the softmax of those scores
        scores = np.asarray(expected @ tagger.coef_.toarray())
        want = np.exp(scores - scores.max(axis=1, keepdims=True))
        want /= want.sum(axis=1, keepdims=True)
        marginals = tagger.predict_marginals([[token] for token in flat])
        got = np.array([[m[0][label] for label in tagger.classes_] for m in marginals])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_global_output_config_does_not_matter():
    from sklearn import config_context

    plain = CRFTagger(c2=0.1).fit(X_TOY, Y_TOY)
    with config_context(transform_output="pandas"):
        configured = CRFTagger(c2=0.1).fit(X_TOY, Y_TOY)
        assert configured.predict(X_TOY) == plain.predict(X_TOY)
        assert configured.predict_marginals(X_TOY) == plain.predict_marginals(X_TOY)
    assert_same_coef(configured.coef_, plain.coef_)


@pytest.mark.parametrize("algorithm", ["lbfgs", "l2sgd"])
def test_period_zero_disables_the_delta_test(algorithm):
    # the docs: 0 turns the delta test off (l2sgd divided by zero)
    X, y = X_TOY * 3, Y_TOY * 3
    params = {"epsilon": 0.0} if algorithm == "lbfgs" else {}  # no convergence test either
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        tagger = CRFTagger(algorithm, period=0, delta=1e9, max_iterations=4, **params)
        tagger.fit(X, y)
        assert tagger.n_iter_ == 4
        assert tagger.status_.name == "MAX_ITERATIONS"
        # the test on, with that delta, stops at its first chance
        tagger.set_params(period=1).fit(X, y)
    assert tagger.n_iter_ < 4
    assert (
        tagger.status_.name == {"lbfgs": "STOPPED_DELTA", "l2sgd": "SMALL_IMPROVEMENT"}[algorithm]
    )
    if algorithm == "l2sgd":  # partial_fit's epochs run no delta test
        tagger = CRFTagger(algorithm, period=0)
        tagger.partial_fit(X, y, classes=["D", "N", "V"]).partial_fit(X, y)
        assert tagger.n_iter_ == 2


@pytest.mark.parametrize("algorithm", ["ap", "pa", "arow"])
def test_period_is_an_error_for_the_trainers_without_a_delta_test(algorithm):
    for period in (0, 5):
        with pytest.raises(ValueError, match=f"period={period} does not apply to algorithm"):
            CRFTagger(algorithm, period=period).fit(X_TOY, Y_TOY)
