"""Model formats 5 and 6: what prediction needs, aligned, used in place (issue 42).

Format 6 is the default of ``save`` (format 5 with the names in a packed
table): only the features with a nonzero weight, stored uncompressed with
every array 64-byte aligned, so that ``CRFTagger.load(path, mmap=True)``
uses the file's pages in place.
"""

import json
import mmap
import struct
import zipfile

import numpy as np
import pytest
from test_io import assert_same_state, make_state, prediction_state

from skcrf import CRFTagger
from skcrf._persist._aligned import ALIGNMENT
from skcrf.io import FORMAT_VERSION, load_state, save_state

MODEL_ARRAYS = [
    "state_ptr",
    "state_labels",
    "state_weights",
    "transition_index",
    "transition_weights",
    "conditioned_ptr",
    "conditioned_pairs",
    "conditioned_weights",
]
# each format's own list (an oracle kept apart from the writer's)
ARRAYS = {
    5: ["metadata", "attributes", *MODEL_ARRAYS],
    6: ["metadata", "attribute_text", "attribute_starts", "attribute_table", *MODEL_ARRAYS],
}
VERSIONS = pytest.mark.parametrize("version", [5, 6])


def _save(tagger, path, version, dtype="float64"):
    """``tagger.save(path, dtype=dtype)`` in format ``version``."""
    if version == FORMAT_VERSION:
        tagger.save(path, dtype=dtype)
    else:
        save_state(tagger._get_fitted_state(), path, format_version=version, dtype=dtype)


def _fit(seed=0, n=60, **params):
    rng = np.random.default_rng(seed)
    words = [f"w{k}" for k in range(30)]
    X, y = [], []
    for _ in range(n):
        length = int(rng.integers(1, 8))
        tokens = [str(rng.choice(words)) for _ in range(length)]
        X.append(
            [
                # (noise: with c1 = 1 some of its attributes keep no feature, and are not saved)
                {"w": t, "len": float(len(t)), "odd": int(t[1:]) % 2 == 1, "n": str(k % 7)}
                for k, t in enumerate(tokens)
            ]
        )
        y.append(["A" if int(t[1:]) < 10 else "B" if int(t[1:]) < 20 else "C" for t in tokens])
    params = {"c1": 1.0, "c2": 0.01, "max_iterations": 60, **params}
    return CRFTagger(**params).fit(X, y), X


@pytest.fixture(scope="module")
def fitted():
    return _fit()


def _base_array(array):
    while isinstance(array, np.ndarray) and array.base is not None:
        array = array.base
    return array.obj if isinstance(array, memoryview) else array


@VERSIONS
def test_the_default_keeps_only_the_nonzero_features(tmp_path, version):
    state = make_state()
    path = tmp_path / "m.skcrf"
    save_state(state, path, format_version=None if version == FORMAT_VERSION else version)
    expected = prediction_state(state)
    assert expected.model.n_features < state.model.n_features  # (zeros were dropped)
    for mmap_file in (False, True):
        assert_same_state(expected, load_state(path, mmap=mmap_file))


@VERSIONS
def test_layout_stored_aligned_and_readable_by_numpy(fitted, tmp_path, version):
    tagger, X = fitted
    path = tmp_path / "m.skcrf"
    _save(tagger, path, version)
    data = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        assert [info.filename for info in infos] == [f"{name}.npy" for name in ARRAYS[version]]
        for info in infos:
            assert info.compress_type == zipfile.ZIP_STORED
            name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
            start = info.header_offset + 30 + name_len + extra_len
            assert start % ALIGNMENT == 0
            header_len = struct.unpack_from("<H", data, start + 8)[0]
            assert (start + 10 + header_len) % ALIGNMENT == 0  # each array's data
    with np.load(path, allow_pickle=False) as npz:
        doc = json.loads(npz["metadata"].tobytes())
        weights = npz["state_weights"]
        assert (weights != 0).all() and (npz["transition_weights"] != 0).all()
        assert npz["conditioned_ptr"].tolist() == [0] and len(npz["conditioned_pairs"]) == 0
    assert doc["format_version"] == version and doc["weights_dtype"] == "float64"
    assert doc["conditioned_attributes"] is None
    model = tagger._fitted_model()
    assert len(weights) == np.count_nonzero(model.state_weights) < model.n_states
    assert doc["n_attributes"] < model.n_attributes  # attributes left without features dropped


@VERSIONS
@pytest.mark.parametrize("mmap_file", [False, True])
def test_load_predicts_what_the_saved_model_predicts(fitted, tmp_path, mmap_file, version):
    tagger, X = fitted
    _save(tagger, tmp_path / "m.skcrf", version)
    loaded = CRFTagger.load(tmp_path / "m.skcrf", mmap=mmap_file)
    assert loaded.predict(X) == tagger.predict(X)
    assert [loaded.predict_single(x) for x in X[:5]] == tagger.predict(X[:5])
    assert loaded.predict_marginals(X) == tagger.predict_marginals(X)
    assert loaded.tagger_.tag([["w:w3", "odd"], ["w:w12"]]) == tagger.tagger_.tag(
        [["w:w3", "odd"], ["w:w12"]]
    )
    model = loaded._fitted_model()
    for name in ("state_ptr", "state_labels", "state_weights"):
        array = getattr(model, name)
        # mapped: read-only views of the map, no copy; else writable
        assert array.flags.writeable != mmap_file
        assert isinstance(_base_array(array), mmap.mmap) == mmap_file


def test_warm_start_from_a_mapped_model_starts_from_the_kept_features(fitted, tmp_path):
    tagger, X = fitted
    tagger.save(tmp_path / "m.skcrf")
    loaded = CRFTagger.load(tmp_path / "m.skcrf", mmap=True)
    kept = np.count_nonzero(tagger._fitted_model().weights)
    assert loaded.n_features_ == kept < tagger.n_features_
    y = tagger.predict(X)
    loaded.set_params(warm_start=True, max_iterations=5)
    loaded.fit(X, y)  # read-only arrays: the fit makes its own
    assert loaded.n_features_ >= kept
    assert loaded.predict(X[:3]) == y[:3]


@VERSIONS
def test_input_conditioned_transitions(tmp_path, version):
    from test_conditioned_transitions import _fit_random

    tagger, X, _ = _fit_random(5)
    _save(tagger, tmp_path / "m.skcrf", version)
    with np.load(tmp_path / "m.skcrf") as npz:
        doc = json.loads(npz["metadata"].tobytes())
        assert (npz["conditioned_weights"] != 0).all()
    assert doc["format_version"] == version and doc["conditioned_attributes"]
    for mmap_file in (False, True):
        loaded = CRFTagger.load(tmp_path / "m.skcrf", mmap=mmap_file)
        assert loaded.predict(X) == tagger.predict(X)
        assert loaded.predict_marginals(X) == tagger.predict_marginals(X)


@VERSIONS
def test_float32_weights(fitted, tmp_path, version):
    tagger, X = fitted
    _save(tagger, tmp_path / "64.skcrf", version)
    _save(tagger, tmp_path / "32.skcrf", version, dtype="float32")
    size64, size32 = ((tmp_path / f"{n}.skcrf").stat().st_size for n in (64, 32))
    assert size32 < size64
    with np.load(tmp_path / "32.skcrf") as npz:
        assert npz["state_weights"].dtype == np.float32
        assert json.loads(npz["metadata"].tobytes())["weights_dtype"] == "float32"
        stored = npz["state_weights"]
        # format 6: the offsets and labels in the narrowest type holding them (3 labels,
        # a few dozen features); format 5: the kernels' types
        want = (np.uint8, np.uint8) if version == 6 else (np.int64, np.int32)
        assert (npz["state_ptr"].dtype, npz["state_labels"].dtype) == want
    for mmap_file in (False, True):
        loaded = CRFTagger.load(tmp_path / "32.skcrf", mmap=mmap_file)
        model = loaded._fitted_model()
        assert model.state_weights.dtype == np.float64  # converted for the kernels
        assert np.array_equal(model.state_weights, stored.astype(np.float64))
        np.testing.assert_allclose(
            model.state_weights,
            tagger._fitted_model().state_weights[tagger._fitted_model().state_weights != 0],
            rtol=2.0**-24,
        )
        assert loaded.predict(X) == tagger.predict(X)


def test_invalid_dtype_and_unsupported_combinations(tmp_path):
    state = make_state()
    with pytest.raises(ValueError, match="dtype must be 'float64' or 'float32'"):
        save_state(state, tmp_path / "m", dtype="float16")
    with pytest.raises(ValueError, match="float32 weights are stored in formats 5 and 6 only"):
        save_state(state, tmp_path / "m", dtype="float32", format_version=3)
    state.model.state_weights = state.model.state_weights.copy()
    state.model.state_weights[0] = 1e300
    with pytest.raises(ValueError, match="beyond float32's range"):
        save_state(state, tmp_path / "m", dtype="float32")
    assert not (tmp_path / "m").exists()


@pytest.mark.treebank
def test_float32_on_the_treebank_seed_task(treebank, tmp_path):
    from skcrf.datasets import treebank_sentence_features

    train, test = treebank
    X_train, y_train = treebank_sentence_features(train)
    X_test, _ = treebank_sentence_features(test)
    # (two threads: the model of one, in half the time)
    tagger = CRFTagger(c1=0.1, c2=0.1, max_iterations=50, n_jobs=2).fit(X_train, y_train)
    tagger.save(tmp_path / "m.skcrf", dtype="float32")
    loaded = CRFTagger.load(tmp_path / "m.skcrf", mmap=True)
    assert loaded.predict(X_test) == tagger.predict(X_test)
    got, want = loaded.predict_marginals(X_test), tagger.predict_marginals(X_test)
    labels = list(tagger.classes_)
    difference = max(
        abs(a[label] - b[label])
        for sequence_a, sequence_b in zip(got, want)
        for a, b in zip(sequence_a, sequence_b)
        for label in labels
    )
    assert 0 < difference < 1e-6


@VERSIONS
@pytest.mark.parametrize("mmap_file", [False, True])
def test_a_file_cut_before_it_is_opened_is_refused(fitted, tmp_path, mmap_file, version):
    tagger, _ = fitted
    path = tmp_path / "m.skcrf"
    _save(tagger, path, version)
    data = path.read_bytes()
    rng = np.random.default_rng(1)
    cuts = {0, 1, 45, 46, 64, len(data) - 22, len(data) - 1}
    cuts |= set(rng.integers(0, len(data), size=60).tolist())
    for cut in sorted(cuts):
        path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match="Cannot load skcrf model"):
            CRFTagger.load(path, mmap=mmap_file)


def test_a_file_cut_between_open_and_map_is_refused(fitted, tmp_path, monkeypatch):
    import skcrf._persist._npz as npz_module

    tagger, _ = fitted
    path = tmp_path / "m.skcrf"
    tagger.save(path)
    real_mmap = mmap.mmap

    def cut_then_map(fileno, length, **kwargs):
        mapped = real_mmap(fileno, length, **kwargs)
        with open(path, "r+b") as f:  # cut it after the size was read
            f.truncate(length // 2)
        return mapped

    monkeypatch.setattr(npz_module.mmap, "mmap", cut_then_map)
    with pytest.raises(ValueError, match="truncated while it was opened"):
        load_state(path, mmap=True)


def test_replacing_a_mapped_file_by_a_rename_is_safe(tmp_path):
    first, X = _fit(seed=0)
    second, _ = _fit(seed=3, c1=0.0)
    path = tmp_path / "m.skcrf"
    first.save(path)
    loaded = CRFTagger.load(path, mmap=True)
    before = loaded.predict_marginals(X)
    second.save(path)  # an atomic rename: the mapping keeps the old file
    assert loaded.predict_marginals(X) == before == first.predict_marginals(X)
    assert CRFTagger.load(path, mmap=True).predict_marginals(X) == second.predict_marginals(X)


@VERSIONS
def test_an_archive_not_laid_out_as_its_format_is_refused(fitted, tmp_path, version):
    tagger, _ = fitted
    path = tmp_path / "m.skcrf"
    _save(tagger, path, version)
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    # the same arrays written by numpy: not aligned, so not format 5 or 6
    np.savez(tmp_path / "numpy.npz", **arrays)
    with pytest.raises(ValueError, match=f"not laid out as format {version} lays it out"):
        load_state(tmp_path / "numpy.npz")
    # the aligned layout with another version in its metadata (4, or the other aligned one)
    from skcrf._persist._aligned import aligned_npz_bytes

    for other in (4, 11 - version):
        doc = json.loads(arrays["metadata"].tobytes())
        doc["format_version"] = other
        arrays["metadata"] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
        (tmp_path / "other.npz").write_bytes(aligned_npz_bytes(arrays))
        with pytest.raises(
            ValueError,
            match=f"says format version {other}, but the archive is laid out as format {version}",
        ):
            load_state(tmp_path / "other.npz", mmap=True)


def _python_members(buffer, layouts):
    """read_aligned_members without its compiled route: the members, or the ValueError."""
    from skcrf._persist import _aligned

    scan = _aligned.scan_members
    _aligned.scan_members = lambda *args: None
    try:
        return _aligned.read_aligned_members(buffer, *layouts)
    except ValueError as exc:
        return exc
    finally:
        _aligned.scan_members = scan


@VERSIONS
def test_the_compiled_member_scan_accepts_only_what_the_python_reader_reads(
    fitted, tmp_path, version
):
    # the compiled route reads the writer's own layout, and for any other
    # bytes either gives up (None: the Python reader decides) or gives
    # exactly the Python reader's members: damage in the zip records, in the
    # .npy headers, anywhere, and files cut short
    from skcrf._persist._member_scan import scan_members

    tagger, _ = fitted
    path = tmp_path / "m.skcrf"
    _save(tagger, path, version)
    data = path.read_bytes()
    layouts = list(ARRAYS.values())
    members = scan_members(data, layouts)
    assert members is not None and members == _python_members(data, layouts)
    assert list(members) == ARRAYS[version]
    # where the records and headers lie: every member's first 192 bytes, the directory
    starts = [m[3] for m in members.values()]
    spots = [k for start in starts for k in range(max(0, start - 128), start + 64)]
    spots += range(len(data) - 22 - 12 * 60, len(data))
    rng = np.random.default_rng(version)
    accepted = declined = 0
    for at in [*spots, *rng.integers(0, len(data), 300)]:
        mutant = bytearray(data)
        mutant[at] ^= int(rng.integers(1, 256))
        scanned, python = scan_members(mutant, layouts), _python_members(mutant, layouts)
        if scanned is None:
            declined += 1
        else:
            accepted += 1
            assert scanned == python, at
    for size in [*rng.integers(0, len(data), 100), len(data) - 1, 21, 0]:
        assert scan_members(data[:size], layouts) is None
        assert isinstance(_python_members(data[:size], layouts), ValueError)
    assert accepted > 100 and declined > 100  # (both outcomes exercised)


@VERSIONS
def test_a_damaged_member_names_itself(fitted, tmp_path, version):
    tagger, _ = fitted
    path = tmp_path / "m.skcrf"
    _save(tagger, path, version)
    data = bytearray(path.read_bytes())
    weights = tagger._fitted_model().state_weights
    at = data.find(weights[weights != 0][:4].tobytes())
    assert at > 0 and at % 8 == 0
    data[at] ^= 1  # still a finite weight: the CRC tells
    path.write_bytes(bytes(data))
    for mmap_file in (False, True):
        with pytest.raises(ValueError, match="'state_weights' is corrupted \\(CRC mismatch\\)"):
            load_state(path, mmap=mmap_file)


@VERSIONS
def test_pycrfsuite_tagger_opens_skcrf_files(fitted, tmp_path, version):
    from skcrf.pycrfsuite import Tagger

    tagger, X = fitted
    _save(tagger, tmp_path / "m.skcrf", version)
    tagger.to_crfsuite(tmp_path / "m.crfsuite")
    ours, theirs = Tagger(), Tagger()
    ours.open(tmp_path / "m.skcrf")
    theirs.open(tmp_path / "m.crfsuite")
    items = [[{k: v for k, v in token.items()} for token in x] for x in X[:10]]
    assert [ours.tag(x) for x in items] == [theirs.tag(x) for x in items]
    assert ours.labels() == theirs.labels()
    assert ours.info().state_features == theirs.info().state_features
    assert isinstance(_base_array(ours.model.state_weights), mmap.mmap)
    data = bytearray((tmp_path / "m.skcrf").read_bytes())
    data[-30] ^= 0xFF
    (tmp_path / "bad.skcrf").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"Invalid model file '.*bad\.skcrf': Cannot load skcrf"):
        Tagger().open(tmp_path / "bad.skcrf")
    from test_conditioned_transitions import _fit_random

    _fit_random(5)[0].save(tmp_path / "c.skcrf")
    with pytest.raises(ValueError, match="Invalid model file.*input-conditioned transitions"):
        Tagger().open(tmp_path / "c.skcrf")


def test_names_table_vouched_for_by_its_crc(fitted, tmp_path):
    # the first lookup does not verify a format 5 table (its CRC-32 vouches
    # for it); a crafted one with a matching CRC is answered safely, and
    # refused when the names are listed
    from skcrf._persist._aligned import aligned_npz_bytes

    tagger, X = fitted
    _save(tagger, tmp_path / "m.skcrf", 5)
    with np.load(tmp_path / "m.skcrf") as npz:
        arrays = {name: npz[name].copy() for name in npz.files}
    model = CRFTagger.load(tmp_path / "m.skcrf", mmap=True)._fitted_model()
    index = model.attributes.string_index
    assert index._verifications()[0] == 1  # (a sound table: only not read at open)
    name = model.attribute_names()[0].encode()
    chunk = arrays["attributes"]
    at = chunk.tobytes().find(name + b"\0")
    chunk[at] ^= 0x20  # another name, its bucket's hash no longer its own
    (tmp_path / "crafted.skcrf").write_bytes(aligned_npz_bytes(arrays))
    crafted = CRFTagger.load(tmp_path / "crafted.skcrf", mmap=True)
    assert crafted._fitted_model().attributes.id_of(name.decode()) == -1
    crafted.predict(X)  # answers, from the other names
    with pytest.raises(ValueError, match="Cannot load skcrf model"):
        load_state(tmp_path / "crafted.skcrf")


def test_a_crafted_packed_table_answers_absent_never_another_id(fitted, tmp_path):
    # format 6: a table whose slots were moved (with a matching CRC) is used
    # safely: a lookup compares the name's bytes, so it answers "absent" for
    # a misplaced name, never another name's id; check() finds it; what
    # cannot be used (an id out of range or twice) is refused at open
    from skcrf._persist._aligned import aligned_npz_bytes

    tagger, X = fitted
    tagger.save(tmp_path / "m.skcrf")
    with np.load(tmp_path / "m.skcrf") as npz:
        arrays = {name: npz[name].copy() for name in npz.files}
    names = load_state(tmp_path / "m.skcrf").model.attribute_names()
    table = arrays["attribute_table"]
    filled = np.flatnonzero(table)
    empty = np.flatnonzero(table == 0)
    moved = filled[0]
    id_bits = max(1, len(names).bit_length())
    moved_id = int(table[moved] & ((1 << id_bits) - 1)) - 1
    # to the next empty slot: the probe from the name's home meets the emptied slot first
    table[empty[empty > moved][0] if (empty > moved).any() else empty[0]] = table[moved]
    table[moved] = 0
    (tmp_path / "crafted.skcrf").write_bytes(aligned_npz_bytes(arrays))
    crafted = CRFTagger.load(tmp_path / "crafted.skcrf", mmap=True)._fitted_model().attributes
    answers = [crafted.id_of(name) for name in names]
    assert all(answer in (k, -1) for k, answer in enumerate(answers))
    assert answers[moved_id] == -1
    with pytest.raises(ValueError, match="crafted.skcrf.*not found at its id"):
        crafted.string_index.check()
    assert load_state(tmp_path / "crafted.skcrf").model.attribute_names() == names
    for value, problem in (
        (len(names) + 1, "out of range"),
        (int(table[filled[-1]]), "in more than one slot"),
    ):
        bad = {**arrays, "attribute_table": arrays["attribute_table"].copy()}
        bad["attribute_table"][np.flatnonzero(bad["attribute_table"] == 0)[0]] = value
        (tmp_path / "bad.skcrf").write_bytes(aligned_npz_bytes(bad))
        with pytest.raises(ValueError, match=f"Cannot load skcrf model.*{problem}"):
            CRFTagger.load(tmp_path / "bad.skcrf", mmap=True)
