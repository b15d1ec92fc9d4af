"""What the commands share: opening models, errors, output, progress."""

import argparse
import os
import sys
import time
from typing import Any

from .._utils._data_files import DataFileError, check_regular_file, display_name

#: The first bytes of a CRFsuite model file and of an skcrf model file (a zip).
CRFSUITE_MAGIC = b"lCRF"
ZIP_MAGIC = b"PK\x03\x04"


class CommandError(Exception):
    """A command that cannot go on: its message is printed, the exit status is 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with errors raised (exit status 1 with the message), not ``sys.exit(2)``."""

    def error(self, message: str) -> Any:
        raise CommandError(f"{self.prog}: {message} (see {self.prog} -h)")


def open_model(path: str, *, cost_factor: float = 1.0) -> Any:
    """The fitted :class:`~skcrf.CRFTagger` of a model file, by its first bytes.

    CRFsuite model files (``lCRF``) through :meth:`~skcrf.CRFTagger.from_crfsuite`,
    skcrf's own (``save``) through :meth:`~skcrf.CRFTagger.load`; any other
    file goes to :func:`open_other_model` (CRF++ and Wapiti models).
    ``cost_factor`` is ``crf_test -c`` (CRF++ models only).
    """
    from .._tagger import CRFTagger

    check_regular_file(path, display_name(path), "a model file")
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(CRFSUITE_MAGIC) or head.startswith(ZIP_MAGIC):
        if cost_factor != 1.0:
            raise CommandError(f"{path}: -c (the cost factor) applies to CRF++ models only")
        if head.startswith(CRFSUITE_MAGIC):
            return CRFTagger.from_crfsuite(path)
        return CRFTagger.load(path)
    return open_other_model(path, head, cost_factor=cost_factor)


#: The first bytes of CRF++ 0.58 models: the binary file's version (100, a
#: little-endian uint32), crf_learn -t's text file; of Wapiti 1.5 models.
CRFPP_BINARY_MAGIC = (100).to_bytes(4, "little")
CRFPP_TEXT_MAGIC = b"version:"
WAPITI_MAGIC = b"#mdl#"


def open_other_model(path: str, head: bytes, *, cost_factor: float = 1.0) -> Any:
    """The other toolkits' model files, by ``head`` (their first bytes): CRF++ and Wapiti.

    :meth:`~skcrf.CRFTagger.from_crfpp` (with ``cost_factor``) and
    :meth:`~skcrf.CRFTagger.from_wapiti`; anything else is refused.
    """
    from .._tagger import CRFTagger

    if head.startswith(CRFPP_BINARY_MAGIC) or head.startswith(CRFPP_TEXT_MAGIC):
        return CRFTagger.from_crfpp(path, cost_factor=cost_factor)
    if cost_factor != 1.0:
        raise CommandError(f"{path}: -c (the cost factor) applies to CRF++ models only")
    if head.startswith(WAPITI_MAGIC):
        return CRFTagger.from_wapiti(path)
    raise CommandError(
        f"{path}: not a model file that skcrf reads (a CRFsuite, CRF++ or Wapiti model, or "
        f"one saved by skcrf; it starts with {head[:4]!r})"
    )


def template_tagger(tagger: Any, path: str) -> Any:
    """``tagger``, which must carry a template (``featurizer=TemplateFeaturizer(...)``)."""
    from .._template._featurizer import TemplateFeaturizer

    if not isinstance(getattr(tagger, "featurizer", None), TemplateFeaturizer):
        raise CommandError(
            f"{path}: the model has no template (it was not trained with "
            "featurizer=skcrf.TemplateFeaturizer(...)), so it cannot read column files"
        )
    return tagger


def run(command: Any, argv: list[str]) -> int:
    """``command(argv)`` with the errors of files and arguments as a message and status 1."""
    try:
        return command(argv)
    except CommandError as exc:
        message = str(exc)
        if message.startswith("skcrf "):  # names its command already
            print(message, file=sys.stderr)
            return 1
    except BrokenPipeError:  # pragma: no cover - `skcrf tag ... | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except DataFileError as exc:
        message = f"error: {exc}"
    except (OSError, ValueError, TypeError) as exc:
        # OSError: a missing file (named by its filename); ValueError: a bad
        # model file or parameter, whose message says what is wrong
        filename = getattr(exc, "filename", None)
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        message = f"error: {filename}: {text}" if filename else f"error: {text}"
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print(f"skcrf: {message}", file=sys.stderr)
    return 1


class ByteProgress:
    """A tqdm bar over the bytes of a file on a terminal's stderr; nothing otherwise.

    tqdm is optional (the ``progress`` extra): without it, or when stderr is
    not a terminal, nothing is shown.
    """

    def __init__(self, total: "int | None", description: str) -> None:
        self._bar = None
        self._done = 0
        if not total or not sys.stderr.isatty():
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(
            total=total, desc=description, unit="B", unit_scale=True, leave=False, file=sys.stderr
        )

    def update_to(self, position: int) -> None:
        if self._bar is not None and position > self._done:
            self._bar.update(position - self._done)
            self._done = position

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def utc_timestamp() -> str:
    """The time now as CRFsuite's log writes it (ISO 8601, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
