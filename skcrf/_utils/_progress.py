"""A live progress line for a long fit (``verbose=1``).

On a terminal the line updates in place: through tqdm when it is installed
(the ``progress`` extra), else with a carriage return. Anywhere else (a pipe,
a log file) a plain line is written every :data:`PLAIN_INTERVAL` seconds and
at the end, so that logs stay short.
"""

import os
import sys
import time

#: Seconds between two plain progress lines when the stream is not a terminal.
PLAIN_INTERVAL = 5.0


def _format_seconds(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _terminal_size(stream, default=(100, 24)):
    """(columns, rows) of the terminal behind ``stream``; ``default`` where unknown or 0.

    A terminal that reports 0 rows (a fresh pseudo-terminal) would make tqdm
    hide its bar.
    """
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return default
    return size.columns or default[0], size.lines or default[1]


class ProgressDisplay:
    """One line showing how a fit advances.

    Parameters
    ----------
    total : int or None
        The iteration limit (None or 0: no limit, no remaining time).
    stream : file-like, optional
        Where to write (default ``sys.stderr`` at creation).
    use_tqdm : bool or None, default=None
        None: tqdm when it can be imported and the stream is a terminal.
    """

    def __init__(self, total=None, *, stream=None, use_tqdm=None):
        self.total = total or None
        self.stream = sys.stderr if stream is None else stream
        self.is_terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        self._start = time.perf_counter()
        self._last_plain = None
        self._previous_loss = None
        self._bar = None
        if use_tqdm is None:
            use_tqdm = self.is_terminal
        if use_tqdm:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                pass
            else:
                columns, rows = _terminal_size(self.stream)
                self._bar = tqdm(
                    total=self.total,
                    file=self.stream,
                    unit="it",
                    leave=True,
                    ncols=columns,
                    nrows=rows,
                    desc="skcrf",
                )

    def _summary(self, entry):
        loss = entry.get("loss")
        parts = [f"loss={loss:.6g}" if loss is not None else ""]
        if loss is not None and self._previous_loss not in (None, 0.0):
            improvement = (self._previous_loss - loss) / abs(loss) if loss else 0.0
            parts.append(f"improvement={improvement:.2e}")
        self._previous_loss = loss
        for key in ("validation_score", "dev_accuracy"):
            if key in entry:
                parts.append(
                    f"{'dev' if key == 'dev_accuracy' else 'validation'}={entry[key]:.4f}"
                )
                break
        return "  ".join(p for p in parts if p)

    def update(self, entry):
        """Show the iteration ``entry`` (a training-log dict) just recorded."""
        num = entry.get("num", 0)
        summary = self._summary(entry)
        if self._bar is not None:
            self._bar.update(num - self._bar.n)
            self._bar.set_postfix_str(summary, refresh=True)
            return
        now = time.perf_counter()
        if self.is_terminal:
            self._write(f"\r{self._line(num, summary, now)}\x1b[K")
        elif self._last_plain is None or now - self._last_plain >= PLAIN_INTERVAL:
            self._write(self._line(num, summary, now) + "\n")
            self._last_plain = now
        self._last_entry = (num, summary)

    def _line(self, num, summary, now):
        elapsed = now - self._start
        of = f"/{self.total}" if self.total else ""
        timing = f"elapsed {_format_seconds(elapsed)}"
        if self.total and num:
            timing += f", remaining ~{_format_seconds(elapsed / num * (self.total - num))}"
        return f"[skcrf] iteration {num}{of}  {summary}  ({timing})"

    def close(self, message=""):
        """End the line (and print why training stopped)."""
        if self._bar is not None:
            self._bar.close()
        else:
            last = getattr(self, "_last_entry", None)
            if self.is_terminal:
                self._write("\n")
            elif last is not None and self._last_plain is not None:
                self._write(self._line(*last, time.perf_counter()) + "\n")
        if message:
            self._write(f"[skcrf] {message}\n")

    def _write(self, text):
        self.stream.write(text)
        self.stream.flush()
