"""CRFTaggerCV: the L1/L2 coefficients chosen by cross-validation along a warm-started path.

Conventions
-----------
- The grid is ``c1s_ × c2s_``, each in the order the user gave (or
  ascending for a grid given as a number of values). Candidate ``k`` of
  ``cv_results_`` is ``(c1s_[k // n_c2], c2s_[k % n_c2])``: the order of
  ``GridSearchCV(estimator, {'c1': c1s_, 'c2': c2s_})``, so the two
  ``cv_results_`` line up row by row. ``scores_[f, i, j]`` is the score of
  fold ``f`` at ``(c1s_[i], c2s_[j])``.
- The path (per fold) is a comb, walked from strong to weak regularization:
  the *spine* walks c2 from its largest to its smallest value at the largest
  c1, then one *row* per c2 walks c1 from its second largest value down to
  its smallest, starting from that c2's spine solution. Every fit but the
  first of each fold's spine is warm-started from the previous solution of
  its walk (``warm_start=True``). The spines (one task per fold) run first,
  then the rows (one task per fold and c2, the weakest c2 first: they take
  longest), each phase in parallel.
- Ties in the mean score are broken as ``GridSearchCV`` breaks them: the
  first candidate in ``cv_results_`` order.
- ``plateau``: a walk encodes its fold's held-out part once, after its first
  fit (every fit of a walk has the same features), and each warm-started
  fit's ``callback`` scores every iterate on it (:class:`_HeldOutPlateau`).
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import BaseCrossValidator, check_cv
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import check_is_fitted

from ._compat import Interval, _fit_context
from ._tagger import CRFTagger
from ._training._fit import DevEvaluator
from ._training._weights import check_sample_weight
from ._typing import LabelSequencesLike, SequenceLike, SequencesLike
from .metrics import get_scorer

#: Bounds of the log grids made when ``c1`` or ``c2`` is a number of values.
C1_RANGE = (1e-2, 1.0)  # after 0
C2_RANGE = (1e-3, 1.0)

#: The regularization coefficients each training algorithm has.
_ALGORITHM_COEFFICIENTS = {
    "lbfgs": ("c1", "c2"),
    "l2sgd": ("c2",),
    "asgd": ("c2",),
    "ap": (),
    "pa": (),
    "arow": (),
}


def _log_grid(name, n):
    """The default grid of ``n`` values of ``c1`` or ``c2``, ascending."""
    if name == "c1":
        # 0 (no L1, plain L-BFGS) and n - 1 values from 0.01 to 1
        return np.concatenate([[0.0], np.geomspace(*C1_RANGE, n - 1)]) if n > 1 else np.zeros(1)
    return np.geomspace(*C2_RANGE, n) if n > 1 else np.array([C2_RANGE[1]])


def _check_grid(name, value):
    """The grid of ``name`` as a 1-D float array (``value`` is not None)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}={value!r}: give a list of values or a number of values.")
    if isinstance(value, Integral):
        if value < 1:
            raise ValueError(f"{name}={value}: the grid is empty; give at least one value.")
        return _log_grid(name, int(value))
    if isinstance(value, Real):
        raise TypeError(
            f"{name}={value!r}: give a list of values ({name}=[{value!r}]) or an int "
            "number of values on a log grid."
        )
    if isinstance(value, str) or not hasattr(value, "__len__"):
        raise TypeError(f"{name} must be a list of numbers or an int; got {type(value).__name__}.")
    try:
        grid = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a list of numbers; got {value!r:.100}.") from None
    if grid.ndim != 1:
        raise ValueError(f"{name} must be a flat list of numbers; got shape {grid.shape}.")
    if grid.size == 0:
        raise ValueError(f"{name}=[]: the grid is empty; give at least one value.")
    bad = grid[~np.isfinite(grid) | (grid < 0)]
    if bad.size:
        raise ValueError(
            f"{name}: every value must be finite and >= 0; got {bad[0]!r} in {list(grid)!r:.200}."
        )
    if np.unique(grid).size != grid.size:
        raise ValueError(f"{name}: the values must be distinct; got {list(grid)!r:.200}.")
    return grid


def _subset(seq, indices):
    return [seq[i] for i in indices]


class _HeldOutPlateau:
    """Stops a warm-started fit once its held-out token accuracy stops moving.

    Built from a tagger fitted on the fold's training part: the fits of a
    walk train on the same sequences, so they share its feature layout and
    the test part is encoded once. ``callback()`` is a fresh ``fit``
    callback: it stops the fit when the token accuracy (Viterbi paths, under
    the estimator's ``allowed_transitions``) of the last ``patience + 1``
    iterates spans at most ``tol``.
    """

    def __init__(self, tagger, X_test, y_test, w_test, patience, tol):
        predictor = tagger._fitted()
        self.n_features = predictor.model.n_features
        self.evaluator = DevEvaluator(
            X_test,
            y_test,
            predictor.vocabulary,
            predictor.model,
            tagger.n_jobs,
            name="test",
            sample_weight=w_test,
            allowed_transitions=tagger.allowed_transitions,
        )
        self.patience = patience
        self.tol = tol

    def callback(self):
        recent = deque(maxlen=self.patience + 1)

        def stop(info):
            if info.weights.size != self.n_features:  # not this layout: no test
                return False
            recent.append(self.evaluator.accuracy(info.weights))
            return len(recent) > self.patience and max(recent) - min(recent) <= self.tol

        return stop


def _walk(
    tagger,
    X_train,
    y_train,
    X_test,
    y_test,
    points,
    scorer,
    keep,
    verbose,
    fold,
    w_train=None,
    w_test=None,
    plateau=None,
):
    """Fit ``tagger`` (warm_start=True) at every point of ``points`` in turn.

    Parameters
    ----------
    tagger : CRFTagger
        Unfitted (the walk starts cold) or fitted on ``X_train`` (the walk
        starts from its weights). It is changed in place.
    points : list of ((i, j), params)
        Grid indices and the parameters to set, in walk order.
    keep : bool
        Also return a copy of the tagger fitted at each point (to start
        later walks from).
    w_train, w_test : ndarray or None
        The sequences' ``sample_weight`` (fit and score), or None.
    plateau : (int, float) or None
        ``(patience, tol)``: every warm-started fit also stops when its
        held-out token accuracy has stopped moving (:class:`_HeldOutPlateau`).

    Returns
    -------
    records : list of dict
        Per point: ``index``, ``score``, ``fit_time``, ``score_time``,
        ``n_iter``, ``warm`` (whether that fit started from a solution).
    fitted : list of CRFTagger or None
    """
    records, fitted = [], [] if keep else None
    monitor = None
    for index, params in points:
        warm = tagger.__sklearn_is_fitted__()
        if warm and plateau is not None and monitor is None:
            monitor = _HeldOutPlateau(tagger, X_test, y_test, w_test, *plateau)
        tagger.set_params(**params)
        start = time.perf_counter()
        callback = None if monitor is None else monitor.callback()
        tagger.fit(X_train, y_train, sample_weight=w_train, callback=callback)
        fit_time = time.perf_counter() - start
        start = time.perf_counter()
        weights = {} if w_test is None else {"sample_weight": w_test}
        if scorer is None:
            score = tagger.score(X_test, y_test, **weights)
        else:
            score = scorer(tagger, X_test, y_test, **weights)
        score_time = time.perf_counter() - start
        records.append(
            {
                "index": index,
                "score": float(score),
                "fit_time": fit_time,
                "score_time": score_time,
                "n_iter": int(tagger.n_iter_),
                "warm": warm,
            }
        )
        if keep:
            fitted.append(copy.deepcopy(tagger))  # later fits must not change it
        if verbose > 0:
            shown = ", ".join(f"{k}={v:g}" for k, v in params.items())
            print(
                f"[CV fold {fold + 1}; {shown}] score={score:.4f}, {tagger.n_iter_} "
                f"iterations ({'warm' if warm else 'cold'} start), {fit_time:.1f} s",
                flush=True,
            )
    return records, fitted


def _refit_enabled(self):
    if not self.refit:
        raise AttributeError(
            f"This {type(self).__name__} was made with refit=False: the prediction "
            "methods exist only with refit=True (best_estimator_ fitted on all the data)."
        )
    return True


class CRFTaggerCV(BaseEstimator):
    """CRF tagger with its L1/L2 coefficients chosen by cross-validation.

    In the spirit of :class:`~sklearn.linear_model.LogisticRegressionCV`:
    for every fold the grid of ``(c1, c2)`` is walked from strong to weak
    regularization, each fit warm-started from the previous solution
    (``CRFTagger(warm_start=True)``), which takes fewer iterations than
    training every point from zero as :class:`~sklearn.model_selection.GridSearchCV`
    does. The best pair (highest mean score over the folds) is then used to
    train ``best_estimator_`` on all the data, from zero.

    Parameters
    ----------
    estimator : CRFTagger or None, default=None
        The tagger whose other settings (features, stopping rules,
        ``max_iterations``, thread count ``n_jobs``, ...) every fit uses.
        None means ``CRFTagger()``. Its ``model_filename`` is used only by
        the final refit, never by the cross-validation fits.
    c1 : int, list of float or None, default=4
        The L1 coefficients to try (``algorithm='lbfgs'`` only). An int
        ``n`` means 0 and ``n - 1`` values log-spaced from 0.01 to 1 (4
        gives 0, 0.01, 0.1, 1); ``n = 1`` means 0 alone. None searches no c1:
        the estimator's own c1 is used, and ``cv_results_`` has no
        ``param_c1`` (as a GridSearchCV over c2 alone); it must be None for
        ``algorithm='l2sgd'`` and ``'asgd'``, which have no L1 term.
    c2 : int, list of float or None, default=4
        The L2 coefficients to try (``'lbfgs'``, ``'l2sgd'`` and ``'asgd'``). An int
        ``n`` means ``n`` values log-spaced from 0.001 to 1 (4 gives 0.001,
        0.01, 0.1, 1). None searches no c2 (the estimator's own is used).
        The values must be distinct and ``>= 0``.
    cv : int, cross-validation generator or iterable, default=None
        As in GridSearchCV; None means 5-fold ``KFold`` and an int ``k``
        means ``KFold(k)``, never stratified (the targets are sequences).
        Groups given to :meth:`fit` are passed to the splitter.
    scoring : str, callable or None, default=None
        A scorer name of :func:`skcrf.metrics.get_scorer` (such as
        ``'flat_f1_macro'`` or ``'entity_f1'``) or a callable
        ``scorer(estimator, X, y)``; None means the estimator's ``score``
        (token accuracy). Higher is better.
    n_jobs : int or None, default=None
        Parallel walks (folds and path segments), through joblib: None
        means 1 unless in a :func:`joblib.parallel_backend` context (the
        Dask backend works), -1 means all cores. The estimator's own
        ``n_jobs`` stays the thread count of each fit.
    refit : bool, default=True
        Train ``best_estimator_`` on all the data with the chosen
        coefficients (from zero, so it is exactly the model of a plain
        ``CRFTagger`` with those settings). The prediction methods need it.
    verbose : int, default=0
        1: a header and one line per fit (fold, coefficients, score,
        iterations, warm or cold start, time). 2 and more: also passed to
        the estimator as its own ``verbose`` (its training log).
    plateau : int or None, default=None
        None: every fit runs until the estimator's stopping rules end it, as
        in ``GridSearchCV``. An int ``n``: each warm-started fit also stops
        once the token accuracy of its iterates on the fold's held-out part
        has varied by at most ``plateau_tol`` over the last ``n``
        iterations (``n + 1`` iterates; the Viterbi paths, under the
        estimator's ``allowed_transitions``, weighted by ``sample_weight``):
        the score has stopped moving, so the rest of the fit's tail would
        not change it. The first fit of each fold (the strongest
        regularization, from zero) runs to its end. A stopped fit is scored
        as usual (``scoring``). This takes several times fewer iterations
        (on the seed Treebank task with ``n=10``, 3.5× fewer than the
        default path), at the price of scores that may differ from a
        converged fit's (most for the weakest regularization): see the user
        guide. The refit is never stopped this way.
    plateau_tol : float, default=2e-4
        The variation of the held-out token accuracy, in ``[0, 1]`` (2e-4 is
        about 5 tokens in 27,000), that counts as no change; used only with
        ``plateau``.

    Attributes
    ----------
    c1_ : float
        The chosen L1 coefficient (the estimator's own when ``c1`` is None).
    c2_ : float
        The chosen L2 coefficient (the estimator's own when ``c2`` is None).
    c1s_ : ndarray of shape (n_c1,)
        The L1 grid, in the order given (ascending when made from an int).
    c2s_ : ndarray of shape (n_c2,)
        The L2 grid, likewise.
    scores_ : ndarray of shape (n_splits, n_c1, n_c2)
        ``scores_[f, i, j]``: score of fold ``f`` with ``c1s_[i]`` and
        ``c2s_[j]``.
    n_iter_ : ndarray of shape (n_splits, n_c1, n_c2)
        Iterations of each fit (warm-started fits take fewer, and fits
        stopped by ``plateau`` fewer still).
    cv_results_ : dict of ndarray
        In the layout of ``GridSearchCV.cv_results_`` (keys
        ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``,
        ``std_score_time``, ``param_c1``, ``param_c2`` (masked arrays),
        ``params``, ``split{k}_test_score``, ``mean_test_score``,
        ``std_test_score``, ``rank_test_score``), so that
        ``pandas.DataFrame(cv_results_)`` and other tools reading it work.
        Candidates are in the order of ``GridSearchCV`` over ``{'c1': c1s_,
        'c2': c2s_}``. A fit time is the time of that fit alone (a
        warm-started one is short).
    best_index_ : int
        The index of the chosen candidate in ``cv_results_``.
    best_params_ : dict
        ``{'c1': c1_, 'c2': c2_}`` (the searched ones only).
    best_score_ : float
        Mean cross-validated score of the chosen candidate.
    best_estimator_ : CRFTagger
        The estimator with the chosen coefficients, trained on all the data
        (only with ``refit=True``).
    refit_time_ : float
        Seconds taken by the refit (0 without refit).
    n_splits_ : int
        Number of folds.
    scorer_ : callable or None
        The scorer used (None: the estimator's ``score``).

    See Also
    --------
    sklearn.model_selection.GridSearchCV : the exhaustive search, every fit
        from zero.

    Notes
    -----
    The path is a comb: per fold, first
    c2 from strong to weak at the largest c1, then, for every c2, c1 from
    strong to weak. L1 paths start from the sparsest model. A warm-started
    fit stops by the estimator's usual rules (``epsilon``, ``delta`` over
    ``period`` iterations, ``max_iterations`` counted per fit), so it reaches
    the same optimum as a cold one only within those tolerances: scores
    equal to a GridSearchCV's within the optimizer's tolerance, not to the
    last digit. Errors in a fit are raised (GridSearchCV's
    ``error_score='raise'``).

    Examples
    --------
    >>> from skcrf import CRFTagger
    >>> from skcrf import CRFTaggerCV
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}, {"w": "runs"}],
    ...      [{"w": "the"}, {"w": "cat"}], [{"w": "a"}, {"w": "dog"}, {"w": "runs"}]]
    >>> y = [["D", "N"], ["D", "N", "V"], ["D", "N"], ["D", "N", "V"]]
    >>> search = CRFTaggerCV(CRFTagger(), c1=[0.0, 0.1], c2=[0.01, 1.0], cv=2)
    >>> search.fit(X, y).scores_.shape
    (2, 2, 2)
    >>> sorted(search.best_params_)
    ['c1', 'c2']
    >>> search.predict([[{"w": "the"}, {"w": "dog"}]])
    [['D', 'N']]
    """

    _parameter_constraints: dict = {
        "estimator": [BaseEstimator, None],
        "c1": [Interval(Integral, 1, None, closed="left"), "array-like", None],
        "c2": [Interval(Integral, 1, None, closed="left"), "array-like", None],
        "cv": ["cv_object"],
        "scoring": [str, callable, None],
        "n_jobs": [Integral, None],
        "refit": ["boolean"],
        "verbose": ["verbose"],
        "plateau": [Interval(Integral, 1, None, closed="left"), None],
        "plateau_tol": [Interval(Real, 0, 1, closed="both")],
    }

    def __init__(
        self,
        estimator: CRFTagger | None = None,
        *,
        c1: int | Sequence[float] | None = 4,
        c2: int | Sequence[float] | None = 4,
        cv: int | BaseCrossValidator | Iterable[Any] | None = None,
        scoring: str | Callable[..., float] | None = None,
        n_jobs: int | None = None,
        refit: bool = True,
        verbose: int = 0,
        plateau: int | None = None,
        plateau_tol: float = 2e-4,
    ) -> None:
        self.estimator = estimator
        self.c1 = c1
        self.c2 = c2
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.refit = refit
        self.verbose = verbose
        self.plateau = plateau
        self.plateau_tol = plateau_tol

    def _grids(self, estimator):
        """``{name: grid}`` of the searched coefficients, checked against the algorithm."""
        params = estimator.get_params(deep=False)
        missing = [name for name in ("c1", "c2", "warm_start") if name not in params]
        if missing:
            raise TypeError(
                f"estimator must be a CRFTagger (with parameters c1, c2 and warm_start); "
                f"{type(estimator).__name__} has no {', '.join(missing)}."
            )
        algorithm = params.get("algorithm") or "lbfgs"
        allowed = _ALGORITHM_COEFFICIENTS.get(algorithm, ("c1", "c2"))
        grids = {}
        for name in ("c1", "c2"):
            value = getattr(self, name)
            if value is None:
                continue
            if name not in allowed:
                has = " and ".join(allowed) if allowed else "neither c1 nor c2"
                raise ValueError(
                    f"{name}={value!r}: algorithm={algorithm!r} has no {name} (it has "
                    f"{has}); set {name}=None, or use GridSearchCV for its own parameters."
                )
            grids[name] = _check_grid(name, value)
        if not grids:
            raise ValueError("c1 and c2 are both None: there is nothing to search.")
        return grids

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(
        self,
        X: Sequence[SequenceLike],
        y: Sequence[Sequence[Any]],
        groups: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> CRFTaggerCV:
        """Cross-validate the grid, choose ``(c1, c2)`` and refit.

        Parameters
        ----------
        X : list of sequences of tokens
        y : list of sequences of labels
        groups : array-like of shape (n_sequences,), optional
            Group labels of the sequences, for a group splitter such as
            ``GroupKFold``.
        sample_weight : array-like of shape (n_sequences,), optional
            Weights of the sequences: each fold's fits get their training
            sequences' weights, its scores its test sequences' (as
            ``score(..., sample_weight=)`` and the scorers take them), and
            the refit all of them.

        Returns
        -------
        self : CRFTaggerCV
        """
        estimator = CRFTagger() if self.estimator is None else self.estimator
        grids = self._grids(estimator)
        if not hasattr(X, "__len__") or not hasattr(y, "__len__"):
            raise TypeError("X and y must be lists of sequences (generators cannot be split).")
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} sequences but y has {len(y)}.")
        weights = None if sample_weight is None else check_sample_weight(sample_weight, len(X))
        scorer = None if self.scoring is None else get_scorer(self.scoring)
        cv = check_cv(self.cv, y, classifier=False)  # never stratified: y are sequences
        splits = list(cv.split(X, y, groups))
        n_splits = len(splits)

        names = list(grids)
        # Missing coefficients: a grid of one point, the estimator's value (None: not set).
        full = {name: grids.get(name, np.array([np.nan])) for name in ("c1", "c2")}
        n_c1, n_c2 = full["c1"].size, full["c2"].size
        # Strong to weak regularization: descending values.
        c1_walk = np.argsort(-full["c1"], kind="stable")
        c2_walk = np.argsort(-full["c2"], kind="stable")

        def params(i, j):
            return {
                name: float(full[name][k]) for name, k in (("c1", i), ("c2", j)) if name in grids
            }

        base = clone(estimator).set_params(warm_start=True, model_filename=None)
        if self.verbose >= 2:
            base.set_params(verbose=self.verbose)
        folds = [
            (_subset(X, train), _subset(y, train), _subset(X, test), _subset(y, test))
            for train, test in splits
        ]
        fold_weights = [
            {} if weights is None else {"w_train": weights[train], "w_test": weights[test]}
            for train, test in splits
        ]
        if self.verbose > 0:
            print(
                f"Fitting {n_splits} folds for each of {n_c1 * n_c2} candidates, totalling "
                f"{n_splits * n_c1 * n_c2} fits (warm-started paths)",
                flush=True,
            )

        if isinstance(self.plateau, (bool, np.bool_)):
            raise ValueError(
                f"The 'plateau' parameter of {type(self).__name__} must be a number of "
                f"iterations (an int >= 1) or None; got {self.plateau!r}."
            )
        if self.plateau is not None:
            for weights_of_fold in fold_weights:
                weights_of_fold["plateau"] = (self.plateau, self.plateau_tol)
        parallel = Parallel(n_jobs=self.n_jobs)
        i0 = int(c1_walk[0])
        spine = [((i0, int(j)), params(i0, int(j))) for j in c2_walk]
        spines = parallel(
            delayed(_walk)(
                clone(base), *folds[f], spine, scorer, True, self.verbose, f, **fold_weights[f]
            )
            for f in range(n_splits)
        )
        # Weakest c2 first: those rows take the most iterations, and a long
        # task dispatched last would run alone while the other workers idle.
        rows = (
            [
                ((f, pos), [((int(i), int(j)), params(int(i), int(j))) for i in c1_walk[1:]])
                for pos, j in reversed(list(enumerate(c2_walk)))
                for f in range(n_splits)
            ]
            if n_c1 > 1
            else []
        )
        row_results = parallel(
            delayed(_walk)(
                spines[f][1][pos],
                *folds[f],
                points,
                scorer,
                False,
                self.verbose,
                f,
                **fold_weights[f],
            )
            for (f, pos), points in rows
        )

        shape = (n_splits, n_c1, n_c2)
        scores, fit_time, score_time = np.empty(shape), np.empty(shape), np.empty(shape)
        n_iter = np.zeros(shape, dtype=np.intp)
        for f, records in [(f, spines[f][0]) for f in range(n_splits)] + [
            (f, res[0]) for ((f, _), _), res in zip(rows, row_results)
        ]:
            for record in records:
                i, j = record["index"]
                scores[f, i, j] = record["score"]
                fit_time[f, i, j] = record["fit_time"]
                score_time[f, i, j] = record["score_time"]
                n_iter[f, i, j] = record["n_iter"]

        candidates = [params(i, j) for i in range(n_c1) for j in range(n_c2)]
        self.cv_results_ = _cv_results(candidates, names, scores, fit_time, score_time)
        self.best_index_ = int(np.argmin(self.cv_results_["rank_test_score"]))
        best = candidates[self.best_index_]
        self.best_params_ = dict(best)
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        own = estimator.get_params(deep=False)
        self.c1_ = best.get("c1", own["c1"])
        self.c2_ = best.get("c2", own["c2"])
        self.c1s_ = grids.get("c1", np.array([self.c1_], dtype=object))
        self.c2s_ = grids.get("c2", np.array([self.c2_], dtype=object))
        self.scores_ = scores
        self.n_iter_ = n_iter
        self.n_splits_ = n_splits
        self.scorer_ = scorer
        self.refit_time_ = 0.0
        if self.refit:
            best_estimator = clone(estimator).set_params(**best)
            verbose = best_estimator.get_params()["verbose"]
            if self.verbose >= 2:
                best_estimator.set_params(verbose=self.verbose)
            start = time.perf_counter()
            best_estimator.fit(X, y, sample_weight=weights)
            self.refit_time_ = time.perf_counter() - start
            best_estimator.set_params(verbose=verbose)  # the estimator's own, as given
            self.best_estimator_ = best_estimator
        return self

    # -- delegation to best_estimator_ ---------------------------------------

    def _best(self):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_

    @available_if(_refit_enabled)
    def predict(self, X: SequencesLike) -> list[list[Any]]:
        """Labels of each sequence, by ``best_estimator_`` (see :meth:`CRFTagger.predict`)."""
        return self._best().predict(X)

    @available_if(_refit_enabled)
    def predict_single(self, xseq: SequenceLike) -> list[Any]:
        """Labels of one sequence, by ``best_estimator_``."""
        return self._best().predict_single(xseq)

    @available_if(_refit_enabled)
    def predict_marginals(self, X: SequencesLike) -> list[list[dict[Any, float]]]:
        """Label marginals of every token, by ``best_estimator_``."""
        return self._best().predict_marginals(X)

    @available_if(_refit_enabled)
    def predict_marginals_single(self, xseq: SequenceLike) -> list[dict[Any, float]]:
        """Label marginals of one sequence, by ``best_estimator_``."""
        return self._best().predict_marginals_single(xseq)

    @available_if(_refit_enabled)
    def score(
        self, X: SequencesLike, y: LabelSequencesLike, sample_weight: ArrayLike | None = None
    ) -> float:
        """Score of ``best_estimator_`` on ``X, y``: ``scoring``, or its own score.

        As ``GridSearchCV.score``: with a ``scoring``, that scorer; without,
        ``best_estimator_.score`` (token accuracy); ``sample_weight`` (one
        per sequence) is passed to either.
        """
        best = self._best()
        weights = {} if sample_weight is None else {"sample_weight": sample_weight}
        if self.scorer_ is None:
            return best.score(X, y, **weights)
        return float(self.scorer_(best, X, y, **weights))

    @property
    def classes_(self) -> np.ndarray:
        """The labels of ``best_estimator_``."""
        return self._best().classes_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # As CRFTagger's: lists of sequences of feature dicts, not arrays.
        tags.input_tags.two_d_array = False
        tags.input_tags.dict = True
        tags.target_tags.required = True
        return tags


def _cv_results(candidates, names, scores, fit_time, score_time):
    """``cv_results_`` in GridSearchCV's layout (one scorer, no train scores)."""
    n_splits = scores.shape[0]
    n_candidates = len(candidates)

    def by_candidate(array):
        # (n_splits, n_c1, n_c2) -> (n_candidates, n_splits), c1 outer as in ParameterGrid
        return array.reshape(n_splits, n_candidates).T

    results = {}

    def store(key, array, splits=False, rank=False):
        array = by_candidate(array)
        if splits:
            for k in range(n_splits):
                results[f"split{k}_{key}"] = array[:, k].copy()
        means = array.mean(axis=1)
        results[f"mean_{key}"] = means
        results[f"std_{key}"] = np.sqrt(((array - means[:, None]) ** 2).mean(axis=1))
        if rank:
            # rankdata(-means, method='min') without scipy: 1 + number strictly better
            finite = np.where(np.isnan(means), -np.inf, means)
            results[f"rank_{key}"] = (1 + (finite[None, :] > finite[:, None]).sum(axis=1)).astype(
                np.int32
            )

    store("fit_time", fit_time)
    store("score_time", score_time)
    for name in names:
        values = np.array([params[name] for params in candidates])
        masked = np.ma.MaskedArray(np.empty(n_candidates, dtype=values.dtype), mask=True)
        masked[:] = values  # setting unmasks, as in GridSearchCV
        results[f"param_{name}"] = masked
    results["params"] = candidates
    store("test_score", scores, splits=True, rank=True)
    return results
