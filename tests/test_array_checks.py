"""The compiled checks of model arrays against a plain numpy oracle (and zlib)."""

import mmap
import os
import platform
import sysconfig
import zlib

import numpy as np
import pytest

from skcrf._utils._array_checks import (
    COLUMN_OUT_OF_RANGE,
    COLUMNS_NOT_INCREASING,
    PTR_NOT_RISING,
    STATE_WEIGHTS_NOT_FINITE,
    TRANSITION_WEIGHTS_NOT_FINITE,
    TRANSITIONS_NOT_INCREASING,
    _clmul_crc32,
    all_finite,
    crc32,
    csr_problem,
    model_arrays_problem,
)


def test_crc32_equals_zlib_at_every_length_offset_and_start_value():
    # lengths across the 64-byte folding and the 16-byte tail, at offsets
    # that misalign the loads, with start values that set every bit
    data = np.random.default_rng(0).integers(0, 256, 1 << 16, dtype=np.uint8).tobytes()
    lengths = [*range(200), 255, 256, 257, 1000, 4095, 4096, 40_001, (1 << 16) - 7]
    for start in (0, 1, 0xFFFFFFFF, 0x12345678):
        for offset in (0, 1, 7):
            for n in lengths:
                chunk = memoryview(data)[offset : offset + n]
                assert _clmul_crc32(chunk, start) == zlib.crc32(chunk, start), (start, offset, n)
    assert _clmul_crc32(b"") == 0 and _clmul_crc32(b"", 77) == 77
    # (the CRC of a run of zero bytes, where a wrong constant shows at once)
    zeros = bytes(1 << 12)
    assert _clmul_crc32(zeros) == zlib.crc32(zeros)


def test_crc32_reads_a_read_only_map(tmp_path):
    path = tmp_path / "bytes"
    path.write_bytes(bytes(range(256)) * 300)
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert crc32(memoryview(m)[3:70_000]) == zlib.crc32(memoryview(m)[3:70_000])


def _gcc_on_x86_64_linux_with_pclmul():
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or ""
    with open("/proc/cpuinfo") as cpuinfo:
        return "gcc" in compiler and " pclmulqdq" in cpuinfo.read()


@pytest.mark.skipif(
    not _gcc_on_x86_64_linux_with_pclmul(), reason="the fast path: GCC, x86-64 Linux, PCLMULQDQ"
)
def test_crc32_uses_carry_less_multiplication_where_built_for_it():
    # elsewhere crc32 is zlib's function itself
    assert crc32 is _clmul_crc32


def oracle(ptr, columns, n_columns):
    n = len(columns)
    if len(ptr) < 1 or ptr[0] != 0 or ptr[-1] != n or (np.diff(ptr) < 0).any():
        return PTR_NOT_RISING
    if n and (columns.min() < 0 or columns.max() >= n_columns):
        return COLUMN_OUT_OF_RANGE
    starts = np.zeros(n, dtype=bool)
    starts[ptr[:-1][ptr[:-1] < n]] = True
    if n and (np.diff(columns)[~starts[1:]] <= 0).any():
        return COLUMNS_NOT_INCREASING
    return 0


def random_csr(rng, n_rows, n_columns):
    rows = [
        np.sort(rng.choice(n_columns, rng.integers(0, n_columns + 1), replace=False))
        for _ in range(n_rows)
    ]
    ptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    columns = np.concatenate(rows) if rows else np.zeros(0)
    return ptr, columns.astype(np.int64)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_csr_problem_equals_the_numpy_oracle(dtype):
    rng = np.random.default_rng(0)
    seen = set()
    for trial in range(600):
        ptr, columns = random_csr(rng, int(rng.integers(0, 8)), 5)
        damage = trial % 5
        if damage == 1 and len(columns):
            columns[rng.integers(len(columns))] = rng.choice([-1, 5, 9])
        elif damage == 2 and len(columns) > 1:
            k = rng.integers(len(columns) - 1)
            columns[k], columns[k + 1] = columns[k + 1], columns[k]
        elif damage == 3 and len(ptr) > 2:
            ptr[rng.integers(1, len(ptr) - 1)] = rng.integers(-2, len(columns) + 3)
        elif damage == 4:
            ptr[-1] += rng.choice([-1, 1])
        columns = columns.astype(dtype)
        want = oracle(ptr, columns, 5)
        assert csr_problem(ptr, columns, 5) == want, (ptr, columns)
        seen.add(want)
    assert seen == {0, PTR_NOT_RISING, COLUMN_OUT_OF_RANGE, COLUMNS_NOT_INCREASING}


def test_all_finite():
    values = np.linspace(-1, 1, 101)
    assert all_finite(values) and all_finite(np.zeros(0))
    for bad in (np.nan, np.inf, -np.inf):
        damaged = values.copy()
        damaged[57] = bad
        assert not all_finite(damaged)


def model_oracle(ptr, labels, n_labels, index, state_weights, transition_weights):
    problem = oracle(ptr, labels, n_labels)
    if problem:
        return problem
    if len(index) and (
        index[0] < 0 or index[-1] >= n_labels * n_labels or (np.diff(index) <= 0).any()
    ):
        return TRANSITIONS_NOT_INCREASING
    if not np.isfinite(state_weights).all():
        return STATE_WEIGHTS_NOT_FINITE
    if not np.isfinite(transition_weights).all():
        return TRANSITION_WEIGHTS_NOT_FINITE
    return 0


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_model_arrays_problem_equals_the_numpy_oracle(dtype):
    rng = np.random.default_rng(1)
    seen = set()
    for trial in range(800):
        n_labels = int(rng.integers(1, 5))
        ptr, labels = random_csr(rng, int(rng.integers(0, 8)), n_labels)
        index = np.sort(rng.choice(n_labels**2, rng.integers(0, n_labels**2 + 1), replace=False))
        state_weights, transition_weights = (
            rng.normal(size=len(labels)),
            rng.normal(size=len(index)),
        )
        damage = trial % 8
        if damage == 1 and len(labels):
            labels[rng.integers(len(labels))] = rng.choice([-1, n_labels])
        elif damage == 2 and len(ptr) > 2:
            ptr[rng.integers(1, len(ptr) - 1)] = rng.integers(-2, len(labels) + 3)
        elif damage == 3 and len(index):
            index[rng.integers(len(index))] = rng.choice([-1, n_labels**2, 0])
        elif damage == 4 and len(index) > 1:
            index[-1] = index[0]
        elif damage == 5 and len(state_weights):
            state_weights[rng.integers(len(state_weights))] = rng.choice([np.nan, np.inf])
        elif damage == 6 and len(transition_weights):
            transition_weights[rng.integers(len(transition_weights))] = -np.inf
        elif damage == 7 and len(labels) and len(transition_weights):  # two at once: the first
            labels[0] = -1
            transition_weights[0] = np.nan
        arrays = (ptr, labels.astype(dtype), n_labels, index, state_weights, transition_weights)
        want = model_oracle(*arrays)
        assert model_arrays_problem(*arrays) == want, arrays
        seen.add(want)
    assert seen == set(range(7))
