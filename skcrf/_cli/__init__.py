"""The ``skcrf`` command (console script and ``python -m skcrf``).

A thin layer over the library: the files are read by :mod:`skcrf.io`'s
readers, models trained and applied by the parts :class:`skcrf.CRFTagger` is
made of (``_models``: the fit driver, the model files' readers and writers, the
predictor; :mod:`skcrf.pycrfsuite`'s trainer for CRFsuite's log), so that the
command line and the library give the same models, and tagging a file does
not wait for scikit-learn to import.
"""

import importlib
import os
import sys

from ._common import run

__all__ = ["console_main", "main"]

USAGE = """\
usage: skcrf COMMAND [ARGS ...]
Train and apply linear-chain CRFs from the shell, with the options, files and
outputs of CRFsuite's, CRF++'s and Wapiti's command-line tools.

commands:
  learn   train on CRFsuite data files (as 'crfsuite learn')
  tag     tag CRFsuite data files (as 'crfsuite tag')
  dump    write a model as text (as 'crfsuite dump')
  crfpp   'skcrf crfpp learn' and 'skcrf crfpp test' (as crf_learn and crf_test;
          test also opens CRF++ and Wapiti models)
  wapiti  'skcrf wapiti train', 'label' and 'dump' (as Wapiti's modes; label and
          dump also open Wapiti models)

'skcrf COMMAND -h' shows a command's options.
"""


#: command -> (its module, its function); only the command run is imported
_COMMANDS = {
    "learn": ("_crfsuite", "learn"),
    "tag": ("_crfsuite", "tag"),
    "dump": ("_crfsuite", "dump"),
    "crfpp": ("_crfpp", "main"),
    "wapiti": ("_wapiti", "main"),
}


def main(argv=None):
    """Run the command ``argv`` (default ``sys.argv[1:]``) names; return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(USAGE)
        return 0 if args else 1
    if args[0] in ("-V", "--version"):
        from .._version import __version__

        print(f"skcrf {__version__}")
        return 0
    if args[0] not in _COMMANDS:
        print(f"skcrf: unknown command {args[0]!r} (see skcrf -h)", file=sys.stderr)
        return 1
    module, function = _COMMANDS[args[0]]
    command = getattr(importlib.import_module(f".{module}", __name__), function)
    return run(command, args[1:])


def console_main():
    """The console script and ``python -m skcrf``: :func:`main`, then exit at once.

    Python's teardown (freeing every module and object) took 14-23 ms here
    of a 0.25-0.3 s ``skcrf crfpp test`` on the Treebank's test part. A command
    has closed its files and finished its threads when :func:`main`
    returns, so the process ends without it (as mypy's command does) once
    the standard streams are flushed. An exception :func:`main` does not
    handle propagates as usual.
    """
    status = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `skcrf tag ... | head`: what `run` answers
        status = 1
    os._exit(status)
