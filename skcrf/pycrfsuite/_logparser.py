"""python-crfsuite's ``pycrfsuite._logparser``: :class:`TrainLogParser` and :class:`LabelScore`.

Pickles of ``sklearn_crfsuite.CRF`` objects name these two classes by this
path (their ``training_log_`` is a parser whose iterations hold LabelScore
tuples); with ``pycrfsuite`` served by :mod:`skcrf.pycrfsuite` they load as
skcrf's.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from .._training._training_log import LabelScore

__all__ = ["LabelScore", "TrainLogParser"]

_ITERATION_HEAD = re.compile(r"\*{5} (?:Iteration|Epoch) #(\d+) \*{5}\n")
_SECONDS = re.compile(r"Seconds required: (\d+\.\d+)")
_ITERATION_FIELDS = [
    ("loss", re.compile(r"Loss: (\d+\.\d+)"), float),
    ("feature_norm", re.compile(r"Feature norm: (\d+\.\d+)"), float),
    ("error_norm", re.compile(r"Error norm: (\d+\.\d+)"), float),
    ("active_features", re.compile(r"Active features: (\d+)"), int),
    ("linesearch_trials", re.compile(r"Line search trials: (\d+)"), int),
    ("linesearch_step", re.compile(r"Line search step: (\d+\.\d+)"), float),
    ("time", re.compile(r"Seconds required for this iteration: (\d+\.\d+)"), float),
]
_AVERAGES = re.compile(r"Macro-average precision, recall, F1: \((\d\.\d+), (\d\.\d+), (\d\.\d+)\)")
_ACCURACY = re.compile(r"(Item|Instance) accuracy: (\d+) / (\d+)")
_LABEL_SCORE = re.compile(
    r"\s{4}(.+): \((\d+), (\d+), (\d+)\) \((\d\.\d+), (\d\.\d+), (\d\.\d+)\)"
)
_LABEL_ABSENT = re.compile(r"\s{4}(.+): \(0, 0, 0\) \(\*{6}, \*{6}, \*{6}\)")


class TrainLogParser:
    """Reads CRFsuite's training log, message by message (pycrfsuite's parser).

    :meth:`feed` takes each message and returns the event it completes, if
    any: 'start', 'featgen_progress', 'featgen_end', 'prepared',
    'prepare_error', 'iteration', 'optimization_end' or 'end'.

    Attributes
    ----------
    iterations : list of dict
        One per iteration: ``num``, ``scores`` (``{label: LabelScore}``) and
        those of ``loss``, ``feature_norm``, ``error_norm``,
        ``active_features``, ``linesearch_trials``, ``linesearch_step``,
        ``time``, ``avg_precision``, ``avg_recall``, ``avg_f1``,
        ``item_accuracy`` / ``instance_accuracy`` (Fractions) and their
        ``*_float`` values that the log gives.
    last_iteration : dict or None
    featgen_percent : int
        Feature generation's progress (-2 before it starts).
    featgen_num_features, featgen_seconds, training_seconds, storing_seconds
        None until the log gives them.
    log : list of str
        Every message fed.
    events : list of tuple
        ``(event, start, end)``: the event and its slice of ``log``.
    state : str or None
        Where in the log the parser is.
    """

    def __init__(self) -> None:
        self.state: str | None = None
        self.featgen_percent = -2
        self.featgen_num_features: int | None = None
        self.featgen_seconds: float | None = None
        self.training_seconds: float | None = None
        self.storing_seconds: float | None = None
        self.iterations: list[dict[str, Any]] = []
        self.last_iteration: dict[str, Any] | None = None
        self.log: list[str] = []
        self.events: list[tuple[str, int, int]] = []

    def feed(self, line: str) -> str | None:
        """Read one message; return the event it completes (or None)."""
        self.log.append(line)
        if self.state is None:
            self.state = "STARTING"
            self._starting(line)
            self.events.append(("start", 0, len(self.log)))
            return "start"
        event = self._HANDLERS[self.state](self, line)
        if event is not None:
            start, end = self.events[-1][2], len(self.log)
            if event in ("prepared", "optimization_end"):
                end -= 1  # the message that ends them starts the next part
            self.events.append((event, start, end))
        return event

    @property
    def last_log(self) -> str:
        """The log text of the last event."""
        _, start, end = self.events[-1]
        return "".join(self.log[start:end])

    def _starting(self, line):
        if line.startswith("Feature generation"):
            self.state = "FEATGEN"
        return None

    def _featgen(self, line):
        if line in "0123456789.10":  # a progress mark (CRFsuite prints 0, ., ..., 10)
            self.featgen_percent += 2
            return "featgen_progress"
        match = re.match(r"Number of features: (\d+)", line)
        if match:
            self.featgen_num_features = int(match.group(1))
            return None
        seconds = _seconds(line)
        if seconds is not None:
            self.featgen_seconds = seconds
            self.state = "AFTER_FEATGEN"
            return "featgen_end"
        return None

    def _after_featgen(self, line):
        if _iteration_number(line) is not None:
            self.state = "ITERATION"
            self._iteration(line)
            return "prepared"
        if "terminated with error" in line:
            self.state = "AFTER_ITERATION"
            return "prepare_error"
        return None

    def _iteration(self, line):
        number = _iteration_number(line)
        if number is not None:
            self.last_iteration = {"num": number, "scores": {}}
            self.iterations.append(self.last_iteration)
        elif line == "\n":
            self.state = "AFTER_ITERATION"
            return "iteration"
        current = self.last_iteration
        assert current is not None
        for key, pattern, kind in _ITERATION_FIELDS:
            match = pattern.match(line)
            if match:
                current[key] = kind(match.group(1))
        match = _AVERAGES.match(line)
        if match:
            precision, recall, f1 = map(float, match.groups())
            current.update(avg_precision=precision, avg_recall=recall, avg_f1=f1)
        match = _ACCURACY.match(line)
        if match:
            name = match.group(1).lower()
            accuracy = Fraction(int(match.group(2)), int(match.group(3)))
            current[f"{name}_accuracy"] = accuracy
            current[f"{name}_accuracy_float"] = float(accuracy)
        match = _LABEL_SCORE.match(line)
        if match:
            label, n_match, n_model, n_ref, precision, recall, f1 = match.groups()
            current["scores"][label] = LabelScore(
                int(n_match), int(n_model), int(n_ref), float(precision), float(recall), float(f1)
            )
        match = _LABEL_ABSENT.match(line)
        if match:
            current["scores"][match.group(1)] = LabelScore(0, 0, 0, None, None, None)
        return None

    def _after_iteration(self, line):
        if _iteration_number(line) is not None:
            self.state = "ITERATION"
            return self._iteration(line)
        match = re.match(r"Total seconds required for training: (\d+\.\d+)", line)
        if match:
            self.training_seconds = float(match.group(1))
        if line.startswith("Storing the model"):
            self.state = "STORING"
            return "optimization_end"
        return None

    def _storing(self, line):
        if line == "\n":
            return "end"
        seconds = _seconds(line)
        if seconds:
            self.storing_seconds = seconds
        return None

    _HANDLERS = {
        "STARTING": _starting,
        "FEATGEN": _featgen,
        "AFTER_FEATGEN": _after_featgen,
        "ITERATION": _iteration,
        "AFTER_ITERATION": _after_iteration,
        "STORING": _storing,
    }


def _iteration_number(line: str) -> int | None:
    match = _ITERATION_HEAD.match(line)
    return int(match.group(1)) if match else None


def _seconds(line: str) -> float | None:
    match = _SECONDS.match(line)
    return float(match.group(1)) if match else None
