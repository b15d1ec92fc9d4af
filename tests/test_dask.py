"""skcrf.dask: the map-reduce vocabulary, DaskCRFTagger on a LocalCluster, read_conll.

The cluster tests run two worker processes (one thread each) and compare with
a local CRFTagger fit on the same data: the same features in the same order,
the objective at convergence within 1e-6 relative, the same predictions.
"""

import logging
import pickle
import sys

import numpy as np
import pytest

pytest.importorskip("skcrf._inference._kernels", reason="compiled extension not built")
distributed = pytest.importorskip("distributed")
db = pytest.importorskip("dask.bag")
cloudpickle = pytest.importorskip("cloudpickle")

from sklearn.base import clone  # noqa: E402

from skcrf import CRFTagger  # noqa: E402
from skcrf import dask as skcrf_dask  # noqa: E402
from skcrf._dask import _tasks as tasks  # noqa: E402
from skcrf._featurize._encoded import concatenate  # noqa: E402
from skcrf._featurize._labels import encode_labels  # noqa: E402
from skcrf._featurize._vocabulary import Vocabulary  # noqa: E402
from skcrf._training._objective import select_features  # noqa: E402
from skcrf.dask import DaskCRFTagger, read_conll  # noqa: E402

# feature functions defined here run on the workers (read_conll)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

WORDS = ["the", "a", "dog", "cat", "runs", "sleeps", "big", "small", "Bob", "Paris", "7", "!"]
TAGS = dict(zip(WORDS, ["D", "D", "N", "N", "V", "V", "J", "J", "P", "P", "C", "."]))


def make_data(n, seed=0, empty=False):
    """Sequences of token dicts (strings, floats, bools, explicit zeros) and tags."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for i in range(n):
        length = 0 if empty and i % 7 == 3 else int(rng.integers(1, 9))
        words = [WORDS[j] for j in rng.integers(0, len(WORDS), length)]
        X.append(
            [
                {
                    "w": w,
                    "prev": words[t - 1] if t else "BOS",
                    "len": len(w) / 5,
                    "upper": w[0].isupper(),
                    "digit": w.isdigit(),
                }
                for t, w in enumerate(words)
            ]
        )
        y.append([TAGS[w] if rng.random() > 0.15 else "N" for w in words])
    return X, y


def chunks(seq, sizes):
    out, start = [], 0
    for size in sizes:
        out.append(seq[start : start + size])
        start += size
    return out


def model_arrays(model):
    return (
        model.attributes,
        model.classes.tolist(),
        model.state_ptr.tolist(),
        model.state_labels.tolist(),
        model.transition_index.tolist(),
    )


def merge_all(stats):
    """Merge a list of stats in order, pairwise (the tree that skcrf.dask builds)."""
    stats = list(stats)
    while len(stats) > 1:
        merged = [tasks.merge_stats(a, b) for a, b in zip(stats[0::2], stats[1::2])]
        stats = merged + ([stats[-1]] if len(stats) % 2 else [])
    return stats[0]


# -- the map-reduce, without a cluster -------------------------------------------


@pytest.mark.parametrize("sizes", [[40], [10, 10, 10, 10], [0, 13, 0, 27], [1, 1, 37, 1]])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"min_freq": 2.0},
        {"all_possible_states": True},
        {"all_possible_transitions": True, "min_freq": 1.5},
    ],
)
def test_merged_stats_give_select_features(sizes, options):
    X, y = make_data(40, seed=1, empty=True)
    X[5][0]["neg"] = -3.0  # a feature whose sum is negative: dropped at min_freq 0
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(X, grow=True)
    labels = [label for seq in y for label in seq]
    index, classes = encode_labels(labels)
    expected, observed = select_features(encoded, index, classes, vocabulary.attributes, **options)

    scans = [
        tasks.scan_partition(xp, yp, k, tasks.__version__)
        for k, (xp, yp) in enumerate(zip(chunks(X, sizes), chunks(y, sizes)))
    ]
    stats = merge_all([tasks.partition_stats(scan) for scan in scans])
    bundle = tasks.build_model(stats, **options)
    assert model_arrays(bundle.model) == model_arrays(expected)
    np.testing.assert_allclose(bundle.observed, observed, rtol=1e-12, atol=1e-12)

    # each partition's ids are those of the global vocabulary
    for scan, xp in zip(scans, chunks(X, sizes)):
        part, _ = tasks.vectorize_partition(scan, bundle, tasks.__version__)
        again = Vocabulary(vocabulary.attributes).encode(xp, grow=False)
        for a, b in zip(part[:4], again[:4]):  # the CSR arrays and lengths
            np.testing.assert_array_equal(a, b)


def local_objective(X, y, weights, bundle, c2):
    """The local CRFObjective of the whole data, on the features of ``bundle``."""
    from skcrf._training._objective import CRFObjective
    from skcrf._training._weights import drop_sequences

    encoded = Vocabulary(bundle.model.attributes).encode(X, grow=False)
    index, classes = encode_labels([label for seq in y for label in seq], bundle.model.classes)
    token_weights = None
    if weights is not None:
        keep = weights > 0
        encoded, index, classes, _ = drop_sequences(encoded, index, classes, None, keep)
        token_weights = np.repeat(weights[keep], encoded.lengths)
    return CRFObjective(encoded, bundle.model, bundle.observed, c2=c2, token_weights=token_weights)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("sizes", [[40], [10, 10, 10, 10], [0, 13, 0, 27], [5, 30, 1, 2, 2]])
@pytest.mark.parametrize("n_groups", [1, 2, 3])
def test_groups_give_the_local_loss_and_gradient(sizes, n_groups, weighted):
    """A worker's partitions evaluated together, summed over the groups, are the local objective."""
    X, y = make_data(40, seed=5, empty=True)
    weights = None
    if weighted:
        weights = sample_weights(40, seed=5)
        weights[:5] = 1.0  # a partition of weight-1 sequences only: no token weights there
    w_parts = [None] * len(sizes) if weights is None else chunks(weights.tolist(), sizes)
    scans = [
        tasks.scan_partition(xp, yp, k, tasks.__version__, wp)
        for k, (xp, yp, wp) in enumerate(zip(chunks(X, sizes), chunks(y, sizes), w_parts))
    ]
    bundle = tasks.build_model(merge_all([tasks.partition_stats(s) for s in scans]))
    parts = [tasks.vectorize_partition(scan, bundle, tasks.__version__) for scan in scans]
    bounds = skcrf_dask.partition_groups(len(parts), n_groups)
    assert [k for start, stop in bounds for k in range(start, stop)] == list(range(len(parts)))
    groups = [
        tasks.group_partitions(parts[start:stop], bundle, 1, tasks.__version__)
        for start, stop in bounds
    ]
    c2 = 0.3
    rng = np.random.default_rng(1)
    for scale in (0.0, 0.5):
        w = rng.normal(scale=scale, size=bundle.model.n_features)
        log_z, expected = tasks.add_losses(*[tasks.partition_loss(g, w) for g in groups])
        loss = log_z - w @ bundle.observed + c2 * (w @ w)
        gradient = expected - bundle.observed + 2.0 * c2 * w
        want_loss, want_gradient = local_objective(X, y, weights, bundle, c2).loss_gradient(w)
        assert loss == pytest.approx(want_loss, rel=1e-12)
        np.testing.assert_allclose(gradient, want_gradient, rtol=1e-10, atol=1e-10)


def test_concatenated_partitions_are_the_encoding_of_their_sequences():
    X, y = make_data(30, seed=6, empty=True)
    sizes = [7, 0, 12, 11]
    scans = [
        tasks.scan_partition(xp, yp, k, tasks.__version__)
        for k, (xp, yp) in enumerate(zip(chunks(X, sizes), chunks(y, sizes)))
    ]
    bundle = tasks.build_model(merge_all([tasks.partition_stats(s) for s in scans]))
    parts = [tasks.vectorize_partition(scan, bundle, tasks.__version__)[0] for scan in scans]
    joined = concatenate(parts[1:])
    again = Vocabulary(bundle.model.attributes).encode(X[7:], grow=False)
    for a, b in zip(joined[:4], again[:4]):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype


@pytest.mark.parametrize(
    "n_partitions, n_groups", [(1, 1), (1, 4), (8, 2), (5, 3), (7, 7), (3, 1)]
)
def test_partition_groups_are_consecutive_runs_of_similar_size(n_partitions, n_groups):
    bounds = skcrf_dask.partition_groups(n_partitions, n_groups)
    assert len(bounds) == min(n_partitions, n_groups)
    assert bounds[0][0] == 0 and bounds[-1][1] == n_partitions
    assert all(stop == start for (_, stop), (start, _) in zip(bounds, bounds[1:]))
    sizes = [stop - start for start, stop in bounds]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_merge_rejects_labels_equal_but_not_the_same():
    first = tasks.scan_partition([[{"a": 1}]], [[1]], 0, tasks.__version__)
    second = tasks.scan_partition([[{"a": 1}]], [[1.0]], 1, tasks.__version__)
    with pytest.raises(ValueError, match="equal in Python but not the same"):
        tasks.merge_stats(first.stats, second.stats)


def test_partition_errors_name_the_partition_and_sequence():
    X, y = make_data(5)
    X[3][0]["w"] = None
    with pytest.raises(TypeError, match=r"X\.partitions\[2\]\[3\]\[0\]: feature 'w'"):
        tasks.scan_partition(X, y, 2, tasks.__version__)
    X, y = make_data(5)
    with pytest.raises(ValueError, match=r"y\.partitions\[1\]\[4\] has"):
        tasks.scan_partition(X, y[:4] + [y[4][:-1] + ["x", "x"]], 1, tasks.__version__)


def test_version_check_in_tasks():
    with pytest.raises(tasks.VersionMismatchError, match="install the same skcrf"):
        tasks.scan_partition([], [], 0, "0.0.0-other")


def test_only_lbfgs_and_no_partial_fit():
    with pytest.raises(ValueError, match="'lbfgs' only.*online trainers"):
        DaskCRFTagger(algorithm="ap").fit([[{"a": 1}]], [["x"]])
    with pytest.raises(ValueError, match="no partial_fit"):
        DaskCRFTagger().partial_fit([[{"a": 1}]], [["x"]], classes=["x"])


def test_params_clone_and_pickle():
    tagger = DaskCRFTagger(c1=0.1, c2=0.5, n_jobs=2, client="tcp://127.0.0.1:1")
    assert tagger.get_params()["client"] == "tcp://127.0.0.1:1"
    assert set(CRFTagger().get_params()) | {"client"} == set(tagger.get_params())
    copy = clone(tagger)
    assert copy.get_params() == tagger.get_params()
    sentinel = object()  # a client is shared by clone, not copied
    assert clone(DaskCRFTagger(client=sentinel)).client is sentinel
    assert pickle.loads(pickle.dumps(tagger)).get_params() == tagger.get_params()


# -- read_conll -----------------------------------------------------------------------


CONLL = """# a comment
-DOCSTART- -X- O

The DT B-NP
dog NN I-NP
runs VBZ B-VP

# sent 2
Bob NNP B-NP


sleeps VBZ B-VP
. . O
"""


def write_corpus(folder, n_files=3, n_sentences=30, seed=0):
    """CoNLL files of make_data's words; returns the (words, tags) written."""
    rng = np.random.default_rng(seed)
    written = []
    for f in range(n_files):
        lines = [f"# file {f}"]
        for _ in range(n_sentences):
            words = [WORDS[j] for j in rng.integers(0, len(WORDS), int(rng.integers(1, 9)))]
            tags = [TAGS[w] for w in words]
            lines += [f"{w}\t{t}" for w, t in zip(words, tags)] + [""]
            written.append((words, tags))
        (folder / f"part-{f}.conll").write_text("\n".join(lines) + "\n")
    return written


def word_features(rows):
    words = [row["word"] for row in rows]
    return [
        {"w": w, "prev": words[i - 1] if i else "BOS", "upper": w[0].isupper()}
        for i, w in enumerate(words)
    ]


def test_read_conll_without_dask(tmp_path):
    (tmp_path / "a.conll").write_text(CONLL)
    items = list(
        read_conll(
            tmp_path / "a.conll", columns=("word", "pos", "chunk"), label_column="chunk", bag=False
        )
    )
    assert items == [
        (
            [
                {"word": "The", "pos": "DT"},
                {"word": "dog", "pos": "NN"},
                {"word": "runs", "pos": "VBZ"},
            ],
            ["B-NP", "I-NP", "B-VP"],
        ),
        ([{"word": "Bob", "pos": "NNP"}], ["B-NP"]),
        ([{"word": "sleeps", "pos": "VBZ"}, {"word": ".", "pos": "."}], ["B-VP", "O"]),
    ]
    (tmp_path / "bad.conll").write_text("a b\nc\n")
    with pytest.raises(ValueError, match=r"bad\.conll:2: the line has 1 fields"):
        list(read_conll(tmp_path / "bad.conll", columns=("w", "t"), bag=False))
    with pytest.raises(FileNotFoundError, match="no file matches"):
        read_conll(tmp_path / "*.missing", columns=("w",), bag=False)
    with pytest.raises(ValueError, match="not one of columns"):
        read_conll(tmp_path / "a.conll", columns=("w",), label_column="t", bag=False)


@pytest.mark.parametrize("blocksize", [1, 7, 50, 333])
def test_read_conll_blocks_read_every_sequence_once(tmp_path, blocksize):
    from skcrf._dask._conll import conll_blocks, read_blocks

    written = write_corpus(tmp_path, n_files=2, n_sentences=20)
    options = dict(columns=("word", "tag"), label_column="tag")
    whole = list(read_conll(str(tmp_path / "*.conll"), bag=False, **options))
    assert [([r["word"] for r in x], t) for x, t in whole] == written
    blocks = conll_blocks(str(tmp_path / "*.conll"), blocksize)
    assert len(blocks) > 2
    assert [item for block in blocks for item in read_blocks([block], **options)] == whole


# -- on a LocalCluster ------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    with cluster, distributed.Client(cluster) as client:
        yield client


def fit_both(X, y, *, npartitions, client, **params):
    local = CRFTagger(**params).fit(X, y)
    remote = DaskCRFTagger(**params).fit(X, y, npartitions=npartitions)
    return local, remote


def assert_same_model(local, remote, X):
    assert remote.attributes_ == local.attributes_
    assert model_arrays(remote._model) == model_arrays(local._model)
    f_local = local.training_log_.last_iteration["loss"]
    f_remote = remote.training_log_.last_iteration["loss"]
    assert abs(f_remote - f_local) <= 1e-6 * abs(f_local)
    agree = np.mean(
        [a == b for p, q in zip(local.predict(X), remote.predict(X)) for a, b in zip(p, q)]
    )
    assert agree >= 0.999


@pytest.mark.parametrize("c1", [0.0, 0.2])
@pytest.mark.parametrize("npartitions", [1, 4])
def test_fit_equals_local_fit(client, c1, npartitions):
    X, y = make_data(80, seed=2, empty=True)
    local, remote = fit_both(X, y, npartitions=npartitions, client=client, c1=c1, c2=0.5)
    assert remote.status_.converged and local.status_.converged
    assert_same_model(local, remote, X)
    assert remote.fit_info_["n_partitions"] == npartitions
    assert remote.fit_info_["vectorized_bytes"] > 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_each_worker_holds_one_group_and_no_partition_copies(client):
    X, y = make_data(80, seed=7)
    held = []

    def look(info):
        if not held:
            held.append(client.has_what())

    remote = DaskCRFTagger(c2=0.5, max_iterations=3).fit(X, y, npartitions=6, callback=look)
    info = remote.fit_info_
    assert (info["n_partitions"], info["n_groups"], info["n_workers"]) == (6, 2, 2)
    groups = {a: [k for k in keys if "skcrf-group" in k] for a, keys in held[0].items()}
    assert sorted(len(keys) for keys in groups.values()) == [1, 1]
    # the vectorized partitions live in their groups only
    assert not [k for keys in held[0].values() for k in keys if "skcrf-partition" in k]
    local = CRFTagger(c2=0.5, max_iterations=3).fit(X, y)
    assert remote.training_log_.last_iteration["loss"] == pytest.approx(
        local.training_log_.last_iteration["loss"], rel=1e-10
    )


def group_threads_held(dask_worker):
    """Threads of each group a worker holds (run on the workers)."""
    return {
        key: value.n_threads
        for key, value in dask_worker.data.items()
        if "skcrf-group" in str(key)
    }


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("n_jobs", [None, 1])
def test_a_group_uses_its_workers_threads(n_jobs):
    from skcrf._utils._threads import effective_n_threads

    # None: the worker's 2 threads (fewer on a machine with fewer cores)
    expected_threads = effective_n_threads(2) if n_jobs is None else 1
    X, y = make_data(60, seed=8)
    cluster = distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        dashboard_address=":0",
        silence_logs=logging.CRITICAL,
    )
    with cluster, distributed.Client(cluster) as client:
        held = []

        def look(info):
            if not held:
                held.extend(client.run(group_threads_held).values())

        remote = DaskCRFTagger(c2=0.5, max_iterations=5, n_jobs=n_jobs).fit(
            X, y, npartitions=3, callback=look
        )
    assert remote.fit_info_["n_groups"] == 1
    assert [list(threads.values()) for threads in held] == [[expected_threads]]
    local = CRFTagger(c2=0.5, max_iterations=5).fit(X, y)
    assert remote.training_log_.last_iteration["loss"] == pytest.approx(
        local.training_log_.last_iteration["loss"], rel=1e-10
    )


def test_fit_on_read_conll_bags_and_predict_bags(client, tmp_path):
    write_corpus(tmp_path, n_files=4, n_sentences=25)
    options = dict(columns=("word", "tag"), label_column="tag", feature_func=word_features)
    data = read_conll(str(tmp_path / "*.conll"), **options)
    assert data.npartitions == 4
    X, y = data.pluck(0), data.pluck(1)
    # n_jobs=2: each partition's evaluation runs on 2 threads of its worker
    remote = DaskCRFTagger(c2=0.5, all_possible_transitions=True, n_jobs=2).fit(X, y)
    pairs = list(read_conll(str(tmp_path / "*.conll"), bag=False, **options))
    X_list, y_list = [x for x, _ in pairs], [t for _, t in pairs]
    local = CRFTagger(c2=0.5, all_possible_transitions=True).fit(X_list, y_list)
    assert_same_model(local, remote, X_list)

    predicted = remote.predict(X)
    assert isinstance(predicted, db.Bag) and predicted.npartitions == X.npartitions
    assert predicted.compute() == local.predict(X_list)
    assert remote.score(X, y) == pytest.approx(local.score(X_list, y_list))
    as_local = remote.to_local()
    assert type(as_local) is CRFTagger
    assert as_local.predict(X_list) == local.predict(X_list)
    np.testing.assert_array_equal(as_local.coef_.toarray(), remote.coef_.toarray())


def test_input_errors_on_the_cluster(client):
    X, y = make_data(40, seed=3)
    with pytest.raises(ValueError, match="X has 4 partitions but y has 3"):
        DaskCRFTagger().fit(db.from_sequence(X, npartitions=4), db.from_sequence(y, npartitions=3))
    # same number of partitions, different lengths
    X_bag = db.from_sequence(X, npartitions=2)
    y_bag = db.concat(
        [db.from_sequence(y[:15], npartitions=1), db.from_sequence(y[15:], npartitions=1)]
    )
    with pytest.raises(
        ValueError,
        match=r"X\.partitions\[(0|1)\] has 20 sequences but "
        r"y\.partitions\[(0|1)\] has (15|25) label",
    ):
        DaskCRFTagger().fit(X_bag, y_bag)
    X[27][1]["w"] = float("nan")
    with pytest.raises(ValueError, match=r"X\.partitions\[1\]\[7\]\[1\]: feature 'w'"):
        DaskCRFTagger().fit(X, y, npartitions=2)


def test_version_mismatch_is_reported(client, monkeypatch):
    monkeypatch.setattr(skcrf_dask, "__version__", "0.0.0-other")
    with pytest.raises(tasks.VersionMismatchError, match="driver runs skcrf 0.0.0-other"):
        DaskCRFTagger().fit([[{"a": 1}]], [["x"]])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_worker_lost_mid_fit_gives_the_same_model():
    """A worker closed at iteration 3: its partitions are rebuilt from lineage."""
    X, y = make_data(80, seed=4)
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.CRITICAL,
    )
    with cluster, distributed.Client(cluster) as client:
        params = dict(c2=0.5, max_iterations=12)
        reference = DaskCRFTagger(**params).fit(X, y, npartitions=4)
        closed = []

        def close_a_worker(info):
            if info.iteration == 3 and not closed:
                holding = [
                    address
                    for address, keys in client.has_what().items()
                    if any("skcrf-group" in key for key in keys)
                ]
                name = next(
                    name
                    for name, nanny in cluster.workers.items()
                    if nanny.worker_address == holding[0]
                )
                cluster.sync(cluster.workers[name].close)
                closed.append(holding[0])

        survived = DaskCRFTagger(**params).fit(X, y, npartitions=4, callback=close_a_worker)
        assert closed and len(client.nthreads()) == 1
    assert survived.n_iter_ == reference.n_iter_
    # the sums run in a fixed order: the very same weights
    np.testing.assert_array_equal(survived._model.weights, reference._model.weights)
    assert survived.predict(X) == reference.predict(X)


# -- sample_weight -------------------------------------------------------------------


def sample_weights(n, seed=0):
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.2, 3.0, size=n)
    weights[rng.random(n) < 0.2] = 0.0
    return weights


@pytest.mark.parametrize("sizes", [[40], [10, 10, 10, 10], [0, 13, 0, 27]])
@pytest.mark.parametrize("options", [{}, {"all_possible_states": True, "min_freq": 1.0}])
def test_weighted_merged_stats_give_select_features(sizes, options):
    from skcrf._training._weights import drop_sequences

    X, y = make_data(40, seed=3, empty=True)
    X[6] = [{"only_here": "x"}] * len(X[6])  # attributes of a weight-0 sequence
    weights = sample_weights(40, seed=3)
    weights[6] = 0.0
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(X, grow=True)
    index, classes = encode_labels([label for seq in y for label in seq])
    keep = weights > 0
    encoded, index, classes, _ = drop_sequences(encoded, index, classes, None, keep)
    c = np.repeat(weights[keep], encoded.lengths)
    expected, observed = select_features(
        encoded, index, classes, vocabulary.attributes, token_weights=c, **options
    )
    scans = [
        tasks.scan_partition(xp, yp, k, tasks.__version__, wp)
        for k, (xp, yp, wp) in enumerate(
            zip(chunks(X, sizes), chunks(y, sizes), chunks(weights.tolist(), sizes))
        )
    ]
    bundle = tasks.build_model(merge_all([tasks.partition_stats(s) for s in scans]), **options)
    assert model_arrays(bundle.model) == model_arrays(expected)
    np.testing.assert_allclose(bundle.observed, observed, rtol=1e-12, atol=1e-12)


def test_partition_weight_errors_name_the_partition():
    X, y = make_data(5)
    with pytest.raises(ValueError, match=r"sample_weight\.partitions\[2\]\[1\] is -1\.0"):
        tasks.scan_partition(X, y, 2, tasks.__version__, [1, -1, 1, 1, 1])
    with pytest.raises(ValueError, match=r"4 weights for 5 sequences"):
        tasks.scan_partition(X, y, 0, tasks.__version__, [1, 1, 1, 1])


@pytest.mark.parametrize("npartitions", [1, 3])
def test_weighted_fit_equals_local_fit(client, npartitions):
    X, y = make_data(80, seed=4, empty=True)
    weights = sample_weights(80, seed=4)
    local = CRFTagger(c2=0.5).fit(X, y, sample_weight=weights)
    remote = DaskCRFTagger(c2=0.5).fit(X, y, sample_weight=weights, npartitions=npartitions)
    assert_same_model(local, remote, X)
    assert remote.score(X, y, sample_weight=weights) == pytest.approx(
        local.score(X, y, sample_weight=weights), rel=1e-12
    )
    bags = [db.from_sequence(data, npartitions=npartitions) for data in (X, y, weights.tolist())]
    remote_bags = DaskCRFTagger(c2=0.5).fit(bags[0], bags[1], sample_weight=bags[2])
    assert_same_model(local, remote_bags, X)
    assert remote_bags.score(*bags) == pytest.approx(
        local.score(X, y, sample_weight=weights), rel=1e-12
    )
    with pytest.raises(TypeError, match="sample_weight must be a Bag"):
        DaskCRFTagger(c2=0.5).fit(bags[0], bags[1], sample_weight=weights)
    with pytest.raises(ValueError, match="class_weight"):
        DaskCRFTagger(c2=0.5, class_weight="balanced").fit(X, y)
