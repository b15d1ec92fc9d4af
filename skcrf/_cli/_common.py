"""What the commands share: arguments, errors, output, progress (models: ``_models``)."""

import argparse
import os
import sys
import time
from typing import Any, TextIO

from .._utils._data_files import DataFileError


class CommandError(Exception):
    """A command that cannot go on: its message is printed, the exit status is 1."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with errors raised (exit status 1 with the message), not ``sys.exit(2)``."""

    def error(self, message: str) -> Any:
        raise CommandError(f"{self.prog}: {message} (see {self.prog} -h)")


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


def open_output(path: str, command: str, *reads: str) -> TextIO:
    """``path`` opened for the command's text output, unless the command reads that file.

    Opening truncates the file: were it the model or an input (another name
    for it included), the command would destroy what it reads, and a model
    mapped in place would crash the process. ``reads``: the files the
    command reads ("-" and empty names are skipped).
    """
    for read in reads:
        if read and read != "-" and _same_file(path, read):
            raise CommandError(
                f"{command}: the output file {path} is {read}, which the command reads; "
                "give another output file"
            )
    return open(path, "w", encoding="utf-8", newline="\n")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


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
