"""The training trace of a CRF fit."""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .._utils._progress import ProgressDisplay

if TYPE_CHECKING:
    from ._lbfgs import IterationInfo, LBFGSStatus
    from ._online_train import OnlineStatus


class LabelScore(NamedTuple):
    """Held-out figures of one label at one iteration (CRFsuite's, by name).

    ``match``: tokens of the label predicted correctly; ``model``: tokens
    predicted as the label; ``ref``: tokens with the label in the reference;
    ``precision``, ``recall``, ``f1``: None when the label is absent from the
    reference (``ref == 0``).
    """

    match: int
    model: int
    ref: int
    precision: float | None
    recall: float | None
    f1: float | None


def holdout_scores(
    truth: np.ndarray,
    predicted: np.ndarray,
    sequence_ends: np.ndarray,
    classes: np.ndarray,
    unseen: Mapping[Any, int] | None = None,
) -> dict[str, Any]:
    """CRFsuite's held-out evaluation of one iteration, as log entries.

    Parameters
    ----------
    truth, predicted : ndarray of int
        Label indices of every token (flat order); ``truth`` is -1 for a
        label unknown to the model (never correct, left out of the averages).
    sequence_ends : ndarray of int
        Flat index one past the last token of every non-empty sequence.
    classes : ndarray of object
    unseen : dict, optional
        ``{label: count}`` of the reference labels the model does not know.
        CRFsuite adds them to its labels (they score 0 and count in the
        averages); so do these figures, without changing the model.

    Returns
    -------
    dict
        ``scores`` ({label: LabelScore}), ``avg_precision``, ``avg_recall``,
        ``avg_f1`` (macro averages over the labels, 0 for a label absent from
        the reference, as CRFsuite computes them),
        ``item_accuracy`` / ``instance_accuracy`` (Fractions) and their
        ``*_float`` values, and ``dev_accuracy`` (= ``item_accuracy_float``).
    """
    n_labels = len(classes)
    correct = truth == predicted
    match = np.bincount(truth[correct], minlength=n_labels)
    model = np.bincount(predicted, minlength=n_labels)
    ref = np.bincount(truth[truth >= 0], minlength=n_labels)
    scores = {}
    totals = np.zeros(3)
    for k, label in enumerate(classes.tolist()):
        if ref[k] == 0:
            scores[label] = LabelScore(int(match[k]), int(model[k]), 0, None, None, None)
            continue
        precision = match[k] / model[k] if model[k] else 0.0
        recall = match[k] / ref[k]
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        scores[label] = LabelScore(
            int(match[k]),
            int(model[k]),
            int(ref[k]),
            float(precision),
            float(recall),
            float(f1),
        )
        totals += (precision, recall, f1)
    unseen = unseen or {}
    for label, count in unseen.items():
        scores[label] = LabelScore(0, 0, int(count), 0.0, 0.0, 0.0)
    averages = totals / (n_labels + len(unseen))
    n_correct = int(correct.sum())
    wrong_before = np.concatenate([[0], np.cumsum(~correct)])
    starts = np.concatenate([[0], sequence_ends[:-1]])
    n_sequences_correct = int(np.sum(wrong_before[sequence_ends] == wrong_before[starts]))
    item = Fraction(n_correct, len(truth))
    instance = Fraction(n_sequences_correct, len(sequence_ends))
    return {
        "scores": scores,
        "avg_precision": float(averages[0]),
        "avg_recall": float(averages[1]),
        "avg_f1": float(averages[2]),
        "item_accuracy": item,
        "item_accuracy_float": float(item),
        "instance_accuracy": instance,
        "instance_accuracy_float": float(instance),
        "dev_accuracy": float(item),
    }


class TrainingLog:
    """Per-iteration record of a fit, and how the optimizer stopped.

    Like sklearn-crfsuite's ``training_log_``: ``iterations`` is a list of
    dicts, one per iteration (an L-BFGS iteration, or an epoch of an online
    trainer), with sklearn-crfsuite's keys:

    - ``num``: iteration number, from 1;
    - ``scores``: ``{label: LabelScore}`` on the held-out data, ``{}``
      without it;
    - ``loss``: the full objective (including the c1 and c2 terms);
    - ``feature_norm``: the L2 norm of the weights;
    - ``error_norm``: the norm of the gradient (of the pseudo-gradient when
      c1 > 0);
    - ``active_features``: the number of nonzero weights;
    - ``linesearch_trials``: objective evaluations in this iteration's line
      search;
    - ``linesearch_step``: the accepted step length;
    - ``time``: seconds this iteration took;
    - with ``X_dev``/``y_dev``: ``avg_precision``, ``avg_recall``, ``avg_f1``
      (macro averages over the model's labels, as CRFsuite prints them),
      ``item_accuracy`` and ``instance_accuracy`` (``Fraction``: correct
      tokens and correct sequences), their ``*_float`` values, and
      ``dev_accuracy`` (= ``item_accuracy_float``);
    - with ``early_stopping``: ``validation_score``, the score (``scoring``,
      token accuracy by default) of this iteration's weights on the
      validation data.

    The L-BFGS keys ``error_norm`` and ``linesearch_*`` are absent for the
    online trainers, which log ``loss`` (their epoch loss, CRFsuite's),
    ``feature_norm``, ``active_features``, ``time`` and their own figures
    (l2sgd: ``learning_rate``; see the user guide's "Training" page).

    Parameters
    ----------
    verbose : bool or int, default=False
        0/False: quiet. 1/True: one progress line on stderr, updated in
        place on a terminal (through tqdm when it is installed, the
        ``progress`` extra), a plain line every few seconds otherwise.
        2 or more: one line per iteration, as it is recorded.
    total : int or None, default=None
        The iteration limit, for the progress line's remaining time.

    Attributes
    ----------
    iterations : list of dict
    status : LBFGSStatus or None
        How the optimizer stopped (set at the end of the fit).
    message : str
    """

    # class-level defaults: logs pickled by earlier versions lack them
    _progress = None
    _total = None

    def __init__(self, verbose: bool | int = False, total: int | None = None) -> None:
        self.verbose = verbose
        self.iterations: list[dict[str, Any]] = []
        self.status: LBFGSStatus | OnlineStatus | None = None
        self.message = ""
        self._total = total
        self._progress = None
        self._tick = time.perf_counter()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_progress"] = None  # a display belongs to the fit that made it
        return state

    def copy(self) -> TrainingLog:
        """A copy to continue: new entries go to it only (the entries are shared)."""
        log = copy.copy(self)
        log.iterations = list(self.iterations)
        log._progress = None
        return log

    def record_iteration(
        self,
        info: IterationInfo,
        holdout: Callable[[np.ndarray], Mapping[str, Any]] | None = None,
    ) -> None:
        """Record an optimizer iteration (an ``IterationInfo``).

        ``time`` is the time since the previous record, not counting the
        evaluation of ``holdout(weights)``, a callable returning the held-out
        entries (:func:`holdout_scores`), when given.
        """
        self.record_epoch(self.iteration_entry(info), info.x, holdout)

    def iteration_entry(self, info: IterationInfo) -> dict[str, Any]:
        """The log entry of an L-BFGS iteration (an ``IterationInfo``)."""
        return {
            "num": info.k,
            "scores": {},
            "loss": float(info.fun),
            "feature_norm": float(info.xnorm),
            "error_norm": float(info.gnorm),
            "active_features": int(info.n_nonzero),
            "linesearch_trials": int(info.n_evals_linesearch),
            "linesearch_step": float(info.step),
            "time": time.perf_counter() - self._tick,
        }

    def record_epoch(
        self,
        entry: Mapping[str, Any],
        weights: np.ndarray,
        holdout: Callable[[np.ndarray], Mapping[str, Any]] | None = None,
    ) -> None:
        """Record a trainer's own entry; held-out entries added when given."""
        record: dict[str, Any] = {"scores": {}, **entry}
        if holdout is not None:
            record.update(holdout(weights))
        self.record(record)
        self._tick = time.perf_counter()

    def record(self, entry: dict[str, Any]) -> None:
        """Append one iteration's dict (and print it when verbose)."""
        self.iterations.append(entry)
        if self.verbose == 1:
            if self._progress is None:
                self._progress = ProgressDisplay(self._total)
            self._progress.update(entry)
        elif self.verbose:
            fields = "  ".join(
                f"{key}={value:.6g}" if isinstance(value, float) else f"{key}={value}"
                for key, value in entry.items()
                if key != "scores" and not isinstance(value, Fraction)
            )
            print(f"[skcrf] iteration {fields}", file=sys.stderr)

    def finish(self, status: LBFGSStatus | OnlineStatus, message: str) -> None:
        """Set how the optimizer stopped, and close the progress display."""
        self.status = status
        self.message = message
        if self._progress is not None:
            self._progress.close(f"stopped: {status.name}: {message}")
            self._progress = None
        elif self.verbose:
            print(f"[skcrf] stopped: {status.name}: {message}", file=sys.stderr)

    @property
    def last_iteration(self) -> dict[str, Any]:
        """The last iteration's dict (``{}`` before the first)."""
        return self.iterations[-1] if self.iterations else {}

    @property
    def converged(self) -> bool:
        """Whether the optimizer stopped on a convergence test (False before the end)."""
        return self.status is not None and self.status.converged

    def __len__(self) -> int:
        return len(self.iterations)

    def __repr__(self) -> str:
        status = self.status.name if self.status is not None else None
        return f"TrainingLog(n_iterations={len(self)}, status={status})"
