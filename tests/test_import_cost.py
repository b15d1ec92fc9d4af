"""What ``import skcrf`` and ``import skcrf.pycrfsuite`` load (issue 39).

``import skcrf.pycrfsuite`` (the CRFsuite reader, the decoders, the tagger
core) loads neither scikit-learn nor SciPy: command-line tools and
short-lived workers pay only numpy's import and skcrf's own modules.
``import skcrf`` loads the public names on first access (PEP 562). Each
check runs in a fresh interpreter, since this one has imported everything.
The times themselves are measured by ``benchmarks/import_time.py``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import skcrf

# an installed wheel too (tools/build_wheels.py): the compiled kernels' lazy BLAS
pytestmark = pytest.mark.wheel

ROOT = Path(skcrf.__file__).resolve().parent.parent

# heavy packages that a bare ``import skcrf`` must leave alone
HEAVY = ("sklearn", "scipy", "joblib", "threadpoolctl", "pandas")


def _fresh(code):
    """Run ``code`` in a fresh interpreter that finds this skcrf; its last stdout line, as JSON."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


_LOADED = """
import json, os, sys
import {module}
assert os.path.realpath({module}.__file__).startswith({root!r}), {module}.__file__
print(json.dumps(sorted(sys.modules)))
"""


def _loaded_by(module):
    return _fresh(_LOADED.format(module=module, root=str(ROOT)))


def _top_level(modules):
    return {name.split(".")[0] for name in modules}


def test_import_skcrf_pycrfsuite_loads_no_sklearn_nor_scipy():
    loaded = _top_level(_loaded_by("skcrf.pycrfsuite"))
    assert "sklearn" not in loaded
    assert "scipy" not in loaded
    assert "numpy" in loaded


def test_import_skcrf_loads_no_heavy_module():
    modules = _loaded_by("skcrf")
    assert not _top_level(modules) & set(HEAVY)
    assert "numpy" not in _top_level(modules)
    # the estimator and the public modules are imported on first access
    for lazy in ("skcrf._tagger", "skcrf._cv", "skcrf.io", "skcrf.metrics", "skcrf.pycrfsuite"):
        assert lazy not in modules


def test_public_names_import_from_a_fresh_interpreter():
    names = _fresh(
        """
import json
import skcrf
from skcrf import CRFTagger, CRFTaggerCV, io, metrics
from skcrf import *  # noqa: F403
assert CRFTagger.__module__ == "skcrf._tagger"
assert skcrf.io is io and skcrf.metrics is metrics
from skcrf._training._lbfgs import LBFGSStatus
assert skcrf.LBFGSStatus is LBFGSStatus
missing = [name for name in skcrf.__all__ if name not in dir(skcrf)]
assert not missing, missing
assert all(getattr(skcrf, name) is globals()[name] for name in skcrf.__all__)
print(json.dumps(sorted(skcrf.__all__)))
"""
    )
    assert names == sorted(skcrf.__all__)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        skcrf.not_a_name  # noqa: B018
    assert not hasattr(skcrf, "CRFTaggr")


def test_lazy_names_are_the_defining_modules_objects():
    from skcrf._tagger import CRFTagger
    from skcrf._training._training_log import TrainingLog

    assert skcrf.CRFTagger is CRFTagger
    assert skcrf.TrainingLog is TrainingLog
    assert set(skcrf.__all__) <= set(dir(skcrf))


def test_skcrf_pycrfsuite_tags_without_sklearn_and_trains_with_it(tmp_path):
    path = str(tmp_path / "m.crfsuite")
    trained = _fresh(
        f"""
import json, sys
import skcrf.pycrfsuite as pycrfsuite
trainer = pycrfsuite.Trainer(verbose=False)
trainer.append([{{"a": 1.0}}, {{"b": 1.0}}], ["x", "y"])
trainer.append([{{"b": 1.0}}, {{"a": 1.0}}], ["y", "x"])
trainer.train({path!r})
print(json.dumps("sklearn" in sys.modules))
"""
    )
    assert trained  # training checks its parameters with CRFTagger's rules
    tagged = _fresh(
        f"""
import json, sys
import skcrf.pycrfsuite as pycrfsuite
tagger = pycrfsuite.Tagger()
tagger.open({path!r})
labels = tagger.tag([{{"a": 1.0}}, {{"b": 1.0}}])
light = not any(m.split(".")[0] in ("sklearn", "scipy") for m in sys.modules)
# marginals multiply matrices: SciPy's BLAS is loaded then, scikit-learn never
tagger.set([{{"a": 1.0}}, {{"b": 1.0}}])
marginal = tagger.marginal("x", 0)
print(json.dumps([labels, light, marginal > 0.5, "sklearn" in sys.modules]))
"""
    )
    assert tagged == [["x", "y"], True, True, False]
