"""A ``pycrfsuite.Tagger`` look-alike over a fitted skcrf model.

sklearn-crfsuite's ``CRF.tagger_`` is a ``pycrfsuite.Tagger``; code written
for it calls ``labels()``, ``info()``, ``set(xseq)``, ``tag()``,
``probability(yseq)``, ``marginal(y, pos)`` and ``dump()``.
:class:`CRFsuiteTagger` answers those calls from skcrf's own model and
kernels: the :class:`~skcrf._inference._decode.Decoder` for Viterbi paths and marginals,
the numpy forward pass of :mod:`skcrf._inference._logspace` for ``log Z``. Nothing here
imports the estimator or pycrfsuite.

Conventions
-----------
- The view shows the model as CRFsuite stores it in a model file: only the
  features with a nonzero weight, only the attributes that keep at least one
  of them (numbered ``0, 1, ...`` in skcrf's attribute order, as CRFsuite's
  writer renumbers them), and every label, numbered as in ``classes``.
  Features with a zero weight score nothing, so tagging is unaffected.
- ``info()`` is the parsed text dump, as in pycrfsuite: ids are strings and
  weights are the dump's, printed with six decimals (``%f``) and read back.
  The exact weights are the estimator's ``state_features_`` and
  ``transition_features_``.
- Labels are returned as the model holds them (``classes``): strings for a
  model trained on strings or read from a CRFsuite file, but an skcrf model
  trained on ints returns ints (pycrfsuite only knows strings). The dump
  writes ``str(label)``.
- ``set`` stores one sequence per thread; ``tag()``, ``probability`` and
  ``marginal`` read the calling thread's. Calls that pass ``xseq`` give, from
  any number of threads sharing one view, exactly the results of sequential
  calls (pycrfsuite's ``Tagger`` keeps one sequence for all threads).
- A view holds at most one model. Built without one (``skcrf.pycrfsuite``'s
  ``Tagger()``) it is closed until a model is loaded: every method then
  raises :class:`TaggerClosedError`. Loading replaces everything at once
  (the model, its vocabulary, decoder and caches are one object), so a
  thread never sees half of two models; a sequence set under a model that
  was since replaced counts as not set.
"""

from __future__ import annotations

import math
import operator
import os
import sys
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex

import numpy as np

from ._featurize._validation import check_emissions, check_sequences
from ._featurize._vocabulary import Vocabulary
from ._inference._blocks import state_scores
from ._inference._decode import Decoder
from ._inference._logspace import forward_backward
from ._persist._crfsuite_file import crfsuite_bytes, header_fields
from ._typing import SequenceLike

if TYPE_CHECKING:
    from ._model import CRFModel

__all__ = ["CRFsuiteTagger", "ParsedDump", "TaggerClosedError", "UnknownLabelError"]


class UnknownLabelError(ValueError, RuntimeError):
    """A label that the model does not have.

    A ``ValueError``; also a ``RuntimeError``, which is what pycrfsuite raises
    in this case ("Failed to convert into label identifier"), so that code
    catching either keeps working.
    """


class TaggerClosedError(ValueError, RuntimeError):
    """A tagger without a model: never opened, or closed.

    A ``ValueError`` and a ``RuntimeError``: pycrfsuite raises the first from
    ``labels``, ``set``, ``tag``, ``probability`` and ``marginal`` on a closed
    tagger ("The tagger is not opened") and the second from ``info`` and
    ``dump`` ("Tagger is closed"), so code catching either keeps working.
    """


class ParsedDump:
    """The model's parameters, as ``pycrfsuite.Tagger.info()`` returns them.

    Attributes
    ----------
    header : dict
        ``{field: str}``: the fields of the CRFsuite file header (``magic``,
        ``size``, ``type``, ``version``, ``num_features``, ``num_labels``,
        ``num_attrs``, ``off_*``), as the dump prints them.
    labels : dict
        ``{label: id}``, ids as strings (``'0'``, ``'1'``, ...).
    attributes : dict
        ``{attribute: id}``, ids as strings; only the attributes with a
        nonzero state feature.
    transitions : dict
        ``{(label_from, label_to): weight}``, nonzero weights only.
    state_features : dict
        ``{(attribute, label): weight}``, nonzero weights only.
    """

    def __init__(self) -> None:
        self.header: dict[str, str] = {}
        self.labels: dict[Any, str] = {}
        self.attributes: dict[str, str] = {}
        self.transitions: dict[tuple[Any, Any], float] = {}
        self.state_features: dict[tuple[str, Any], float] = {}

    def __repr__(self) -> str:
        return (
            f"<ParsedDump: {len(self.labels)} labels, {len(self.attributes)} attributes, "
            f"{len(self.transitions)} transitions, {len(self.state_features)} state features>"
        )


class _SetSequence:
    """The sequence given to ``set``: its encoding and what was computed from it.

    Each is computed when first needed (``tag(xseq)`` computes only the
    path); the object belongs to the thread that set it.
    """

    __slots__ = ("loaded", "encoded", "emissions", "path", "marginals", "log_partition")

    def __init__(self, loaded, encoded):
        self.loaded = loaded  # the _Loaded it was encoded for
        self.encoded = encoded
        self.emissions = None
        self.path = None
        self.marginals = None
        self.log_partition = None


class _Loaded:
    """One model and everything derived from it, replaced as one object."""

    def __init__(
        self,
        model: CRFModel,
        vocabulary: Vocabulary | None,
        decoder: Decoder | None,
        file_header: dict[str, str] | None,
    ) -> None:
        if vocabulary is None:
            vocabulary = Vocabulary(model.attributes, model.value_separator)
        self.model = model
        self.vocabulary = vocabulary
        self.decoder = Decoder(model) if decoder is None else decoder
        self.classes = list(model.classes.tolist())
        self.label_index = {label: k for k, label in enumerate(self.classes)}
        # a model read from a file is shown as the file holds it
        self.from_file = file_header is not None
        self.header_fields: dict[str, str] | None = file_header
        self.info: ParsedDump | None = None
        self.stored_model: CRFModel | None = model if self.from_file else None


class CRFsuiteTagger:
    """A ``pycrfsuite.Tagger`` look-alike over a fitted skcrf model.

    What ``CRFTagger.tagger_`` returns, so that code written for
    sklearn-crfsuite's ``crf.tagger_`` runs unchanged. The methods and their
    results are pycrfsuite's (see the module's conventions for the model it
    shows); the differences are clearer errors where pycrfsuite answers
    silently (``tag()`` or ``probability`` before any ``set``, an unknown
    label) and no model files: build an estimator from a CRFsuite file with
    ``CRFTagger.from_crfsuite(path)`` instead of ``open`` (or use
    ``skcrf.pycrfsuite.Tagger``, this class with ``open``).

    Parameters
    ----------
    model : CRFModel, optional
        The fitted model. None: the tagger is closed until a model is
        loaded (``skcrf.pycrfsuite.Tagger`` opens files into it).
    vocabulary : Vocabulary, optional
        The model's attribute vocabulary (the estimator's, to share its
        caches); built from ``model.attributes`` when omitted.
    decoder : Decoder, optional
        The model's decoder; built when omitted.

    Examples
    --------
    >>> from skcrf import CRFTagger
    >>> from skcrf._tagger_view import CRFsuiteTagger
    >>> X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}, {"w": "runs"}]]
    >>> y = [["DET", "NOUN"], ["DET", "NOUN", "VERB"]]
    >>> crf = CRFTagger(c2=0.1).fit(X, y)
    >>> tagger = CRFsuiteTagger(crf._model)
    >>> tagger.labels()
    ['DET', 'NOUN', 'VERB']
    >>> tagger.tag([{"w": "the"}, {"w": "cat"}])
    ['DET', 'NOUN']
    >>> tagger.tag()  # the sequence set by the last call
    ['DET', 'NOUN']
    >>> round(tagger.marginal("NOUN", 1), 3) > 0.5
    True
    >>> 0 < tagger.probability(["DET", "NOUN"]) <= 1
    True
    >>> tagger.info().attributes["w:dog"]
    '1'
    """

    def __init__(
        self,
        model: CRFModel | None = None,
        vocabulary: Vocabulary | None = None,
        decoder: Decoder | None = None,
    ) -> None:
        # the sequence given to set(), one per thread: threads share a view
        self._local = threading.local()
        self._loaded: _Loaded | None = None
        if model is not None:
            self._load(model, vocabulary, decoder)

    def _load(
        self,
        model: CRFModel,
        vocabulary: Vocabulary | None = None,
        decoder: Decoder | None = None,
        *,
        file_header: dict[str, str] | None = None,
    ) -> None:
        """Show ``model`` from now on (one assignment: threads see old or new).

        ``file_header``: the header fields of the file ``model`` was read
        from; the view then shows the model as that file holds it (every
        feature, zero weights included) instead of as CRFsuite would store it.
        """
        self._loaded = _Loaded(model, vocabulary, decoder, file_header)

    def _unload(self) -> None:
        self._loaded = None

    def _state(self, method: str) -> _Loaded:
        loaded = self._loaded
        if loaded is None:
            raise TaggerClosedError(
                f"{method}: the tagger has no model: open a model file first (it was "
                "never opened, or was closed)."
            )
        return loaded

    @property
    def model(self) -> CRFModel | None:
        """The model (a ``CRFModel``) this view shows; None when closed."""
        loaded = self._loaded
        return None if loaded is None else loaded.model

    def __repr__(self) -> str:
        loaded = self._loaded
        if loaded is None:
            return f"<{type(self).__name__}: closed>"
        return (
            f"<{type(self).__name__}: {len(loaded.classes)} labels, "
            f"{loaded.model.n_attributes} attributes>"
        )

    # -- what pycrfsuite opens from files ----------------------------------

    def open(self, name: str | os.PathLike[str]) -> NoReturn:
        """Not supported: the view shows a fitted estimator's model.

        Raises
        ------
        NotImplementedError
            Always; load a CRFsuite model file with
            ``skcrf.CRFTagger.from_crfsuite(path)`` and use its ``tagger_``.
        """
        raise NotImplementedError(
            "CRFsuiteTagger.open: this tagger shows the model of a fitted skcrf "
            "CRFTagger and opens no files. Load a CRFsuite model file with "
            "skcrf.CRFTagger.from_crfsuite(path) and use its tagger_, or with "
            "skcrf.pycrfsuite.Tagger().open(path)."
        )

    def open_inmemory(self, value: bytes) -> NoReturn:
        """Not supported; see :meth:`open`.

        Raises
        ------
        NotImplementedError
            Always; write the bytes to a file and use
            ``skcrf.CRFTagger.from_crfsuite(path)``.
        """
        raise NotImplementedError(
            "CRFsuiteTagger.open_inmemory: this tagger shows the model of a fitted "
            "skcrf CRFTagger and opens no model data. Write the bytes to a file and "
            "load it with skcrf.CRFTagger.from_crfsuite(path)."
        )

    def close(self) -> None:
        """Do nothing: the view holds no file (kept so cleanup code runs)."""

    # -- the model -----------------------------------------------------------

    def labels(self) -> list[Any]:
        """The labels of the model.

        Returns
        -------
        list
            In label-id order (``classes``); see the module's note on types.

        Raises
        ------
        TaggerClosedError
            If no model is loaded.
        """
        return list(self._state("labels()").classes)

    def info(self) -> ParsedDump:
        """The model's parameters, as the parsed text dump.

        Returns
        -------
        ParsedDump
            Ids as strings, weights as printed by the dump (six decimals).

        Raises
        ------
        TaggerClosedError
            If no model is loaded.
        """
        loaded = self._state("info()")
        if loaded.info is None:
            loaded.info = self._parsed_dump(loaded)
        # a fresh copy each call, as pycrfsuite builds a new one each call
        info = ParsedDump()
        for name in ("header", "labels", "attributes", "transitions", "state_features"):
            setattr(info, name, dict(getattr(loaded.info, name)))
        return info

    def dump(self, filename: str | os.PathLike[str] | None = None) -> None:
        """Write the model in CRFsuite's plain-text dump format.

        Parameters
        ----------
        filename : str or path-like, optional
            Where to write (the file is replaced). None writes to stdout.

        Raises
        ------
        TaggerClosedError
            If no model is loaded.
        """
        text = self._dump_text(self._state("dump()"))
        if filename is None:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        with open(filename, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    # -- one sequence ----------------------------------------------------------

    def set(self, xseq: SequenceLike) -> None:
        """Set the sequence that the other methods work on.

        :meth:`tag`, :meth:`probability` and :meth:`marginal` read it.
        Each thread has its own: threads that share this tagger do not see
        each other's sequence (pycrfsuite's ``Tagger`` keeps one for all).

        Parameters
        ----------
        xseq : sequence of tokens
            One sequence, in pycrfsuite's formats: each token a dict of
            features (string values, numbers, bools, nested dicts, lists of
            strings) or a list of feature names; a
            ``pycrfsuite.ItemSequence`` is accepted too. Attributes the model
            does not know are ignored.

        Raises
        ------
        TaggerClosedError
            If no model is loaded.
        """
        loaded = self._state("set()")
        current = _SetSequence(loaded, self._encode(loaded, xseq))
        self._emissions(current)  # now: a token whose scores overflow is an error of set()
        self._local.current = current

    def _encode(self, loaded: _Loaded, xseq: Any) -> Any:
        """``xseq`` encoded by ``loaded``'s vocabulary (an ``Encoded`` of one sequence)."""
        tokens = self._tokens(xseq)
        return loaded.vocabulary.encode(
            check_sequences([tokens], name="xseq"), grow=False, name="xseq"
        )

    def _tokens(self, xseq: Any) -> Any:
        """``xseq`` as the list of tokens that skcrf encodes (a hook for subclasses)."""
        return _plain_sequence(xseq)

    def tag(self, xseq: SequenceLike | None = None) -> list[Any]:
        """The most probable labels (Viterbi) of a sequence.

        Parameters
        ----------
        xseq : sequence of tokens, optional
            Set this sequence first (as :meth:`set`). Omitted: the sequence
            set last.

        Returns
        -------
        list
            One label per token.

        Raises
        ------
        TaggerClosedError
            If no model is loaded.
        ValueError
            If ``xseq`` is omitted and this thread set no sequence (under the
            model now loaded).
        """
        if xseq is None:
            current = self._require_set("tag()")
            loaded = current.loaded
            if current.path is None:
                current.path = self._viterbi(loaded, current.encoded)
        else:
            # set(xseq), scoring the tokens once: the decoder computes the
            # scores (and names a token whose scores overflow, as set() does)
            loaded = self._state("set()")
            current = _SetSequence(loaded, self._encode(loaded, xseq))
            current.path = self._viterbi(loaded, current.encoded)
            self._local.current = current
        classes = loaded.classes
        return [classes[k] for k in current.path.tolist()]

    def probability(self, yseq: Iterable[Any]) -> float:
        """``P(yseq | xseq)`` of a label sequence, for the sequence set last.

        Parameters
        ----------
        yseq : sequence of labels
            One label per token of the sequence.

        Returns
        -------
        float
            0.0 for an empty sequence, as in CRFsuite.

        Raises
        ------
        ValueError
            If ``yseq`` and the sequence differ in length, or a label is not
            one of the model's (:class:`UnknownLabelError`), or no sequence
            is set (:class:`TaggerClosedError` without a model).
        """
        current = self._require_set("probability()")
        loaded = current.loaded
        yseq = list(yseq)
        n_tokens = len(current.encoded.indptr) - 1
        if len(yseq) != n_tokens:
            raise ValueError(
                f"probability(): the numbers of items and labels differ: the sequence "
                f"set has {n_tokens} items, yseq has {len(yseq)} labels."
            )
        if n_tokens == 0:
            return 0.0  # CRFsuite's answer for an empty sequence
        path = np.array(
            [self._label_id(loaded, label, f"yseq[{t}]") for t, label in enumerate(yseq)]
        )
        transitions = loaded.decoder.transitions
        score = self._emissions(current)[np.arange(n_tokens), path].sum()
        score += transitions[path[:-1], path[1:]].sum()
        return math.exp(score - self._log_partition(current))

    def marginal(self, y: Any, pos: SupportsIndex) -> float:
        """``P(y_pos = y | xseq)`` for the sequence set last.

        Parameters
        ----------
        y : label
        pos : int
            Position in the sequence, ``0 <= pos < len(xseq)``.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            If ``pos`` is out of range or ``y`` is not a label of the model
            (:class:`UnknownLabelError`), or no sequence is set
            (:class:`TaggerClosedError` without a model).
        """
        current = self._require_set("marginal()")
        loaded = current.loaded
        pos = operator.index(pos)
        n_tokens = len(current.encoded.indptr) - 1
        if not 0 <= pos < n_tokens:
            raise ValueError(
                f"marginal(): position {pos} is out of range: the sequence set has "
                f"{n_tokens} items."
            )
        label = self._label_id(loaded, y, "y")
        if current.marginals is None:
            current.marginals = loaded.decoder.marginals(current.encoded, name="xseq")
        return float(current.marginals[pos, label])

    # -- helpers ---------------------------------------------------------------

    def _require_set(self, method):
        loaded = self._state(method)
        current = getattr(self._local, "current", None)
        if current is None or current.loaded is not loaded:
            raise ValueError(
                f"{method}: no sequence is set in this thread. Call set(xseq) or tag(xseq) first."
            )
        return current

    @staticmethod
    def _label_id(loaded, label, where):
        try:
            return loaded.label_index[label]
        except (KeyError, TypeError):
            raise UnknownLabelError(
                f"{where}: {label!r} is not a label of the model; its labels are "
                f"{_short_list(loaded.classes)}."
            ) from None

    @staticmethod
    def _viterbi(loaded, encoded):
        """The label ids of the Viterbi path of one encoded sequence."""
        if len(encoded.indptr) == 1:
            return np.zeros(0, dtype=np.intp)
        return loaded.decoder.viterbi_single(encoded, name="xseq")

    @staticmethod
    def _emissions(current):
        """The state scores of the sequence set (checked finite), computed once."""
        if current.emissions is None:
            encoded, loaded = current.encoded, current.loaded
            emissions = np.zeros((len(encoded.indptr) - 1, len(loaded.classes)))
            state_scores(
                encoded.indptr, encoded.ids, encoded.values, loaded.decoder.arrays, emissions
            )
            check_emissions(emissions, encoded.lengths, name="xseq")
            current.emissions = emissions
        return current.emissions

    @classmethod
    def _log_partition(cls, current):
        if current.log_partition is None:
            emissions = cls._emissions(current)
            n_tokens = len(emissions)
            result = forward_backward(
                emissions,
                current.loaded.decoder.transitions,
                np.ones(n_tokens, dtype=np.intp),
            )
            current.log_partition = float(result.log_partition[0])
        return current.log_partition

    def _stored(self, loaded=None):
        """The model as CRFsuite's trainer stores it in a file.

        Only the nonzero features, and only the attributes that keep one
        (in attribute order, renumbered), as ``crf1de_save_model`` writes; a
        model read from a file is shown as the file holds it.
        """
        loaded = self._state("_stored()") if loaded is None else loaded
        if loaded.stored_model is None:
            loaded.stored_model = loaded.model.without_zeros()
        return loaded.stored_model

    def _features(self, loaded):
        """``(state, transitions)`` of the stored model, in the dump's order.

        ``state``: ``(attribute id, label id, weight)`` by attribute then
        label; ``transitions``: ``(from id, to id, weight)`` by from then to.
        """
        model = self._stored(loaded)
        n_labels = len(loaded.classes)
        state = list(
            zip(
                model.state_attributes().tolist(),
                model.state_labels.tolist(),
                model.state_weights.tolist(),
            )
        )
        transitions = [
            (i // n_labels, i % n_labels, w)
            for i, w in zip(model.transition_index.tolist(), model.transition_weights.tolist())
        ]
        return state, transitions

    def _header(self, loaded):
        """The header fields of the stored model's file, as strings."""
        if loaded.header_fields is None:
            model = self._stored(loaded)
            fields = _written_header(model)
            if fields is None:
                # A model CRFsuite cannot store: the counts, and zeros for
                # the size and offsets (which only a written file has).
                fields = {
                    "magic": "lCRF",
                    "size": "0",
                    "type": "FOMC",
                    "version": "100",
                    "num_features": "0",
                    "num_labels": str(model.n_labels),
                    "num_attrs": str(model.n_attributes),
                    "off_features": "0x0",
                    "off_labels": "0x0",
                    "off_attrs": "0x0",
                    "off_labelrefs": "0x0",
                    "off_attrrefs": "0x0",
                }
            loaded.header_fields = fields
        return dict(loaded.header_fields)

    def _dump_text(self, loaded):
        state, transitions = self._features(loaded)
        names, classes = self._stored(loaded).attributes, loaded.classes
        lines = ["FILEHEADER = {"]
        lines += [f"  {key}: {value}" for key, value in self._header(loaded).items()]
        lines += ["}", "", "LABELS = {"]
        lines += [f"  {k:5d}: {label}" for k, label in enumerate(classes)]
        lines += ["}", "", "ATTRIBUTES = {"]
        lines += [f"  {a:5d}: {name}" for a, name in enumerate(names)]
        lines += ["}", "", "TRANSITIONS = {"]
        lines += [f"  (1) {classes[i]} --> {classes[j]}: {w:f}" for i, j, w in transitions]
        lines += ["}", "", "STATE_FEATURES = {"]
        lines += [f"  (0) {names[a]} --> {classes[k]}: {w:f}" for a, k, w in state]
        lines += ["}", "", ""]
        return "\n".join(lines)

    def _parsed_dump(self, loaded):
        """The :class:`ParsedDump` of :meth:`dump`'s text, built directly."""
        state, transitions = self._features(loaded)
        names, classes = self._stored(loaded).attributes, loaded.classes
        info = ParsedDump()
        info.header = self._header(loaded)
        info.labels = {label: str(k) for k, label in enumerate(classes)}
        info.attributes = {name: str(a) for a, name in enumerate(names)}
        # weights as the dump prints them, so that info() and dump() agree
        info.transitions = {(classes[i], classes[j]): float(f"{w:f}") for i, j, w in transitions}
        info.state_features = {(names[a], classes[k]): float(f"{w:f}") for a, k, w in state}
        return info


def _plain_sequence(xseq):
    """``xseq`` as a list of tokens; a pycrfsuite ItemSequence becomes its items."""
    if type(xseq).__name__ == "ItemSequence" and type(xseq).__module__.startswith("pycrfsuite"):
        return xseq.items()
    if isinstance(xseq, (str, bytes)) or isinstance(xseq, dict):
        raise TypeError(
            f"xseq must be one sequence (a list of tokens); got {type(xseq).__name__}."
        )
    return xseq


def _written_header(model):
    """Header fields of ``model`` written as a CRFsuite file; None if it cannot be.

    The size and the offsets are those of the file
    :func:`skcrf._persist._crfsuite_file.write_crfsuite` writes, so ``info().header``
    matches what pycrfsuite shows for that file.
    """
    try:
        data = crfsuite_bytes(model)
    except (ValueError, TypeError):  # a model CRFsuite cannot store: no file, no header
        return None
    return file_header(data)


def file_header(data: bytes) -> dict[str, str]:
    """The header fields of the CRFsuite file ``data``, as CRFsuite's dump prints them."""
    return {field: _header_text(field, value) for field, value in header_fields(data).items()}


def _header_text(field, value):
    """A header field as CRFsuite's dump prints it: offsets in hexadecimal."""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if field.startswith("off_"):
        return f"0x{value:X}"
    return str(value)


def _short_list(items, limit=10):
    shown = ", ".join(repr(item) for item in items[:limit])
    return f"[{shown}{', ...' if len(items) > limit else ''}]"
