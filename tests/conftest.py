import os
import sys

import pytest

# the plain references of the compiled kernels (tests/_reference.py)
sys.path.insert(0, os.path.dirname(__file__))

# tools/build_wheels.py runs the tests marked `wheel` against an installed
# wheel, from a copy of tests/ outside the source tree: the skcrf imported
# must be the installed one
_installed_under = os.environ.get("SKCRF_TEST_INSTALLED_UNDER")
if _installed_under:
    import skcrf

    if not os.path.realpath(skcrf.__file__).startswith(os.path.realpath(_installed_under)):
        raise RuntimeError(f"skcrf imported from {skcrf.__file__}, not under {_installed_under}")


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


@pytest.fixture(params=[False, True], ids=["one block, dense rows", "tiny blocks, sparse"])
def block_size(request, monkeypatch):
    """The objective's blocks two ways: all in one block with dense rows, or
    one or two sequences a block with every attribute sparse."""
    import skcrf._inference._blocks as blocks

    if request.param:
        monkeypatch.setattr(blocks, "BLOCK_ELEMENTS", 8)
        monkeypatch.setattr(blocks, "DENSE_DENOMINATOR", 0)
    else:
        monkeypatch.setattr(blocks, "DENSE_DENOMINATOR", 1000)
    return request.param
