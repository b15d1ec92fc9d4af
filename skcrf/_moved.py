"""Old module paths of skcrf that pickles name, and the modules that replaced them.

A pickle records the module of each class it holds. Pickles made before the
private modules moved into subpackages name the flat paths
(``skcrf._lbfgs.LBFGSStatus``). :func:`install`, run by ``skcrf/__init__``,
appends a finder to ``sys.meta_path`` that answers an import of an old path
(which no other finder finds: no file is left there) with the module of its
new path itself: ``skcrf._lbfgs`` *is* ``skcrf._training._lbfgs``, so the
classes are the same objects. The finder
imports nothing until an old path is imported (pickle's ``find_class``
imports the module, then reads ``sys.modules``); a module that moves adds
its old path to :data:`MOVED`.
"""

import importlib
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

# old path -> new path (pickles made by skcrf before its subpackages)
MOVED = {
    "skcrf._lbfgs": "skcrf._training._lbfgs",
    "skcrf._monitor": "skcrf._training._monitor",
    "skcrf._online_train": "skcrf._training._online_train",
    "skcrf._training_log": "skcrf._training._training_log",
    "skcrf._embeddings": "skcrf._featurize._embeddings",
    "skcrf._featurizer": "skcrf._featurize._featurizer",
}


class _MovedFinder:
    """Finds the old paths of :data:`MOVED`; loads each as its new module.

    A meta path finder and loader by protocol (``find_spec``,
    ``create_module``, ``exec_module``), not by subclassing
    :mod:`importlib.abc`, whose import (importlib.resources, tempfile, zlib,
    ...) would be most of ``import skcrf``'s time.
    """

    _skcrf_moved_finder = True

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", self))  # by protocol

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the import system's default module

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns what sys.modules holds under the old
        # path after this call: the new module, with its own name and spec.
        sys.modules[module.__name__] = importlib.import_module(MOVED[module.__name__])


def install() -> None:
    """Append the finder of the old paths to ``sys.meta_path``; idempotent.

    Last: it is asked only for what no other finder found, so the imports
    of everything else never pass through it.
    """
    if not any(getattr(f, "_skcrf_moved_finder", False) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
