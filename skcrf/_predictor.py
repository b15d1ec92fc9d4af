"""What a fitted model answers: labels, probabilities, entities, explanations.

:class:`Predictor` holds one fitted model with what serving it needs (the
attribute vocabulary, the transition attributes' vocabulary, the decoder).
Every prediction method of :class:`~skcrf.CRFTagger` checks its arguments
and hands one call to it, with the estimator's decoding parameters in a
:class:`Decoding`. A predictor is never changed once built: any number of
threads share it, and each call's workspaces are its own.

Conventions
-----------
- ``X`` is any iterable of sequences of tokens (encoded once, streamed when
  it is not a list); ``xseq`` one sequence, checked by the caller
  (:func:`~skcrf._featurize._validation.check_single_sequence`).
- ``decoding.allowed_transitions`` is the estimator's; a call's own
  ``allowed_transitions`` replaces it when not None.
- Label results are lists of the model's labels (``classes``), per sequence.
"""

from typing import Any, NamedTuple

import numpy as np

from ._featurize._labels import check_distinct_labels, check_labels, encode_labels
from ._featurize._stream import encode_data
from ._featurize._transitions import TransitionParts, with_transitions
from ._featurize._validation import check_sequences
from ._featurize._vocabulary import Vocabulary
from ._inference._constraints import Constraints, scheme_roles
from ._inference._decode import Decoder
from ._inference._explain import explanation, explanation_rows, strongest_features
from ._inference._output import label_lists
from ._inference._spans import RoleMasks, span_log_proba
from ._inference._structured import nbest, sequence_scores, transition_marginals
from ._template._vocabulary import TemplateVocabulary
from ._training._weights import check_sample_weight
from ._utils._threads import effective_n_threads

__all__ = ["Decoding", "Predictor", "data_frame"]


class Decoding(NamedTuple):
    """The estimator's decoding parameters, as a call uses them."""

    method: str  # ``decoding``: 'viterbi' or 'posterior'
    allowed_transitions: Any
    n_jobs: int | None

    def n_threads(self):
        return effective_n_threads(self.n_jobs)

    @classmethod
    def from_params(cls, params):
        """The decoding of a model file's parameters (the estimator's defaults if absent)."""
        return cls(
            params.get("decoding", "viterbi"),
            params.get("allowed_transitions"),
            params.get("n_jobs"),
        )


class Predictor:
    """A fitted model ready to decode (read-only, shared by threads).

    Parameters
    ----------
    model : CRFModel
    vocabulary : Vocabulary, optional
        The model's attribute vocabulary (the fit's own, with its caches);
        built from ``model.attributes`` when not given.
    decoder : Decoder, optional
        Built from ``model`` when not given.
    template : CompiledPlan, optional
        The model's template: the vocabulary then encodes raw tokens
        (:class:`~skcrf._template._vocabulary.TemplateVocabulary`).
    """

    def __init__(self, model, vocabulary=None, decoder=None, template=None):
        self.model = model
        self.classes = model.classes
        self._class_list = model.classes.tolist()  # the labels decoded paths index
        self.template = template
        if vocabulary is None and template is not None:
            conditioned = () if model.conditioned is None else model.conditioned.attributes
            # (a model file's packed names stay lazy: no str per name)
            vocabulary = TemplateVocabulary(template, model.attributes, conditioned)
        self.vocabulary = (
            Vocabulary(model.attributes, model.value_separator)
            if vocabulary is None
            else vocabulary
        )
        self.decoder = Decoder(model) if decoder is None else decoder
        self.transition_vocabulary = (
            None
            if model.conditioned is None
            else Vocabulary(model.conditioned.attributes, model.value_separator)
        )

    # -- encoding and decoding, shared by the questions below ----------------

    def encode(self, X, name="X", y=None, n_threads=1):
        """``X`` encoded for prediction (and ``y`` as a list, when given).

        ``n_threads``: a template's raw tokens are featurized by that many
        threads (feature dicts are read by one).
        """
        # a model with transition attributes takes them out of the tokens
        parts = None if self.model.conditioned is None else TransitionParts()
        if y is None:
            encoded = encode_data(
                self.vocabulary,
                X,
                grow=False,
                name=name,
                single_hint=name == "X",
                transitions=parts,
                n_threads=n_threads,
            )
        else:
            encoded, y = encode_data(
                self.vocabulary,
                X,
                y,
                grow=False,
                name=name,
                transitions=parts,
                n_threads=n_threads,
            )
        if parts is not None:
            encoded = with_transitions(
                encoded, parts, self.transition_vocabulary, grow=False, name=name
            )
        return encoded if y is None else (encoded, y)

    def encode_single(self, xseq):
        """One sequence encoded for prediction."""
        if self.model.conditioned is not None:
            return self.encode([xseq], name="xseq")
        return self.vocabulary.encode([xseq], grow=False, name="xseq")

    def constraints(self, lengths, decoding, allowed_transitions, partial_labels, scheme=None):
        """The :class:`Constraints` of a call (None when there are none)."""
        if allowed_transitions is None:
            allowed_transitions = decoding.allowed_transitions
        if allowed_transitions is None and partial_labels is None and scheme is None:
            return None
        return Constraints.build(
            self.classes, lengths, allowed_transitions, partial_labels, scheme=scheme
        )

    def path(self, encoded, constraints, decoding, n_threads, name="X"):
        """Label index of every token (flat order) under ``decoding.method``."""
        if decoding.method == "viterbi":
            method = self.decoder.viterbi
        elif decoding.method == "posterior":
            method = self.decoder.posterior
        else:  # set_params does not validate
            raise ValueError(
                f"The 'decoding' parameter of CRFTagger must be 'viterbi' or 'posterior'; "
                f"got {decoding.method!r:.60}."
            )
        return method(encoded, n_threads, name=name, constraints=constraints)

    def _encode_constrained(self, X, decoding, allowed_transitions, partial_labels, scheme=None):
        encoded = self.encode(X, n_threads=decoding.n_threads())
        constraints = self.constraints(
            encoded.lengths, decoding, allowed_transitions, partial_labels, scheme=scheme
        )
        return encoded, constraints

    # -- the questions -------------------------------------------------------

    def predict(self, X, decoding, allowed_transitions=None, partial_labels=None):
        """Labels of each sequence."""
        if self._straight(decoding, allowed_transitions, partial_labels) and type(X) is list:
            # raw tokens featurized and decoded in one compiled call a shard
            vocabulary = self.vocabulary
            try:
                path, lengths = self.decoder.viterbi_token_sequences(
                    check_sequences(X),
                    vocabulary.compiled,
                    vocabulary.index,
                    vocabulary.constant_ids,
                    decoding.n_threads(),
                )
            except OverflowError:
                pass  # the encoded path below words the error
            else:
                return label_lists(path, lengths, self._class_list)
        encoded, constraints = self._encode_constrained(
            X, decoding, allowed_transitions, partial_labels
        )
        path = self.path(encoded, constraints, decoding, decoding.n_threads())
        return label_lists(
            np.asarray(path, dtype=np.intp),
            np.asarray(encoded.lengths, dtype=np.intp),
            self._class_list,
        )

    @staticmethod
    def _unconstrained_viterbi(decoding, allowed_transitions, partial_labels):
        return (
            allowed_transitions is None
            and decoding.allowed_transitions is None
            and partial_labels is None
            and decoding.method == "viterbi"
        )

    def _straight(self, decoding, allowed_transitions, partial_labels):
        """Whether a call's Viterbi runs straight from a template's raw tokens."""
        return (
            self.template is not None
            and self.model.conditioned is None
            and self._unconstrained_viterbi(decoding, allowed_transitions, partial_labels)
        )

    def predict_single(self, xseq, decoding, allowed_transitions=None, partial_labels=None):
        """Labels of one sequence: one thread, Viterbi straight when unconstrained."""
        if self._straight(decoding, allowed_transitions, partial_labels):
            # raw tokens featurized and decoded in one compiled call
            vocabulary = self.vocabulary
            try:
                path = self.decoder.viterbi_tokens(
                    xseq, vocabulary.compiled, vocabulary.index, vocabulary.constant_ids
                )
            except OverflowError:
                pass  # the encoded path below words the error
            else:
                return self.classes[path].tolist()
        encoded = self.encode_single(xseq)
        if self._unconstrained_viterbi(decoding, allowed_transitions, partial_labels):
            return self.classes[self.decoder.viterbi_single(encoded, name="xseq")].tolist()
        constraints = self.constraints(
            encoded.lengths,
            decoding,
            allowed_transitions,
            None if partial_labels is None else [partial_labels],
        )
        return self.classes[self.path(encoded, constraints, decoding, 1, name="xseq")].tolist()

    def marginals(self, X, decoding, allowed_transitions=None, partial_labels=None):
        """Per sequence, per token, ``{label: probability}``."""
        encoded, constraints = self._encode_constrained(
            X, decoding, allowed_transitions, partial_labels
        )
        return self.decoder.marginal_dicts(
            encoded, self.classes.tolist(), decoding.n_threads(), constraints=constraints
        )

    def nbest(self, X, n, decoding, allowed_transitions=None, partial_labels=None):
        """Per sequence, the ``n`` most probable ``(labels, log_probability)``."""
        encoded, constraints = self._encode_constrained(
            X, decoding, allowed_transitions, partial_labels
        )
        paths, log_proba, found = nbest(
            self.decoder, encoded, n, decoding.n_threads(), constraints=constraints
        )
        labels = [self.classes[row].tolist() for row in paths[: int(found.max(initial=1))]]
        log_proba = log_proba.tolist()
        return [
            [(labels[q][start:stop], log_proba[i][q]) for q in range(found_i)]
            for i, (start, stop, found_i) in enumerate(
                zip(*_bounds(encoded.lengths), found.tolist())
            )
        ]

    def sequence_log_proba(self, X, y, decoding, allowed_transitions=None, partial_labels=None):
        """``log p(y | x)`` of each sequence (``y`` None: of its decoded labels)."""
        if y is None:
            encoded = self.encode(X, n_threads=decoding.n_threads())
        else:
            encoded, y = self.encode(X, y=y, n_threads=decoding.n_threads())
        constraints = self.constraints(
            encoded.lengths, decoding, allowed_transitions, partial_labels
        )
        n_threads = decoding.n_threads()
        if y is None and decoding.method == "viterbi":
            _, log_proba, _ = nbest(self.decoder, encoded, 1, n_threads, constraints=constraints)
            return log_proba[:, 0]
        if y is None:
            label_index = self.path(encoded, constraints, decoding, n_threads)
        else:
            labels = check_labels(y, encoded.lengths, name="y")
            label_index, _ = encode_labels(
                labels, self.classes, name="y", lengths=encoded.lengths, classes_name="classes_"
            )
        return sequence_scores(
            self.decoder, encoded, label_index, n_threads, constraints=constraints
        )

    def transition_marginals(self, X, decoding, allowed_transitions=None, partial_labels=None):
        """Per sequence, the ``(len - 1, L, L)`` marginals of neighbouring label pairs."""
        encoded, constraints = self._encode_constrained(
            X, decoding, allowed_transitions, partial_labels
        )
        pairs = transition_marginals(
            self.decoder, encoded, decoding.n_threads(), constraints=constraints
        )
        return [
            pairs[start : max(stop - 1, start)] for start, stop in zip(*_bounds(encoded.lengths))
        ]

    def entities(self, X, scheme, decoding, allowed_transitions=None, partial_labels=None):
        """Per sequence, ``(start, end, type, probability)`` of each decoded entity."""
        name, roles = scheme_roles(self.classes.tolist(), scheme, context="scheme")
        encoded, constraints = self._encode_constrained(
            X, decoding, allowed_transitions, partial_labels, scheme=scheme
        )
        # skcrf.metrics imports scikit-learn: not at import (the command line tags without it)
        from .metrics import _chunks_from_parsed as label_chunks

        n_threads = decoding.n_threads()
        path = self.path(encoded, constraints, decoding, n_threads)
        parsed = [roles[k] for k in path.tolist()]
        spans = [
            [(start, end, kind) for kind, start, end in label_chunks(seq)]
            for seq in split_flat(parsed, encoded.lengths)
        ]
        log_proba = span_log_proba(
            self.decoder,
            encoded,
            spans,
            RoleMasks(name, roles),
            n_threads,
            constraints=constraints,
        )
        return [
            [
                (start, end, kind, float(np.exp(lp)))
                for (start, end, kind), lp in zip(seq, seq_log_proba.tolist())
            ]
            for seq, seq_log_proba in zip(spans, log_proba)
        ]

    def explain(self, xseq, decoding, as_frame=False):
        """The feature terms of each token's predicted and runner-up labels."""
        labels = self.predict_single(xseq, decoding)
        marginals = self.marginals([xseq], decoding)[0]
        terms = explanation(self.model, self.encode_single(xseq), labels, marginals)
        if not as_frame:
            return terms
        return data_frame(*explanation_rows(terms), "explain")

    def top_features(self, n, as_frame=False):
        """The ``n`` strongest state features and transitions."""
        state, transition = strongest_features(self.model, n)
        if not as_frame:
            return {"state": state, "transition": transition}
        rows = [("state", a, None, label, w) for a, label, w in state]
        rows += [("transition", None, source, label, w) for source, label, w in transition]
        columns = ["kind", "attribute", "from_label", "label", "weight"]
        return data_frame(rows, columns, "top_features")

    def accuracy(self, X, y, decoding, sample_weight=None):
        """Token accuracy of the decoded labels (weighted per sequence)."""
        weights = check_sample_weight(sample_weight)
        encoded, y = self.encode(X, y=y, n_threads=decoding.n_threads())
        if weights is not None:
            weights = check_sample_weight(weights, len(encoded.lengths))
        true = check_labels(y, encoded.lengths, name="y")
        if not true:
            raise ValueError("score needs at least one token; all sequences are empty.")
        check_distinct_labels(
            true, "y", classes=self.classes, lengths=encoded.lengths, classes_name="classes_"
        )
        constraints = self.constraints(encoded.lengths, decoding, None, None)
        path = self.path(encoded, constraints, decoding, decoding.n_threads())
        correct = [a == b for a, b in zip(true, self.classes[path].tolist())]
        if weights is None:
            return float(np.mean(correct))
        token_weights = np.repeat(weights, encoded.lengths)
        if not token_weights.sum() > 0:
            raise ValueError("score: sample_weight is 0 for every token.")
        return float(np.average(correct, weights=token_weights))


def _bounds(lengths):
    """Start and stop (lists) of each sequence in flat token order."""
    ends = np.cumsum(lengths).tolist()
    return [0, *ends[:-1]], ends


def split_flat(flat, lengths):
    """A flat per-token list split into one list per sequence."""
    return [flat[start:stop] for start, stop in zip(*_bounds(lengths))]


def data_frame(rows, columns, method):
    """``pandas.DataFrame(rows, columns=columns)``; a clear error without pandas."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(
            f"{method}(as_frame=True) needs pandas, which is not installed; "
            "install it or use as_frame=False (plain lists)."
        ) from None
    return pd.DataFrame(rows, columns=columns)
