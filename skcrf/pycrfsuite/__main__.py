"""``python -m skcrf.pycrfsuite``: run a program with ``import pycrfsuite`` served by skcrf.

::

    python -m skcrf.pycrfsuite program.py [args ...]
    python -m skcrf.pycrfsuite -m package.module [args ...]

calls :func:`skcrf.pycrfsuite.install` and then runs the program as
``python program.py`` (or ``python -m package.module``) would: as
``__main__``, with ``sys.argv`` holding the program and its arguments.
"""

from __future__ import annotations

import os
import runpy
import sys

from . import install

USAGE = """\
usage: python -m skcrf.pycrfsuite program.py [args ...]
       python -m skcrf.pycrfsuite -m module [args ...]

Runs a Python program, or a module as with 'python -m', with 'import pycrfsuite'
served by skcrf.pycrfsuite (skcrf.pycrfsuite.install() is called first).
"""


def main(argv: list[str] | None = None) -> int:
    """Run the program that ``argv`` (default: ``sys.argv[1:]``) names; return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] == "-m" and len(args) < 2:
        print("Argument expected for the -m option\n" + USAGE, end="", file=sys.stderr)
        return 2
    install()
    if args[0] == "-m":
        sys.argv = args[1:]  # runpy puts the module's file in sys.argv[0]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        # as 'python program.py': the program's folder first on sys.path
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
