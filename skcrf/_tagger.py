"""The public estimator: a linear-chain CRF tagger with scikit-learn's API."""

import warnings
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from ._compat import Interval, StrOptions, _fit_context
from ._inference import forward_backward, viterbi
from .io import load_model, save_model
from ._lbfgs import LBFGSResult, LBFGSStatus, minimize_lbfgs
from ._objective import (
    CRFObjective,
    effective_n_threads,
    select_features,
    split_sequences,
    unpack_weights,
)
from ._packing import pack, sequence_rows
from ._training_log import TrainingLog
from ._vectorize import (
    check_emissions,
    check_labels,
    check_sequences,
    encode_labels,
    vectorize,
)

# Below this many tokens per thread, a prediction is not worth sharding.
_TOKENS_PER_THREAD = 2000


class CRFTagger(BaseEstimator):
    """Linear-chain conditional random field for sequence labelling.

    A drop-in replacement for ``sklearn_crfsuite.CRF`` with the L-BFGS
    trainer: the same parameters with the same meanings, and the same model
    (the same features and objective, minimized by the same L-BFGS / OWL-QN
    rules as CRFsuite). Training and inference run batched over all
    sequences in numpy.

    Parameters
    ----------
    c1 : float, default=0.0
        L1 coefficient: the objective has the term ``c1 * ||w||_1``. With
        ``c1 > 0`` training uses OWL-QN, whose line search is always
        backtracking.
    c2 : float, default=1.0
        L2 coefficient: the objective has the term ``c2 * ||w||_2^2``.
    max_iterations : int or None, default=None
        Maximum number of L-BFGS iterations; None or 0 means no limit (as in
        CRFsuite).
    all_possible_states : bool, default=False
        Give every (attribute, label) pair a feature, not only those seen in
        the training data.
    all_possible_transitions : bool, default=False
        Give every label pair a transition feature, not only those seen.
    min_freq : float, default=0.0
        Keep a feature only if the sum of its values over the training data
        is at least ``min_freq``.
    num_memories : int, default=6
        Number of (step, gradient change) pairs L-BFGS keeps; >= 1.
    epsilon : float, default=1e-5
        Stop when ``||g|| / max(1, ||w||) <= epsilon``; >= 0.
    period : int, default=10
        Iterations back to compare with in the ``delta`` test; 0 disables it.
    delta : float, default=1e-5
        Stop when the objective improved by less than ``delta`` relative to
        its value ``period`` iterations earlier; >= 0.
    linesearch : {'MoreThuente', 'Backtracking', 'StrongBacktracking'}, \
default='MoreThuente'
        Line search used when ``c1 == 0``.
    max_linesearch : int, default=20
        Maximum objective evaluations in one line search; >= 1.
    verbose : bool or int, default=False
        Print every iteration to stderr.
    n_jobs : int or None, default=None
        Threads used to evaluate the objective: sequences are split into
        ``n_jobs`` shards evaluated in parallel. None means 1; -1 means all
        cores. Any value gives the same model (up to floating-point
        summation order).

    Attributes
    ----------
    classes_ : ndarray of object
        The labels seen in training, sorted when they can be; labels are
        returned as given (ints stay ints).
    vectorizer_ : sklearn.feature_extraction.DictVectorizer
        Maps token features to attribute columns.
    coef_ : ndarray of shape (n_attributes, n_classes)
        State feature weights; 0 where no feature exists.
    transition_ : ndarray of shape (n_classes, n_classes)
        ``transition_[i, j]``: weight of label ``classes_[i]`` followed by
        ``classes_[j]``.
    n_iter_ : int
        L-BFGS iterations run.
    training_log_ : TrainingLog
        Per-iteration loss, norms, line-search figures, time (and dev
        accuracy); ``training_log_.status`` says how the optimizer stopped.
    status_ : LBFGSStatus
        How the optimizer stopped (also ``training_log_.status``).
    n_features_ : int
        Number of features of the model (the parameters optimized).

    Notes
    -----
    Token features follow python-crfsuite's conventions. A token is a dict or
    a list of feature names (each with value 1.0):

    - ``{'w': 'Hello'}``: attribute ``w=Hello`` with value 1.0;
    - ``True``/``False``: 1.0/0.0 (a 0.0 attribute still creates features,
      as in CRFsuite); ints and floats: their value (finite);
    - a nested dict is flattened with ``key:`` prefixes;
    - a list or set of strings gives one attribute ``key=string`` each;
    - the same attribute twice in a token adds up.

    None, NaN, infinity and other value types are rejected with an error
    naming the sequence, token and key.

    If ``fit`` is interrupted (KeyboardInterrupt), the estimator is left as
    it was before the call: fitted attributes are set together at the end.

    Examples
    --------
    >>> from skcrf import CRFTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}, {"w": "runs"}]]
    >>> y = [["DET", "NOUN"], ["DET", "NOUN", "VERB"]]
    >>> tagger = CRFTagger(c2=0.1).fit(X, y)
    >>> tagger.predict([[{"w": "the"}, {"w": "cat"}]])
    [['DET', 'NOUN']]
    >>> tagger.score(X, y)
    1.0
    """

    _parameter_constraints: dict = {
        "c1": [Interval(Real, 0, None, closed="left")],
        "c2": [Interval(Real, 0, None, closed="left")],
        "max_iterations": [Interval(Integral, 0, None, closed="left"), None],
        "all_possible_states": ["boolean"],
        "all_possible_transitions": ["boolean"],
        "min_freq": [Interval(Real, None, None, closed="neither")],
        "num_memories": [Interval(Integral, 1, None, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="left")],
        "period": [Interval(Integral, 0, None, closed="left")],
        "delta": [Interval(Real, 0, None, closed="left")],
        "linesearch": [StrOptions({"MoreThuente", "Backtracking", "StrongBacktracking"})],
        "max_linesearch": [Interval(Integral, 1, None, closed="left")],
        "verbose": ["verbose"],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        *,
        c1=0.0,
        c2=1.0,
        max_iterations=None,
        all_possible_states=False,
        all_possible_transitions=False,
        min_freq=0.0,
        num_memories=6,
        epsilon=1e-5,
        period=10,
        delta=1e-5,
        linesearch="MoreThuente",
        max_linesearch=20,
        verbose=False,
        n_jobs=None,
    ):
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.min_freq = min_freq
        self.num_memories = num_memories
        self.epsilon = epsilon
        self.period = period
        self.delta = delta
        self.linesearch = linesearch
        self.max_linesearch = max_linesearch
        self.verbose = verbose
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, X_dev=None, y_dev=None):
        """Train the CRF.

        Parameters
        ----------
        X : list of sequences of tokens
            A token is a dict of features or a list of feature names.
        y : list of sequences of labels
            Labels may be any hashable values.
        X_dev, y_dev : list of sequences, optional
            Held-out data whose token accuracy is logged at every iteration
            (``training_log_``). It never changes the model.

        Returns
        -------
        self : CRFTagger
        """
        matrix, lengths, vectorizer = vectorize(X, name="X")
        label_index, classes = encode_labels(check_labels(y, lengths, name="y"), name="y")
        n_labels = len(classes)
        features = select_features(
            matrix,
            label_index,
            lengths,
            n_labels,
            all_possible_states=self.all_possible_states,
            all_possible_transitions=self.all_possible_transitions,
            min_freq=self.min_freq,
        )
        n_attributes = matrix.shape[1]
        dev_accuracy = None
        if (X_dev is None) != (y_dev is None):
            raise ValueError("X_dev and y_dev must be given together.")
        if X_dev is not None:
            dev_accuracy = _DevEvaluator(
                X_dev, y_dev, vectorizer, classes, features, n_attributes
            )

        objective = CRFObjective(
            matrix,
            lengths,
            n_labels,
            features,
            c2=self.c2,
            n_threads=effective_n_threads(self.n_jobs),
        )
        del matrix  # the objective keeps its own packed copy
        log = TrainingLog(verbose=self.verbose)

        def record(info):
            log.record_iteration(info, dev_accuracy)

        with objective:
            if features.n_parameters == 0:
                # No feature exists (say, only empty tokens in one-token
                # sequences): the objective is constant, nothing to optimize.
                loss, gradient = objective.loss_gradient(np.zeros(0))
                result = LBFGSResult(
                    x=np.zeros(0), fun=loss, grad=gradient,
                    status=LBFGSStatus.ALREADY_MINIMIZED, n_iter=0, n_evals=1,
                    message="The model has no features: nothing to optimize.",
                )
            else:
                result = minimize_lbfgs(
                    objective.loss_gradient,
                    np.zeros(features.n_parameters),
                    c1=self.c1,
                    num_memories=self.num_memories,
                    epsilon=self.epsilon,
                    period=self.period,
                    delta=self.delta,
                    max_iterations=self.max_iterations or None,
                    linesearch=self.linesearch,
                    max_linesearch=self.max_linesearch,
                    callback=record,
                )
        log.finish(result.status, result.message)
        if not result.status.converged:
            warnings.warn(
                f"CRFTagger stopped before converging: {result.message} "
                f"({result.status.name}, after {result.n_iter} iterations). The "
                "weights are those of the last accepted iteration.",
                ConvergenceWarning,
                stacklevel=3,  # past _fit_context's wrapper
            )

        coef, transition = unpack_weights(result.x, features, n_attributes, n_labels)
        # Set together, so an interrupted fit leaves the estimator unchanged.
        self.classes_ = classes
        self.vectorizer_ = vectorizer
        self.coef_ = coef
        self.transition_ = transition
        self.n_features_ = features.n_parameters
        self.n_iter_ = result.n_iter
        self.status_ = result.status
        self.training_log_ = log
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # Input is a list of sequences of feature dicts, not an array; the
        # target is a list of label sequences. Not a ClassifierMixin: that
        # would make integer ``cv`` stratify on y, which sequences cannot.
        tags.input_tags.two_d_array = False
        tags.input_tags.dict = True
        tags.target_tags.required = True
        return tags

    # -- persistence -------------------------------------------------------

    def save(self, path):
        """Save the fitted model to ``path`` without pickle.

        See :func:`skcrf.io.save_model` for the format; the write is atomic.
        """
        save_model(self, path)

    @classmethod
    def load(cls, path):
        """Load a model saved by :meth:`save` (never unpickles)."""
        return load_model(path, cls=cls)

    # -- prediction --------------------------------------------------------

    def _per_token(self, X, kernel):
        """Run a packed kernel over the sequences of ``X``; per-token results.

        ``kernel(emissions, transitions, batch_sizes)`` returns one row per
        packed token. Large batches are dealt into ``n_jobs`` shards that run
        on threads (numpy's kernels release the GIL).

        Returns
        -------
        values : ndarray, one row per token in flat order
        lengths : ndarray of int
        """
        check_is_fitted(self)
        matrix, lengths, _ = vectorize(X, self.vectorizer_, name="X")
        emissions = matrix @ self.coef_
        check_emissions(emissions, lengths, name="X")
        n_threads = min(
            effective_n_threads(self.n_jobs), max(1, len(emissions) // _TOKENS_PER_THREAD)
        )

        def run(sequences):
            layout = pack(lengths[sequences])
            rows = sequence_rows(lengths, sequences)[layout.flat_index]
            return rows, kernel(emissions[rows], self.transition_, layout.batch_sizes)

        shards = split_sequences(lengths, n_threads)
        if len(shards) == 1:
            results = [run(shards[0])]
        else:
            with ThreadPoolExecutor(len(shards)) as pool:
                results = list(pool.map(run, shards))
        values = np.empty((len(emissions),) + results[0][1].shape[1:], results[0][1].dtype)
        for rows, shard_values in results:
            values[rows] = shard_values
        return values, lengths

    @staticmethod
    def _split(flat, lengths):
        """Split a flat per-token list into one list per sequence."""
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        return [flat[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]

    def predict(self, X):
        """Most likely label sequence of each sequence (Viterbi).

        Parameters
        ----------
        X : list of sequences of tokens

        Returns
        -------
        list of list
            One list of labels per sequence (empty for an empty sequence).
        """
        path, lengths = self._per_token(X, lambda e, t, b: viterbi(e, t, b)[0])
        return self._split(self.classes_[path].tolist(), lengths)

    def predict_single(self, xseq):
        """Labels of one sequence of tokens."""
        _check_single(xseq)
        return self.predict([xseq])[0]

    def predict_marginals(self, X):
        """Marginal probability of every label at every token.

        Parameters
        ----------
        X : list of sequences of tokens

        Returns
        -------
        list of list of dict
            ``result[i][t][label]`` is ``p(y_t = label | x_i)``.
        """
        marginals, lengths = self._per_token(
            X, lambda e, t, b: forward_backward(e, t, b, overwrite_emissions=True).marginals
        )
        classes = self.classes_.tolist()
        return self._split([dict(zip(classes, row)) for row in marginals.tolist()], lengths)

    def predict_marginals_single(self, xseq):
        """Label marginals of one sequence of tokens."""
        _check_single(xseq)
        return self.predict_marginals([xseq])[0]

    def score(self, X, y):
        """Token accuracy of the predictions of ``X`` against ``y``.

        Parameters
        ----------
        X : list of sequences of tokens
        y : list of sequences of labels

        Returns
        -------
        float
        """
        check_is_fitted(self)
        sequences = check_sequences(X, name="X")
        lengths = [len(seq) for seq in sequences]
        true = check_labels(y, lengths, name="y")
        if not true:
            raise ValueError("score needs at least one token; all sequences are empty.")
        predicted = [label for seq in self.predict(sequences) for label in seq]
        return float(np.mean([a == b for a, b in zip(true, predicted)]))

    # -- inspection --------------------------------------------------------

    @property
    def state_features_(self):
        """Nonzero state weights as ``{(attribute, label): weight}``."""
        check_is_fitted(self)
        rows, cols = np.nonzero(self.coef_)
        names = self.vectorizer_.feature_names_
        classes = self.classes_
        return {
            (names[r], classes[c]): float(w)
            for r, c, w in zip(rows.tolist(), cols.tolist(), self.coef_[rows, cols].tolist())
        }

    @property
    def transition_features_(self):
        """Nonzero transition weights as ``{(label_from, label_to): weight}``."""
        check_is_fitted(self)
        rows, cols = np.nonzero(self.transition_)
        classes = self.classes_
        return {
            (classes[r], classes[c]): float(self.transition_[r, c])
            for r, c in zip(rows.tolist(), cols.tolist())
        }


def _check_single(xseq):
    """Reject a list of sequences passed where one sequence is expected."""
    if isinstance(xseq, (str, bytes, Mapping)) or not hasattr(xseq, "__len__"):
        raise TypeError(
            f"xseq must be one sequence (a list of tokens); got {type(xseq).__name__}."
        )
    for j, token in enumerate(xseq):
        if isinstance(token, (list, tuple)) and token and isinstance(token[0], dict):
            raise TypeError(
                f"xseq[{j}] is a list of dicts: xseq must be one sequence of tokens. "
                "For several sequences use predict / predict_marginals."
            )


class _DevEvaluator:
    """Token accuracy of held-out data under the current weights."""

    def __init__(self, X_dev, y_dev, vectorizer, classes, features, n_attributes):
        matrix, lengths, _ = vectorize(X_dev, vectorizer, name="X_dev")
        labels = check_labels(y_dev, lengths, name="y_dev")
        if not labels:
            raise ValueError("X_dev has no tokens: all sequences are empty.")
        # Labels unseen in training get -1: always wrong, never a new class.
        self.truth, _ = encode_labels(labels, classes, name="y_dev")
        self.layout = pack(lengths)
        self.matrix = matrix[self.layout.flat_index]
        self.features = features
        self.n_attributes = n_attributes
        self.n_labels = len(classes)

    def __call__(self, w):
        W, T = unpack_weights(w, self.features, self.n_attributes, self.n_labels)
        path, _ = viterbi(self.matrix @ W, T, self.layout.batch_sizes)
        return float(np.mean(self.layout.to_flat(path) == self.truth))
