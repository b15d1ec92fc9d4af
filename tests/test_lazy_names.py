"""Models served from CRFsuite files with their attributes looked up in place.

``read_crfsuite(..., lazy_attributes=True)`` (what ``Tagger.open``,
``from_crfsuite`` and ``model_filename`` use) builds the model's arrays in
one compiled pass and answers attribute lookups from the file's own hash
tables (:class:`~skcrf._utils._cqdb_index.CQDBIndex`): it must give exactly
the model of the full reader, refuse exactly what the full reader refuses
(the attributes' strings aside, which are checked when listed), and never
crash or answer with another string's id on a corrupted file.
"""

import pickle
import struct
import threading

import numpy as np
import pytest
from _reference import hashlittle as reference_hashlittle
from test_crfsuite_file import (
    _layout,
    _patched,
    _random_model,
    _random_sequences,
    _train,
    _u32,
    _with_size,
)

from skcrf import CRFTagger
from skcrf._featurize._vocabulary import Vocabulary
from skcrf._persist._cqdb import cqdb_bytes, encode_strings, read_cqdb
from skcrf._persist._crfsuite_file import _labels_in_place, crfsuite_bytes, read_crfsuite
from skcrf._persist._feature_scan import check_references, scan_features
from skcrf._utils._cqdb_index import (
    CQDBIndex,
    LazyNames,
    _first_bucket,
    _key_hash_at,
    hashlittle,
)
from skcrf.pycrfsuite import Tagger

pycrfsuite = pytest.importorskip("pycrfsuite")

ARRAYS = ("state_ptr", "state_labels", "state_weights", "transition_index", "transition_weights")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("lazy") / "trained.crfsuite"
    _train(path, "lbfgs", {"c1": 0.1, "c2": 0.1, "max_iterations": 20})
    return path


def _assert_same_model(lazy, full):
    for name in ARRAYS:
        a, b = getattr(lazy, name), getattr(full, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert lazy.classes.tolist() == full.classes.tolist()
    assert lazy.value_separator == full.value_separator
    assert len(lazy.attributes) == full.n_attributes


# -- the index -----------------------------------------------------------------


def test_hashlittle_equals_the_reference():
    rng = np.random.default_rng(0)
    for n in [*range(40), 95, 96, 97, 1000]:
        key = rng.integers(256, size=n, dtype=np.uint8).tobytes()
        assert hashlittle(key) == reference_hashlittle(key), n


def test_index_finds_every_string_and_nothing_else():
    names = [f"w[{i % 7}]:{'éλ日'[i % 3]}{i}" for i in range(3000)] + ["", "bias", "a" * 300]
    chunk = cqdb_bytes(*encode_strings(names, "attribute"))
    index = CQDBIndex(chunk, 0, len(names), "attributes")
    assert len(index) == len(names)
    for k, name in enumerate(names):
        assert index.lookup(name) == k
        assert index.name(k) == name
    for absent in ["bia", "bias ", "w[0]:x", "a" * 299, "bias\0", "\0"]:
        assert index.lookup(absent) == -1
    assert index.lookup(b"bias") == -1 and index.lookup(3) == -1  # only str
    with pytest.raises(IndexError):
        index.name(len(names))


def test_index_at_an_offset_of_a_larger_buffer():
    chunk = cqdb_bytes(*encode_strings(["x", "y"], "attribute"))
    data = b"\x07" * 13 + chunk + b"tail"
    index = CQDBIndex(data, 13, 2, "attributes")
    assert (index.lookup("x"), index.lookup("y"), index.lookup("z")) == (0, 1, -1)


def test_index_refuses_what_its_lookups_rely_on():
    chunk = cqdb_bytes(*encode_strings([f"s{i}" for i in range(50)], "attribute"))
    n = 50
    bad = {
        "does not start": _patched(chunk, 0, "4s", b"CQDX"),
        "has the size": _patched(chunk, 4, "<I", len(chunk) + 1),
        "byte-order": _patched(chunk, 12, "<I", 0x71534462),
        "backward array": _patched(chunk, 20, "<I", len(chunk) - 3),
        "hash table": _patched(chunk, 24, "<I", len(chunk) - 4),
    }
    t = next(t for t in range(256) if _u32(chunk, 24 + 8 * t))
    bad["buckets for"] = _patched(chunk, 24 + 8 * t + 4, "<I", _u32(chunk, 24 + 8 * t + 4) - 1)
    for match, data in bad.items():
        with pytest.raises(ValueError, match=match):
            CQDBIndex(data, 0, n, "attributes")
    with pytest.raises(ValueError, match="cannot hold"):
        CQDBIndex(chunk, 0, n + 1, "attributes")
    with pytest.raises(ValueError, match="outside"):
        CQDBIndex(chunk[:100], 0, n, "attributes")


def test_a_corrupted_table_or_record_is_refused_at_open_or_first_lookup_never_a_wrong_id():
    # the index checks the tables' shape when it is made, and every bucket and
    # the record it points to at its first lookup: a damaged chunk is refused
    # then (naming the chunk), by that lookup and every later one, and a
    # chunk it accepts answers every lookup exactly
    names = [f"s{i}" for i in range(200)]
    chunk = bytearray(cqdb_bytes(*encode_strings(names, "attribute")))
    rng = np.random.default_rng(1)
    table_start = min(_u32(chunk, 24 + 8 * t) for t in range(256) if _u32(chunk, 24 + 8 * t))
    outcomes = set()
    for _ in range(400):
        data = bytearray(chunk)
        # damage the records and the tables (not the header: checked up front)
        for position in rng.integers(2072, len(chunk), size=int(rng.integers(1, 4))):
            data[position] = int(rng.integers(256))
        if rng.random() < 0.3:  # a bucket pointing anywhere
            bucket = table_start + 8 * int(rng.integers(2 * len(names)))
            struct.pack_into("<I", data, bucket + 4, int(rng.integers(2**32)))
        try:
            index = CQDBIndex(bytes(data), 0, len(names), "attributes")
        except ValueError as exc:
            assert str(exc).startswith("the attributes CQDB chunk at offset 0: ")
            outcomes.add("refused")
            continue
        try:
            found = index.lookup(names[int(rng.integers(len(names)))])
        except ValueError as exc:
            assert str(exc).startswith("the attributes CQDB chunk at offset 0 is corrupted")
            for name in [*names, "s200", ""]:  # and so is every lookup after it
                with pytest.raises(ValueError, match="chunk at offset 0 is corrupted"):
                    index.lookup(name)
            outcomes.add("refused at the first lookup")
            continue
        assert found >= 0
        outcomes.add("accepted")
        for k, name in enumerate(names):
            assert index.lookup(name) == k
        assert index.lookup("s200") == -1 and index.lookup("") == -1
    assert outcomes == {"refused", "refused at the first lookup", "accepted"}


def _one_table(chunk, fill):
    """``chunk`` (2 strings) with both strings' buckets in one table of 4 buckets,
    the others empty; ``fill(table_offset, record_of)`` writes its buckets."""
    chunk = bytearray(chunk)
    tables = [t for t in range(256) if _u32(chunk, 24 + 8 * t)]
    offset = _u32(chunk, 24 + 8 * tables[0])
    for t in tables:
        struct.pack_into("<II", chunk, 24 + 8 * t, 0, 0)
    struct.pack_into("<II", chunk, 24 + 8 * tables[0], offset, 4)  # 4 buckets for 2 strings
    fill(chunk, offset, [_u32(chunk, _u32(chunk, 20) + 4 * k) for k in range(2)])
    return bytes(chunk)


def test_a_full_table_or_one_record_for_all_is_refused_at_open():
    # the files: a full hash table (CRFsuite would probe it forever for
    # an unknown string) and every bucket and backward link on one record
    chunk = cqdb_bytes(*encode_strings(["a", "b"], "attribute"))

    def full(data, offset, records):
        for b in range(4):
            struct.pack_into("<II", data, offset + 8 * b, 12345, records[b % 2])

    with pytest.raises(ValueError, match="has 4 buckets for 4 strings"):
        CQDBIndex(_one_table(chunk, full), 0, 2, "attributes")

    def one_record(data, offset, records):
        bwd = _u32(data, 20)
        struct.pack_into("<II", data, bwd, records[0], records[0])
        h = hashlittle(b"a\0")
        for b in range(4):
            struct.pack_into("<II", data, offset + 8 * b, *((h, records[0]) if b < 2 else (0, 0)))

    with pytest.raises(ValueError, match="(hash table|more than one bucket|backward link)"):
        CQDBIndex(_one_table(chunk, one_record), 0, 2, "attributes")
    # and through the readers, the file named
    data = bytearray(crfsuite_bytes(_random_model(4, n_labels=2, n_attributes=2)))
    cq = _layout(data)["attributes"]
    size = _u32(data, cq + 4)
    data[cq : cq + size] = _one_table(data[cq : cq + size], full)
    for lazy in (True, False):
        with pytest.raises(ValueError, match=r"Cannot read CRFsuite model \(bytes\).*buckets for"):
            read_crfsuite(bytes(data), lazy_attributes=lazy)


# -- the reader ------------------------------------------------------------------


def _written_files():
    yield crfsuite_bytes(_random_model(1))
    yield crfsuite_bytes(_random_model(2, n_labels=3, n_attributes=5, classes=[0, 1.5, None]))
    yield crfsuite_bytes(_random_model(3, n_labels=1, n_attributes=1))


def test_lazy_read_is_the_full_read(trained):
    for data in [trained.read_bytes(), *_written_files()]:
        full = read_crfsuite(data).model
        lazy = read_crfsuite(data, lazy_attributes=True).model
        assert isinstance(lazy.attributes, LazyNames)
        _assert_same_model(lazy, full)
        assert lazy.attributes.tolist() == full.attributes
        assert lazy.attribute_names() is lazy.attributes.tolist()  # listed once
        for k, name in enumerate(full.attributes):
            assert lazy.attributes.id_of(name) == k and name in lazy.attributes
        assert pickle.loads(pickle.dumps(lazy)).attributes == full.attributes


def test_files_in_another_order_take_the_full_route(trained):
    # features shuffled (references fixed to follow them): the fast route
    # declines and the full reader reads the file
    data = bytearray(trained.read_bytes())
    layout = _layout(data)
    start = layout["features"] + 12
    n = _u32(data, layout["features"] + 8)
    records = [bytes(data[start + 20 * k : start + 20 * k + 20]) for k in range(n)]
    order = np.random.default_rng(0).permutation(n)
    where = np.empty(n, dtype=np.int64)
    where[order] = np.arange(n)
    for k, old in enumerate(order):
        data[start + 20 * k : start + 20 * k + 20] = records[old]
    for refs, owners in (("label_refs", "n_labels"), ("attribute_refs", "n_attributes")):
        offset = layout[refs]
        for a in range(layout[owners]):
            at = _u32(data, offset + 12 + 4 * a)
            for i in range(_u32(data, at)):
                fid = _u32(data, at + 4 + 4 * i)
                struct.pack_into("<I", data, at + 4 + 4 * i, int(where[fid]))
    data = bytes(data)
    lazy = read_crfsuite(data, lazy_attributes=True).model
    assert isinstance(lazy.attributes, list)  # the full route
    _assert_same_model(lazy, read_crfsuite(trained.read_bytes()).model)


def _both(data):
    """The full and the lazy read of ``data``: (model or None, error or None) each."""
    outcomes = []
    for lazy in (False, True):
        try:
            outcomes.append((read_crfsuite(data, lazy_attributes=lazy).model, None))
        except ValueError as exc:
            outcomes.append((None, str(exc)))
    return outcomes


def _check_lazy_against_full(data, names):
    (full, full_error), (lazy, lazy_error) = _both(data)
    if lazy is None:
        assert lazy_error == full_error  # refused for the same reason, same words
        return "refused"
    if full is not None:
        _assert_same_model(lazy, full)
        assert list(lazy.attributes) == full.attributes
        return "read"
    # Only the attributes' strings, checked when listed, can be wrong here.
    assert "attributes CQDB chunk" in full_error, full_error
    assert isinstance(lazy.attributes, LazyNames)
    with pytest.raises(ValueError, match="Cannot read CRFsuite model"):
        lazy.attributes.tolist()
    for name in names:
        try:
            found = lazy.attributes.id_of(name)
        except ValueError as exc:
            assert "corrupted" in str(exc)
            continue
        assert -1 <= found < len(lazy.attributes)
    return "strings damaged"


def test_hostile_files_lazy_refuses_what_full_refuses(trained):
    rng = np.random.default_rng(7)
    seen = set()
    for data in [trained.read_bytes(), *_written_files()]:
        names = read_crfsuite(data).model.attributes
        cuts = sorted(set(range(0, 64, 3)) | set(rng.integers(len(data), size=150).tolist()))
        for cut in cuts:
            assert _check_lazy_against_full(data[:cut], names) == "refused"
            if cut >= 48:
                seen.add(_check_lazy_against_full(_with_size(data[:cut]), names))
        for _ in range(250):
            mutated = bytearray(data)
            for position in rng.integers(len(data), size=int(rng.integers(1, 4))):
                mutated[position] = int(rng.integers(256))
            seen.add(_check_lazy_against_full(bytes(mutated), names))
        # the attributes' records, aimed at
        cq = _layout(data)["attributes"]
        bwd = _u32(data, cq + 20)
        for k in range(min(len(names), 20)):
            record = _u32(data, cq + bwd + 4 * k)
            for shift, value in ((8, 0), (8, 0xFF), (0, 0xFF), (4, 0xFF)):
                seen.add(
                    _check_lazy_against_full(
                        _patched(data, cq + record + shift, "B", value), names
                    )
                )
    # the index checks every record a bucket reaches at open: damaged strings
    # are refused there (only equal or non-UTF-8 strings with their right
    # hash, which random bytes do not make, would be left to the listing)
    assert {"refused", "read"} <= seen


def test_references_in_crfsuite_order_need_no_feature_record(trained):
    # the attributes' reference lists as CRFsuite writes them (each attribute's
    # state features, in order) are checked against the scanned arrays, without
    # reading the feature records: the verdict must be the general check's
    rng = np.random.default_rng(8)
    for data in [trained.read_bytes(), *_written_files()]:
        layout = _layout(data)
        first, num = layout["features"] + 12, _u32(data, layout["features"] + 8)
        arrays, first_state = scan_features(
            data, first, num, layout["n_labels"], layout["n_attributes"]
        )
        n_states = len(arrays["state_labels"])
        assert first_state == (0 if n_states else -1)  # (CRFsuite writes them first)
        start = layout["attribute_refs"]
        end = start + _u32(data, start + 4)
        verdicts = set()
        for trial in range(300):
            mutated = bytearray(data)
            lists = [_u32(data, start + 12 + 4 * a) for a in range(layout["n_attributes"])]
            long_lists = [at for at in lists if _u32(data, at) > 1]
            if trial == 1:  # a list in another order: valid, not CRFsuite's
                for at in long_lists[:1]:
                    at += 4
                    mutated[at : at + 4], mutated[at + 4 : at + 8] = (
                        data[at + 4 : at + 8],
                        data[at : at + 4],
                    )
            elif trial:  # (the first: intact)
                at = int(rng.integers(start + 4, end))
                if rng.random() < 0.5:
                    mutated[at] = int(rng.integers(256))
                else:
                    at -= at % 4
                    value = (
                        int(rng.integers(len(data)))
                        if rng.random() < 0.5
                        else int(rng.integers(num + 2))
                    )
                    struct.pack_into("<I", mutated, at, value)
            args = (
                bytes(mutated),
                start,
                b"AFRF",
                layout["n_attributes"],
                0,
                first,
                num,
                n_states,
            )
            general = check_references(*args)
            assert check_references(*args, arrays["state_ptr"], first_state) == general
            verdicts.add(general >= 0)
            assert trial > 1 or general == end  # (intact, or in another order)
        assert verdicts == {True, False}


def test_labels_read_in_place_as_read_cqdb_reads_them(trained):
    # the fast route reads the labels through the compiled index: what it
    # accepts, read_cqdb accepts, with the same strings (else read_cqdb reads
    # them, or names what is wrong)
    rng = np.random.default_rng(9)
    outcomes = set()
    for data in [trained.read_bytes(), *_written_files()]:
        layout = _layout(data)
        offset, n_labels = layout["labels"], layout["n_labels"]
        end = offset + _u32(data, offset + 4)
        for trial in range(300):
            mutated = bytearray(data)
            if trial:
                for at in rng.integers(offset, end, size=int(rng.integers(1, 3))):
                    mutated[at] = int(rng.integers(256))
            mutated = bytes(mutated)
            fast = _labels_in_place(mutated, offset, n_labels)
            try:
                full = read_cqdb(mutated, offset, n_labels, "labels", 48)
            except ValueError:
                full = None
            assert fast is None or fast == full, trial
            assert trial or fast == full is not None  # (intact: read in place)
            outcomes.add((fast is not None, full is not None))
    assert {(True, True), (False, False)} <= outcomes


# -- the vocabulary ----------------------------------------------------------------


def _lazy_vocabulary(model):
    data = crfsuite_bytes(model)
    lazy = read_crfsuite(data, lazy_attributes=True).model
    return Vocabulary(lazy.attributes, ":"), Vocabulary(model.attributes, ":")


def test_lazy_vocabulary_encodes_as_the_full_one():
    model = _random_model(5, n_attributes=60)
    lazy, full = _lazy_vocabulary(model)
    X = _random_sequences(model, 3)
    # string values too: names split at the first ':' into key and value
    X += [[{name.split(":", 1)[0]: name.split(":", 1)[1]} for name in model.attributes[:30]]]
    X += [[{"f1": "nope", "bias": 2.0}, ["f0:" + model.attributes[0][3:], "unknown"]], []]
    for _ in range(2):  # again, from the caches
        a, b = lazy.encode(X, grow=False), full.encode(X, grow=False)
        for name in ("indptr", "ids", "values", "lengths"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert len(lazy) == len(full)
    assert all(lazy.get(n) == k and n in lazy for k, n in enumerate(model.attributes))
    assert lazy.get("nope") == -1 and "nope" not in lazy and lazy.get(3) == -1
    assert lazy.attributes == full.attributes
    assert pickle.loads(pickle.dumps(lazy)).attributes == model.attributes


def test_lazy_vocabulary_grows_after_listing_its_names():
    model = _random_model(6, n_attributes=20)
    lazy, full = _lazy_vocabulary(model)
    X = [[{"new": 1.0, model.attributes[3]: 1.0}, {"other": "x"}]]
    a, b = lazy.encode(X, grow=True), full.encode(X, grow=True)
    assert np.array_equal(a.ids, b.ids)
    assert lazy.attributes == full.attributes == [*model.attributes, "new", "other:x"]


# -- the estimator and the tagger ----------------------------------------------------


def test_from_crfsuite_serves_lazily_and_lists_attributes_on_access(trained):
    full = read_crfsuite(trained).model
    crf = CRFTagger.from_crfsuite(trained)
    assert isinstance(crf._model.attributes, LazyNames)
    assert "attributes_" not in vars(crf)
    X = _random_sequences(full, 11)
    reference = pycrfsuite.Tagger()
    reference.open(str(trained))
    assert [crf.predict_single(x) for x in X] == [reference.tag(x) for x in X]
    assert crf.attributes_ == full.attributes and isinstance(crf.attributes_, list)
    assert crf.num_attributes_ == len(full.attributes)
    assert crf.coef_.shape == (len(full.attributes), len(full.classes))
    again = pickle.loads(pickle.dumps(crf))
    assert again.attributes_ == full.attributes and again.predict(X) == crf.predict(X)


def test_tagger_open_serves_lazily(trained):
    tagger = Tagger()
    tagger.open(str(trained))
    reference = pycrfsuite.Tagger()
    reference.open(str(trained))
    full = read_crfsuite(trained).model
    X = _random_sequences(full, 12)
    assert [tagger.tag(x) for x in X] == [reference.tag(x) for x in X]
    assert tagger.info().attributes == reference.info().attributes


def test_threads_share_a_lazy_model(trained):
    # the first lookups of every name happen concurrently, filling the caches
    full = read_crfsuite(trained).model
    X = _random_sequences(full, 13, n_sequences=200)
    expected = CRFTagger.from_crfsuite(trained).predict(X)
    for _ in range(3):
        crf = CRFTagger.from_crfsuite(trained)
        tagger = Tagger()
        tagger.open(str(trained))
        results = {}
        barrier = threading.Barrier(8)

        def work(i, crf=crf, tagger=tagger, results=results, barrier=barrier):
            barrier.wait()
            order = X[i::8] if i % 2 else X[::-1][i::8]
            if i < 4:
                results[i] = {id(x): crf.predict_single(x) for x in order}
            else:
                results[i] = {id(x): tagger.tag(x) for x in order}

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        by_id = {id(x): y for x, y in zip(X, expected)}
        for answers in results.values():
            assert answers and all(by_id[k] == v for k, v in answers.items())


def _damaged_tables(data):
    """The issue's two files, from the CRFsuite file ``data``: the attributes'
    first hash table full (its empty buckets on a record), and every backward
    link on the first record."""
    layout = _layout(data)
    cq = layout["attributes"]
    offset, m = next(
        (_u32(data, cq + 24 + 8 * t), _u32(data, cq + 28 + 8 * t))
        for t in range(256)
        if _u32(data, cq + 24 + 8 * t)
    )
    full = bytearray(data)
    record = next(
        _u32(data, cq + offset + 8 * b + 4)
        for b in range(m)
        if _u32(data, cq + offset + 8 * b + 4)
    )
    for b in range(m):
        if not _u32(data, cq + offset + 8 * b + 4):
            struct.pack_into("<II", full, cq + offset + 8 * b, 12345, record)
    one_record = bytearray(data)
    bwd = cq + _u32(data, cq + 20)
    for k in range(layout["n_attributes"]):
        struct.pack_into("<I", one_record, bwd + 4 * k, _u32(data, bwd))
    # (the lazy readers fall back to the full reader, whose words are these)
    return {"buckets for": bytes(full), "record of id 1 holds the id 0": bytes(one_record)}


def test_damaged_tables_are_refused_by_every_entry_point(trained, tmp_path):
    from skcrf.nltk import CRFTagger as NLTKTagger

    nltk_tagger = NLTKTagger()
    with pytest.raises(RuntimeError, match="No model"):  # no model: no tags
        nltk_tagger.tag_sents([["the", "cat"]])
    nltk_tagger.set_model_file(str(trained))
    model = nltk_tagger._estimator
    for match, data in _damaged_tables(trained.read_bytes()).items():
        path = tmp_path / "damaged.crfsuite"
        path.write_bytes(data)
        with pytest.raises(
            ValueError, match=rf"Cannot read CRFsuite model .*{path.name}.*{match}"
        ):
            CRFTagger.from_crfsuite(path)
        with pytest.raises(ValueError, match=rf"Invalid model file .*{path.name}.*{match}"):
            Tagger().open(str(path))
        with pytest.raises(ValueError, match=rf"{path.name}.*{match}"):
            nltk_tagger.set_model_file(str(path))
        assert nltk_tagger._estimator is model  # the previous model kept
        assert nltk_tagger._model_file == str(trained)
        for lazy in (False, True):
            with pytest.raises(ValueError, match=match):
                read_crfsuite(data, lazy_attributes=lazy)


# -- what the first lookup verifies ------------------------------------------------------


def _damaged_name(data):
    """The CRFsuite file ``data`` with a byte of its last attribute's name
    changed: the tables' shape intact (the open accepts it), the first lookup's
    verification finds a bucket whose hash is no longer its string's."""
    layout = _layout(data)
    cq = layout["attributes"]
    record = cq + _u32(data, cq + _u32(data, cq + 20) + 4 * (layout["n_attributes"] - 1))
    damaged = bytearray(data)
    damaged[record + 8] = ord("#") if damaged[record + 8] != ord("#") else ord("%")
    return bytes(damaged)


def test_a_table_damaged_beyond_its_shape_is_refused_by_the_first_lookup(trained, tmp_path):
    from skcrf.nltk import CRFTagger as NLTKTagger

    data = _damaged_name(trained.read_bytes())
    path = tmp_path / "damaged-name.crfsuite"
    path.write_bytes(data)
    X = _random_sequences(read_crfsuite(trained).model, 14, n_sequences=3)
    problem = r"the attributes CQDB chunk at offset \d+ is corrupted "
    problem += r"\((looking up .*|checking it)\): bucket .* holds the hash .*, not its string's"
    with pytest.raises(ValueError, match="the bucket of the string of id .* does not match"):
        read_crfsuite(data)  # the full reader refuses it
    lazy = read_crfsuite(data, lazy_attributes=True).model  # the open accepts it
    with pytest.raises(ValueError, match=r"Cannot read CRFsuite model \(bytes\): " + problem):
        lazy.attributes.check()

    tagger = Tagger()
    tagger.open(str(path))
    for xseq in X:  # the first lookup, and every one after it
        with pytest.raises(ValueError, match=rf"Invalid model file '.*{path.name}': {problem}"):
            tagger.tag(xseq)
    tagger = Tagger()
    tagger.open_inmemory(data)
    with pytest.raises(ValueError, match=rf"Invalid model: {problem}"):
        tagger.tag(X[0])
    crf = CRFTagger.from_crfsuite(path)
    for predict in (crf.predict_single, crf.predict_marginals_single):
        with pytest.raises(ValueError, match=rf"Cannot read CRFsuite model '.*{path.name}': "):
            predict(X[0])
    with pytest.raises(ValueError, match=rf"Cannot read CRFsuite model '.*{path.name}': "):
        CRFTagger(model_filename=str(path)).predict(X)
    # names looked up one by one: the same
    with pytest.raises(ValueError, match=problem):
        CRFTagger.from_crfsuite(path)._model.attributes.id_of("w:a")

    # NLTK's set_model_file verifies at once and keeps the previous model
    nltk_tagger = NLTKTagger()
    nltk_tagger.set_model_file(str(trained))
    model = nltk_tagger._estimator
    with pytest.raises(
        ValueError, match=rf"Cannot read CRFsuite model '.*{path.name}'.*{problem}"
    ):
        nltk_tagger.set_model_file(str(path))
    assert nltk_tagger._estimator is model and nltk_tagger._model_file == str(trained)
    assert nltk_tagger.tag_sents([["the", "cat"]])


def test_threads_meet_a_damaged_table_at_once(trained, tmp_path):
    # 8 threads make their first lookups together: each is refused, naming the
    # file; none tags (the verdict is published once the verification is done)
    path = tmp_path / "damaged-name.crfsuite"
    path.write_bytes(_damaged_name(trained.read_bytes()))
    X = _random_sequences(read_crfsuite(trained).model, 15, n_sequences=16)
    for _ in range(3):
        crf = CRFTagger.from_crfsuite(path)
        tagger = Tagger()
        tagger.open(str(path))
        errors, tagged = [], []
        barrier = threading.Barrier(8)

        def work(i, crf=crf, tagger=tagger, errors=errors, tagged=tagged, barrier=barrier):
            barrier.wait()
            for xseq in X[i::8]:
                try:
                    tagged.append(crf.predict_single(xseq) if i % 2 else tagger.tag(xseq))
                except ValueError as exc:
                    errors.append(str(exc))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not tagged and len(errors) == len(X)
        assert all(path.name in e and "not its string's" in e for e in errors), errors[:2]


def test_the_fast_verification_agrees_with_the_bucket_by_bucket_one():
    # the first lookup's verification reads the records in file order (fast);
    # when it finds anything, or the records are in another order, the
    # bucket-by-bucket one decides (and names the problem): they must agree
    rng = np.random.default_rng(3)
    seen = set()
    for trial in range(900):
        n = int(rng.integers(1, 400)) if trial % 50 else 5000
        names = list(
            dict.fromkeys(
                f"s{i}" * int(rng.integers(1, 4)) + "x" * int(rng.integers(0, 30))
                for i in range(n)
            )
        )
        data = bytearray(cqdb_bytes(*encode_strings(names, "attribute")))
        kind, shuffled = trial % 5, False
        tables = [(_u32(data, 24 + 8 * t), _u32(data, 28 + 8 * t)) for t in range(256)]
        tables = [(offset, m) for offset, m in tables if m]
        if kind == 0:  # bytes of the records and tables
            for position in rng.integers(2072, len(data), size=int(rng.integers(1, 4))):
                data[position] = int(rng.integers(256))
        elif kind == 1:  # a 32-bit field
            at = 4 * int(rng.integers(518, len(data) // 4))
            value = int(rng.integers(64)) if rng.random() < 0.5 else int(rng.integers(2**32))
            struct.pack_into("<I", data, at, value)
        elif kind == 2:  # two buckets' records swapped
            (o1, m1), (o2, m2) = (tables[int(rng.integers(len(tables)))] for _ in range(2))
            b1, b2 = o1 + 8 * int(rng.integers(m1)) + 4, o2 + 8 * int(rng.integers(m2)) + 4
            data[b1 : b1 + 4], data[b2 : b2 + 4] = data[b2 : b2 + 4], data[b1 : b1 + 4]
        elif kind == 3:  # sound, the ids given in another order than the records
            order = rng.permutation(len(names))
            records = [_u32(data, _u32(data, 20) + 4 * k) for k in range(len(names))]
            for k, record in enumerate(records):
                struct.pack_into("<I", data, record, int(order[k]))
                struct.pack_into("<I", data, _u32(data, 20) + 4 * int(order[k]), record)
            names = [names[k] for k in np.argsort(order)]
            shuffled = bool((order != np.arange(len(order))).any())
        try:
            index = CQDBIndex(bytes(data), 0, len(names), "attributes")
        except ValueError:
            seen.add("refused at open")
            continue
        fast, slow = index._verifications()
        assert fast in (0, 1) and (fast == 0 or slow == 0), (trial, fast, slow)
        if kind == 3 and shuffled:
            assert (fast, slow) == (0, 0)  # (the fast one declines: records out of order)
        elif kind >= 3:
            assert (fast, slow) == (1, 0)
        seen.add(("fast", fast, "sound", slow == 0))
        if slow:
            with pytest.raises(ValueError, match="chunk at offset 0 is corrupted"):
                index.check()
        else:
            index.check()
            assert all(index.lookup(name) == k for k, name in enumerate(names))
            assert index.lookup("absent") == -1
    assert seen == {
        "refused at open",
        ("fast", 1, "sound", True),
        ("fast", 0, "sound", True),
        ("fast", 0, "sound", False),
    }


def test_the_verification_hashes_and_first_buckets_are_crfsuite_s():
    rng = np.random.default_rng(4)
    for length in range(1, 50):
        for trial in range(60):
            high = 4 if trial % 2 else 256
            key = rng.integers(1 - trial % 3 // 2, high, size=length, dtype=np.uint8)
            if trial % 3 == 0:
                key[-1] = 0
            key = key.tobytes()
            for slack in (0, 1, 5, 11, 12, 30):  # (near the end: read without the slack)
                before = int(rng.integers(7))
                data = b"\x01" * before + key + b"\x00" * slack
                assert _key_hash_at(data, before, length) == (
                    reference_hashlittle(key),
                    key[-1] == 0 and b"\0" not in key[:-1],
                )
    sizes = [1, 2, 3, 7, 255, 256, 257, 4097, 2**20 + 3, 2**29 - 1, 2**31 + 5, 2**32 - 1]
    for m in sizes:
        for h in [0, 2**32 - 1, 2**32 - 256, *rng.integers(2**32, size=300).tolist()]:
            assert _first_bucket(h, m) == (h >> 8) % m
