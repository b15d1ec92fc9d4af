"""python-crfsuite's API on skcrf's engine: ``import skcrf.pycrfsuite as pycrfsuite``.

Code written for python-crfsuite (``pycrfsuite``) runs unchanged with this
one import changed: :class:`ItemSequence`, :class:`Tagger`,
:class:`BaseTrainer` / :class:`Trainer` (with CRFsuite's parameter names,
defaults and help strings, its log messages, the ``on_*`` hooks and
``logparser``), :class:`CRFSuiteError` and :data:`CRFSUITE_VERSION`.
Nothing here calls CRFsuite: tagging runs on skcrf's kernels (the tagger is
the one behind :attr:`skcrf.CRFTagger.tagger_`), training on skcrf's fit
driver (the model CRFsuite trains: the same features, objective and
optimizers, labels and attributes numbered as CRFsuite numbers them), and
models are CRFsuite model files that python-crfsuite, CRFsuite and
sklearn-crfsuite open.

The package has python-crfsuite's layout: ``skcrf.pycrfsuite._pycrfsuite``
(the classes above), ``skcrf.pycrfsuite._logparser`` (:class:`TrainLogParser`
and ``LabelScore``) and ``skcrf.pycrfsuite._dumpparser``
(``CRFsuiteDumpParser`` and :class:`ParsedDump`); each class is one object
whichever path names it. For code one cannot edit, and for pickles that
name ``pycrfsuite`` (a pickled ``sklearn_crfsuite.CRF`` names
``pycrfsuite._logparser.TrainLogParser``), :func:`install` serves
``import pycrfsuite`` and its submodules from this package; ``python -m
skcrf.pycrfsuite program.py`` runs a whole program so.

Items are taken as pycrfsuite takes them (see :class:`ItemSequence`):
iterables of feature names (lists, sets, ``dict.keys()``, generators),
``{name: float}`` and ``{name: bool}`` dicts, ``{name: str}`` (the attribute
``name:str``), nested dicts, lists and sets (names joined by ``:``).

Threads: one :class:`Tagger` may be shared by any number of threads. Calls
that pass the sequence (``tag(xseq)``) give exactly what sequential calls
give. :meth:`Tagger.set` stores the sequence per thread: ``set(xseq)`` then
``tag()``, ``probability(yseq)`` or ``marginal(y, pos)`` read the calling
thread's sequence (pycrfsuite keeps one for all threads). ``open`` and
``close`` replace the model at once; a thread's sequence set under the
previous model then counts as not set. A :class:`Trainer` is not meant to
be shared while it trains.

Differences from python-crfsuite, on purpose (the migration guide's "From
python-crfsuite" lists them all):

- Errors where pycrfsuite answers silently or crashes: ``tag()``,
  ``probability`` and ``marginal`` before any ``set`` raise ValueError
  (pycrfsuite answers ``[]`` and 0.0); a closed tagger raises
  :class:`TaggerClosedError` from every method (a ValueError and a
  RuntimeError, what pycrfsuite raises from each); a malformed item or
  sequence (a ``None`` value, a key that is not a string, a string where
  an item or a sequence is expected) raises :class:`ItemFormatError` (a
  TypeError and a ValueError) and a non-finite value ValueError, where
  pycrfsuite raises SystemError, iterates the string or trains on NaN; a
  file that is not a well-formed CRFsuite model raises ValueError on
  ``open``; out-of-range parameter values raise ValueError from
  :meth:`BaseTrainer.train`.
- ``open``, ``train`` and ``dump`` take path-like objects too; ``dump``
  replaces the file.
- The online trainers shuffle with their own fixed-seed generator: they
  are deterministic, but their order is not CRFsuite's ``rand()`` order;
  l2sgd logs its calibration settings but not each trial.
- ``TrainLogParser`` is ``skcrf.pycrfsuite.TrainLogParser`` too
  (pycrfsuite has it only in its private ``_logparser`` module).
"""

from __future__ import annotations

import sys

from . import _dumpparser, _logparser, _pycrfsuite
from ._dumpparser import ParsedDump
from ._logparser import TrainLogParser
from ._pycrfsuite import (
    CRFSUITE_VERSION,
    BaseTrainer,
    CRFSuiteError,
    ItemFormatError,
    ItemSequence,
    Tagger,
    TaggerClosedError,
    Trainer,
    UnknownLabelError,
)

__all__ = [
    "CRFSUITE_VERSION",
    "BaseTrainer",
    "CRFSuiteError",
    "ItemFormatError",
    "ItemSequence",
    "ParsedDump",
    "Tagger",
    "TaggerClosedError",
    "TrainLogParser",
    "Trainer",
    "UnknownLabelError",
    "install",
]

#: python-crfsuite's submodules, as this package has them.
_SUBMODULES = {"_pycrfsuite": _pycrfsuite, "_logparser": _logparser, "_dumpparser": _dumpparser}


def install() -> None:
    """Serve ``import pycrfsuite`` from this package, for code one cannot edit.

    Registers this package as ``pycrfsuite`` in ``sys.modules``, and its
    submodules as ``pycrfsuite._pycrfsuite``, ``pycrfsuite._logparser`` and
    ``pycrfsuite._dumpparser``: every later ``import pycrfsuite`` (of the
    program or of a package it uses, such as sklearn-crfsuite) gets
    skcrf's classes, whether or not python-crfsuite is installed, and
    pickles that name pycrfsuite's classes load as skcrf's. Call it before
    anything imports pycrfsuite; calling it again does nothing. Opt-in: it
    is never called by skcrf itself. ``python -m skcrf.pycrfsuite
    program.py [args]`` (or ``-m module [args]``) runs a program with it
    called first.

    Raises
    ------
    RuntimeError
        If python-crfsuite's own ``pycrfsuite`` (or one of its submodules)
        is already imported: its objects and skcrf's would be mixed. Nothing
        is registered then.

    Examples
    --------
    >>> import skcrf.pycrfsuite
    >>> skcrf.pycrfsuite.install()  # doctest: +SKIP
    >>> import pycrfsuite  # doctest: +SKIP
    >>> pycrfsuite.Tagger is skcrf.pycrfsuite.Tagger  # doctest: +SKIP
    True
    """
    served = {"pycrfsuite": sys.modules[__name__]}
    served.update({f"pycrfsuite.{name}": module for name, module in _SUBMODULES.items()})
    for name, module in served.items():
        present = sys.modules.get(name)
        if present is not None and present is not module:
            where = getattr(present, "__file__", None) or repr(present)
            raise RuntimeError(
                f"{name} is already imported (from {where}), so skcrf.pycrfsuite.install() "
                "cannot serve it: call install() before anything imports pycrfsuite "
                "(sklearn_crfsuite imports it), or run the program with "
                "'python -m skcrf.pycrfsuite'."
            )
    sys.modules.update(served)
