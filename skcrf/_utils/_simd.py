"""The test hook of the compiled kernels' baseline (non-AVX2) code path.

The kernels that have an AVX2 version (the vectorized exp, l2sgd's
forward-backward, the Viterbi max-plus sweep) choose it at import when the CPU supports AVX2
(skcrf/_utils/_simd.h). ``SKCRF_DISABLE_AVX2=1`` in the environment before
skcrf is imported makes them take the baseline code instead, as on a CPU
without AVX2; both give the same bits. Each extension module reports its
choice as ``AVX2_PATH``.
"""

import os

ENVIRONMENT_VARIABLE = "SKCRF_DISABLE_AVX2"


def avx2_disabled():
    """True when ``SKCRF_DISABLE_AVX2`` is set to anything but ``""`` or ``"0"``."""
    return os.environ.get(ENVIRONMENT_VARIABLE, "") not in ("", "0")
