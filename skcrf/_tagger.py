"""The public estimator: a linear-chain CRF tagger with scikit-learn's API."""

import copy
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction import DictVectorizer
from sklearn.utils import check_random_state

from ._compat import HasMethods, Interval, StrOptions, _fit_context, param_names
from ._featurize._validation import check_single_sequence
from ._inference._decode import Decoder
from ._model import FittedState
from ._persist._crfpp_model import read_crfpp_model
from ._persist._crfsuite_file import crfsuite_bytes, read_crfsuite, write_crfsuite
from ._persist._estimator_files import (
    check_crfsuite_model,
    check_model_filename,
    crfsuite_state,
    write_model_filename,
)
from ._persist._npz import load_state, save_state
from ._persist._templates import (
    state_featurizer,
    state_template,
    template_extra,
    warn_template_not_written,
)
from ._persist._wapiti_model import read_wapiti_model
from ._predictor import Decoding, Predictor
from ._tagger_view import CRFsuiteTagger
from ._training import _fit as fit_driver
from ._training._fit import ALGORITHM_DEFAULTS
from ._training._monitor import CallbackInfo
from ._typing import LabelSequencesLike, SequenceLike, SequencesLike
from .metrics import get_scorer

# The parameters added after the first release, with their defaults: a pickle
# made before one existed gets its default.
_PARAMETERS_ADDED_LATER = {
    "decoding": "viterbi",
    "class_weight": None,
    "all_possible_conditioned_transitions": False,
    "featurizer": None,
}

# Guards the creation of ``tagger_``'s view, which threads share.
_TAGGER_VIEW_LOCK = threading.Lock()

#: The fitted attributes set by fit (and read lazily from model_filename).
_FITTED_ATTRIBUTES = frozenset(
    {
        "classes_",
        "attributes_",
        "n_features_",
        "n_iter_",
        "status_",
        "training_log_",
        "best_iteration_",
    }
)


class CRFTagger(BaseEstimator):
    """Linear-chain conditional random field for sequence labelling.

    A drop-in replacement for ``sklearn_crfsuite.CRF``: the same parameters,
    in the same order, with the same meanings, and the same model (the same
    features and objective, minimized by the same L-BFGS / OWL-QN rules as
    CRFsuite). Training and inference run in compiled kernels over the
    features that exist, batched over sequences and threaded (``n_jobs``).

    Parameters
    ----------
    algorithm : {'lbfgs', 'l2sgd', 'asgd', 'ap', 'pa', 'arow'} or None, default=None
        The training algorithm, CRFsuite's (but ``'asgd'``); None means ``'lbfgs'``:

        - ``'lbfgs'``: L-BFGS on the regularized log-likelihood (OWL-QN
          when ``c1 > 0``); parameters c1, c2, max_iterations (default:
          until converged), num_memories, epsilon, period, delta,
          linesearch, max_linesearch;
        - ``'l2sgd'``: stochastic gradient descent with L2 regularization
          and a calibrated learning rate; c2, max_iterations (default 1000
          epochs), period, delta (default 1e-6), calibration_*;
        - ``'asgd'`` (skcrf's, not CRFsuite's): averaged SGD on l2sgd's
          objective (the lbfgs objective with ``c1=0``), usually near its
          optimum in a few epochs; c2, max_iterations (default 50 epochs),
          period (default 2), delta (default 1e-2), calibration_*
          (calibration_candidates default 3);
        - ``'ap'``: averaged perceptron; max_iterations (default 100),
          epsilon (default 0: stop when an epoch makes no mistake);
        - ``'pa'``: passive-aggressive (averaged); pa_type, c,
          error_sensitive, averaging, max_iterations, epsilon;
        - ``'arow'``: adaptive regularization of weights; variance, gamma,
          max_iterations, epsilon.

        A parameter explicitly set that the chosen algorithm does not have
        is an error naming the algorithms it belongs to. The online
        trainers (all but ``'lbfgs'``) shuffle the sequences every epoch
        with ``random_state`` and support :meth:`partial_fit`.
    min_freq : float or None, default=None
        Keep a feature only if the sum of its values over the training data
        is at least ``min_freq``. None means 0.
    all_possible_states : bool or None, default=None
        Give every (attribute, label) pair a feature, not only those seen in
        the training data. None means False.
    all_possible_transitions : bool or None, default=None
        Give every label pair a transition feature, not only those seen.
        None means False.
    c1 : float or None, default=None
        L1 coefficient (lbfgs): the objective has the term ``c1 * ||w||_1``.
        With ``c1 > 0`` training uses OWL-QN, whose line search is always
        backtracking. None means 0.
    c2 : float or None, default=None
        L2 coefficient (lbfgs, l2sgd, asgd): the objective has the term
        ``c2 * ||w||_2^2``. None means 1.
    max_iterations : int or None, default=None
        Maximum number of iterations. None means the algorithm's default:
        no limit for lbfgs (0 means no limit too, as in CRFsuite), 1000 for
        l2sgd, 50 for asgd, 100 for ap, pa and arow.
    num_memories : int or None, default=None
        Number of (step, gradient change) pairs L-BFGS keeps; >= 1. None
        means 6.
    epsilon : float or None, default=None
        lbfgs: stop when ``||g|| / max(1, ||w||) <= epsilon`` (None means
        1e-5); ap, pa, arow: stop when the loss is at most ``epsilon`` (None
        means 0).
    period : int or None, default=None
        Iterations back to compare with in the ``delta`` test (lbfgs,
        l2sgd, asgd); 0 disables it. None means 10 (2 for asgd).
    delta : float or None, default=None
        Stop when the objective improved by less than ``delta`` relative to
        its value ``period`` iterations earlier (lbfgs, l2sgd, asgd; the
        online trainers compare their epoch loss). None means 1e-5 (lbfgs),
        1e-6 (l2sgd) or 1e-2 (asgd).
    linesearch : {'MoreThuente', 'Backtracking', 'StrongBacktracking'} or \
None, default=None
        Line search used when ``c1 == 0`` (lbfgs). None means 'MoreThuente'.
    max_linesearch : int or None, default=None
        Maximum objective evaluations in one line search (lbfgs); >= 1. None
        means 20.
    calibration_eta, calibration_rate, calibration_samples, \
calibration_candidates, calibration_max_trials : default=None
        Learning-rate calibration of l2sgd and asgd (defaults 0.1, 2.0, 1000,
        10, 20; asgd's calibration_candidates: 3).
    pa_type : {0, 1, 2} or None, default=None
        Passive-aggressive variant (pa; default 1).
    c : float or None, default=None
        Aggressiveness of pa (default 1).
    error_sensitive : bool or None, default=None
        pa: include the number of wrong labels in the loss (default True).
    averaging : bool or None, default=None
        pa: average the weights (default True).
    variance : float or None, default=None
        arow: initial variance of every weight (default 1).
    gamma : float or None, default=None
        arow: tradeoff between the loss and the change (default 1).
    verbose : bool or int, default=False
        0/False: quiet. 1/True: one progress line on stderr, updated in
        place on a terminal (through tqdm when installed, the ``progress``
        extra), a plain line every few seconds otherwise. 2: one line per
        iteration. ``training_log_`` records every iteration either way.
    model_filename : str, os.PathLike or None, default=None
        A CRFsuite model file, as in sklearn-crfsuite: after ``fit`` (and
        ``partial_fit``) the model is written there; an existing file is
        read on first use (``predict``, a fitted attribute...), so that a
        model can be used without ``fit``. ``__init__`` only stores the
        name, so ``clone`` and ``get_params`` work as usual.
    keep_tempfiles : bool, default=False
        Accepted for compatibility: skcrf keeps its model in memory and
        writes no temporary files, so there is nothing to keep.
    trainer_cls : None
        sklearn-crfsuite's python-crfsuite trainer class; skcrf has its own
        trainers, so only None is accepted.
    n_jobs : int or None, default=None
        Threads used to train and decode: sequences are split into
        ``n_jobs`` shards evaluated in parallel (at most one per block of
        sequences: no thread without work), never more than the usable
        cores (the calling thread's CPU affinity, within a cgroup CPU
        quota). None means 1; -1 means all usable cores, -2 all but one, and
        so on (at least 1). 1 and 2 give the same L-BFGS model to the bit (one
        thread evaluates two shards in turn); more threads, the same model
        up to floating-point summation order.
    random_state : int, RandomState instance or None, default=None
        Shuffling of the online trainers (and their learning-rate
        calibration): an int makes a fit reproducible. Not used by
        ``'lbfgs'``, which is deterministic.
    warm_start : bool, default=False
        Start ``fit`` from the previous fit's weights: old features keep
        their weights, new attributes and labels become new features
        (weight 0); an online trainer also continues its own state.
    early_stopping : bool, default=False
        Score the model on validation data after every iteration
        (``X_dev``/``y_dev`` when given, else ``validation_fraction`` of the
        training sequences, drawn with ``random_state``); stop when the
        score has not improved by more than ``tol`` for
        ``n_iter_no_change`` iterations, and keep the best iteration's
        weights (``best_iteration_``; ``status_`` is ``EARLY_STOPPING``).
    validation_fraction : float, default=0.1
        Fraction of the training sequences held out for early stopping
        when no ``X_dev`` is given; in (0, 1).
    n_iter_no_change : int, default=10
        Iterations without improvement before early stopping; >= 1.
    tol : float, default=1e-7
        The improvement of the validation score that resets the patience.
    scoring : str, callable or None, default=None
        The early-stopping score: None is token accuracy; a name of
        :func:`skcrf.metrics.get_scorer_names`, or a callable
        ``scorer(estimator, X, y)``; higher is better.
    allowed_transitions : str, collection of (label, label) or None, default=None
        The constraint every decoding method uses by default (predict,
        predict_single, predict_marginals, predict_marginals_single,
        predict_nbest, sequence_log_proba, predict_transition_marginals, and
        so score, scorers and GridSearchCV): the allowed (from_label,
        to_label) pairs, or a tagging scheme, 'BIO' (= 'IOB2'), 'IOB1',
        'IOBES' (= 'BIOUL') or 'BMES', from which the allowed pairs and the
        allowed first and last labels are derived (an ``I-X`` never follows
        ``O`` or ``B-Y``; the user guide's decoding page states each
        scheme's rules). A method's own ``allowed_transitions=`` argument overrides
        it. Checked against the labels at fit. Saved with the model (give
        pairs as a list: model files do not store sets).
    missing_label : hashable or None, default=None
        Train from partially labelled sequences: a label equal to
        ``missing_label`` is unknown, and a set / frozenset of labels is a
        fuzzy label (the true label is one of them). The objective then
        marginalizes over every labelling consistent with the known and
        fuzzy labels, ``-sum log sum_{y consistent} p(y | x)`` (Tsuboi et
        al., 2008), minimized by L-BFGS / OWL-QN as usual; with no missing
        or fuzzy label it is exactly the usual objective, and a sequence
        with every label missing contributes nothing. Which (attribute,
        label) and transition features exist is decided from the known
        labels only (``all_possible_states`` / ``all_possible_transitions``
        add every pair, so that attributes seen only on unknown tokens get
        weights for every label). Only ``algorithm='lbfgs'`` trains from
        partial labels; the other trainers, and partial_fit, reject them.
        None: every label is given.
    decoding : {'viterbi', 'posterior'}, default='viterbi'
        The labelling that predict, predict_single, predict_entities,
        sequence_log_proba (without ``y``) and so score, scorers and
        GridSearchCV return. ``'viterbi'``: the most probable labelling.
        ``'posterior'``: the labelling with the largest expected number of
        correct tokens, ``sum_t p(y_t = yhat_t | x)`` (maximum expected
        token accuracy), among those the constraints allow
        (``allowed_transitions``, partial labels): each token's most
        probable label when no pair is forbidden. predict_nbest,
        predict_marginals and ``tagger_`` are unchanged.
    class_weight : dict, 'balanced' or None, default=None
        Weights of the labels, for imbalanced data: each token's term of the
        log-likelihood, ``-log p(y_t | y_{t-1}, x)`` (the chain rule under
        the model), is multiplied by the weight of its gold label, so that
        weights 1 give exactly the usual objective (defined, with its
        gradient, in the user guide's mathematics page). A dict maps labels
        to finite, non-negative weights; labels not in it weigh 1, and a
        label that is not one of the training labels is an error (a
        misspelt label would otherwise be ignored silently). ``'balanced'``:
        ``n_tokens / (n_labels * count(label))`` over the training tokens
        whose label is known. A partially labelled sequence
        (``missing_label``) is not weighted by label: all its tokens weigh
        1 (times its ``sample_weight``). The online trainers ap, pa and
        arow weigh each token's terms of their update (see :meth:`fit`);
        l2sgd and asgd reject ``class_weight``; :meth:`partial_fit` accepts a dict
        but not ``'balanced'`` (one batch's frequencies are not the
        data's). Feature selection does not depend on it. None: every label
        weighs 1 (the usual model, exactly).
    all_possible_conditioned_transitions : bool, default=False
        Input-conditioned transitions (tokens holding transition attributes
        under the key ``'__transition__'``, see the Notes): give every
        transition attribute seen in training a feature for every label
        pair, not only for the pairs it was seen with (the state features'
        ``all_possible_states`` rule): ``n_classes ** 2`` features per
        transition attribute, so mind the memory with many of them.
        Ignored without transition attributes.
    featurizer : TemplateFeaturizer, optional
        Feature templates for raw tokens (CRF++, Wapiti, CRFsuite or
        Pythonic; see :class:`~skcrf.TemplateFeaturizer`). With a
        featurizer, ``X`` everywhere (``fit``, ``X_dev``, ``predict``,
        ``predict_single``, ``predict_marginals``, ``score``, every decoding
        method) is raw token sequences (a token a ``str`` or a tuple of
        ``str`` columns), featurized by compiled code with no Python object
        per feature. The fitted model keeps its template: ``save`` /
        ``load`` and pickle carry it, so a loaded model tags raw tokens.
        ``GridSearchCV`` can tune ``featurizer__...`` beside ``c1``/``c2``.
        A CRFsuite file (``model_filename``, ``to_crfsuite``) holds the
        weights only: read back through ``model_filename``, the template
        comes from this parameter. None: ``X`` holds feature dicts (or lists
        of feature names).

    Attributes
    ----------
    classes_ : ndarray of object
        The labels seen in training, sorted when they can be; labels are
        returned as given (ints stay ints).
    attributes_ : list of str
        The attribute names, in attribute-id order (order of first
        appearance in the training data, as in CRFsuite). A string value
        ``v`` of key ``k`` is the attribute ``k:v``; a nested key is
        ``outer:inner``.
    vectorizer_ : sklearn.feature_extraction.DictVectorizer
        A fitted ``DictVectorizer(separator=':')`` holding the attribute
        vocabulary, for inspection (built when first read).
    coef_ : scipy.sparse.csr_matrix of shape (n_attributes, n_classes)
        State feature weights; a stored entry for every state feature of
        the model (a pair with no feature scores 0).
    transition_ : ndarray of shape (n_classes, n_classes)
        ``transition_[i, j]``: weight of label ``classes_[i]`` followed by
        ``classes_[j]`` (the unconditioned transitions: a model with
        input-conditioned transitions adds, at each token, the weights of
        its transition attributes, ``conditioned_transition_features_``).
    conditioned_transition_features_ : dict
        ``{(transition attribute, label_from, label_to): weight}`` for the
        nonzero input-conditioned transition weights (empty without
        transition attributes). They are not in ``coef_``,
        ``transition_`` or ``transition_features_``; ``n_features_``
        counts them.
    n_iter_ : int
        Iterations run.
    training_log_ : TrainingLog
        Per-iteration loss, norms, line-search figures, time (and dev
        accuracy); ``training_log_.status`` says how the optimizer stopped.
    status_ : LBFGSStatus or OnlineStatus or None
        How training stopped (:class:`skcrf.LBFGSStatus` for 'lbfgs',
        :class:`skcrf.OnlineStatus` for the online trainers; also
        ``training_log_.status``); None for a model read from a CRFsuite
        file.
    best_iteration_ : int or None
        With ``early_stopping=True``: the iteration whose weights were
        kept; None otherwise.
    n_features_ : int
        Number of features of the model (the parameters optimized).
    num_attributes_ : int
        ``len(attributes_)``.
    size_ : int
        Size of the model as a CRFsuite model file, in bytes.
    tagger_ : object
        An object with the methods of ``pycrfsuite.Tagger`` (``labels``,
        ``info``, ``tag``, ``probability``, ``marginal``, ``set``, ``dump``),
        backed by skcrf's own kernels, for code written against
        sklearn-crfsuite's ``tagger_``.
    state_features_ : dict
        ``{(attribute, label): weight}`` for the nonzero state weights.
    transition_features_ : dict
        ``{(label_from, label_to): weight}`` for the nonzero transitions.

    Notes
    -----
    Token features follow python-crfsuite's conventions. A token is a dict or
    a list of feature names (each with value 1.0):

    - ``{'w': 'Hello'}``: attribute ``w:Hello`` with value 1.0;
    - ``True``/``False``: 1.0/0.0 (a 0.0 attribute still creates features,
      as in CRFsuite); ints and floats: their value (finite);
    - a nested dict is flattened with ``key:`` prefixes;
    - a list or set of strings gives one attribute ``key:string`` each;
    - a 1-D numeric numpy array or a non-empty list of floats,
      ``{'emb': vector}``: the attributes ``emb[0]`` ... ``emb[d-1]`` with
      those values (finite; the same length for a key in every token), the
      model CRFsuite trains from ``d`` scalar keys. ``fit`` (lbfgs) keeps
      them as a dense block whose scores and expected counts are BLAS
      products; ``state_features_``, ``coef_``, ``save`` and
      ``to_crfsuite`` show them under those names;
    - the same attribute twice in a token adds up.

    None, NaN, infinity and other value types are rejected with an error
    naming the sequence, token and key.

    If ``fit`` or ``partial_fit`` is interrupted (KeyboardInterrupt), the
    estimator is left as it was before the call: fitted attributes are set
    together at the end. Token values that are ``bytes`` are read as UTF-8
    text, as python-crfsuite reads them.

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
        "algorithm": [StrOptions(set(ALGORITHM_DEFAULTS)), None],
        "min_freq": [Interval(Real, None, None, closed="neither"), None],
        "all_possible_states": ["boolean", None],
        "all_possible_transitions": ["boolean", None],
        "c1": [Interval(Real, 0, None, closed="left"), None],
        "c2": [Interval(Real, 0, None, closed="left"), None],
        "max_iterations": [Interval(Integral, 0, None, closed="left"), None],
        "num_memories": [Interval(Integral, 1, None, closed="left"), None],
        "epsilon": [Interval(Real, 0, None, closed="left"), None],
        "period": [Interval(Integral, 0, None, closed="left"), None],
        "delta": [Interval(Real, 0, None, closed="left"), None],
        "linesearch": [StrOptions({"MoreThuente", "Backtracking", "StrongBacktracking"}), None],
        "max_linesearch": [Interval(Integral, 1, None, closed="left"), None],
        "calibration_eta": [Interval(Real, 0, None, closed="neither"), None],
        "calibration_rate": [Interval(Real, 1, None, closed="neither"), None],
        "calibration_samples": [Interval(Integral, 1, None, closed="left"), None],
        "calibration_candidates": [Interval(Integral, 1, None, closed="left"), None],
        "calibration_max_trials": [Interval(Integral, 1, None, closed="left"), None],
        "pa_type": [Interval(Integral, 0, 2, closed="both"), None],
        "c": [Interval(Real, 0, None, closed="neither"), None],
        "error_sensitive": ["boolean", None],
        "averaging": ["boolean", None],
        "variance": [Interval(Real, 0, None, closed="neither"), None],
        "gamma": [Interval(Real, 0, None, closed="neither"), None],
        "verbose": ["verbose"],
        "model_filename": [str, os.PathLike, None],
        "keep_tempfiles": ["boolean", None],
        "trainer_cls": [type, None],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "scoring": [str, callable, None],
        "allowed_transitions": [str, list, tuple, set, frozenset, None],
        "missing_label": "no_validation",
        "decoding": [StrOptions({"viterbi", "posterior"})],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "all_possible_conditioned_transitions": ["boolean"],
        "featurizer": [HasMethods(["compile", "plan"]), None],
    }

    def __init__(
        self,
        algorithm: str | None = None,
        min_freq: float | None = None,
        all_possible_states: bool | None = None,
        all_possible_transitions: bool | None = None,
        c1: float | None = None,
        c2: float | None = None,
        max_iterations: int | None = None,
        num_memories: int | None = None,
        epsilon: float | None = None,
        period: int | None = None,
        delta: float | None = None,
        linesearch: str | None = None,
        max_linesearch: int | None = None,
        calibration_eta: float | None = None,
        calibration_rate: float | None = None,
        calibration_samples: int | None = None,
        calibration_candidates: int | None = None,
        calibration_max_trials: int | None = None,
        pa_type: int | None = None,
        c: float | None = None,
        error_sensitive: bool | None = None,
        averaging: bool | None = None,
        variance: float | None = None,
        gamma: float | None = None,
        verbose: bool | int = False,
        model_filename: str | os.PathLike[str] | None = None,
        keep_tempfiles: bool | None = False,
        trainer_cls: None = None,
        *,
        n_jobs: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        warm_start: bool = False,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        tol: float = 1e-7,
        scoring: str | Callable[..., float] | None = None,
        allowed_transitions: str | Iterable[tuple[Any, Any]] | None = None,
        missing_label: Any = None,
        decoding: str = "viterbi",
        class_weight: str | Mapping[Any, float] | None = None,
        all_possible_conditioned_transitions: bool = False,
        featurizer: Any = None,
    ) -> None:
        # Positional order is sklearn_crfsuite.CRF's, so that its scripts
        # (``CRF('lbfgs', ...)``) run unchanged; skcrf's own are keyword-only.
        self.algorithm = algorithm
        self.min_freq = min_freq
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.num_memories = num_memories
        self.epsilon = epsilon
        self.period = period
        self.delta = delta
        self.linesearch = linesearch
        self.max_linesearch = max_linesearch
        self.calibration_eta = calibration_eta
        self.calibration_rate = calibration_rate
        self.calibration_samples = calibration_samples
        self.calibration_candidates = calibration_candidates
        self.calibration_max_trials = calibration_max_trials
        self.pa_type = pa_type
        self.c = c
        self.error_sensitive = error_sensitive
        self.averaging = averaging
        self.variance = variance
        self.gamma = gamma
        self.verbose = verbose
        self.model_filename = model_filename
        self.keep_tempfiles = keep_tempfiles
        self.trainer_cls = trainer_cls
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.warm_start = warm_start
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.scoring = scoring
        self.allowed_transitions = allowed_transitions
        self.missing_label = missing_label
        self.decoding = decoding
        self.class_weight = class_weight
        self.all_possible_conditioned_transitions = all_possible_conditioned_transitions
        self.featurizer = featurizer

    def _validate_params(self):
        super()._validate_params()
        if self.trainer_cls is not None:
            raise ValueError(
                "trainer_cls is not supported: it selects a python-crfsuite trainer, and "
                "skcrf trains with its own code. Leave it None and choose the trainer "
                "with algorithm=..."
            )
        if self.n_jobs == 0:
            raise ValueError("n_jobs == 0 has no meaning; use None, a positive count or -1.")

    def _settings(self):
        """The algorithm and its settings: explicit parameters over its defaults."""
        return fit_driver.resolve_settings(self.get_params(deep=False))

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(
        self,
        X: SequencesLike,
        y: LabelSequencesLike,
        X_dev: SequencesLike | None = None,
        y_dev: LabelSequencesLike | None = None,
        *,
        sample_weight: ArrayLike | None = None,
        callback: Callable[[CallbackInfo], Any] | None = None,
    ) -> "CRFTagger":
        """Train the CRF.

        Parameters
        ----------
        X : iterable of sequences of tokens
            A token is a dict of features or a list of feature names. Any
            iterable is accepted, a generator included: it is read once, each
            sequence featurized into the compact internal format as it
            arrives, so the token dicts never need to exist all at once
            (except with ``early_stopping`` and no ``X_dev``, where ``X``
            must be a list: a random part of it is held out).
        y : iterable of sequences of labels
            Read in lockstep with ``X``. Labels may be any hashable values.
            With ``missing_label`` set, a
            label equal to it is unknown and a set / frozenset of labels is
            a fuzzy label (the true label is one of them): see
            ``missing_label``.
        X_dev, y_dev : list of sequences, optional
            Lists (not generators): they are read at every iteration.
            Held-out data evaluated at every iteration (``training_log_``:
            per-label scores, item and instance accuracy). It never changes
            the model, except with ``early_stopping=True``, where it is the
            validation data that chooses the iteration whose weights are
            kept.
        sample_weight : array-like of shape (n_sequences,), optional
            One finite, non-negative weight per sequence. L-BFGS multiplies
            the sequence's log-likelihood (and its gradient) by it; the
            online trainers scale the sequence's update: l2sgd and asgd
            multiply their gradient step by the weight, ap, pa and arow their
            update (see the user guide). Which features and labels exist is
            decided as without weights from the sequences of weight > 0; a
            sequence of weight 0 is as if absent (its attributes stay in
            ``attributes_``, with no feature). With ``class_weight``, a
            token weighs its sequence's weight times its label's. With
            ``early_stopping`` and no ``X_dev``, the held-out sequences keep
            their weights in the validation score; ``X_dev`` is unweighted.
            None: every sequence weighs 1.
        callback : callable, optional
            ``callback(info)`` after every iteration, with a
            :class:`~skcrf.CallbackInfo` (iteration, loss, gradient
            norm, a read-only view of the weights, elapsed seconds).
            Returning True stops training cleanly: ``status_`` is then
            ``CALLBACK_STOP`` (a stop you asked for: no warning, and not
            "converged").

        Returns
        -------
        self : CRFTagger
        """
        algorithm, settings = self._settings()
        check_model_filename(self.model_filename)
        X, y, sample_weight, validation = fit_driver.held_out_data(
            X,
            y,
            X_dev,
            y_dev,
            sample_weight,
            early_stopping=self.early_stopping,
            fraction=self.validation_fraction,
            random_state=check_random_state(self.random_state),
            missing_label=self.missing_label,
        )
        previous = self.__dict__.get("_model") if self.warm_start else None
        fitted = fit_driver.fit(
            X,
            y,
            algorithm,
            settings,
            fit_driver.new_vocabulary(previous, self.featurizer),
            monitor_options=self._monitor_options(X_dev, y_dev, validation, callback),
            previous=previous,
            sample_weight=sample_weight,
            stacklevel=3,  # past _fit_context's wrapper
            **self._fit_options(),
        )
        self._store_fit(fitted)
        self.__dict__.pop("_partial_fit_rng", None)
        return self

    def _fit_options(self):
        """The fit driver's options that the estimator's parameters and state give."""
        return {
            "n_jobs": self.n_jobs,
            "random_state": check_random_state(self.random_state),
            "previous_trainer_state": self.__dict__.get("_trainer_state"),
            "missing_label": self.missing_label,
            "allowed_transitions": self.allowed_transitions,
            "class_weight": self.class_weight,
            "model_filename": self.model_filename,
        }

    def _monitor_options(self, X_dev, y_dev, validation, callback):
        """The fit driver's monitor options (held-out data, early stopping)."""
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable; got {type(callback).__name__}.")
        return {
            "verbose": self.verbose,
            "dev": None if X_dev is None else (X_dev, y_dev),
            "validation": validation,
            # token accuracy of Viterbi paths is the fit driver's own; other
            # scores (and posterior decoding's accuracy) go through a scorer
            "validation_scorer": None
            if self.scoring is None and self.decoding == "viterbi"
            else self._validation_scorer,
            "validation_name": None if self.scoring is None else _scoring_name(self.scoring),
            # the default score decodes under the constraints, as score does
            "allowed_transitions": self.allowed_transitions,
            "n_iter_no_change": self.n_iter_no_change,
            "tol": self.tol,
            "callback": callback,
        }

    def _validation_scorer(self, model, vocabulary, X_val, y_val, sample_weight=None):
        """``score(w)`` of ``scoring`` on the early-stopping data."""
        scorer = get_scorer(self.scoring) if self.scoring is not None else _token_accuracy
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}

        def score(w):
            probe = clone(self)
            probe._set_fitted(model.with_weights(w), 0, None, None, vocabulary)
            return scorer(probe, X_val, y_val, **kwargs)

        return score

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(
        self,
        X: SequencesLike,
        y: LabelSequencesLike,
        classes: Iterable[Any] | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> "CRFTagger":
        """One pass of an online trainer over ``X``, from the current weights.

        For ``algorithm`` in ``'l2sgd'``, ``'asgd'``, ``'ap'``, ``'pa'``, ``'arow'``: one
        epoch over the given sequences (shuffled with ``random_state``),
        continuing the trainer exactly where the previous ``fit`` or
        ``partial_fit`` of this estimator left it (weights, averaging and
        learning-rate schedule).

        Parameters
        ----------
        X : list of sequences of tokens
        y : list of sequences of labels
            Every label must be one of ``classes`` (or ``classes_``).
        classes : list of labels, optional
            All the labels the model will ever know. Required on the first
            call (scikit-learn's convention); afterwards None or the same
            labels.
        sample_weight : array-like of shape (n_sequences,), optional
            One finite, non-negative weight per sequence: scales its update
            as in :meth:`fit`. ``class_weight`` applies when it is a dict;
            ``'balanced'`` is rejected (one batch's label frequencies are
            not the data's).

        Returns
        -------
        self : CRFTagger

        Notes
        -----
        Attributes first seen in a later batch become new features (weight
        0). ``min_freq`` is applied to each batch's own counts when its new
        features are chosen; a feature, once in the model, stays.
        ``all_possible_states`` gives a new attribute a feature for every
        label; ``all_possible_transitions`` gives every label pair a feature
        from the first call. Held-out data and ``max_iterations`` do not
        apply: each call is one epoch.
        """
        algorithm, settings = self._settings()
        check_model_filename(self.model_filename)
        previous = None
        if self.__dict__.get("_model") is not None:
            previous = fit_driver.FitResult(
                self._model,
                self._predictor.vocabulary,
                self.n_iter_,
                self.status_,
                self.training_log_,
                self._trainer_state,
                None,
            )
        rng = self._partial_fit_random_state(previous is not None)
        result = fit_driver.partial_fit(
            X,
            y,
            algorithm,
            settings,
            fit_driver.new_vocabulary(previous and previous.model, self.featurizer),
            classes,
            random_state=rng,
            verbose=self.verbose,
            previous=previous,
            missing_label=self.missing_label,
            sample_weight=sample_weight,
            class_weight=self.class_weight,
        )
        self._store_fit(result)
        self._partial_fit_rng = rng
        return self

    def _partial_fit_random_state(self, fitted):
        """One random stream across partial_fit calls, seeded by random_state.

        A copy of the stream: the call stores it back when it succeeds, so a
        call that fails leaves the stream where it was.
        """
        if not fitted or "_partial_fit_rng" not in self.__dict__:
            return check_random_state(self.random_state)
        return copy.deepcopy(self._partial_fit_rng)

    # -- fitted state ------------------------------------------------------

    def _set_fitted(
        self, model, n_iter, status, log, vocabulary=None, trainer_state=None, **extra
    ):
        """Store a fitted model and its fit's outcome.

        ``extra``: best_iteration, decoder, template (the compiled plan of a
        featurizer's model; by default the vocabulary's).
        """
        template = extra.get("template", getattr(vocabulary, "compiled", None))
        self._predictor = Predictor(model, vocabulary, extra.get("decoder"), template)
        self._template = template
        self._model = model
        self._trainer_state = trainer_state
        self.classes_ = model.classes
        if isinstance(model.attributes, list):
            self.attributes_ = model.attributes
        else:  # names served from a model file: listed on first access
            self.__dict__.pop("attributes_", None)
        self.n_features_ = model.n_features
        self.n_iter_ = n_iter
        self.status_ = status
        self.training_log_ = log
        self.best_iteration_ = extra.get("best_iteration")

    def _store_fit(self, result):
        """Write ``model_filename`` from a fit's result, then store the result.

        In that order, and everything that can fail first: a fit whose
        ``model_filename`` cannot be written (a folder made read-only, a path
        that is a folder, labels CRFsuite cannot keep) leaves the estimator
        exactly as it was, and the file too (the write is atomic), so the
        two agree.

        Parameters
        ----------
        result : FitResult
        """
        decoder = Decoder(result.model)
        write_model_filename(result.model, self.model_filename)
        self._set_fitted(
            result.model,
            result.n_iter,
            result.status,
            result.log,
            result.vocabulary,
            result.trainer_state,
            best_iteration=result.best_iteration,
            decoder=decoder,
        )

    def _get_fitted_state(self):
        """The fitted state as one plain structure (for persistence)."""
        template = self.__dict__.get("_template")
        return FittedState(
            # the featurizer is an estimator: its template goes in extra
            params={**self.get_params(deep=False), "featurizer": None},
            model=self._fitted_model(),
            n_iter=self.n_iter_,
            status=self.status_,
            training_log=self.training_log_,
            extra={"best_iteration": self.best_iteration_, **template_extra(template)},
        )

    @classmethod
    def _from_fitted_state(cls, state):
        """A fitted estimator from a :class:`FittedState`.

        Parameters the estimator does not know (from another version) are
        left out.
        """
        names = frozenset(param_names(cls))  # (a set: ~40 names looked up)
        params = {k: v for k, v in state.params.items() if k in names}
        tagger = cls(**{**params, "featurizer": state_featurizer(state)})
        tagger._set_fitted_state(state)
        return tagger

    def _set_fitted_state(self, state):
        """Store the model of a :class:`FittedState` (read from a file)."""
        # a CRFsuite file (model_filename) has no template: the parameter's
        template = state_template(state, self.__dict__.get("featurizer"))
        extra = {"best_iteration": state.extra.get("best_iteration"), "template": template}
        self._set_fitted(state.model, state.n_iter, state.status, state.training_log, **extra)

    def _fitted_model(self):
        """The fitted model; read from ``model_filename`` on first use."""
        return self._fitted().model

    def _fitted(self):
        """The fitted model's :class:`Predictor`; read from ``model_filename`` on first use."""
        predictor = self.__dict__.get("_predictor")
        if predictor is not None:
            return predictor
        path = self.__dict__.get("model_filename")
        if isinstance(path, (str, os.PathLike)) and os.path.exists(path):
            self._set_fitted_state(read_crfsuite(path, lazy_attributes=True))
            return self._predictor
        missing = f" (model_filename={path!r} does not exist yet)" if path is not None else ""
        raise NotFittedError(
            f"This {type(self).__name__} instance is not fitted yet{missing}. Call "
            "'fit' with appropriate arguments before using this estimator."
        )

    def __sklearn_is_fitted__(self):
        try:
            self._fitted()
        except NotFittedError:
            return False
        return True

    def __getattr__(self, name):
        # Only reached when normal lookup fails, which includes a property
        # raising AttributeError (NotFittedError is one). The fitted
        # attributes of a model_filename not read yet are read on access.
        attribute = getattr(type(self), name, None)
        if name in _FITTED_ATTRIBUTES or isinstance(attribute, property):
            model = self._fitted_model()  # NotFittedError if there is no model
            if isinstance(attribute, property):
                return attribute.fget(self)  # its own error, if any, unmasked
            if name == "attributes_" and name not in self.__dict__:
                return model.attribute_names()  # (a model opened with lazy names)
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self):
        state = dict(super().__getstate__())  # a copy: it may be our __dict__
        # The encoder's caches and the decoder's arrays are rebuilt on load.
        state.pop("_predictor", None)
        state.pop("_tagger_view", None)
        return state

    def __setstate__(self, state):
        # a pickle made before a parameter existed: its default
        super().__setstate__({**_PARAMETERS_ADDED_LATER, **state})
        model = self.__dict__.get("_model")
        if model is not None:
            self._predictor = Predictor(model, template=self.__dict__.get("_template"))

    @property
    def coef_(self) -> sp.csr_matrix:
        """State weights, CSR of shape (n_attributes, n_classes)."""
        return self._fitted_model().coef()

    @property
    def transition_(self) -> np.ndarray:
        """Transition weights, dense (n_classes, n_classes)."""
        return self._fitted_model().transition_matrix()

    @property
    def vectorizer_(self) -> DictVectorizer:
        """A fitted ``DictVectorizer(separator=':')`` with the attribute vocabulary."""
        return self._fitted_model().vectorizer()

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

    def save(self, path: str | os.PathLike[str], *, dtype: str = "float64") -> None:
        """Save the fitted model to ``path`` without pickle.

        See :func:`skcrf.io.save_model` for the format (what prediction
        needs: the features with a nonzero weight); the write is atomic.
        ``dtype="float32"`` stores the weights as float32, halving them
        (labels equal but for exact ties, marginals within about 1e-7).
        """
        save_state(self._get_fitted_state(), path, dtype=dtype)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, mmap: bool = False) -> "CRFTagger":
        """Load a model saved by :meth:`save` (never unpickles).

        ``mmap=True``: the model's arrays are used where they lie in the
        file, mapped read-only (processes that load one file share its
        pages); see :mod:`skcrf.io` ("Mapped files").
        """
        return cls._from_fitted_state(load_state(path, lazy_attributes=True, mmap=mmap))

    def to_crfsuite(self, path: str | os.PathLike[str]) -> None:
        """Write the model as a CRFsuite model file.

        ``pycrfsuite.Tagger().open(path)`` (and CRFsuite, sklearn-crfsuite,
        NLTK) then predicts what this tagger predicts. Labels that are not
        str are written as ``str(label)``; their original values are kept in
        a trailing section that CRFsuite ignores and :meth:`from_crfsuite`
        reads back. The write is atomic.

        As CRFsuite's own trainer does, only the features with a nonzero
        weight are written (and the attributes that keep one): the file
        predicts exactly what this tagger predicts, and a tagger read back
        from it has those features only. A tagger with a ``featurizer``
        warns: the file cannot hold the template (``save`` keeps it).
        """
        model = self._crfsuite_model("to_crfsuite").without_zeros()
        warn_template_not_written(self.__dict__.get("_template"))
        write_crfsuite(model, path)

    def _crfsuite_model(self, what):
        """The fitted model, which must be one a CRFsuite file can hold."""
        return check_crfsuite_model(self._fitted_model(), what)

    @classmethod
    def from_crfsuite(cls, source: Any) -> "CRFTagger":
        """A fitted tagger from a CRFsuite model.

        Parameters
        ----------
        source : str, os.PathLike or sklearn_crfsuite.CRF
            The path of a CRFsuite model file (written by CRFsuite,
            python-crfsuite, sklearn-crfsuite, NLTK's CRFTagger or
            :meth:`to_crfsuite`), the file's content as bytes, or a fitted
            ``sklearn_crfsuite.CRF`` (its parameters are copied too).

        Returns
        -------
        CRFTagger
            Predicts exactly what CRFsuite predicts with that model. Its
            ``classes_`` are in the file's label order (CRFsuite's: order of
            first appearance in training); ``n_iter_`` is 0 and ``status_``
            and ``training_log_`` are None (the file does not keep them).

        Raises
        ------
        ValueError
            If the file is not a well-formed CRFsuite model (truncated,
            corrupted or crafted): the message names what is wrong. The
            attributes' hash tables are checked here for their shape, and
            verified in full by the first prediction (the first attribute
            looked up): damage found then is that prediction's ValueError,
            and every later one's, naming the file (never a prediction from
            a damaged table).
        """
        names = set(param_names(cls)) - {"model_filename", "trainer_cls"}
        return cls._from_fitted_state(crfsuite_state(source, names))

    @classmethod
    def from_crfpp(cls, source: Any, *, cost_factor: float = 1.0) -> "CRFTagger":
        """A fitted tagger from a CRF++ 0.58 model.

        Parameters
        ----------
        source : str, os.PathLike or bytes
            The path (or content) of a model ``crf_learn`` wrote: the binary
            file, or the text one of ``crf_learn -t``.
        cost_factor : float, default=1.0
            ``crf_test -c``: every weight is multiplied by it.

        Returns
        -------
        CRFTagger
            Tags raw column files as ``crf_test`` does: its ``featurizer``
            is the model's template (a :class:`~skcrf.TemplateFeaturizer`);
            ``predict_marginals`` gives ``crf_test -v2``'s probabilities.

        Raises
        ------
        ValueError
            If the file is not a well-formed CRF++ model: the message names
            the file and what is wrong.
        """
        return cls._from_fitted_state(read_crfpp_model(source, cost_factor=cost_factor))

    @classmethod
    def from_wapiti(cls, source: Any) -> "CRFTagger":
        """A fitted tagger from a Wapiti 1.5 model (``wapiti train``'s ``-m`` file).

        Parameters
        ----------
        source : str, os.PathLike or bytes
            The model file's path or content (a ``crf`` or ``maxent`` model).

        Returns
        -------
        CRFTagger
            Labels raw column files as ``wapiti label`` does: its
            ``featurizer`` is the model's patterns; with
            ``decoding='posterior'``, as ``wapiti label -p``.

        Raises
        ------
        ValueError
            If the file is not a well-formed Wapiti model: the message names
            the file and what is wrong.
        """
        return cls._from_fitted_state(read_wapiti_model(source))

    # -- prediction --------------------------------------------------------

    def _decoding(self):
        """The decoding parameters a prediction uses."""
        return Decoding(self.decoding, self.allowed_transitions, self.n_jobs)

    def predict(
        self, X: SequencesLike, *, allowed_transitions: Any = None, partial_labels: Any = None
    ) -> list[list[Any]]:
        """Most likely label sequence of each sequence (Viterbi, or see ``decoding``).

        Parameters
        ----------
        X : list of sequences of tokens
        allowed_transitions : str or collection of (label, label), optional
            Decode only label sequences whose consecutive labels form allowed
            pairs: the pairs themselves, or a tagging scheme, ``'BIO'`` (=
            ``'IOB2'``), ``'IOB1'``, ``'IOBES'`` (= ``'BIOUL'``) or
            ``'BMES'``, which also restricts the first and last labels (an
            ``I-X`` never follows ``O`` or ``B-Y``). None: the estimator's
            ``allowed_transitions``.
        partial_labels : list, optional
            Per sequence, None or a list with, per token, None (free), a
            label (known) or a set of labels (the true one is among them):
            the result is the most likely labelling that agrees with them.

        Returns
        -------
        list of list
            One list of labels per sequence (empty for an empty sequence).

        Raises
        ------
        ValueError
            When the constraints leave a sequence no allowed labelling (the
            message names it).
        """
        predictor = self._fitted()
        return predictor.predict(X, self._decoding(), allowed_transitions, partial_labels)

    def predict_single(
        self, xseq: SequenceLike, *, allowed_transitions: Any = None, partial_labels: Any = None
    ) -> list[Any]:
        """Labels of one sequence of tokens.

        ``allowed_transitions`` as in :meth:`predict`; ``partial_labels`` is
        one list with an entry per token.
        """
        predictor = self._fitted()  # cheaper than check_is_fitted: this path is per sentence
        return predictor.predict_single(
            check_single_sequence(xseq), self._decoding(), allowed_transitions, partial_labels
        )

    def predict_marginals(
        self, X: SequencesLike, *, allowed_transitions: Any = None, partial_labels: Any = None
    ) -> list[list[dict[Any, float]]]:
        """Marginal probability of every label at every token.

        Parameters
        ----------
        X : list of sequences of tokens
        allowed_transitions, partial_labels : optional
            As in :meth:`predict`: the marginals are then conditioned on
            them (a label that no allowed labelling has there gets 0).

        Returns
        -------
        list of list of dict
            ``result[i][t][label]`` is ``p(y_t = label | x_i)``.
        """
        predictor = self._fitted()
        return predictor.marginals(X, self._decoding(), allowed_transitions, partial_labels)

    def predict_marginals_single(
        self, xseq: SequenceLike, *, allowed_transitions: Any = None, partial_labels: Any = None
    ) -> list[dict[Any, float]]:
        """Label marginals of one sequence of tokens.

        Constraints as in :meth:`predict_single`.
        """
        xseq = check_single_sequence(xseq)
        return self.predict_marginals(
            [xseq],
            allowed_transitions=allowed_transitions,
            partial_labels=None if partial_labels is None else [partial_labels],
        )[0]

    def predict_nbest(
        self,
        X: SequencesLike,
        n: int = 5,
        *,
        allowed_transitions: Any = None,
        partial_labels: Any = None,
    ) -> list[list[tuple[list[Any], float]]]:
        """The ``n`` most probable label sequences of each sequence, exactly.

        Parameters
        ----------
        X : list of sequences of tokens
        n : int, default=5
            Label sequences wanted per sequence (at least 1).
        allowed_transitions, partial_labels : optional
            As in :meth:`predict`: only allowed label sequences are listed,
            and their probabilities are conditioned on the constraints.

        Returns
        -------
        list of list of (list, float)
            Per sequence, ``(labels, log_probability)`` pairs, most probable
            first; fewer than ``n`` when fewer label sequences exist. The
            first is :meth:`predict`'s. Ties (equal scores) are ordered by
            the labels read from the end: the lower last label in
            ``classes_`` order first, then the lower label before it, and so
            on. An empty sequence has one, ``([], 0.0)``.
        """
        n = _check_count(n)
        predictor = self._fitted()
        return predictor.nbest(X, n, self._decoding(), allowed_transitions, partial_labels)

    def sequence_log_proba(
        self,
        X: SequencesLike,
        y: LabelSequencesLike | None = None,
        *,
        allowed_transitions: Any = None,
        partial_labels: Any = None,
    ) -> np.ndarray:
        """Log-probability ``log p(y | x)`` of each sequence's labels.

        Parameters
        ----------
        X : list of sequences of tokens
        y : list of sequences of labels, optional
            The labellings to score; a label the model does not know gives
            ``-inf``. None: :meth:`predict`'s labelling of each sequence
            (the model's confidence in its answer): the Viterbi path, or the
            posterior one with ``decoding='posterior'``.
        allowed_transitions, partial_labels : optional
            As in :meth:`predict`: probabilities conditioned on them; a
            labelling that breaks them gets ``-inf``.

        Returns
        -------
        ndarray of shape (n_sequences,)
            0 for an empty sequence.
        """
        predictor = self._fitted()
        return predictor.sequence_log_proba(
            X, y, self._decoding(), allowed_transitions, partial_labels
        )

    def predict_transition_marginals(
        self, X: SequencesLike, *, allowed_transitions: Any = None, partial_labels: Any = None
    ) -> list[np.ndarray]:
        """Marginal probability of every label pair at every pair of neighbours.

        Parameters
        ----------
        X : list of sequences of tokens
        allowed_transitions, partial_labels : optional
            As in :meth:`predict`.

        Returns
        -------
        list of ndarray
            Per sequence an array of shape ``(len - 1, n_classes,
            n_classes)``: ``[t, i, j]`` is ``p(y_t = classes_[i], y_{t+1} =
            classes_[j] | x)``. Summed over ``j`` it gives the marginals of
            token ``t``, over ``i`` those of token ``t + 1``.
        """
        predictor = self._fitted()
        return predictor.transition_marginals(
            X, self._decoding(), allowed_transitions, partial_labels
        )

    def predict_entities(
        self,
        X: SequencesLike,
        scheme: str = "BIO",
        *,
        allowed_transitions: Any = None,
        partial_labels: Any = None,
    ) -> list[list[tuple[int, int, Any, float]]]:
        """The entities of each sequence's labelling, with their exact probability.

        Every labelling considered is valid in ``scheme``: the labelling is
        decoded (``decoding``) under the scheme's rules (its allowed pairs
        and first and last labels) together with the other constraints
        (``allowed_transitions``, the estimator's by default, and
        ``partial_labels``), so a labelling the scheme forbids (an ``I-X``
        after ``O``) is never decoded. Its entities are read as the entity
        metrics read them.

        Parameters
        ----------
        X : list of sequences of tokens
        scheme : str, default='BIO'
            ``'BIO'`` (= ``'IOB2'``), ``'IOB1'``, ``'IOBES'`` (=
            ``'BIOUL'``) or ``'BMES'`` (case-insensitive): every label of the
            model must be ``'O'`` or a prefix of the scheme and a type
            (``'B-PER'``).
        allowed_transitions, partial_labels : optional
            As in :meth:`predict`; they constrain the labellings as well as
            the scheme.

        Returns
        -------
        list of list of (int, int, type, float)
            Per sequence, ``(start, end, type, probability)`` of each entity,
            in order; ``end`` is exclusive (the entity covers tokens
            ``start`` to ``end - 1``). ``probability`` is the exact
            probability under the model, conditioned on the labellings
            valid in the scheme and allowed by the constraints, that a
            labelling has exactly this span as an entity of this type
            (neither longer nor shorter): ``p(span | x, valid)``.

        Raises
        ------
        ValueError
            On an unknown scheme or a label that does not follow it (named),
            or when the constraints leave a sequence no labelling (named).
        """
        predictor = self._fitted()
        return predictor.entities(X, scheme, self._decoding(), allowed_transitions, partial_labels)

    def explain(self, xseq: SequenceLike, *, as_frame: bool = False) -> Any:
        """Why each token gets its label: the feature terms of the scores.

        The score of a labelling is the sum of its state terms (per token,
        the weight of (attribute, label) times the attribute's value) and
        its transition terms (the weight of each pair of neighbouring
        labels). For every token this lists the state terms of the
        predicted label (:meth:`predict_single`, so ``decoding`` and
        ``allowed_transitions`` apply) and of the runner-up, the label with
        the next highest marginal probability there
        (:meth:`predict_marginals_single`), and the transition term of the
        predicted path into the token.

        Parameters
        ----------
        xseq : sequence of tokens
        as_frame : bool, default=False
            Return a ``pandas.DataFrame`` (pandas is needed, and not a
            dependency of skcrf).

        Returns
        -------
        list of dict, or pandas.DataFrame
            One dict per token, with keys:

            - ``'position'``: the token's index;
            - ``'label'``, ``'probability'``: the predicted label and its
              marginal probability;
            - ``'state'``: ``[(attribute, label, weight * value), ...]``,
              the state terms of the predicted label, largest absolute term
              first (attributes unseen in training, or without a feature
              for the label, add nothing and are not listed);
            - ``'runner_up'``, ``'runner_up_probability'``,
              ``'runner_up_state'``: the same for the runner-up label (None,
              0.0 and [] for a model with one label);
            - ``'transition'``: ``(previous_label, label, weight)`` of the
              predicted path into this token (None at the first token);
            - ``'conditioned'``: ``[(transition_attribute, previous_label,
              label, weight * value), ...]``, the input-conditioned
              transition terms of the predicted path into this token,
              largest absolute term first (empty without transition
              attributes, and at the first token).

            The predicted path's score is the sum of every ``'state'``,
            ``'transition'`` and ``'conditioned'`` term. With ``as_frame=True``, one row per term:
            columns ``position``, ``candidate`` (``'predicted'`` or
            ``'runner_up'``), ``kind`` (``'state'``, ``'transition'`` or
            ``'conditioned'``), ``attribute`` (None for a transition),
            ``from_label`` (None for a state term), ``label``,
            ``contribution``.
        """
        predictor = self._fitted()
        return predictor.explain(check_single_sequence(xseq), self._decoding(), as_frame)

    def top_features(self, n: int = 10, *, as_frame: bool = False) -> Any:
        """The ``n`` strongest state features and transitions (largest ``|weight|``).

        Parameters
        ----------
        n : int, default=10
            How many of each (at least 1); fewer when the model has fewer
            nonzero weights.
        as_frame : bool, default=False
            Return a ``pandas.DataFrame`` (pandas is needed).

        Returns
        -------
        dict or pandas.DataFrame
            ``{'state': [(attribute, label, weight), ...], 'transition':
            [(from_label, to_label, weight), ...]}``, strongest first (ties:
            attribute order, then ``classes_`` order). With
            ``as_frame=True``, one row per feature: columns ``kind``
            (``'state'`` or ``'transition'``), ``attribute`` (None for a
            transition), ``from_label`` (None for a state feature),
            ``label``, ``weight``.
        """
        n = _check_count(n)
        return self._fitted().top_features(n, as_frame)

    def score(
        self, X: SequencesLike, y: LabelSequencesLike, sample_weight: ArrayLike | None = None
    ) -> float:
        """Token accuracy of the predictions of ``X`` against ``y``.

        Predictions use the estimator's ``allowed_transitions`` and ``decoding``.

        Parameters
        ----------
        X : list of sequences of tokens
        y : list of sequences of labels
        sample_weight : array-like of shape (n_sequences,), optional
            Per-sequence weights: each token weighs its sequence's weight
            (the weighted mean of the tokens' correctness).

        Returns
        -------
        float
        """
        return self._fitted().accuracy(X, y, self._decoding(), sample_weight)

    # -- inspection --------------------------------------------------------

    @property
    def tagger_(self) -> CRFsuiteTagger:
        """A ``pycrfsuite.Tagger`` look-alike of the model (sklearn-crfsuite's ``tagger_``)."""
        model = self._crfsuite_model("tagger_")
        with _TAGGER_VIEW_LOCK:  # one view for all threads (each keeps its set())
            view = self.__dict__.get("_tagger_view")
            if view is None or view.model is not model:
                # kept: users call tagger_.set(x), then tagger_.marginal(...)
                view = CRFsuiteTagger(model, self._predictor.vocabulary, self._predictor.decoder)
                self._tagger_view = view
        return view

    @property
    def num_attributes_(self) -> int:
        """Number of attributes (token feature names) of the model."""
        return self._fitted_model().n_attributes

    @property
    def size_(self) -> int:
        """Size in bytes of the model as a CRFsuite file (sklearn-crfsuite's ``size_``)."""
        return len(crfsuite_bytes(self._crfsuite_model("size_").without_zeros()))

    @property
    def state_features_(self) -> dict[tuple[str, Any], float]:
        """Nonzero state weights as ``{(attribute, label): weight}``."""
        return self._fitted_model().state_features()

    @property
    def transition_features_(self) -> dict[tuple[Any, Any], float]:
        """Nonzero transition weights as ``{(label_from, label_to): weight}``."""
        return self._fitted_model().transition_features()

    @property
    def conditioned_transition_features_(self) -> dict[tuple[str, Any, Any], float]:
        """Nonzero input-conditioned transition weights.

        ``{(transition attribute, label_from, label_to): weight}``; empty for
        a model without transition attributes.
        """
        return self._fitted_model().conditioned_transition_features()


def _scoring_name(scoring):
    """``scoring`` as error messages name it: ``scoring='f1'``, ``scoring=my_scorer``."""
    if isinstance(scoring, str):
        return f"scoring={scoring!r}"
    name = getattr(scoring, "__qualname__", None) or getattr(scoring, "__name__", None)
    return f"scoring={name or repr(scoring)[:100]}"


def _token_accuracy(estimator, X, y, sample_weight=None):
    """The default early-stopping score: ``estimator.score`` (its own decoding)."""
    return estimator.score(X, y, sample_weight=sample_weight)


def _check_count(n):
    """``n`` of ``predict_nbest`` and ``top_features``: an integer >= 1."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, Integral) or n < 1:
        raise ValueError(f"n must be an integer >= 1; got {n!r}.")
    return int(n)
