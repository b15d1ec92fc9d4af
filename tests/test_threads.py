"""One fitted model served from many threads at once.

Every public prediction method, called from 8 threads on sequences of 1 to
20,000 tokens, must give exactly the answers of sequential calls: no shared
workspace, no shared "current sequence", never a crash.
"""

import random
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from skcrf import CRFTagger

# quick, run-time dependencies only: tools/build_wheels.py runs these against each wheel
pytestmark = pytest.mark.wheel

N_THREADS = 8
LENGTHS = [1, 2, 3, 7, 20, 50, 200, 1000, 20000]


def _tokens(rng, n):
    return [
        {"w": f"w{rng.randrange(60)}", "s": str(rng.randrange(4)), "x": rng.random()}
        for _ in range(n)
    ]


def _labels(tokens):
    return [f"L{int(t['w'][1:]) % 9}" if t["x"] > 0.1 else "RARE" for t in tokens]


@pytest.fixture(scope="module")
def served():
    rng = random.Random(0)
    X = [_tokens(rng, rng.randrange(1, 25)) for _ in range(400)]
    y = [_labels(s) for s in X]
    tagger = CRFTagger(c1=0.05, c2=0.01, max_iterations=40, all_possible_transitions=True)
    tagger.fit(X, y)
    queries = [_tokens(rng, n) for n in LENGTHS]
    rng.shuffle(queries)
    return tagger, queries


def _as_comparable(value):
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return [_as_comparable(v) for v in value]
    return value


def _calls(tagger, xseq):
    """(name, thunk) for every method that takes the sequence it decodes."""
    n = len(xseq)
    labels = tagger.classes_
    partial = [labels[k % len(labels)] if k % 5 == 0 else None for k in range(n)]
    allowed = [(a, b) for a in labels for b in labels if (a, b) != ("RARE", "RARE")]
    view = tagger.tagger_

    def view_set_then_read():
        view.set(xseq)
        path = view.tag()
        return (path, view.probability(path), view.marginal(path[0], 0))

    calls = [
        ("predict_single", lambda: tagger.predict_single(xseq)),
        ("predict_marginals_single", lambda: tagger.predict_marginals_single(xseq)),
        ("predict", lambda: tagger.predict([xseq, xseq[: max(1, n // 2)]])),
        ("predict_marginals", lambda: tagger.predict_marginals([xseq])),
        ("predict_single partial", lambda: tagger.predict_single(xseq, partial_labels=partial)),
        ("predict allowed", lambda: tagger.predict([xseq], allowed_transitions=allowed)),
        ("tagger_.tag(xseq)", lambda: view.tag(xseq)),
        ("tagger_ set/tag/probability/marginal", view_set_then_read),
    ]
    if n <= 1000:  # the structured methods cost more per token
        calls += [
            ("predict_nbest", lambda: tagger.predict_nbest([xseq], n=3)),
            ("sequence_log_proba", lambda: tagger.sequence_log_proba([xseq])),
            ("predict_transition_marginals", lambda: tagger.predict_transition_marginals([xseq])),
        ]
    return calls


def _run_all(tagger, queries, offset):
    results = {}
    for q in range(len(queries)):
        k = (q + offset) % len(queries)
        for name, call in _calls(tagger, queries[k]):
            results[k, name] = _as_comparable(call())
    return results


def _check_threads(tagger, queries, repeats=1):
    expected = _run_all(tagger, queries, 0)
    for _ in range(repeats):
        with ThreadPoolExecutor(N_THREADS) as pool:
            # each thread walks the queries from another start: all overlap
            outcomes = list(pool.map(lambda i: _run_all(tagger, queries, 3 * i), range(N_THREADS)))
        for outcome in outcomes:
            assert outcome.keys() == expected.keys()
            wrong = [key for key in expected if outcome[key] != expected[key]]
            assert not wrong, f"threads disagree with the sequential answers: {wrong[:5]}"


def test_fitted_model_shared_by_threads(served):
    tagger, queries = served
    _check_threads(tagger, queries, repeats=2)


def test_loaded_model_shared_by_threads(served, tmp_path):
    # a freshly loaded model starts with empty encoder caches, filled while
    # the threads run
    tagger, queries = served
    tagger.to_crfsuite(tmp_path / "m.crfsuite")
    _check_threads(CRFTagger.from_crfsuite(tmp_path / "m.crfsuite"), queries)


def test_set_sequence_is_per_thread(served):
    tagger, queries = served
    view = tagger.tagger_
    short, long_ = queries[0], max(queries, key=len)
    view.set(short)
    with ThreadPoolExecutor(1) as pool:
        # another thread has set nothing yet, then sets its own
        with pytest.raises(ValueError, match="no sequence is set in this thread"):
            pool.submit(view.tag).result()
        pool.submit(view.set, long_).result()
        assert len(pool.submit(view.tag).result()) == len(long_)
    assert len(view.tag()) == len(short)
    assert tagger.tagger_ is view


def test_single_decoder_bound_built_once_under_threads():
    # many labels: the pruning bound is built by some call while other
    # threads decode without it; every answer equals the sequential one
    rng = np.random.default_rng(3)
    n_labels = 120
    X = [[{"w": f"w{rng.integers(300)}"} for _ in range(rng.integers(1, 6))] for _ in range(600)]
    y = [[f"L{rng.integers(n_labels)}" for _ in s] for s in X]
    tagger = CRFTagger(max_iterations=5, all_possible_transitions=True).fit(X, y)
    queries = [[{"w": f"w{rng.integers(300)}"} for _ in range(n)] for n in (1, 4, 30, 300) * 8]
    expected = [tagger.predict([q])[0] for q in queries]  # the batched kernel
    fresh = CRFTagger.from_crfsuite(_crfsuite_bytes(tagger))
    with ThreadPoolExecutor(N_THREADS) as pool:
        got = list(pool.map(fresh.predict_single, queries * 2))
    assert got == expected * 2


def _crfsuite_bytes(tagger):
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "m.crfsuite")
        tagger.to_crfsuite(path)
        with open(path, "rb") as f:
            return f.read()


def test_lists_of_names_and_pycrfsuite_items_under_threads(served, tmp_path):
    # lists of names and pycrfsuite's items, encoded in C through the
    # encoder's caches (empty after loading, filled while the threads run;
    # fresh str objects each call, names short and long): one model, one
    # skcrf.pycrfsuite.Tagger, every answer the sequential one
    import skcrf.pycrfsuite

    tagger, queries = served
    tagger.to_crfsuite(tmp_path / "m.crfsuite")
    short = [q for q in queries if len(q) <= 1000]

    def as_names(xseq):
        return [
            [f"w:{t['w']}", f"s:{t['s']}", "".join(["a long name for ", t["w"]]), "bias"]
            for t in xseq
        ]

    def as_items(xseq):
        return [{"w": "".join(t["w"]), "s": t["s"], "x": t["x"]} for t in xseq]

    def answers(estimator, view, offset):
        results = {}
        for q in range(len(short)):
            k = (q + offset) % len(short)
            xseq = short[k]
            results[k, "predict_single"] = estimator.predict_single(as_names(xseq))
            results[k, "tag names"] = view.tag(as_names(xseq))
            results[k, "tag items"] = view.tag(as_items(xseq))
            results[k, "marginal"] = view.marginal(results[k, "tag items"][0], 0)
        return results

    def loaded():
        view = skcrf.pycrfsuite.Tagger()
        view.open(tmp_path / "m.crfsuite")
        return CRFTagger.from_crfsuite(tmp_path / "m.crfsuite"), view

    expected = answers(*loaded(), 0)
    estimator, view = loaded()  # caches empty again
    with ThreadPoolExecutor(N_THREADS) as pool:
        outcomes = list(pool.map(lambda i: answers(estimator, view, 3 * i), range(N_THREADS)))
    for outcome in outcomes:
        assert outcome == expected


def test_mapped_model_shared_by_threads(served, tmp_path):
    # format 5 mapped read-only (CRFTagger.load(mmap=True)): the arrays the
    # kernels read are the file's pages, the name lookups the file's tables
    tagger, queries = served
    tagger.save(tmp_path / "m.skcrf")
    loaded = CRFTagger.load(tmp_path / "m.skcrf", mmap=True)
    assert not loaded._fitted_model().state_labels.flags.writeable
    _check_threads(loaded, queries)


def test_thread_map_keeps_order_runs_nested_calls_inline_and_survives_fork():
    import os
    import threading
    import warnings

    from skcrf._utils._threads import thread_map

    assert thread_map(lambda a, b: a * b, 3, range(10), range(10)) == [k * k for k in range(10)]
    assert thread_map(str, 1, [1, 2]) == ["1", "2"]

    def nested(k):
        # a call from a pool thread runs there (no task waits for a queued one)
        name = threading.current_thread().name
        inner = thread_map(lambda j: threading.current_thread().name, 2, range(2))
        return name, inner

    caller = threading.current_thread().name
    calls = thread_map(nested, 2, range(4))
    assert calls[0][0] == caller  # the first task runs in the calling thread
    assert all(name != caller and inner == [name] * 2 for name, inner in calls[1:])
    with pytest.raises(ZeroDivisionError):
        thread_map(lambda k: 1 // k, 2, [1, 0])

    # the first task's error is raised once every other task has ended
    ended = []

    def slow_or_failing(k):
        if k == 0:
            raise ValueError("first")
        time.sleep(0.05)
        ended.append(k)

    with pytest.raises(ValueError, match="first"):
        thread_map(slow_or_failing, 3, range(3))
    assert sorted(ended) == [1, 2]
    if not hasattr(os, "fork"):
        return
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+: fork with the pool's threads alive
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child has the pool object but not its threads: a new pool
        try:
            ok = thread_map(lambda k: k + 1, 2, range(3)) == [1, 2, 3]
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
    finally:
        os.close(read)
        os.waitpid(pid, 0)
