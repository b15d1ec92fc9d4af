"""What happens after every training iteration: the log, early stopping, callbacks.

One :class:`TrainingMonitor` serves every trainer: L-BFGS calls
:meth:`~TrainingMonitor.lbfgs_iteration` with its ``IterationInfo``, the
online trainers call :meth:`~TrainingMonitor.online_epoch` with their epoch
entry. Both return True to ask the trainer to stop (its ``CALLBACK_STOP``).
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from ._lbfgs import IterationInfo
    from ._training_log import TrainingLog


class CallbackInfo(NamedTuple):
    """What ``fit(..., callback=f)`` passes to ``f`` after every iteration.

    Attributes
    ----------
    iteration : int
        Iteration (L-BFGS) or epoch (online trainers) number, from 1.
    loss : float
        The objective (L-BFGS, with the c1 and c2 terms) or the epoch loss
        of an online trainer.
    gradient_norm : float or None
        Norm of the (pseudo-)gradient; None for the online trainers, which
        have none.
    weights : ndarray
        A read-only view of the flat weight vector (state weights, then
        transition weights, in the model's feature order). Copy it to keep it.
    elapsed : float
        Seconds since training started.
    """

    iteration: int
    loss: float
    gradient_norm: float | None
    weights: np.ndarray
    elapsed: float


class TrainingMonitor:
    """Log every iteration, apply early stopping, call the user's callback.

    Parameters
    ----------
    log : TrainingLog
    holdout : callable or None
        ``holdout(w)``: the held-out log entries (``X_dev``), or None.
    validation : callable or None
        ``validation(w)``: the early-stopping score (higher is better), or
        None when early stopping is off.
    n_iter_no_change : int
        Stop when the validation score has not improved by more than
        ``tol`` on its best for this many iterations.
    tol : float
    callback : callable or None
        ``callback(CallbackInfo)``; returning True stops training.
    validation_name : str
        What ``validation`` is, for its errors (``"scoring='f1'"``).
    """

    def __init__(
        self,
        log: TrainingLog,
        *,
        holdout: Callable[[np.ndarray], Mapping[str, Any]] | None = None,
        validation: Callable[[np.ndarray], float] | None = None,
        n_iter_no_change: int = 10,
        tol: float = 1e-7,
        callback: Callable[[CallbackInfo], Any] | None = None,
        validation_name: str = "the early-stopping score",
    ) -> None:
        self.log = log
        self.validation_name = validation_name
        self.holdout = holdout
        self.validation = validation
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.callback = callback
        self.best_score = -np.inf
        self.best_iteration: int | None = None
        self.best_weights: np.ndarray | None = None
        self.early_stopped = False
        self.user_stopped = False
        self._since_best = 0
        self._start = time.perf_counter()

    def lbfgs_iteration(self, info: IterationInfo) -> bool:
        """After an L-BFGS iteration (an ``IterationInfo``); True stops."""
        return self._after(self.log.iteration_entry(info), info.x, info.k, info.fun, info.gnorm)

    def online_epoch(self, entry: Mapping[str, Any], weights: np.ndarray) -> bool:
        """After an epoch of an online trainer; True stops."""
        # numbered within this fit (a resumed trainer counts its epochs on)
        entry = {**entry, "num": len(self.log.iterations) + 1}
        return self._after(entry, weights, entry["num"], entry["loss"], None)

    def _after(self, entry, weights, iteration, loss, gradient_norm):
        stop = False
        if self.validation is not None:
            score = self._validation_score(weights, iteration)
            entry["validation_score"] = score
            # improving by more than tol resets the patience; the best
            # weights are those of the highest score all the same
            if score > self.best_score + self.tol:
                self._since_best = 0
            else:
                self._since_best += 1
            if score > self.best_score or self.best_weights is None:
                self.best_score = score
                self.best_iteration = iteration
                self.best_weights = np.array(weights, dtype=np.float64, copy=True)
            if self._since_best >= self.n_iter_no_change:
                self.early_stopped = stop = True
        self.log.record_epoch(entry, weights, self.holdout)
        if self.callback is not None:
            view = np.asarray(weights).view()
            view.flags.writeable = False
            info = CallbackInfo(
                iteration, float(loss), gradient_norm, view, time.perf_counter() - self._start
            )
            if self.callback(info):
                self.user_stopped = stop = True
        return stop

    def _validation_score(self, weights, iteration):
        """The early-stopping score of ``weights``: a finite real number, or an error."""
        score = self.validation(weights)
        if isinstance(score, np.ndarray) and score.ndim == 0:
            score = score[()]
        if isinstance(score, (bool, np.bool_)) or not isinstance(score, numbers.Real):
            raise TypeError(
                f"early stopping: {self.validation_name} returned "
                f"{score!r:.100} ({type(score).__name__}) at iteration {iteration}; "
                "a scorer must return a real number (higher is better)."
            )
        score = float(score)
        if not math.isfinite(score):
            raise ValueError(
                f"early stopping: {self.validation_name} returned {score} at iteration "
                f"{iteration}; a scorer must return a finite number (higher is "
                "better), or early stopping cannot compare iterations. Check the "
                "scorer, or that the validation data gives it something to score."
            )
        return score
