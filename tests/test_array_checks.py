"""The compiled checks of model arrays against a plain numpy oracle."""

import numpy as np
import pytest

from skcrf._utils._array_checks import (
    COLUMN_OUT_OF_RANGE,
    COLUMNS_NOT_INCREASING,
    PTR_NOT_RISING,
    all_finite,
    csr_problem,
)


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
