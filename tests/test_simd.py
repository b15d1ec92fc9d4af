"""The AVX2 and the baseline code of the compiled kernels give the same bits.

The vectorized exp, l2sgd's forward-backward and the Viterbi max-plus sweep
(Viterbi, n-best) have an AVX2 version chosen at import when the CPU has AVX2 (skcrf/_utils/_simd.h); SKCRF_DISABLE_AVX2=1
forces the baseline, the code a CPU without AVX2 runs. The same fits and
predictions run in two fresh interpreters, one per path, and must agree bit
for bit (both paths claim the same bits: no FMA, the same order of sums).
"""

import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from skcrf._inference import _kernels, _nbest, _viterbi
from skcrf._training import _online

pytestmark = pytest.mark.wheel

# Written to a .npz file by a fresh interpreter: the kernels' outputs, fits
# (L-BFGS and l2sgd, 9 labels: vector loops with a remainder) and predictions.
SCRIPT = """
import sys
import warnings
import numpy as np
import skcrf
warnings.simplefilter("ignore")  # max_iterations reached: on purpose
from skcrf._inference import _kernels, _nbest, _viterbi
from skcrf._training import _online

rng = np.random.RandomState(0)
scores = rng.uniform(-800.0, 5.0, size=(37, 13))
scores[3, 4] = np.nan
scores[5, :] = 0.0
maxima = np.empty(37)
_kernels.exp_shifted(scores, maxima)

labels = [f"L{j}" for j in range(9)]
X, y = [], []
for _ in range(40):
    n = rng.randint(1, 12)
    X.append([{f"w{rng.randint(30)}": 1.0, f"v{rng.randint(8)}": float(rng.rand()),
               "bias": 1.0} for _ in range(n)])
    y.append([labels[rng.randint(9)] for _ in range(n)])
out = {"exp": scores, "maxima": maxima,
       "avx2": np.array([_kernels.AVX2_PATH, _online.AVX2_PATH, _viterbi.AVX2_PATH,
                         _nbest.AVX2_PATH])}
# every other pair forbidden: full max-plus sweeps (9 labels: a remainder)
allowed = [(a, b) for a in labels for b in labels if (int(a[1:]) + int(b[1:])) % 3 != 1]
for algorithm in ("lbfgs", "l2sgd"):
    tagger = skcrf.CRFTagger(algorithm=algorithm, max_iterations=30, c2=0.1, random_state=0)
    tagger.fit(X, y)
    out[algorithm + "_coef"] = tagger.coef_.toarray()
    out[algorithm + "_transition"] = tagger.transition_
    marginals = tagger.predict_marginals(X)
    out[algorithm + "_marginals"] = np.array(
        [m[c] for seq in marginals for m in seq for c in tagger.classes_]
    )
    out[algorithm + "_log_proba"] = np.asarray(tagger.sequence_log_proba(X, y))
    out[algorithm + "_paths"] = np.array(
        [labels.index(t) for predicted in (tagger.predict(X),
                                           tagger.predict(X, allowed_transitions=allowed))
         for seq in predicted for t in seq]
    )
    nbest = tagger.predict_nbest(X, n=3, allowed_transitions=allowed)
    out[algorithm + "_nbest"] = np.array(
        [labels.index(t) for pairs in nbest for path, _ in pairs for t in path]
    )
    out[algorithm + "_nbest_log_proba"] = np.array(
        [log_proba for pairs in nbest for _, log_proba in pairs]
    )
np.savez(sys.argv[1], **out)
"""


def cpu_has_avx2():
    """AVX2 in /proc/cpuinfo's flags (Linux); None where that cannot be read."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx2" in line for line in f)
    except OSError:
        return None


def run_script(tmp_path, name, disable):
    env = dict(os.environ)
    env.pop("SKCRF_DISABLE_AVX2", None)
    if disable:
        env["SKCRF_DISABLE_AVX2"] = "1"
    path = tmp_path / f"{name}.npz"
    subprocess.run([sys.executable, "-c", SCRIPT, str(path)], env=env, check=True, cwd=tmp_path)
    with np.load(path, allow_pickle=False) as data:
        return dict(data)


def test_path_reported_and_hook_read_at_import(tmp_path):
    # this process: the default choice (unless the variable is set by the caller)
    assert _kernels.AVX2_PATH == _online.AVX2_PATH == _viterbi.AVX2_PATH == _nbest.AVX2_PATH
    if os.environ.get("SKCRF_DISABLE_AVX2", "") in ("", "0"):
        is_gcc_linux_x86 = sys.platform == "linux" and platform.machine() == "x86_64"
        if is_gcc_linux_x86 and cpu_has_avx2() is not None:
            assert _kernels.AVX2_PATH == cpu_has_avx2()
    code = (
        "from skcrf._inference import _kernels, _nbest, _viterbi; "
        "from skcrf._training import _online; "
        "print(_kernels.AVX2_PATH, _online.AVX2_PATH, _viterbi.AVX2_PATH, _nbest.AVX2_PATH)"
    )
    for value, expected in (("1", "False False False False"), ("0", None)):
        env = dict(os.environ, SKCRF_DISABLE_AVX2=value)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
        if expected is None:  # "0" leaves the default choice
            expected = " ".join([str(_kernels.AVX2_PATH)] * 4)
            if os.environ.get("SKCRF_DISABLE_AVX2", "") not in ("", "0"):
                continue
        assert out == expected


def test_avx2_and_baseline_give_the_same_bits(tmp_path):
    default = run_script(tmp_path, "default", disable=False)
    baseline = run_script(tmp_path, "baseline", disable=True)
    assert not baseline["avx2"].any()
    if not default["avx2"].all():
        pytest.skip("this CPU (or build) has no AVX2 path: both runs took the baseline")
    assert default.keys() == baseline.keys()
    for key in default:
        if key == "avx2":
            continue
        a, b = default[key], baseline[key]
        assert a.shape == b.shape, key
        # the same bits, NaN included
        assert a.tobytes() == b.tobytes(), (key, np.nanmax(np.abs(a - b)))
    # and the kernels computed something: exp of the scores less their row maxima
    scores = np.random.RandomState(0).uniform(-800.0, 5.0, size=(37, 13))
    scores[5, :] = 0.0
    rows = np.arange(37) != 3  # row 3 holds a NaN, which stays NaN
    assert np.isnan(default["exp"][3, 4])
    shifted = scores - scores.max(axis=1, keepdims=True)
    expected = np.exp(np.maximum(shifted, -708.0))
    np.testing.assert_allclose(default["exp"][rows], expected[rows], rtol=1e-15, atol=0)
    np.testing.assert_array_equal(default["maxima"][rows], scores.max(axis=1)[rows])
