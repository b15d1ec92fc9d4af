"""The fit driver: labelled sequences in, a fitted model out.

Every way skcrf trains goes through here: ``CRFTagger.fit`` (any algorithm,
warm start, partially labelled sequences, held-out data, early stopping),
``CRFTagger.partial_fit`` (one epoch of an online trainer), ``CRFTaggerCV``
(whose path is warm-started ``CRFTagger.fit`` calls) and ``DaskCRFTagger``
(the same monitor, L-BFGS call and outcome over a distributed objective).

Conventions
-----------
- ``settings`` is the dict of :func:`resolve_settings`: the algorithm's
  parameters over CRFsuite's defaults (:data:`ALGORITHM_DEFAULTS`) and the
  feature-generation ones (:data:`FEATURE_DEFAULTS`).
- A fit builds everything new (vocabulary, model, log) and returns it in a
  :class:`FitResult`; the estimator stores it in one step, so a fit that
  fails leaves the estimator as it was.
- The steps, each a function: :func:`encode_training_data` (tokens and
  labels to numbers), :func:`select_model_features` (the features that
  exist, merged into a previous model on warm start), :func:`make_monitor`
  (held-out scores, early stopping, the user's callback),
  :func:`minimize` or :func:`~skcrf._training._online_train.train_online`,
  then :func:`outcome`.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from typing import Any, NamedTuple

import numpy as np

from .._featurize._labels import (
    check_classes,
    check_distinct_labels,
    check_labels,
    check_partial_training_labels,
    encode_labels,
    same_label,
)
from .._featurize._stream import encode_data
from .._featurize._transitions import TRANSITION_KEY, TransitionParts, with_transitions
from .._featurize._validation import (
    check_reusable,
    check_sequences,
    check_sums,
    largest_value,
    locate_row,
)
from .._featurize._vocabulary import Vocabulary
from .._inference._constraints import Constraints, transition_constraints
from .._inference._decode import Decoder
from .._model import merge_features
from .._template._vocabulary import TemplateVocabulary
from .._utils._threads import effective_n_threads
from ._defaults import ALGORITHM_DEFAULTS as ALGORITHM_DEFAULTS
from ._defaults import FEATURE_DEFAULTS as FEATURE_DEFAULTS
from ._defaults import TRAINER_PARAMETERS as TRAINER_PARAMETERS
from ._lbfgs import Handover, LBFGSResult, LBFGSStatus, NonFiniteStartError, minimize_lbfgs
from ._monitor import TrainingMonitor
from ._objective import CRFObjective, drop_zeros, select_features
from ._online_train import OnlineStatus, train_online
from ._training_log import TrainingLog, holdout_scores
from ._weights import (
    check_class_weight,
    check_sample_weight,
    drop_sequences,
    label_weights,
    token_weights,
)


def resolve_settings(params):
    """The algorithm and its settings: explicit parameters over its defaults.

    Parameters
    ----------
    params : dict
        The estimator's parameters (``algorithm``, the trainer parameters
        and the feature-generation ones; None, or absent, means "the
        default").

    Returns
    -------
    algorithm : str
    settings : dict

    A parameter explicitly set (not None) that the algorithm does not have is
    an error naming the algorithms it belongs to.
    """
    algorithm = params.get("algorithm") or "lbfgs"
    own = ALGORITHM_DEFAULTS[algorithm]
    settings = dict(FEATURE_DEFAULTS)
    settings.update(own)
    for name in TRAINER_PARAMETERS:
        value = params.get(name)
        if value is None:
            continue
        if name not in own:
            owners = sorted(a for a, defaults in ALGORITHM_DEFAULTS.items() if name in defaults)
            raise ValueError(
                f"{name}={value!r} does not apply to algorithm={algorithm!r}: it is a "
                f"parameter of {', '.join(map(repr, owners))}. Leave it None or "
                "choose that algorithm."
            )
        settings[name] = value
    for name in FEATURE_DEFAULTS:
        if params.get(name) is not None:
            settings[name] = params[name]
    # skcrf's own, for models with transition attributes (CRFsuite has none)
    settings["all_possible_conditioned_transitions"] = bool(
        params.get("all_possible_conditioned_transitions", False)
    )
    return algorithm, settings


#: How errors call the labels a warm start and a later partial_fit keep.
_PREVIOUS_CLASSES = "classes_ (of the model warm_start continues)"
_FIXED_CLASSES = "partial_fit's classes"


class TrainingData(NamedTuple):
    """Labelled training sequences as numbers."""

    encoded: Any  # Encoded
    label_index: np.ndarray  # label of each token (-1: unknown)
    classes: np.ndarray  # the labels, in index order
    partial: Any  # PartialLabels or None


class FitResult(NamedTuple):
    """What a fit leaves: stored by the estimator in one step."""

    model: Any  # CRFModel, with the weights kept
    vocabulary: Any  # Vocabulary
    n_iter: int
    status: LBFGSStatus | OnlineStatus
    log: TrainingLog
    trainer_state: Any  # OnlineState, or None after L-BFGS
    best_iteration: int | None


def new_vocabulary(previous=None, featurizer=None):
    """The vocabulary a fit grows: a copy of ``previous``'s (a warm start) or a new one.

    A copy: an interrupted fit must leave the old vocabulary as it was. With
    a featurizer, a :class:`TemplateVocabulary` (raw tokens in).
    """
    if featurizer is not None:
        if previous is None:
            return TemplateVocabulary(featurizer.compile())
        conditioned = () if previous.conditioned is None else previous.conditioned.attributes
        return TemplateVocabulary(featurizer.compile(), previous.attributes, conditioned)
    if previous is None:
        return Vocabulary()
    return Vocabulary(previous.attributes, previous.value_separator)


def encode_training_data(
    vocabulary,
    X,
    y,
    *,
    algorithm,
    missing_label=None,
    previous_classes=None,
    fixed_classes=None,
    transitions=None,
):
    """Encode ``X`` (growing ``vocabulary``) and its labels ``y``.

    Parameters
    ----------
    previous_classes : ndarray or None
        The labels of the model a warm start continues: they keep their
        indices, new labels come after them.
    fixed_classes : ndarray or None
        ``partial_fit``'s labels, fixed by its first call: a label outside
        them is an error, and so is a partially labelled sequence.
    transitions : TransitionParts or None
        Filled with the tokens' transition attributes (see
        :func:`~skcrf._featurize._stream.encode_data`).

    Returns
    -------
    TrainingData
    """
    # any iterable: a generator is featurized sequence by sequence (one pass);
    # L-BFGS keeps vector features ({'emb': array}) as a dense block (BLAS)
    encoded, y = encode_data(
        vocabulary, X, y, grow=True, name="X", dense=algorithm == "lbfgs", transitions=transitions
    )
    check_sums(encoded, vocabulary, name="X")
    if fixed_classes is not None:
        return _encode_fixed_labels(encoded, y, fixed_classes, missing_label)
    partial = None
    if missing_label is None:
        labels = check_labels(y, encoded.lengths, name="y")
        classes = None
        if previous_classes is not None:
            check_distinct_labels(
                labels,
                "y",
                classes=previous_classes,
                lengths=encoded.lengths,
                classes_name=_PREVIOUS_CLASSES,
            )
            _, classes = encode_labels([*previous_classes.tolist(), *dict.fromkeys(labels)])
        label_index, classes = encode_labels(labels, classes, name="y", lengths=encoded.lengths)
    else:
        label_index, classes, partial = check_partial_training_labels(
            y, encoded.lengths, missing_label, name="y", previous_classes=previous_classes
        )
        if partial is not None and algorithm != "lbfgs":
            raise ValueError(
                f"algorithm={algorithm!r} cannot train from partially labelled "
                "sequences (labels equal to missing_label, or sets of labels): only "
                "'lbfgs' marginalizes over the unknown labels. Use algorithm='lbfgs', "
                "or give every label."
            )
    return TrainingData(encoded, label_index, classes, partial)


def check_conditioned_fit(algorithm, partial, class_weight, previous, model_filename):
    """The fits that can train input-conditioned transitions, or a clear error."""
    reason = None
    if algorithm != "lbfgs":
        reason = f"only algorithm='lbfgs' trains them (got {algorithm!r})"
    elif partial is not None:
        reason = "partially labelled sequences (missing_label) cannot train them"
    elif class_weight is not None:
        reason = "class_weight cannot be combined with them"
    elif previous is not None and previous.conditioned is None:
        reason = "warm_start cannot continue a model without them into them"
    elif model_filename is not None:
        reason = (
            "model_filename writes a CRFsuite model file, which cannot hold them "
            "(set model_filename=None and use save())"
        )
    if reason is not None:
        raise ValueError(
            f"X holds transition attributes (the token key {TRANSITION_KEY!r}: "
            f"input-conditioned transitions), but {reason}."
        )


def _encode_fixed_labels(encoded, y, known, missing_label):
    if missing_label is not None:
        _, _, partial = check_partial_training_labels(y, encoded.lengths, missing_label, name="y")
        if partial is not None:
            raise ValueError(
                "partial_fit cannot train from partially labelled sequences (labels "
                "equal to missing_label, or sets of labels): only fit with "
                "algorithm='lbfgs' marginalizes over the unknown labels."
            )
    labels = check_labels(y, encoded.lengths, name="y")
    label_index, _ = encode_labels(
        labels, known, name="y", lengths=encoded.lengths, classes_name=_FIXED_CLASSES
    )
    if (label_index < 0).any():
        row = int(np.flatnonzero(label_index < 0)[0])
        i, j = locate_row(row, encoded.lengths)
        raise ValueError(
            f"y[{i}][{j}]: the label {labels[row]!r:.100} is not one of the classes "
            f"{list(known)!r:.200} fixed by the first call to partial_fit."
        )
    return TrainingData(encoded, label_index, known, None)


def partial_fit_classes(classes, fitted_classes):
    """The labels of a ``partial_fit`` call: given on the first, fixed after."""
    if fitted_classes is None:
        if classes is None:
            raise ValueError(
                "classes must be given on the first call to partial_fit: the "
                "labels the model will know (scikit-learn's convention)."
            )
        return encode_labels(check_classes(classes), name="classes")[1]
    if classes is not None:
        _, given = encode_labels(check_classes(classes), name="classes")
        if len(given) != len(fitted_classes) or not all(
            a == b and same_label(a, b) for a, b in zip(given.tolist(), fitted_classes.tolist())
        ):
            raise ValueError(
                f"classes={list(given)!r:.200} differs from classes_="
                f"{list(fitted_classes)!r:.200} fixed by the first call to partial_fit."
            )
    return fitted_classes


def apply_weights(data, sample_weight, class_weight, previous_classes=None):
    """The training data without its sequences of weight 0, and each token's weight.

    Parameters
    ----------
    data : TrainingData
    sample_weight : array-like or None
        One weight per sequence (checked here: the length of a generator is
        known once it is encoded).
    class_weight : None, 'balanced' or dict
    previous_classes : ndarray or None
        A warm start's labels (they stay classes).

    Returns
    -------
    data : TrainingData
    token_weights : ndarray or None
        None when every weight is 1: the unweighted path, exactly.
    """
    n_sequences = len(data.encoded.lengths)
    sample_weight = check_sample_weight(sample_weight, n_sequences)
    if sample_weight is not None and not (sample_weight > 0).all():
        keep = sample_weight > 0
        if not keep.any():
            raise ValueError(
                "sample_weight is 0 for every sequence: there is nothing to train on."
            )
        data = TrainingData(
            *drop_sequences(
                data.encoded,
                data.label_index,
                data.classes,
                data.partial,
                keep,
                previous_classes=previous_classes,
            )
        )
        sample_weight = sample_weight[keep]
    if sample_weight is not None and (sample_weight == 1.0).all():
        sample_weight = None
    weights = label_weights(class_weight, data.label_index, data.classes)
    if weights is not None and (weights == 1.0).all():
        weights = None
    return data, token_weights(
        sample_weight, weights, data.label_index, data.encoded.lengths, data.partial
    )


def select_model_features(
    data, vocabulary, settings, previous=None, token_weights=None, transition_attributes=None
):
    """The model's features (CRFsuite's rule), merged into ``previous``'s.

    Returns
    -------
    model : CRFModel
        With ``previous``'s weights on its features, zero on the new ones.
    observed : ndarray
        The empirical feature counts, in the model's feature order.
    old_index : ndarray or None
        Where each feature of ``previous`` is in the model (None without it).

    ``token_weights`` (weighted training) weights the observed counts only;
    ``transition_attributes``: the names of ``data.encoded.transitions``'
    attributes (input-conditioned transitions).
    """
    model, observed = select_features(
        data.encoded,
        data.label_index,
        data.classes,
        vocabulary.attributes,
        all_possible_states=settings["all_possible_states"],
        all_possible_transitions=settings["all_possible_transitions"],
        min_freq=settings["min_freq"],
        partial=data.partial,
        token_weights=token_weights,
        transition_attributes=transition_attributes,
        all_possible_conditioned_transitions=settings.get(
            "all_possible_conditioned_transitions", False
        ),
    )
    if previous is None:
        return model, observed, None
    # old features keep their weights; new ones start at zero
    model, old_index, new_index = merge_features(previous, model)
    widened = np.zeros(model.n_features)
    widened[new_index] = observed
    return model, widened, old_index


def resumed_trainer_state(algorithm, state, old_index, n_features):
    """The online trainer's state, widened to the model's features (warm start)."""
    if algorithm == "lbfgs":
        return None
    if state is None or state.algorithm != algorithm:
        raise ValueError(
            f"warm_start with algorithm={algorithm!r} continues that trainer's own "
            "state, but the model was not trained by it in this session. Fit "
            "without warm_start first."
        )
    return state.expanded(old_index, n_features)


def split_validation(X, y, fraction, random_state, missing_label=None, sample_weight=None):
    """Hold out ``fraction`` of the sequences for early stopping.

    Returns the kept sequences, their labels, and ``(X_val, y_val)``; with
    ``sample_weight``, the kept sequences' weights too and ``(X_val, y_val,
    weights_val)``.
    """
    sequences = check_sequences(X, name="X")
    lengths = [len(seq) for seq in sequences]
    if missing_label is None:
        check_labels(y, lengths, name="y")  # errors name the original positions
    else:
        check_partial_training_labels(y, lengths, missing_label, name="y")
    y = list(y)
    n_validation = int(np.ceil(fraction * len(sequences)))
    if n_validation < 1 or n_validation >= len(sequences):
        raise ValueError(
            f"early_stopping with validation_fraction={fraction} "
            f"leaves {len(sequences) - n_validation} of {len(sequences)} sequences "
            "for training; give more sequences or X_dev/y_dev."
        )
    order = random_state.permutation(len(sequences))
    held, kept = np.sort(order[:n_validation]), np.sort(order[n_validation:])
    if sample_weight is not None:
        sample_weight = check_sample_weight(sample_weight, len(sequences))
        return (
            [sequences[i] for i in kept],
            [y[i] for i in kept],
            sample_weight[kept],
            ([sequences[i] for i in held], [y[i] for i in held], sample_weight[held]),
        )
    return (
        [sequences[i] for i in kept],
        [y[i] for i in kept],
        ([sequences[i] for i in held], [y[i] for i in held]),
    )


def held_out_data(
    X, y, X_dev, y_dev, sample_weight, *, early_stopping, fraction, random_state, missing_label
):
    """``X_dev`` checked, and the validation data of early stopping.

    Without ``X_dev``, early stopping holds out a random ``fraction`` of
    ``X`` (:func:`split_validation`), which must then be a list.

    Returns
    -------
    X, y, sample_weight
        The training data (what is left of it after a split).
    validation : tuple or None
        ``(X_val, y_val)`` (with a split of weighted data, ``(X_val, y_val,
        weights_val)``), or None without early stopping.
    """
    if (X_dev is None) != (y_dev is None):
        raise ValueError("X_dev and y_dev must be given together.")
    if X_dev is not None:
        # read at every iteration: a generator would be empty after the first
        check_reusable(X_dev, "X_dev", "it is scored at every iteration")
        check_reusable(
            y_dev, "y_dev", "it is scored at every iteration", what="a list of label sequences"
        )
    if not early_stopping:
        return X, y, sample_weight, None
    if X_dev is not None:
        return X, y, sample_weight, (X_dev, y_dev)
    reason = (
        "early_stopping without X_dev holds out a random part of X as "
        "validation data (or give X_dev and y_dev)"
    )
    check_reusable(X, "X", reason)
    check_reusable(y, "y", reason, what="a list of label sequences")
    split = split_validation(
        X, y, fraction, random_state, missing_label, sample_weight=sample_weight
    )
    if sample_weight is None:
        X, y, validation = split
        return X, y, None, validation
    return split


class DevEvaluator:
    """CRFsuite's held-out evaluation under given weights (log entries).

    With ``allowed_transitions`` (early stopping's evaluator), the paths are
    the constrained ones, as the estimator's ``predict``: its token accuracy
    is then ``score`` of each iteration's model. The log's evaluator of
    ``X_dev`` has none, as CRFsuite's.
    """

    def __init__(
        self,
        X_dev,
        y_dev,
        vocabulary,
        model,
        n_jobs,
        name="dev",
        sample_weight=None,
        allowed_transitions=None,
    ):
        # Encoded against the vocabulary as it is now: attributes seen only
        # in the dev data have no feature, and must not join the vocabulary.
        x_name, y_name = f"X_{name}", f"y_{name}"
        parts = TransitionParts()
        self.encoded = encode_data(
            vocabulary, X_dev, grow=False, name=x_name, single_hint=False, transitions=parts
        )
        if model.conditioned is not None:
            transitions = Vocabulary(model.conditioned.attributes, model.value_separator)
            self.encoded = with_transitions(self.encoded, parts, transitions, name=x_name)
        labels = check_labels(y_dev, self.encoded.lengths, name=y_name)
        if not labels:
            raise ValueError(f"{x_name} has no tokens: all sequences are empty.")
        # Labels unseen in training get -1: always wrong, never a new class.
        self.truth, _ = encode_labels(
            labels,
            model.classes,
            name=y_name,
            lengths=self.encoded.lengths,
            classes_name="the model's classes",
        )
        self.name = x_name
        self.unseen = Counter(labels[k] for k in np.flatnonzero(self.truth < 0).tolist())
        lengths = np.asarray(self.encoded.lengths)
        self.sequence_ends = np.cumsum(lengths)[lengths > 0]
        self.model = model
        self.constraints = Constraints.build(
            model.classes, self.encoded.lengths, allowed_transitions
        )
        self.n_threads = effective_n_threads(n_jobs)
        # validation data split from weighted training data: each token
        # weighs as its sequence (accuracy only; the log's scores are unweighted)
        self.token_weights = None
        if sample_weight is not None:
            self.token_weights = np.repeat(sample_weight, lengths)

    def _path(self, w):
        return Decoder(self.model.with_weights(w)).viterbi(
            self.encoded, self.n_threads, name=self.name, constraints=self.constraints
        )

    def accuracy(self, w):
        """Token accuracy under the weights ``w`` (the estimator's score)."""
        correct = self._path(w) == self.truth
        if self.token_weights is not None:
            return float(np.average(correct, weights=self.token_weights))
        return float(np.mean(correct))

    def __call__(self, w):
        path = self._path(w)
        return holdout_scores(
            self.truth, path, self.sequence_ends, self.model.classes, self.unseen
        )


def make_monitor(
    model,
    vocabulary,
    settings,
    *,
    verbose,
    n_jobs,
    dev=None,
    validation=None,
    validation_scorer=None,
    validation_name=None,
    allowed_transitions=None,
    n_iter_no_change=10,
    tol=1e-7,
    callback=None,
    log=None,
):
    """The log and monitor of a fit.

    Parameters
    ----------
    dev : (X_dev, y_dev) or None
        Held-out data scored into the log at every iteration.
    validation : (X_val, y_val) or (X_val, y_val, sample_weight_val) or None
        Early stopping's data (None: no early stopping); the weights when
        it was split from weighted training data.
    validation_scorer : callable or None
        ``validation_scorer(model, vocabulary, X_val, y_val[,
        sample_weight_val])`` returns ``score(w)`` (higher is better); None:
        token accuracy (weighted by the sequences' weights when given) of
        the Viterbi paths under ``allowed_transitions``.
    log : TrainingLog or None
        The log to record into (``skcrf.pycrfsuite``'s writes CRFsuite's
        messages as it goes); None: a new one, quiet or printing by
        ``verbose``.
    validation_name : str or None
        What ``validation_scorer`` is, for the error of a score that is not
        a finite number (``"scoring='f1'"``).
    allowed_transitions : see :func:`transition_constraints`
        The estimator's constraint, under which the default token accuracy
        decodes (as ``score`` does); ``dev``'s log entries are CRFsuite's,
        unconstrained.
    """
    holdout = None if dev is None else DevEvaluator(*dev, vocabulary, model, n_jobs)
    score = None
    if validation is not None:
        if validation_scorer is None:
            X_val, y_val, *weights_val = validation
            score = DevEvaluator(
                X_val,
                y_val,
                vocabulary,
                model,
                n_jobs,
                name="validation",
                sample_weight=weights_val[0] if weights_val else None,
                allowed_transitions=allowed_transitions,
            ).accuracy
        else:
            score = validation_scorer(model, vocabulary, *validation)
    if log is None:
        log = TrainingLog(verbose=verbose, total=settings["max_iterations"] or None)
    return TrainingMonitor(
        log,
        holdout=holdout,
        validation=score,
        n_iter_no_change=n_iter_no_change,
        tol=tol,
        callback=callback,
        validation_name=validation_name or "the token accuracy score",
    )


def minimize(
    loss_gradient,
    x0,
    settings,
    monitor,
    *,
    owner="CRFTagger",
    stacklevel=2,
    fresh_gradient=False,
    n_threads=1,
    warn=True,
    linesearch_hint=None,
):
    """L-BFGS / OWL-QN on ``loss_gradient`` (CRFsuite's 'lbfgs').

    ``x0``: an array or a :class:`~skcrf._training._lbfgs.Handover` (see
    :func:`minimize_lbfgs`); ``stacklevel`` is the caller's, for the warning
    of a fit that stopped before converging (it names the weights that are
    kept);
    ``fresh_gradient``: ``loss_gradient`` returns a new gradient array at
    every call, kept without a copy (:func:`minimize_lbfgs`);
    ``n_threads``: the threads of the optimizer's vector passes;
    ``warn=False``: no warning (a caller whose log reports the status);
    ``linesearch_hint``: a callable giving a sentence (or "") that the
    warning adds when the line search failed.
    """
    if len(x0) == 0:
        # No feature exists (say, only empty tokens in one-token sequences):
        # the objective is constant, nothing to optimize.
        loss, gradient = loss_gradient(np.zeros(0))
        return LBFGSResult(
            x=np.zeros(0),
            fun=loss,
            grad=gradient,
            status=LBFGSStatus.ALREADY_MINIMIZED,
            n_iter=0,
            n_evals=1,
            message="The model has no features: nothing to optimize.",
        )
    result = minimize_lbfgs(
        loss_gradient,
        x0,
        c1=settings["c1"],
        num_memories=settings["num_memories"],
        epsilon=settings["epsilon"],
        period=settings["period"],
        delta=settings["delta"],
        max_iterations=settings["max_iterations"] or None,
        linesearch=settings["linesearch"],
        max_linesearch=settings["max_linesearch"],
        callback=monitor.lbfgs_iteration,
        fresh_gradient=fresh_gradient,
        n_threads=n_threads,
    )
    unconverged = not result.status.converged and result.status is not LBFGSStatus.CALLBACK_STOP
    if warn and unconverged:
        from sklearn.exceptions import ConvergenceWarning  # not at import: see skcrf.pycrfsuite

        hint = ""
        if linesearch_hint is not None and result.status.is_linesearch_failure:
            hint = linesearch_hint()
        warnings.warn(
            f"{owner} stopped before converging: {result.message} "
            f"({result.status.name}, after {result.n_iter} iterations). The "
            "weights are those of the last accepted iteration." + (hint and f" {hint}"),
            ConvergenceWarning,
            stacklevel=stacklevel + 1,
        )
    return result


#: Feature values of this magnitude and more are named when the line search
#: fails (the objective's curvature grows with the square of the values: in
#: a small test, a value of 1e5 stopped the fit after one iteration, 1e3 did
#: not).
_LARGE_VALUE = 1e4


def _large_values_hint(largest, attributes):
    """A sentence naming the largest feature value if it is large (``largest_value``'s)."""
    if largest is None or abs(largest[0]) < _LARGE_VALUE:
        return ""
    value, where, attribute = largest
    return (
        f"The feature values may be too large for the line search: {value:g} at "
        f"{where} (feature {attributes[attribute]!r}); scale them down (to about 1)."
    )


def _overflow_at_start(c2, token_weights):
    """Why the objective is not finite with every weight at zero, in the user's terms."""
    causes = []
    if not math.isfinite(2.0 * float(c2)):
        causes.append(f"c2={c2:g} is too large (the gradient holds 2 * c2 * w)")
    if token_weights is not None and len(token_weights):
        causes.append(
            "the sample or class weights may be too large (the largest weight of a "
            f"token is {float(np.max(token_weights)):g}; the loss sums weight x log-loss)"
        )
    if not causes:
        causes.append("the feature values may be too large")
    return (
        "Training cannot start: the loss or its gradient is not finite with every "
        f"weight at zero, so a term of the objective overflows float64: {'; '.join(causes)}."
    )


def outcome(algorithm, result, monitor, *, stacklevel=2, warn=True):
    """The status to report and the weights to keep; closes the log (``warn``: see :func:`fit`)."""
    status, weights = result.status, result.x
    if monitor.early_stopped:
        status = (LBFGSStatus if algorithm == "lbfgs" else OnlineStatus).EARLY_STOPPING
    if monitor.best_weights is not None:
        weights = monitor.best_weights
    if warn and status is OnlineStatus.OVERFLOW:
        from sklearn.exceptions import ConvergenceWarning

        warnings.warn(
            f"CRFTagger ({algorithm}) stopped on a failure: {result.message} "
            f"({status.name}, after {result.n_iter} epochs).",
            ConvergenceWarning,
            stacklevel=stacklevel + 1,
        )
    monitor.log.finish(status, result.message if status is result.status else status.description)
    return status, weights


def fit(
    X,
    y,
    algorithm,
    settings,
    vocabulary,
    *,
    n_jobs,
    random_state,
    monitor_options,
    previous=None,
    previous_trainer_state=None,
    missing_label=None,
    allowed_transitions=None,
    stacklevel=2,
    sample_weight=None,
    class_weight=None,
    model_filename=None,
    classes=None,
    warn=True,
):
    """Train a model on ``X, y`` with any algorithm (``CRFTagger.fit``).

    Parameters
    ----------
    vocabulary : Vocabulary
        A new vocabulary (or a copy of the previous model's), grown here.
    random_state : RandomState
        The online trainers' shuffling.
    monitor_options : dict
        The keyword arguments of :func:`make_monitor` other than the model,
        vocabulary and settings.
    previous : CRFModel or None
        The model a warm start continues from.
    previous_trainer_state : OnlineState or None
        Its online trainer's state (a warm start of an online trainer).
    sample_weight : array-like of shape (n_sequences,) or None
    class_weight : None, 'balanced' or dict
        See :func:`apply_weights`.
    model_filename : path or None
        The CRFsuite file the estimator writes (it cannot hold conditioned
        transitions: an error before training).
    classes : ndarray or None
        Labels of the model before those of ``y`` (without a warm start):
        a label only here is a label of the model without state features,
        in every normalizer (CRFsuite's label set is its whole data set's,
        a held-out group's labels included).
    warn : bool, default=True
        Warn (scikit-learn's ``ConvergenceWarning``) when training stops
        before converging or an online trainer overflows. False: no warning,
        and scikit-learn is not imported (the command line, whose log says
        how training ended).

    Tokens may hold transition attributes (:data:`TRANSITION_KEY`): the
    model then has input-conditioned transitions (``model.conditioned``).

    Returns
    -------
    FitResult
    """
    check_class_weight(class_weight)
    if sample_weight is not None:
        check_sample_weight(sample_weight)  # before reading X
    known_classes = classes if previous is None else previous.classes
    parts = TransitionParts()
    data = encode_training_data(
        vocabulary,
        X,
        y,
        algorithm=algorithm,
        missing_label=missing_label,
        previous_classes=known_classes,
        transitions=parts,
    )
    transition_attributes = None
    if parts.found:
        check_conditioned_fit(algorithm, data.partial, class_weight, previous, model_filename)
        # a warm start keeps the ids of the previous model's transition attributes
        transitions = (
            Vocabulary()
            if previous is None
            else Vocabulary(list(previous.conditioned.attributes), previous.value_separator)
        )
        data = data._replace(encoded=with_transitions(data.encoded, parts, transitions, grow=True))
        transition_attributes = transitions.attributes
    elif previous is not None and previous.conditioned is not None:
        raise ValueError(
            "warm_start continues a model with input-conditioned transitions, but X "
            f"holds no transition attributes (the token key {TRANSITION_KEY!r})."
        )
    data, weights = apply_weights(data, sample_weight, class_weight, known_classes)
    transition_constraints(data.classes, allowed_transitions)  # fail now, not at predict
    model, observed, old_index = select_model_features(
        data,
        vocabulary,
        settings,
        previous,
        token_weights=weights,
        transition_attributes=transition_attributes,
    )
    resume = None
    if previous is not None:
        resume = resumed_trainer_state(
            algorithm, previous_trainer_state, old_index, model.n_features
        )
    monitor = make_monitor(model, vocabulary, settings, n_jobs=n_jobs, **monitor_options)
    # The vocabulary's lookup tables are not needed by the training: they
    # go before the objective copies the data (the fit's peak was there, with
    # the tables, the encoded data and the objective's blocks alive at once)
    # and come back once the trainer's memory is freed (or earlier, if a
    # validation scorer encodes). The names are packed into one text, the
    # model's and the vocabulary's: no str per attribute while training.
    packed = vocabulary.rest(pack=model.attributes is vocabulary.attributes)
    if packed is not None:
        model.attributes = packed
    trainer_state = None
    if algorithm == "lbfgs":
        # The objective copies the rows it reads into its blocks (without the
        # explicit zeros, which only feature selection needed): the encoded
        # CSR loses its zeros first, in place, and goes once the blocks exist,
        # before L-BFGS allocates its vectors.
        largest = largest_value(data.encoded)  # (for a warning: the data go below)
        objective = CRFObjective(
            drop_zeros(data.encoded),
            model,
            observed,
            c2=settings["c2"],
            n_threads=effective_n_threads(n_jobs),
            partial=data.partial,
            token_weights=weights,
            labels=data.label_index,
        )
        del data, observed  # the objective keeps the counts as it needs them
        with objective:
            try:
                result = minimize(
                    objective.loss_gradient,
                    Handover(model.weights),  # freed after the first iteration
                    settings,
                    monitor,
                    stacklevel=stacklevel + 1,
                    fresh_gradient=True,  # CRFObjective's gradient is a new array
                    n_threads=effective_n_threads(n_jobs),
                    warn=warn,
                    linesearch_hint=lambda: _large_values_hint(largest, model.attributes),
                )
            except NonFiniteStartError:
                raise ValueError(_overflow_at_start(settings["c2"], weights)) from None
        del objective  # (its blocks: the encoded data) before the tables come back
    else:
        result = train_online(
            algorithm,
            data.encoded,
            data.label_index,
            model,
            settings,
            random_state=random_state,
            callback=monitor.online_epoch,
            resume=resume,
            token_weights=weights,
        )
        trainer_state = result.state
    status, weights = outcome(algorithm, result, monitor, stacklevel=stacklevel + 1, warn=warn)
    vocabulary.wake()  # a fitted model's first prediction does not pay for it
    return FitResult(
        model.with_weights(weights),
        vocabulary,
        result.n_iter,
        status,
        monitor.log,
        trainer_state,
        monitor.best_iteration,
    )


def partial_fit(
    X,
    y,
    algorithm,
    settings,
    vocabulary,
    classes,
    *,
    random_state,
    verbose=False,
    previous=None,
    missing_label=None,
    sample_weight=None,
    class_weight=None,
):
    """One epoch of an online trainer on ``X, y`` (``CRFTagger.partial_fit``).

    Parameters
    ----------
    vocabulary : Vocabulary
        A new vocabulary (or a copy of the previous model's), grown here.
    classes : iterable or None
        The labels: required on the first call, None or the same after.
    previous : FitResult or None
        What the previous call left (model, trainer state, epochs, log); a
        copy of its log is continued (``previous`` is left as it is).

    Returns
    -------
    FitResult
    """
    if algorithm == "lbfgs":
        raise ValueError(
            "partial_fit needs an online trainer: algorithm='l2sgd', 'asgd', 'ap', 'pa' or "
            "'arow'. L-BFGS ('lbfgs', the default) optimizes over all the data at "
            "once; use fit."
        )
    if previous is not None:
        state = previous.trainer_state
        if state is None:
            raise ValueError(
                "partial_fit cannot continue this model: it was not trained by an "
                "online trainer in this session (a model loaded from a file keeps no "
                "trainer state). Train it with fit or partial_fit first."
            )
        if state.algorithm != algorithm:
            raise ValueError(
                f"partial_fit: the model was trained with algorithm={state.algorithm!r}, "
                f"but algorithm is now {algorithm!r}; an online trainer continues only "
                "its own state."
            )
    check_class_weight(class_weight, allow_balanced=False)
    if sample_weight is not None:
        check_sample_weight(sample_weight)  # before reading X
    classes = partial_fit_classes(classes, None if previous is None else previous.model.classes)
    parts = TransitionParts()
    data = encode_training_data(
        vocabulary,
        X,
        y,
        algorithm=algorithm,
        missing_label=missing_label,
        fixed_classes=classes,
        transitions=parts,
    )
    if parts.found:
        check_conditioned_fit(algorithm, None, None, None, None)  # online: an error
    # the classes are fixed: a sequence of weight 0 is dropped, its labels stay
    data, weights = apply_weights(data, sample_weight, class_weight, previous_classes=classes)
    batch_model, _, _ = select_model_features(data, vocabulary, settings)
    if previous is not None:
        model, index, _ = merge_features(previous.model, batch_model)
        state = previous.trainer_state.expanded(index, model.n_features)
        # the log is continued on a copy: a call that fails leaves the old one
        n_iter, log = previous.n_iter, previous.log.copy()
    else:
        model, state, n_iter, log = batch_model, None, 0, TrainingLog(verbose=verbose)
    result = train_online(
        algorithm,
        data.encoded,
        data.label_index,
        model,
        settings,
        random_state=random_state,
        callback=lambda entry, w: log.record_epoch({**entry, "num": n_iter + 1}, w),
        resume=state,
        n_epochs=1,
        token_weights=weights,
    )
    log.finish(result.status, result.message)
    return FitResult(
        model.with_weights(result.x),
        vocabulary,
        n_iter=n_iter + 1,
        status=result.status,
        log=log,
        trainer_state=result.state,
        best_iteration=None,
    )
