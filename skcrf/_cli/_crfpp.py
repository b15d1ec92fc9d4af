"""``skcrf crfpp learn`` and ``skcrf crfpp test``: CRF++'s crf_learn and crf_test."""

from ._common import CommandError


def main(argv):
    """``skcrf crfpp learn|test ...``."""
    raise CommandError("crfpp: not available yet")
