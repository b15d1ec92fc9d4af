"""Build the compiled kernels (every ``skcrf/*.pyx``) with Cython.

The metadata lives in pyproject.toml; this file only declares the extension
modules. Default compiler flags (no ``-march``): the wheels must run on any
CPU of the architecture; BLAS comes from scipy and dispatches SIMD at run time.
"""

import os
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        f"skcrf.{path.stem}",
        [str(path)],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
    )
    for path in sorted(Path("skcrf").glob("*.pyx"))
    # for development: SKCRF_BUILD_ONLY=_kernels,_viterbi builds just those
    if path.stem in os.environ.get("SKCRF_BUILD_ONLY", path.stem).split(",")
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
)
