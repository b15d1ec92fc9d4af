"""The packed name table of model format 6 (skcrf._utils._name_index).

Checked against a plain Python oracle of the format's specification: its
hash, its slot placement, its lookups.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from skcrf._utils import _name_index
from skcrf._utils._cqdb_index import CQDBIndex, LazyNames
from skcrf._utils._name_index import (
    NameIndex,
    PackedNameIndex,
    name_hash,
    pack_names,
    table_layout,
)

MASK = 2**64 - 1


def oracle_hash(data):
    """The specification's 64-bit hash, in Python integers."""

    def mix(h, word):
        h ^= (word * 0x87C37B91114253D5) & MASK
        h = ((h << 27) | (h >> 37)) & MASK
        return (h * 0x9E3779B97F4A7C15 + 0x52DCE729) & MASK

    h = 0x4CF5AD432745937F ^ ((len(data) * 0xC2B2AE3D27D4EB4F) & MASK)
    for at in range(0, len(data), 8):
        h = mix(h, int.from_bytes(data[at : at + 8], "little"))
    h ^= h >> 32
    h = (h * 0xD6E8FEB86659FD93) & MASK
    return h ^ (h >> 29)


def oracle_table(names, size, wide, id_bits):
    """The table the specification places ``names`` in."""
    table = [0] * size
    tag_bits = (64 if wide else 32) - id_bits
    for k, name in enumerate(names):
        h = oracle_hash(name.encode())
        slot = ((h >> 32) * size) >> 32
        while table[slot]:
            slot = (slot + 1) % size
        table[slot] = ((h & ((1 << tag_bits) - 1)) << id_bits) | (k + 1)
    return table


def random_names(rng, n):
    alphabet = ["a", "b", "z", ":", "=", "\0", "é", "字", "\U0001f600", "["]
    names = {""} if n else set()  # (the empty name among them)
    while len(names) < n:
        length = int(rng.integers(0, 40))
        names.add("".join(rng.choice(alphabet, size=length)))
    return sorted(names, key=lambda _: rng.random())


@pytest.mark.parametrize("data", [b"", b"a", b"bias", b"w[-1]=the", b"x" * 8, bytes(range(37))])
def test_the_hash_is_the_specified_one(data):
    assert name_hash(data) == oracle_hash(data)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 300, 5000])
def test_packing_follows_the_specification(n):
    rng = np.random.default_rng(n)
    names = random_names(rng, n)
    text, starts, table = pack_names(names)
    size, wide, id_bits = table_layout(n)
    assert size == n + n // 2 + 1 and not wide and id_bits == max(1, n.bit_length())
    assert bytes(text) == "".join(names).encode()
    assert starts.dtype == np.uint32 and starts[0] == 0
    assert [bytes(text[a:b]).decode() for a, b in zip(starts[:-1], starts[1:])] == names
    assert table.dtype == np.uint32
    assert table.tolist() == oracle_table(names, size, wide, id_bits)


@pytest.mark.parametrize("n", [1, 300, 5000])
def test_lookups_equal_a_dict(n):
    rng = np.random.default_rng(n + 1)
    names = random_names(rng, 2 * n)
    stored, others = names[:n], names[n:]
    index = PackedNameIndex(*pack_names(stored), n)
    assert len(index) == n and isinstance(index, NameIndex)
    ids = {name: k for k, name in enumerate(stored)}
    for name in stored + others + [name + "x" for name in stored[:50]]:
        assert index.lookup(name) == ids.get(name, -1), name
    assert index.lookup(b"bias") == -1 and index.lookup(None) == -1
    assert index.names() == stored
    assert [index.name(k) for k in (0, n - 1)] == [stored[0], stored[-1]]
    index.check()
    with pytest.raises(IndexError):
        index.name(n)


def test_wide_offsets_and_wide_slots(monkeypatch):
    # (uint64 offsets: 4 GiB of names; uint64 slots: over 2**24 names)
    names = random_names(np.random.default_rng(3), 400)
    text, starts, table = pack_names(names)
    index = PackedNameIndex(text, starts.astype(np.uint64), table, len(names))
    assert [index.lookup(name) for name in names] == list(range(len(names)))
    monkeypatch.setattr(_name_index, "table_layout", lambda n: (n + n // 2 + 1, True, 25))
    text, starts, table = pack_names(names)
    assert table.dtype == np.uint64
    assert table.tolist() == oracle_table(names, len(table), True, 25)
    index = PackedNameIndex(text, starts, table, len(names))
    assert [index.lookup(name) for name in names] == list(range(len(names)))
    assert index.lookup("absent") == -1


def test_lookups_from_threads_equal_sequential_ones():
    rng = np.random.default_rng(7)
    names = random_names(rng, 4000)
    index = PackedNameIndex(*pack_names(names[:2000]), 2000)
    want = [index.lookup(name) for name in names]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda part: [index.lookup(name) for name in part], [names] * 8))
    assert got == [want] * 8


def test_names_that_cannot_be_packed():
    with pytest.raises(ValueError, match=r"attribute 1 \('\\ud800'\) cannot be encoded"):
        pack_names(["a", "\ud800"])
    with pytest.raises(ValueError, match="attribute 0 .* is not a str"):
        pack_names([b"a"])
    with pytest.raises(ValueError, match="holds 0 to"):
        table_layout(2**31)


def test_damaged_arrays_are_refused_at_open():
    names = ["w:the", "w:a", "bias", "suffix=ing"]
    text, starts, table = pack_names(names)

    def refused(match, text=text, starts=starts, table=table, n=4):
        with pytest.raises(ValueError, match=match):
            PackedNameIndex(text, starts, table, n)

    refused("offsets must be 5 uint32 or uint64", starts=starts.astype(np.int64))
    refused("offsets must be 5", starts=starts[:-1])
    refused("need 7 slots of uint32", table=table.astype(np.uint64))
    refused("need 7 slots", table=table[:-1])
    refused("text must be a 1-D uint8", text=text.astype(np.int8))
    refused("not from 0 to the text's end", text=text[:-1])
    bad = starts.copy()
    bad[2], bad[3] = bad[3], bad[2]
    refused("offset 3 .* is below offset 2", starts=bad)
    id_mask = (1 << 3) - 1
    for change, match in (
        (lambda t: t.__setitem__(np.flatnonzero(t == 0)[0], 5), "the id 4, out of range"),
        (lambda t: t.__setitem__(np.flatnonzero(t)[0], 0), "holds 3 ids, not 4"),
        (
            lambda t: t.__setitem__(np.flatnonzero(t == 0)[0], t[np.flatnonzero(t)[0]] & id_mask),
            "in more than one slot",
        ),
    ):
        damaged = table.copy()
        change(damaged)
        refused(match, table=damaged)


def test_check_finds_a_misplaced_name():
    names = [f"w:{k}" for k in range(50)]
    text, starts, table = pack_names(names)
    index = PackedNameIndex(text, starts, table, 50)
    index.check()
    # swap two names' bytes (same length): each slot now points to a name that hashes elsewhere
    swapped = text.copy()
    a, b = starts[10], starts[20]
    swapped[a : a + 4], swapped[b : b + 4] = text[b : b + 4], text[a : a + 4]
    damaged = PackedNameIndex(swapped, starts, table, 50)
    damaged.source = "Cannot load skcrf model 'm'"
    assert damaged.lookup("w:10") in (-1, 20)  # never another name's id
    assert damaged.lookup("w:10") != 10
    with pytest.raises(ValueError, match="'m': the name table is corrupted: the name of id 10"):
        damaged.check()


def test_a_cqdb_index_is_a_name_index():
    from skcrf._persist._cqdb import cqdb_bytes, encode_strings

    chunk = cqdb_bytes(*encode_strings(["w:the", "bias"], "attribute"))
    index = CQDBIndex(chunk, 0, 2, "attributes")
    assert isinstance(index, NameIndex) and index.lookup("bias") == 1 and len(index) == 2


def test_lazy_names_over_a_packed_table():
    names = ["w:the", "bias", "w:a"]
    lazy = LazyNames.of_packed(PackedNameIndex(*pack_names(names), 3), source="'m'")
    assert len(lazy) == 3 and "bias" in lazy and lazy.id_of("w:a") == 2
    assert lazy.tolist() == names and lazy.string_index.source == "'m'"
    twice = ["w:the", "bias", "w:the"]
    with pytest.raises(ValueError, match="^'m': the name table holds the same name twice"):
        LazyNames.of_packed(PackedNameIndex(*pack_names(twice), 3), source="'m'").tolist()
    # a vocabulary's names are distinct by construction: no set of every name is made
    known = LazyNames.of_packed(PackedNameIndex(*pack_names(twice), 3), distinct_known=True)
    assert known.tolist() == twice
