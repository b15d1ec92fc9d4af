import os
import sys

import pytest

# the plain references of the compiled kernels (tests/_reference.py)
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session")
def treebank():
    """(train, test) tagged sentences of the NLTK treebank sample.

    Skipped when the data is missing, except in CI (the CI variable is set),
    where a missing treebank is a failure: those tests must run there.
    """
    pytest.importorskip("nltk")
    from skcrf.datasets import load_treebank

    try:
        return load_treebank(download=False)
    except LookupError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but the treebank is missing: {exc}")
        pytest.skip(f"treebank data missing: {exc}")
