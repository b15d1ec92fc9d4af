"""SciPy's BLAS for compiled code (``scipy.linalg.cython_blas``), loaded light.

The kernels call BLAS's ``dgemm`` through the function pointers that
``scipy.linalg.cython_blas`` exports (``__pyx_capi__``). Imported the usual
way, that module first runs ``scipy.linalg``'s ``__init__``, which imports
all of ``scipy.linalg`` (measured here: about 0.2 s and 25 MB of memory, where
the extension itself and its BLAS library take 5 MB), so that training or
computing marginals from the command line would pay for the whole package.
:func:`cython_blas` loads the extension module from its file instead, under
its own name and registered in ``sys.modules``, so that a later ``import
scipy.linalg`` uses that same module. Should SciPy not lay its files out so
(or loading fail), the usual import is used.
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["cython_blas"]

_NAME = "scipy.linalg.cython_blas"


def cython_blas():
    """The module ``scipy.linalg.cython_blas`` (without ``scipy.linalg``'s import if need be)."""
    module = sys.modules.get(_NAME)
    if module is not None:
        return module
    if "scipy.linalg" not in sys.modules:
        module = _load_extension()
        if module is not None:
            return module
    return importlib.import_module(_NAME)


def _load_extension():
    """The extension module loaded from its file and registered, or None if it cannot be."""
    scipy = importlib.util.find_spec("scipy")
    if scipy is None or not scipy.submodule_search_locations:
        return None
    folder = os.path.join(scipy.submodule_search_locations[0], "linalg")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "cython_blas" + suffix)
        if os.path.isfile(path):
            break
    else:
        return None
    spec = importlib.util.spec_from_file_location(_NAME, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError:
        return None
    if "dgemm" not in getattr(module, "__pyx_capi__", {}):
        return None
    return sys.modules.setdefault(_NAME, module)
