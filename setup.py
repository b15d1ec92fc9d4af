"""Build the compiled kernels (every ``.pyx`` under ``skcrf/``) with Cython.

The metadata lives in pyproject.toml; this file only declares the extension
modules. Default compiler flags (no ``-march``): the wheels must run on any
CPU of the architecture (AVX2 code is chosen at run time, skcrf/_utils/_simd.h);
BLAS comes from scipy and dispatches SIMD at run time.
"""

import os
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        ".".join(path.with_suffix("").parts),
        [str(path)],
        # numpy's headers, and the C headers every kernel may share
        include_dirs=[np.get_include(), "skcrf/_utils"],
        define_macros=[
            ("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION"),
            # built against numpy 2 (pyproject.toml), runs with every numpy
            # from 1.23, the run-time minimum, whatever numpy 2.x built it
            ("NPY_TARGET_VERSION", "NPY_1_23_API_VERSION"),
        ],
    )
    for path in sorted(Path("skcrf").rglob("*.pyx"))
    # for development: SKCRF_BUILD_ONLY=_kernels,_viterbi builds just those
    if path.stem in os.environ.get("SKCRF_BUILD_ONLY", path.stem).split(",")
]

setup(
    ext_modules=cythonize(
        extensions,
        # the one place the kernels' directives are set (no per-file headers)
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
)
