"""The training trace of a CRF fit."""

import sys
import time

import numpy as np


class TrainingLog:
    """Per-iteration record of a fit, and how the optimizer stopped.

    Like sklearn-crfsuite's ``training_log_``: ``iterations`` is a list of
    dicts, one per L-BFGS iteration, with the keys

    - ``num``: iteration number, from 1;
    - ``loss``: the full objective (including the c1 and c2 terms);
    - ``feature_norm``: the L2 norm of the weights;
    - ``error_norm``: the norm of the gradient (of the pseudo-gradient when
      c1 > 0);
    - ``active_features``: the number of nonzero weights;
    - ``linesearch_trials``: objective evaluations in this iteration's line
      search;
    - ``linesearch_step``: the accepted step length;
    - ``time``: seconds this iteration took;
    - ``dev_accuracy``: token accuracy on ``X_dev``/``y_dev`` when given.

    Parameters
    ----------
    verbose : bool or int, default=False
        Print each iteration to stderr as it is recorded.

    Attributes
    ----------
    iterations : list of dict
    status : LBFGSStatus or None
        How the optimizer stopped (set at the end of the fit).
    message : str
    """

    def __init__(self, verbose=False):
        self.verbose = verbose
        self.iterations = []
        self.status = None
        self.message = ""
        self._tick = time.perf_counter()

    def record_iteration(self, info, dev_accuracy=None):
        """Record an optimizer iteration (an ``IterationInfo``).

        ``time`` is the time since the previous record, not counting the
        evaluation of ``dev_accuracy(weights)``, a callable, when given.
        """
        entry = {
            "num": info.k,
            "loss": float(info.fun),
            "feature_norm": float(info.xnorm),
            "error_norm": float(info.gnorm),
            "active_features": int(np.count_nonzero(info.x)),
            "linesearch_trials": int(info.n_evals_linesearch),
            "linesearch_step": float(info.step),
            "time": time.perf_counter() - self._tick,
        }
        if dev_accuracy is not None:
            entry["dev_accuracy"] = dev_accuracy(info.x)
        self.record(entry)
        self._tick = time.perf_counter()

    def record(self, entry):
        """Append one iteration's dict (and print it when verbose)."""
        self.iterations.append(entry)
        if self.verbose:
            fields = "  ".join(
                f"{key}={value:.6g}" if isinstance(value, float) else f"{key}={value}"
                for key, value in entry.items()
            )
            print(f"[skcrf] iteration {fields}", file=sys.stderr)

    def finish(self, status, message):
        self.status = status
        self.message = message
        if self.verbose:
            print(f"[skcrf] stopped: {status.name}: {message}", file=sys.stderr)

    @property
    def last_iteration(self):
        """The last iteration's dict (``{}`` before the first)."""
        return self.iterations[-1] if self.iterations else {}

    @property
    def converged(self):
        return self.status is not None and self.status.converged

    def __len__(self):
        return len(self.iterations)

    def __repr__(self):
        status = self.status.name if self.status is not None else None
        return f"TrainingLog(n_iterations={len(self)}, status={status})"
