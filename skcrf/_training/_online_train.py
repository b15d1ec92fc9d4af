"""Online trainers: CRFsuite's l2sgd, ap, pa and arow; skcrf's averaged SGD (asgd).

:func:`train_online` runs the epochs of one algorithm with CRFsuite's
parameters, defaults, losses and stopping rules; each epoch is one call into
the compiled :mod:`skcrf._training._online`. The state it returns lets training go on
later from exactly where it stopped (``partial_fit``).

Conventions
-----------
- The features and the flat weight vector ``w = [state weights, transition
  weights]`` are those of :mod:`skcrf._model` (from
  :func:`skcrf._training._objective.select_features`); training starts from ``w = 0``.
- Sequences of length 0 are left out; ``N`` is the number of the others.
  Every epoch first shuffles the order of the sequences in place with the
  given ``numpy.random.RandomState`` (CRFsuite shuffles its permutation in
  place before every epoch, and once more before l2sgd's calibration). The
  order is part of the state, so two one-epoch calls give the same result as
  one two-epoch call with the same random stream.
- Losses are CRFsuite's, per epoch: l2sgd (and asgd) ``sum_i -log p(y_i |
  x_i) + (lambda / 2) * N * |w|^2`` with ``lambda = 2 * c2 / N`` (each ``-log
  p`` taken just before that sequence's update, at the SGD iterate ``w``); ap
  the sum of the fractions of wrong labels;
  pa the sum of the costs ``score(viterbi) - score(y) + sqrt(d)`` (``+ 1``
  without ``error_sensitive``); arow the sum of ``score(viterbi) - score(y) +
  d``; ``d`` the number of wrong labels.
- Stopping (with ``n_epochs=None``): at most ``max_iterations`` epochs; ap and
  pa stop when ``loss / N < epsilon`` and arow when ``loss / N <= epsilon``
  (CRFsuite's comparisons, so with ``epsilon=0`` only arow stops early);
  l2sgd, from epoch ``period + 1`` on (never with ``period=0``), when ``(loss[epoch - period] -
  loss[epoch]) / loss[epoch] < delta``, and returns the weights of its epoch
  of least loss; asgd the same test (its defaults ``period=2``,
  ``delta=1e-2``, ``max_iterations=50``), returning the last average.
- Output weights: ap the average ``w - ws / c`` (``ws`` sums ``c * update``,
  ``c`` counts the sequences seen, from 1); pa the same average when
  ``averaging``, else ``w``; arow the mean; l2sgd ``w`` (the best epoch's in a
  full run); asgd the average of the iterates since the end of its first
  epoch (the iterate itself during the first epoch).

asgd (skcrf's, not CRFsuite's) minimizes l2sgd's objective, CRFsuite's
L-BFGS objective with ``c1 = 0``, by SGD with the learning rate ``eta0 * (1 +
lambda * eta0 * t) ** -0.75`` (``eta0`` from l2sgd's calibration) and
Polyak-Ruppert averaging (Xu, 2011, "Towards optimal one pass large scale
learning with averaged stochastic gradient descent"; Bottou's crfasgd): the
slower decay keeps the steps long, the average removes their noise.
"""

import enum
import time
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np

from .._utils._threads import single_blas_thread
from ._online import OnlineProblem

ALGORITHMS = ("l2sgd", "asgd", "ap", "pa", "arow")

#: asgd's learning rate decays as ``t ** -ASGD_POWER`` (Xu, 2011).
ASGD_POWER = 0.75

_CALIBRATION_DEFAULTS = {
    "calibration_eta": 0.1,
    "calibration_rate": 2.0,
    "calibration_samples": 1000,
    "calibration_candidates": 10,
    "calibration_max_trials": 20,
}

#: CRFsuite's defaults of every online algorithm's parameters.
DEFAULTS = {
    "l2sgd": {
        "c2": 1.0,
        "max_iterations": 1000,
        "period": 10,
        "delta": 1e-6,
        **_CALIBRATION_DEFAULTS,
    },
    "asgd": {
        "c2": 1.0,
        "max_iterations": 50,
        "period": 2,
        "delta": 1e-2,
        # averaging is robust to the learning rate: fewer trials than l2sgd
        **_CALIBRATION_DEFAULTS,
        "calibration_candidates": 3,
    },
    "ap": {"max_iterations": 100, "epsilon": 0.0},
    "pa": {
        "pa_type": 1,
        "c": 1.0,
        "error_sensitive": True,
        "averaging": True,
        "max_iterations": 100,
        "epsilon": 0.0,
    },
    "arow": {"variance": 1.0, "gamma": 1.0, "max_iterations": 100, "epsilon": 0.0},
}


class OnlineStatus(enum.Enum):
    """How an online trainer stopped.

    ``CRFTagger.status_`` with ``algorithm`` 'l2sgd', 'ap', 'pa' or 'arow'.
    """

    MAX_ITERATIONS = "max_iterations"
    """``max_iterations`` epochs ran without meeting the stopping rule."""

    SMALL_LOSS = "small_loss"
    """ap, pa, arow: the mean loss of an epoch fell to ``epsilon``."""

    SMALL_IMPROVEMENT = "small_improvement"
    """l2sgd, asgd: the loss improved by less than ``delta`` (relative) over ``period`` epochs."""

    EPOCHS_DONE = "epochs_done"
    """The ``n_epochs`` requested ran (no stopping rule is tested; partial_fit)."""

    OVERFLOW = "overflow"
    """l2sgd, asgd: the loss became infinite or NaN; the weights are those before that epoch."""

    CALLBACK_STOP = "callback_stop"
    """The callback asked to stop (a normal stop, but not converged)."""

    EARLY_STOPPING = "early_stopping"
    """The estimator's early stopping ended training: the validation score did not
    improve for ``n_iter_no_change`` epochs (the best epoch's weights are kept)."""

    @property
    def converged(self) -> bool:
        """Whether a stopping rule was met (not merely an epoch budget spent)."""
        return self in (
            OnlineStatus.SMALL_LOSS,
            OnlineStatus.SMALL_IMPROVEMENT,
            OnlineStatus.EARLY_STOPPING,
        )

    @property
    def description(self) -> str:
        """A one-sentence explanation."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    OnlineStatus.MAX_ITERATIONS: "Reached max_iterations epochs.",
    OnlineStatus.SMALL_LOSS: "The mean loss of an epoch fell to epsilon.",
    OnlineStatus.SMALL_IMPROVEMENT: (
        "The loss improved by less than delta over the last period epochs."
    ),
    OnlineStatus.EPOCHS_DONE: "Ran the epochs requested.",
    OnlineStatus.OVERFLOW: "The loss overflowed; the weights are those before that epoch.",
    OnlineStatus.CALLBACK_STOP: "The callback asked to stop.",
    OnlineStatus.EARLY_STOPPING: (
        "Early stopping: the validation score did not improve for n_iter_no_change "
        "epochs; the weights of the best epoch are kept."
    ),
}


@dataclass
class OnlineState:
    """What continuing the training needs: raw weights, accumulators, counters.

    Attributes
    ----------
    algorithm : str
    weights : ndarray of float64, shape (n_features,)
        The raw weights (not averaged; arow's mean).
    weight_sums : ndarray or None
        ap, pa: the sum of ``counter * update`` (for the average).
    counter : float
        ap, pa: one more than the sequences seen so far.
    variances : ndarray or None
        arow: the diagonal covariance.
    initial_variance : float or None
        arow: the variance of a new feature.
    eta : float or None
        l2sgd, asgd: the calibrated learning rate (``t0 = 1 / (lambda * eta)``).
    n_updates : float
        l2sgd, asgd: steps taken so far (``t``).
    average : ndarray or None
        asgd: the average of the iterates (None before averaging starts).
    n_averaged : float
        asgd: the iterates in ``average``.
    order : ndarray of intp
        The current order of the sequences (shuffled in place every epoch).
    n_epochs : int
        Epochs run so far, over all calls.
    """

    algorithm: str
    weights: np.ndarray
    weight_sums: Any = None
    counter: float = 1.0
    variances: Any = None
    initial_variance: Any = None
    eta: Any = None
    n_updates: float = 0.0
    order: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    n_epochs: int = 0
    average: Any = None
    n_averaged: float = 0.0

    @property
    def n_features(self):
        return len(self.weights)

    def copy(self):
        """A deep copy (the arrays are copied)."""

        def dup(a):
            return None if a is None else np.array(a, copy=True)

        return replace(
            self,
            weights=dup(self.weights),
            weight_sums=dup(self.weight_sums),
            variances=dup(self.variances),
            order=dup(self.order),
            average=dup(self.average),
        )

    def expanded(self, index, n_features):
        """The same state for a model of ``n_features`` features.

        Old feature ``k`` becomes feature ``index[k]``; the new ones start as
        in a fresh fit (weight 0, no sum, arow's initial variance).

        Parameters
        ----------
        index : array of int, shape (self.n_features,)
        n_features : int

        Returns
        -------
        OnlineState
        """
        index = np.asarray(index, dtype=np.intp)
        if index.shape != (self.n_features,):
            raise ValueError(f"index must have {self.n_features} entries, got {index.shape}")

        def moved(a, fill):
            if a is None:
                return None
            out = np.full(n_features, fill, dtype=np.float64)
            out[index] = a
            return out

        return replace(
            self,
            weights=moved(self.weights, 0.0),
            weight_sums=moved(self.weight_sums, 0.0),
            variances=moved(self.variances, self.initial_variance),
            order=self.order.copy(),
            average=moved(self.average, 0.0),
        )


class OnlineResult(NamedTuple):
    """Outcome of :func:`train_online`.

    Attributes
    ----------
    x : ndarray of float64, shape (n_features,)
        The weights to output (averaged where the algorithm averages).
    n_iter : int
        Epochs run by this call.
    status : OnlineStatus
    message : str
    state : OnlineState
        To continue training (``resume=``).
    calibration : dict or None
        l2sgd when it calibrated: ``eta``, ``t0``, ``initial_loss`` and
        ``trials`` (a list of ``(eta, loss, accepted)``).
    """

    x: np.ndarray
    n_iter: int
    status: OnlineStatus
    message: str
    state: OnlineState
    calibration: Any = None


def _settings(algorithm, settings):
    """The algorithm's parameters: CRFsuite's defaults where None or missing."""
    out = dict(DEFAULTS[algorithm])
    for key in out:
        if settings.get(key) is not None:
            out[key] = settings[key]
    return out


def _check_constant_over_sequences(algorithm, token_weights, lengths):
    """l2sgd, asgd: a step follows the gradient of ``s * (-log p(y | x))``: one s per sequence."""
    lengths = np.asarray(lengths, dtype=np.intp)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    if not np.array_equal(token_weights, np.asarray(token_weights)[starts]):
        raise ValueError(
            f"algorithm={algorithm!r} does not support class_weight: its step follows the "
            "gradient of one sequence's log-likelihood, which a per-token weight does "
            "not scale. Use algorithm='lbfgs' (the weighted objective of the user "
            "guide), or 'ap', 'pa' or 'arow' (which weigh each token's update)."
        )


def _problem(encoded, labels, model, token_weights=None):
    """The compiled problem over the non-empty sequences."""
    lengths = np.asarray(encoded.lengths, dtype=np.intp)
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    keep = lengths > 0
    n_attributes = len(model.state_ptr) - 1
    ids = np.asarray(encoded.ids)
    if len(ids) and (ids.min() < 0 or ids.max() >= n_attributes):
        raise ValueError("encoded holds attribute ids outside the model's attributes")
    return OnlineProblem(
        encoded.indptr,
        encoded.ids,
        encoded.values,
        starts[keep],
        lengths[keep],
        np.asarray(labels, dtype=np.intp),
        model.state_ptr,
        model.state_labels,
        model.transition_index,
        model.n_labels,
        token_weights,
    )


def _new_state(algorithm, n_features, n_sequences, params):
    state = OnlineState(
        algorithm=algorithm,
        weights=np.zeros(n_features),
        order=np.arange(n_sequences, dtype=np.intp),
    )
    if algorithm in ("ap", "pa"):
        state.weight_sums = np.zeros(n_features)
    if algorithm == "arow":
        state.initial_variance = float(params["variance"])
        state.variances = np.full(n_features, state.initial_variance)
    return state


def _output(state, params):
    """The weights CRFsuite would write now."""
    if state.algorithm == "ap" or (state.algorithm == "pa" and params["averaging"]):
        return state.weights - state.weight_sums / state.counter
    return state.weights.copy()


def _entry(num, loss, weights, seconds, **extra):
    return dict(
        num=num,
        loss=float(loss),
        feature_norm=float(np.sqrt(weights @ weights)),
        active_features=int(np.count_nonzero(weights)),
        time=seconds,
        **extra,
    )


def train_online(
    algorithm,
    encoded,
    labels,
    model,
    settings,
    *,
    random_state,
    callback=None,
    resume=None,
    n_epochs=None,
    token_weights=None,
):
    """Train a linear-chain CRF with one of CRFsuite's online algorithms.

    Parameters
    ----------
    algorithm : {'l2sgd', 'asgd', 'ap', 'pa', 'arow'}
    encoded : Encoded
        Token features of the training data (CSR rows, flat order).
    labels : array of int, shape (n_tokens,)
        Label index of each token.
    model : CRFModel
        The features (their weights are ignored).
    settings : dict
        The algorithm's parameters (see :data:`DEFAULTS`); missing or None
        ones take CRFsuite's defaults.
    random_state : numpy.random.RandomState
        Shuffles the sequences (before every epoch, and for calibration).
    callback : callable, optional
        ``callback(entry, weights)`` after every epoch: ``entry`` a dict with
        ``num`` (epoch, from 1 over all calls), ``loss``, ``feature_norm`` and
        ``active_features`` (of ``weights``), ``time`` (seconds), plus for
        l2sgd and asgd ``learning_rate``, ``total_updates`` and, once ``period``
        epochs ran, ``improvement``; ``weights`` the weights that would be
        output if training stopped now. Returning True stops training
        (status ``CALLBACK_STOP``).
    resume : OnlineState, optional
        Continue from this state (its features must be the model's: see
        :meth:`OnlineState.expanded`). l2sgd and asgd then keep their
        learning rate (asgd its average too).
    n_epochs : int, optional
        Run exactly this many epochs, without stopping rule (and, for
        l2sgd, output the last weights rather than the best epoch's).
    token_weights : ndarray of shape (n_tokens,), optional
        Each token's weight: the updates are scaled (see the epochs of
        :class:`~skcrf._training._online.OnlineProblem`); l2sgd and asgd
        need one weight per sequence (``sample_weight`` only).

    Returns
    -------
    OnlineResult
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown online algorithm {algorithm!r}")
    if token_weights is not None and algorithm in ("l2sgd", "asgd"):
        _check_constant_over_sequences(algorithm, token_weights, encoded.lengths)
    params = _settings(algorithm, settings)
    problem = _problem(encoded, labels, model, token_weights)
    n = problem.n_sequences
    n_features = model.n_features
    if resume is None:
        state = _new_state(algorithm, n_features, n, params)
    else:
        if resume.algorithm != algorithm:
            raise ValueError(f"cannot resume {resume.algorithm!r} training with {algorithm!r}")
        if resume.n_features != n_features:
            raise ValueError(
                f"the state has {resume.n_features} features, the model "
                f"{n_features}: expand it first"
            )
        state = resume.copy()
        if len(state.order) != n:
            # another batch: any permutation of its sequences will do
            state.order = np.arange(n, dtype=np.intp)
    if n_epochs is None:
        budget = int(params["max_iterations"])
    else:
        budget = int(n_epochs)
    trainer = {"l2sgd": _l2sgd, "asgd": _asgd}.get(algorithm, _margin)
    # The loops use no BLAS; idle OpenBLAS threads spinning after a large
    # vector product would take a core from them.
    with single_blas_thread():
        return trainer(
            algorithm, problem, state, params, random_state, callback, budget, n_epochs is not None
        )


def _margin(algorithm, problem, state, params, rs, callback, budget, fixed):
    """ap, pa and arow: one compiled epoch per iteration, the epsilon test."""
    n = problem.n_sequences
    status, n_iter = (OnlineStatus.EPOCHS_DONE if fixed else OnlineStatus.MAX_ITERATIONS), 0
    for _ in range(budget):
        start = time.perf_counter()
        rs.shuffle(state.order)
        if n == 0 or problem.n_features == 0:
            loss = 0.0  # nothing to learn from (or nothing to learn)
        elif algorithm == "ap":
            loss, state.counter = problem.perceptron_epoch(
                state.order, state.weights, state.weight_sums, state.counter
            )
        elif algorithm == "pa":
            loss, state.counter = problem.passive_aggressive_epoch(
                state.order,
                state.weights,
                state.weight_sums,
                state.counter,
                int(params["pa_type"]),
                float(params["c"]),
                bool(params["error_sensitive"]),
            )
        else:
            loss = problem.arow_epoch(
                state.order, state.weights, state.variances, float(params["gamma"])
            )
        weights = _output(state, params)
        state.n_epochs += 1
        n_iter += 1
        if callback is not None and callback(
            _entry(state.n_epochs, loss, weights, time.perf_counter() - start), weights
        ):
            status = OnlineStatus.CALLBACK_STOP
            break
        if not fixed:
            mean = loss / n if n else 0.0
            # CRFsuite: strict for ap and pa, not for arow
            if mean <= params["epsilon"] if algorithm == "arow" else mean < params["epsilon"]:
                status = OnlineStatus.SMALL_LOSS
                break
    x = _output(state, params)
    messages = {
        OnlineStatus.SMALL_LOSS: f"The mean loss of epoch {state.n_epochs} is at most "
        f"epsilon ({params['epsilon']:g}).",
        OnlineStatus.MAX_ITERATIONS: f"Reached max_iterations ({budget}) epochs.",
        OnlineStatus.EPOCHS_DONE: f"Ran the {budget} epoch(s) requested.",
    }
    return OnlineResult(x, n_iter, status, messages.get(status, status.description), state)


def _l2sgd_run(problem, order, w, t0, lam, t, loss_limit=np.inf):
    """One SGD epoch over ``order``: (loss with the L2 term, t, eta); ``w`` in place."""
    loss, t, eta = problem.l2sgd_epoch(order, w, t0, lam, t, loss_limit)
    loss += 0.5 * lam * float(w @ w) * len(order)
    return loss, t, eta


def _calibrate(problem, state, params, lam, rs):
    """CRFsuite's learning-rate calibration: the eta of least loss on a sample.

    The sequences are shuffled once; the first ``calibration_samples`` of
    them get one epoch from ``w = 0`` per trial ``eta``: ``eta`` grows by
    ``calibration_rate`` while the loss stays below the initial loss and
    fewer than ``calibration_candidates`` were accepted, then shrinks from
    ``calibration_eta / calibration_rate`` until that many more were
    accepted; at most ``calibration_max_trials - 1`` trials (CRFsuite's
    count). The best eta is the one of least finite loss.

    Once a trial was accepted, a trial whose running loss passes the initial
    loss is cut short (its loss is recorded as inf): it can be neither
    accepted nor best, and a diverging eta is the slowest to evaluate.
    """
    rs.shuffle(state.order)
    n_samples = min(len(state.order), int(params["calibration_samples"]))
    sample = state.order[:n_samples].copy()
    # at w = 0 every labelling has score 0: -log p = length * log(L)
    initial_loss = float(problem.sequence_lengths()[sample].sum()) * np.log(problem.n_labels)
    init_eta = eta = float(params["calibration_eta"])
    rate = float(params["calibration_rate"])
    candidates = num = int(params["calibration_candidates"])
    best_loss, best_eta = np.inf, init_eta
    decreasing = False
    trials = []
    w = np.zeros(problem.n_features)
    trial = 1
    while num > 0 or not decreasing:
        w[:] = 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            limit = initial_loss if best_loss < initial_loss else np.inf
            loss, _, _ = _l2sgd_run(problem, sample, w, 1.0 / (lam * eta), lam, 0.0, limit)
        accepted = bool(np.isfinite(loss) and loss < initial_loss)
        trials.append((eta, float(loss), accepted))
        if accepted:
            num -= 1
        if np.isfinite(loss) and loss < best_loss:
            best_loss, best_eta = loss, eta
        if not decreasing:
            if accepted and num > 0:
                eta *= rate
            else:
                decreasing = True
                num = candidates
                eta = init_eta / rate
        else:
            eta /= rate
        trial += 1
        if trial >= int(params["calibration_max_trials"]):
            break
    return best_eta, dict(
        eta=best_eta, t0=1.0 / (lam * best_eta), initial_loss=initial_loss, trials=trials
    )


def _no_sequence(state):
    """The result of an SGD fit without a non-empty sequence (the weights unchanged)."""
    return OnlineResult(
        state.weights.copy(),
        0,
        OnlineStatus.MAX_ITERATIONS,
        "No non-empty sequence to train on.",
        state,
    )


def _rate(problem, state, params, rs):
    """``(lam, calibration)``: the L2 rate per sequence and the calibration.

    The learning rate is calibrated into ``state.eta`` on the first fit
    (``calibration`` is None after it).
    """
    lam = 2.0 * float(params["c2"]) / problem.n_sequences
    calibration = None
    if state.eta is None:
        state.eta, calibration = _calibrate(problem, state, params, lam, rs)
    return lam, calibration


def _l2sgd(algorithm, problem, state, params, rs, callback, budget, fixed):
    """SGD with L2 regularization: calibration, epochs, the period/delta test."""
    if problem.n_sequences == 0:
        return _no_sequence(state)
    lam, calibration = _rate(problem, state, params, rs)
    t0 = 1.0 / (lam * state.eta)
    period, delta = int(params["period"]), float(params["delta"])
    history = np.zeros(max(period, 1))
    best_loss, best_w = np.inf, state.weights.copy()
    status, n_iter = (OnlineStatus.EPOCHS_DONE if fixed else OnlineStatus.MAX_ITERATIONS), 0
    for epoch in range(1, budget + 1):
        start = time.perf_counter()
        rs.shuffle(state.order)
        before = (state.weights.copy(), state.n_updates)
        with np.errstate(over="ignore", invalid="ignore"):
            loss, state.n_updates, eta = _l2sgd_run(
                problem, state.order, state.weights, t0, lam, state.n_updates
            )
        if not (np.isfinite(loss) and np.isfinite(state.weights).all()):
            state.weights, state.n_updates = before
            status = OnlineStatus.OVERFLOW
            break
        state.n_epochs += 1
        n_iter += 1
        extra = dict(learning_rate=float(eta), total_updates=float(state.n_updates))
        improvement = None
        if not fixed:
            if loss < best_loss:
                best_loss, best_w = loss, state.weights.copy()
            if period > 0:  # 0 disables the delta test
                if period < epoch:
                    improvement = (history[(epoch - 1) % period] - loss) / loss
                    extra["improvement"] = float(improvement)
                history[(epoch - 1) % period] = loss
        weights = state.weights.copy() if fixed else best_w.copy()
        if callback is not None and callback(
            _entry(state.n_epochs, loss, weights, time.perf_counter() - start, **extra), weights
        ):
            status = OnlineStatus.CALLBACK_STOP
            break
        if improvement is not None and improvement < delta:
            status = OnlineStatus.SMALL_IMPROVEMENT
            break
    if fixed:
        x = state.weights.copy()
    else:
        x = best_w.copy() if np.isfinite(best_loss) else state.weights.copy()
    messages = {
        OnlineStatus.SMALL_IMPROVEMENT: f"The loss improved by less than delta ({delta:g}) "
        f"over the last {period} epochs.",
        OnlineStatus.MAX_ITERATIONS: f"Reached max_iterations ({budget}) epochs.",
        OnlineStatus.EPOCHS_DONE: f"Ran the {budget} epoch(s) requested.",
        OnlineStatus.OVERFLOW: f"The loss overflowed in epoch {state.n_epochs + 1}; "
        "the weights are those before it (try a smaller "
        "calibration_eta or a larger c2).",
    }
    return OnlineResult(
        x, n_iter, status, messages.get(status, status.description), state, calibration
    )


def _asgd(algorithm, problem, state, params, rs, callback, budget, fixed):
    """Averaged SGD: l2sgd's calibration, averaged epochs from the second on, the delta test."""
    if problem.n_sequences == 0:
        return _no_sequence(state)
    lam, calibration = _rate(problem, state, params, rs)
    period, delta = int(params["period"]), float(params["delta"])
    history = np.zeros(max(period, 1))
    status, n_iter = (OnlineStatus.EPOCHS_DONE if fixed else OnlineStatus.MAX_ITERATIONS), 0
    for epoch in range(1, budget + 1):
        start = time.perf_counter()
        rs.shuffle(state.order)
        # the first epoch's iterates are far from the optimum: average from the second on
        average = state.n_epochs >= 1
        saved = None if state.average is None else state.average.copy()
        before = (state.weights.copy(), saved, state.n_updates, state.n_averaged)
        if average and state.average is None:
            state.average = np.zeros(problem.n_features)
        with np.errstate(over="ignore", invalid="ignore"):
            loss, state.n_updates, state.n_averaged, eta = problem.asgd_epoch(
                state.order,
                state.weights,
                state.average if average else state.weights,  # not read when not averaging
                state.eta,
                lam,
                ASGD_POWER,
                state.n_updates,
                state.n_averaged,
                average,
            )
            loss += 0.5 * lam * float(state.weights @ state.weights) * problem.n_sequences
        output = state.average if average else state.weights
        if not (np.isfinite(loss) and np.isfinite(output).all()):
            state.weights, state.average, state.n_updates, state.n_averaged = before
            status = OnlineStatus.OVERFLOW
            break
        state.n_epochs += 1
        n_iter += 1
        extra = dict(learning_rate=float(eta), total_updates=float(state.n_updates))
        improvement = None
        if not fixed and period > 0:
            if period < epoch:
                improvement = (history[(epoch - 1) % period] - loss) / loss
                extra["improvement"] = float(improvement)
            history[(epoch - 1) % period] = loss
        weights = output.copy()
        if callback is not None and callback(
            _entry(state.n_epochs, loss, weights, time.perf_counter() - start, **extra), weights
        ):
            status = OnlineStatus.CALLBACK_STOP
            break
        if improvement is not None and improvement < delta:
            status = OnlineStatus.SMALL_IMPROVEMENT
            break
    x = (state.weights if state.average is None else state.average).copy()
    messages = {
        OnlineStatus.SMALL_IMPROVEMENT: f"The loss improved by less than delta ({delta:g}) "
        f"over the last {period} epochs.",
        OnlineStatus.MAX_ITERATIONS: f"Reached max_iterations ({budget}) epochs.",
        OnlineStatus.EPOCHS_DONE: f"Ran the {budget} epoch(s) requested.",
        OnlineStatus.OVERFLOW: f"The loss overflowed in epoch {state.n_epochs + 1}; "
        "the weights are those before it (try a smaller "
        "calibration_eta or a larger c2).",
    }
    return OnlineResult(
        x, n_iter, status, messages.get(status, status.description), state, calibration
    )
