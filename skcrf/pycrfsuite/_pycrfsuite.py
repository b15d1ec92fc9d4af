"""python-crfsuite's ``pycrfsuite._pycrfsuite``: items, the tagger and the trainers.

Where python-crfsuite's compiled module has :class:`ItemSequence`,
:class:`Tagger`, :class:`BaseTrainer`, :class:`Trainer`,
:class:`CRFSuiteError` and :data:`CRFSUITE_VERSION`, this module has them,
on skcrf's engine (see :mod:`skcrf.pycrfsuite`), with the errors skcrf adds
(:class:`ItemFormatError`, :class:`TaggerClosedError`,
:class:`UnknownLabelError`).
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from .._featurize._vocabulary import Vocabulary, item_pairs, summed_items
from .._model import CRFModel
from .._persist._crfsuite_file import read_crfsuite, read_crfsuite_file, write_crfsuite
from .._persist._files import open_regular_file
from .._persist._npz import load_state
from .._tagger_view import (
    CRFsuiteTagger,
    TaggerClosedError,
    UnknownLabelError,
    file_header,
)
from .._training import _defaults
from .._training._lbfgs import LBFGSStatus
from .._training._online_train import OnlineStatus
from .._training._training_log import TrainingLog
from .._utils._cqdb_index import LazyNames
from ._logparser import TrainLogParser

__all__ = [
    "CRFSUITE_VERSION",
    "BaseTrainer",
    "CRFSuiteError",
    "ItemFormatError",
    "ItemSequence",
    "Tagger",
    "TaggerClosedError",
    "Trainer",
    "UnknownLabelError",
]

#: The CRFsuite version whose model files and training semantics skcrf
#: matches, as python-crfsuite reports its own.
CRFSUITE_VERSION = "0.12.2"

_SEPARATOR = ":"  # CRFsuite's, between a key and its value or nested name


class CRFSuiteError(Exception):
    """An error code of CRFsuite's trainer.

    Parameters
    ----------
    code : int
        CRFsuite's error code (``CRFSUITEERR_*``).

    Attributes
    ----------
    code : int
    """

    #: CRFsuite's error codes (``CRFSUITEERR_*``) and their messages.
    _messages = {
        -0x80000000: "Unknown error occurred",
        -0x80000000 + 1: "Insufficient memory",
        -0x80000000 + 2: "Unsupported operation",
        -0x80000000 + 3: "Incompatible data",
        -0x80000000 + 4: "Internal error",
        -0x80000000 + 5: "Overflow",
        -0x80000000 + 6: "Not implemented",
    }
    OVERFLOW = -0x80000000 + 5

    def __init__(self, code: int) -> None:
        self.code = code
        super().__init__(self._messages.get(code, "Unexpected error"))


# -- items ---------------------------------------------------------------------


class ItemFormatError(TypeError, ValueError):
    """A malformed item or sequence (a key that is not a str, a None value, ...).

    A ``TypeError``, and a ``ValueError``: what python-crfsuite's own tests
    expect for malformed items (pycrfsuite itself raises SystemError or
    accepts them).
    """


def _name(key: Any, where: str) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        return key.decode("utf-8")
    raise ItemFormatError(
        f"{where}: a feature name must be a str (or UTF-8 bytes); got "
        f"{type(key).__name__} {key!r:.50}."
    )


def _value(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ItemFormatError(
            f"{where}: a feature value must be a number, a bool, a str, or a dict, "
            f"list or set of features; got {type(value).__name__} {value!r:.50}."
        ) from None
    if not np.isfinite(number):
        raise ValueError(f"{where}: the value {number} is not finite.")
    return number


def _item_pairs(item: Any, where: str) -> list[tuple[str, float]]:
    """``(attribute, value)`` of one item, in order, repeats kept (CRFsuite's Item)."""
    pairs: list[tuple[str, float]] = []
    if isinstance(item, dict):
        for key, value in item.items():
            name = _name(key, where)
            inner = f"{where}[{name!r}]"
            if isinstance(value, (dict, list, set)):
                for sub, v in _item_pairs(value, inner):
                    pairs.append((name + _SEPARATOR + sub, v))
            elif isinstance(value, (str, bytes)):
                pairs.append((name + _SEPARATOR + _name(value, inner), 1.0))
            else:
                pairs.append((name, _value(value, inner)))
        return pairs
    if isinstance(item, (str, bytes)):
        raise ItemFormatError(
            f"{where}: an item must be a dict of features or an iterable of feature "
            f"names, not a {type(item).__name__} ({item!r:.50}); write [{item!r:.50}] "
            "for one feature."
        )
    try:
        keys = iter(item)
    except TypeError:
        raise ItemFormatError(
            f"{where}: an item must be a dict of features or an iterable of feature "
            f"names; got {type(item).__name__}."
        ) from None
    return [(_name(key, where), 1.0) for key in keys]


def _sequence_pairs(xseq: Any, what: str = "xseq") -> list[list[tuple[str, float]]]:
    if isinstance(xseq, ItemSequence):
        return xseq._pairs
    if isinstance(xseq, (str, bytes, dict)):
        raise ItemFormatError(
            f"{what} must be one sequence of items (a list of dicts or of lists of "
            f"feature names); got {type(xseq).__name__}."
        )
    try:
        items = iter(xseq)
    except TypeError:
        raise ItemFormatError(
            f"{what} must be an iterable of items; got {type(xseq).__name__}."
        ) from None
    return [_item_pairs(item, f"{what}[{i}]") for i, item in enumerate(items)]


def _tokens(pairs: list[list[tuple[str, float]]]) -> list[dict[str, float]]:
    """The tokens skcrf encodes: ``{attribute: value}``, a repeated attribute summed."""
    tokens = []
    for item in pairs:
        token: dict[str, float] = {}
        for name, value in item:
            token[name] = token.get(name, 0.0) + value
        tokens.append(token)
    return tokens


def _converted_pairs(xseq: Any, what: str = "xseq") -> list[list[tuple[str, float]]]:
    """:func:`_sequence_pairs`, python-crfsuite's forms converted in C.

    :func:`~skcrf._featurize._vocabulary.item_pairs` converts them; any other
    sequence, and a malformed one, goes to :func:`_sequence_pairs` (which
    names the item).
    """
    pairs = item_pairs(xseq)
    return _sequence_pairs(xseq, what) if pairs is None else pairs


class ItemSequence:
    """The features of the items of one sequence, prepared once.

    As ``pycrfsuite.ItemSequence``: pass it to :meth:`Tagger.tag`,
    :meth:`Tagger.set` or :meth:`BaseTrainer.append` instead of the raw
    items to prepare them once, or read the attributes that the items give
    with :meth:`items`.

    Parameters
    ----------
    pyseq : iterable of items
        Each item one of:

        - ``{name: float}``: attributes with weights; ``{name: bool}``: 1.0
          or 0.0;
        - ``{name: str}``: the attribute ``name:str`` with weight 1.0 (bytes
          are read as UTF-8);
        - ``{prefix: dict}``, ``{prefix: list}``, ``{prefix: set}``: the
          nested item's attributes, each prefixed by ``prefix:``;
        - an iterable of names (list, set, tuple, ``dict.keys()``, a
          generator): each with weight 1.0.

        The forms mix freely in one dict. Or another :class:`ItemSequence`.

    Raises
    ------
    TypeError
        For a malformed item: a key that is not a str, a value of another
        type (None, a tuple, ...), a str where an item is expected.
    ValueError
        For a value that is not finite.

    Examples
    --------
    >>> from skcrf.pycrfsuite import ItemSequence
    >>> ItemSequence([{"foo": 1, "bar": 0}, {"foo": 1.5, "baz": 2}])
    <ItemSequence of size 2>
    >>> ItemSequence([["foo"], {"bar": {"baz": 1}}, {"w": "the"}]).items()
    [{'foo': 1.0}, {'bar:baz': 1.0}, {'w:the': 1.0}]
    """

    def __init__(self, pyseq: Any) -> None:
        self._pairs = _converted_pairs(pyseq, "pyseq")
        self._token_cache: list[dict[str, float]] | None = None

    def _token_dicts(self) -> list[dict[str, float]]:
        """The tokens skcrf encodes (see :func:`_tokens`), made on first use."""
        tokens = getattr(self, "_token_cache", None)  # (None in an older pickle)
        if tokens is None:
            tokens = self._token_cache = summed_items(self._pairs)
        return tokens

    def items(self) -> list[dict[str, float]]:
        """The prepared features: one ``{attribute: weight}`` dict per item.

        Returns
        -------
        list of dict
            An attribute given twice in an item shows its last weight, as
            in pycrfsuite; both occurrences count in tagging and training
            (their weights add up).
        """
        return [dict(item) for item in self._pairs]

    def __len__(self) -> int:
        return len(self._pairs)

    def __repr__(self) -> str:
        return f"<ItemSequence of size {len(self)}>"


def _label(label: Any, where: str) -> str:
    if isinstance(label, str):
        return label
    if isinstance(label, bytes):
        return label.decode("utf-8")
    raise TypeError(
        f"{where}: a label must be a str (or UTF-8 bytes); got {type(label).__name__} "
        f"{label!r:.50}."
    )


def _labels(yseq: Any, what: str = "yseq") -> list[str]:
    if isinstance(yseq, (str, bytes)):
        raise TypeError(f"{what} must be a sequence of labels, not a {type(yseq).__name__}.")
    return [_label(label, f"{what}[{t}]") for t, label in enumerate(yseq)]


# -- the tagger ------------------------------------------------------------------


class Tagger(CRFsuiteTagger):
    """Tag sequences with a CRFsuite model file, as ``pycrfsuite.Tagger``.

    A tagger starts closed; :meth:`open` or :meth:`open_inmemory` loads a
    model (a file written by CRFsuite, python-crfsuite, sklearn-crfsuite or
    skcrf) and returns a context manager that closes it. ``labels``,
    ``info``, ``dump``, ``set``, ``tag``, ``probability`` and ``marginal``
    are those of :attr:`skcrf.CRFTagger.tagger_` (the same class, which
    this one extends with files and pycrfsuite's item formats, see
    :class:`ItemSequence`).

    The results are CRFsuite's: the same labels, and probabilities and
    marginals equal to pycrfsuite's to rounding (1e-9). ``info()`` and
    ``dump()`` show the model as its file holds it.

    Thread safety: see the module's notes (``set`` is per thread).

    Examples
    --------
    >>> import os, tempfile
    >>> from skcrf.pycrfsuite import Tagger, Trainer
    >>> path = os.path.join(tempfile.mkdtemp(), "model.crfsuite")
    >>> trainer = Trainer(verbose=False)
    >>> trainer.append([{"w": "the"}, {"w": "dog"}], ["DET", "NOUN"])
    >>> trainer.train(path)
    >>> with Tagger().open(path) as tagger:
    ...     tagger.tag([{"w": "the"}, {"w": "dog"}])
    ['DET', 'NOUN']
    """

    def __init__(self) -> None:
        super().__init__()

    def open(self, name: str | os.PathLike[str]) -> contextlib.closing[Tagger]:  # type: ignore[override]
        """Open a model file.

        Parameters
        ----------
        name : str or path-like
            The CRFsuite model file, or an skcrf model file
            (``CRFTagger.save``: read with ``CRFTagger.load``'s checks, a
            format 5 or 6 file mapped in place as ``CRFTagger.load(path,
            mmap=True)`` maps it; a model with input-conditioned transitions
            is refused).

        Returns
        -------
        contextlib.closing
            ``with tagger.open(path):`` closes the tagger at the end.

        Raises
        ------
        OSError
            If the file cannot be read.
        ValueError
            If it is not a well-formed CRFsuite model file (the message says
            what is wrong). The attributes' hash tables are checked here for
            their shape and verified in full by the first ``tag`` (or
            ``set``) that looks an attribute up: damage found then is its
            ValueError, and every later one's (``Invalid model file ...``),
            never tags from a damaged table.
        """
        # a regular file only: a device or a FIFO would never end
        file, _ = open_regular_file(name, "model")
        with file:
            magic = file.read(4)
        what = f"model file {os.fspath(name)!r}"
        if magic == b"PK\x03\x04":  # an skcrf model file (a zip archive)
            return self._open_skcrf(name, what)
        data = read_crfsuite_file(name)
        return self._open_bytes(data, what)

    def _open_skcrf(self, name: str | os.PathLike[str], what: str) -> contextlib.closing[Tagger]:
        try:
            model = load_state(name, lazy_attributes=True, mmap=True).model
        except ValueError as exc:
            raise ValueError(f"Invalid {what}: {exc}") from None
        if model.conditioned is not None:
            raise ValueError(
                f"Invalid {what}: the model has input-conditioned transitions, which "
                "this tagger cannot use (CRFTagger.load reads it)."
            )
        if isinstance(model.attributes, LazyNames):  # a damaged table found by a lookup
            model.attributes.string_index.source = f"Invalid {what}"
        self._load(model)
        return contextlib.closing(self)

    def open_inmemory(self, value: bytes) -> contextlib.closing[Tagger]:  # type: ignore[override]
        """Open a model from its bytes (a model file's content).

        Parameters
        ----------
        value : bytes

        Returns
        -------
        contextlib.closing

        Raises
        ------
        TypeError
            If ``value`` is not bytes-like.
        ValueError
            If it is not a well-formed CRFsuite model.
        """
        if isinstance(value, str) or not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"open_inmemory takes the model's bytes; got {type(value).__name__}.")
        return self._open_bytes(bytes(value), "model")

    def _open_bytes(self, data: bytes, what: str) -> contextlib.closing[Tagger]:
        if data[:4] != b"lCRF":
            raise ValueError(f"Invalid {what}: not a CRFsuite model (no 'lCRF' magic).")
        try:
            state = read_crfsuite(data, lazy_attributes=True)
        except ValueError as exc:
            raise ValueError(f"Invalid {what}: {exc}") from None
        attributes = state.model.attributes
        if isinstance(attributes, LazyNames):  # a damaged table found by a lookup names it
            attributes.string_index.source = f"Invalid {what}"
        self._load(state.model, file_header=file_header(data))
        return contextlib.closing(self)

    def close(self) -> None:
        """Close the model (the tagger can be opened again)."""
        self._unload()

    def _encode(self, loaded: Any, xseq: Any) -> Any:
        # python-crfsuite's forms (lists of plain dicts, nested ones and
        # bytes included, or of lists of names; an ItemSequence's tokens)
        # straight to attribute ids, in C; any other sequence is converted by
        # _tokens, which names a malformed item.
        items = xseq._token_dicts() if isinstance(xseq, ItemSequence) else xseq
        encoded = loaded.vocabulary.encode_items(items, name="xseq")
        if encoded is None:
            encoded = super()._encode(loaded, xseq)
        return encoded

    def _tokens(self, xseq: Any) -> list[dict[str, float]]:
        if isinstance(xseq, ItemSequence):
            return xseq._token_dicts()
        if type(xseq).__name__ == "ItemSequence":
            return super()._tokens(xseq)  # a pycrfsuite.ItemSequence
        return _tokens(_sequence_pairs(xseq))

    def probability(self, yseq: Iterable[Any]) -> float:
        """``P(yseq | xseq)`` for the sequence set last.

        Parameters
        ----------
        yseq : sequence of str
            One label per item (bytes are read as UTF-8).

        Returns
        -------
        float

        Raises
        ------
        ValueError
            If the lengths differ, no sequence is set, or a label is unknown
            (:class:`UnknownLabelError`, also a RuntimeError as in
            pycrfsuite).
        """
        return super().probability(
            [y.decode("utf-8") if isinstance(y, bytes) else y for y in yseq]
        )

    def marginal(self, y: Any, pos: Any) -> float:
        """``P(y_pos = y | xseq)`` for the sequence set last.

        Parameters
        ----------
        y : str
            The label (bytes are read as UTF-8).
        pos : int
            The position, ``0 <= pos < len(xseq)``.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            If ``pos`` is out of range, no sequence is set, or ``y`` is
            unknown.
        """
        return super().marginal(y.decode("utf-8") if isinstance(y, bytes) else y, pos)


# -- trainer parameters --------------------------------------------------------

_ALGORITHM_ALIASES = {"ap": "averaged-perceptron", "pa": "passive-aggressive"}
#: CRFsuite's algorithm names -> skcrf's.
_ALGORITHMS = {
    "lbfgs": "lbfgs",
    "l2sgd": "l2sgd",
    "averaged-perceptron": "ap",
    "passive-aggressive": "pa",
    "arow": "arow",
}
_FEATURE_NAMES = {
    "feature.minfreq": "min_freq",
    "feature.possible_states": "all_possible_states",
    "feature.possible_transitions": "all_possible_transitions",
}
#: CRFsuite's name of an skcrf parameter, where they differ.
_CRFSUITE_NAMES = {
    **{skcrf: name for name, skcrf in _FEATURE_NAMES.items()},
    "calibration_eta": "calibration.eta",
    "calibration_rate": "calibration.rate",
    "calibration_samples": "calibration.samples",
    "calibration_candidates": "calibration.candidates",
    "calibration_max_trials": "calibration.max_trials",
    "pa_type": "type",
}
#: CRFsuite's limit for L-BFGS's max_iterations (INT_MAX: no limit).
_INT_MAX = 2147483647
#: Read back as floats by pycrfsuite's ``get`` although CRFsuite keeps an int.
_GET_AS_FLOAT = frozenset({"calibration.samples"})

#: CRFsuite's help strings of its parameters, reproduced as data so that
#: ``help(name)`` answers what pycrfsuite answers.
_HELP = {
    "feature.minfreq": "The minimum frequency of features.",
    "feature.possible_states": "Force to generate possible state features.",
    "feature.possible_transitions": "Force to generate possible transition features.",
    "c1": "Coefficient for L1 regularization.",
    "c2": "Coefficient for L2 regularization.",
    "num_memories": (
        "The number of limited memories for approximating the inverse hessian matrix."
    ),
    "period": "The duration of iterations to test the stopping criterion.",
    "linesearch": (
        "The line search algorithm used in L-BFGS updates:\n"
        "{   'MoreThuente': More and Thuente's method,\n"
        "    'Backtracking': Backtracking method with regular Wolfe condition,\n"
        "    'StrongBacktracking': Backtracking method with strong Wolfe condition\n"
        "}\n"
    ),
    "max_linesearch": "The maximum number of trials for the line search algorithm.",
    "calibration.eta": "The initial value of learning rate (eta) used for calibration.",
    "calibration.rate": "The rate of increase/decrease of learning rate for calibration.",
    "calibration.samples": "The number of instances used for calibration.",
    "calibration.candidates": "The number of candidates of learning rate.",
    "calibration.max_trials": "The maximum number of trials of learning rates for calibration.",
    "type": (
        "The strategy for updating feature weights: {\n"
        "    0: PA without slack variables,\n"
        "    1: PA type I,\n"
        "    2: PA type II\n"
        "}.\n"
    ),
    "c": "The aggressiveness parameter.",
    "error_sensitive": "Consider the number of incorrect labels to the cost function.",
    "averaging": "Compute the average of feature weights (similarly to Averaged Perceptron).",
    "variance": "The initial variance of every feature weight.",
    "gamma": "Tradeoff parameter.",
}
_HELP_BY_ALGORITHM = {
    "lbfgs": {
        "max_iterations": "The maximum number of iterations for L-BFGS optimization.",
        "epsilon": "Epsilon for testing the convergence of the objective.",
        "delta": (
            "The threshold for the stopping criterion; an L-BFGS iteration stops when the\n"
            "improvement of the log likelihood over the last ${period} iterations is no\n"
            "greater than this threshold."
        ),
    },
    "l2sgd": {
        "max_iterations": "The maximum number of iterations (epochs) for SGD optimization.",
        "delta": (
            "The threshold for the stopping criterion; an optimization process stops when\n"
            "the improvement of the log likelihood over the last ${period} iterations is no\n"
            "greater than this threshold."
        ),
    },
    "ap": {
        "max_iterations": "The maximum number of iterations.",
        "epsilon": "The stopping criterion (the ratio of incorrect label predictions).",
    },
    "pa": {
        "max_iterations": "The maximum number of iterations.",
        "epsilon": "The stopping criterion (the mean loss).",
    },
    "arow": {
        "max_iterations": "The maximum number of iterations.",
        "epsilon": "The stopping criterion (the mean loss).",
    },
}


class _Parameter:
    """One CRFsuite parameter: its names, kind (int, float or str) and default."""

    __slots__ = ("name", "skcrf_name", "kind", "is_bool", "default", "help")

    def __init__(self, name, skcrf_name, default, help_text):
        self.name = name
        self.skcrf_name = skcrf_name
        self.is_bool = isinstance(default, bool)
        if self.is_bool:
            default = int(default)
        # CRFsuite keeps bools as ints
        self.kind = {bool: int, int: int, float: float, str: str}[type(default)]
        self.default = default
        self.help = help_text

    def parse(self, text: str) -> int | float | str:
        """The value CRFsuite keeps for ``text`` (C's ``atoi`` / ``atof``)."""
        if self.kind is str:
            return text
        pattern = _INT_PREFIX if self.kind is int else _FLOAT_PREFIX
        match = pattern.match(text)
        return self.kind(match.group(1)) if match else self.kind(0)

    def text(self, value: int | float | str) -> str:
        """``value`` as CRFsuite's ``get`` prints it (``%d``, ``%f``)."""
        if self.kind is float:
            return f"{value:f}"
        if self.kind is int:
            return f"{value:d}"
        return str(value)

    def cast(self, text: str) -> Any:
        """The printed value as a Python value (what pycrfsuite's ``get`` returns)."""
        if self.name in _GET_AS_FLOAT:
            return float(text)
        if self.is_bool:
            return bool(int(text))
        return self.kind(text)

    def skcrf_value(self, value: int | float | str) -> Any:
        return bool(value) if self.is_bool else value


_INT_PREFIX = re.compile(r"\s*([+-]?\d+)")
_FLOAT_PREFIX = re.compile(
    r"\s*([+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan))", re.IGNORECASE
)


def _parameter_table(algorithm: str) -> dict[str, _Parameter]:
    """CRFsuite's parameters of ``algorithm`` (skcrf's name), in CRFsuite's order."""
    table = {}
    defaults = {**_defaults.FEATURE_DEFAULTS, **_defaults.ALGORITHM_DEFAULTS[algorithm]}
    for skcrf_name, default in defaults.items():
        name = _CRFSUITE_NAMES.get(skcrf_name, skcrf_name)
        if default is None and skcrf_name == "max_iterations":
            default = _INT_MAX  # L-BFGS: no limit
        help_text = _HELP_BY_ALGORITHM[algorithm].get(name, _HELP.get(name, ""))
        table[name] = _Parameter(name, skcrf_name, default, help_text)
    return table


_PARAMETERS = {algorithm: _parameter_table(algorithm) for algorithm in _ALGORITHMS.values()}


# -- the training log ------------------------------------------------------------


_ALGORITHM_TITLES = {
    "lbfgs": "L-BFGS optimization",
    "l2sgd": "Stochastic Gradient Descent (SGD)",
    "ap": "Averaged perceptron",
    "pa": "Passive Aggressive",
    "arow": "Adaptive Regularization of Weights (AROW)",
}
#: liblbfgs's return codes of the L-BFGS statuses that CRFsuite prints as codes.
_LBFGS_CODES = {
    LBFGSStatus.ALREADY_MINIMIZED: 2,
    LBFGSStatus.CALLBACK_STOP: -1021,
    LBFGSStatus.OUT_OF_INTERVAL: -1003,
    LBFGSStatus.INCORRECT_TMINMAX: -1002,
    LBFGSStatus.ROUNDING_ERROR: -1001,
    LBFGSStatus.NON_FINITE: -1001,
    LBFGSStatus.MINIMUM_STEP: -1000,
    LBFGSStatus.MAXIMUM_STEP: -999,
    LBFGSStatus.MAX_LINESEARCH: -998,
    LBFGSStatus.WIDTH_TOO_SMALL: -996,
    LBFGSStatus.INCREASE_GRADIENT: -994,
}
_LBFGS_INVALID_N = -1020  # no features


class _CRFsuiteLog(TrainingLog):
    """A training log that also sends CRFsuite's messages as training goes.

    ``emit(text)`` is called with each piece of CRFsuite's log (the
    trainer's ``message``). The part before the first iteration needs the
    number of features, which the first recorded iteration gives (its weight
    vector); when no iteration runs it is sent with the end.
    """

    def __init__(
        self,
        emit: Callable[[str], Any],
        algorithm: str,
        parameters: dict[str, _Parameter],
        values: dict[str, Any],
    ) -> None:
        super().__init__(verbose=False)
        self._emit = emit
        self._algorithm = algorithm
        self._parameters = parameters
        self._values = values
        self._start = time.perf_counter()
        self.prepared = False
        self.finished: tuple[Any, str] | None = None
        #: tokens and non-empty sequences of the held-out data
        self.dev_totals = (0, 0)
        #: the labels in CRFsuite's order (of first appearance)
        self.label_order: list[str] = []
        #: the number of training instances
        self.n_instances = 0

    def prepare(self, n_features: int) -> None:
        """The end of feature generation and the algorithm's settings."""
        if self.prepared:
            return
        self.prepared = True
        emit = self._emit
        emit(f"Number of features: {n_features}\n")
        emit(f"Seconds required: {time.perf_counter() - self._start:.3f}\n")
        emit("\n")
        emit(f"{_ALGORITHM_TITLES[self._algorithm]}\n")
        printed = {"period": "stop", "max_linesearch": "linesearch.max_iterations"}
        if self._algorithm == "lbfgs":
            names = [
                "c1",
                "c2",
                "num_memories",
                "max_iterations",
                "epsilon",
                "period",
                "delta",
                "linesearch",
                "max_linesearch",
            ]
        else:
            printed = {}
            names = [
                n
                for n in self._parameters
                if not n.startswith("feature.") and not n.startswith("calibration.")
            ]
        for name in names:
            text = self._parameters[name].text(self._values[name])
            emit(f"{printed.get(name, name)}: {text}\n")
        emit("\n")
        if self._algorithm == "l2sgd":
            emit("Calibrating the learning rate (eta)\n")
            for name in self._parameters:
                if name.startswith("calibration."):
                    value = self._values[name]
                    if name == "calibration.samples":  # CRFsuite prints the number used
                        value = min(value, self.n_instances)
                    emit(f"{name}: {self._parameters[name].text(value)}\n")
            emit("\n")
        self._start = time.perf_counter()

    def record_epoch(self, entry, weights, holdout=None):
        self.prepare(len(weights))
        super().record_epoch(entry, weights, holdout)

    def record(self, entry: dict[str, Any]) -> None:
        super().record(entry)
        emit = self._emit
        head = "Epoch" if self._algorithm == "l2sgd" else "Iteration"
        emit(f"***** {head} #{entry['num']} *****\n")
        emit(f"Loss: {entry['loss']:f}\n")
        if self._algorithm == "lbfgs":
            emit(f"Feature norm: {entry['feature_norm']:f}\n")
            emit(f"Error norm: {entry['error_norm']:f}\n")
            emit(f"Active features: {entry['active_features']}\n")
            emit(f"Line search trials: {entry['linesearch_trials']}\n")
            emit(f"Line search step: {entry['linesearch_step']:f}\n")
        elif self._algorithm == "l2sgd":
            emit(f"Feature L2-norm: {entry['feature_norm']:f}\n")
            emit(f"Learning rate (eta): {entry.get('learning_rate', 0.0):f}\n")
            emit(f"Total number of feature updates: {int(entry.get('total_updates', 0))}\n")
        else:
            emit(f"Feature norm: {entry['feature_norm']:f}\n")
        emit(f"Seconds required for this iteration: {entry['time']:.3f}\n")
        if "item_accuracy" in entry:
            self._holdout(entry)
        emit("\n")

    def _holdout(self, entry):
        emit = self._emit
        emit("Performance by label (#match, #model, #ref) (precision, recall, F1):\n")
        scores = entry["scores"]
        labels = [label for label in self.label_order if label in scores]
        labels += [label for label in scores if label not in set(labels)]
        for label in labels:
            score = scores[label]
            counts = f"({score.match}, {score.model}, {score.ref})"
            if score.precision is None:
                figures = "(******, ******, ******)"
            else:
                figures = f"({score.precision:.4f}, {score.recall:.4f}, {score.f1:.4f})"
            emit(f"    {label}: {counts} {figures}\n")
        emit(
            "Macro-average precision, recall, F1: "
            f"({entry['avg_precision']:f}, {entry['avg_recall']:f}, {entry['avg_f1']:f})\n"
        )
        for name, total in zip(("item", "instance"), self.dev_totals):
            fraction = entry[f"{name}_accuracy"]
            # CRFsuite prints the counts, not the reduced fraction
            correct = fraction.numerator * total // fraction.denominator
            emit(f"{name.capitalize()} accuracy: {correct} / {total} ({float(fraction):.4f})\n")

    def finish(self, status, message):
        super().finish(status, message)
        self.finished = (status, message)
        if self.prepared:
            self.end()

    def end(self, n_features: int | None = None) -> None:
        """How training ended (after :meth:`prepare`)."""
        if n_features is not None:
            self.prepare(n_features)
        status: Any = self.finished[0] if self.finished is not None else None
        emit = self._emit
        if self._algorithm == "lbfgs":
            if status is LBFGSStatus.CONVERGED:
                emit("L-BFGS resulted in convergence\n")
            elif status is LBFGSStatus.STOPPED_DELTA:
                emit("L-BFGS terminated with the stopping criteria\n")
            elif status is LBFGSStatus.MAX_ITERATIONS:
                emit("L-BFGS terminated with the maximum number of iterations\n")
            else:
                code = _LBFGS_INVALID_N if n_features == 0 else _LBFGS_CODES.get(status, -1024)
                emit(f"L-BFGS terminated with error code ({code})\n")
        elif self._algorithm == "l2sgd":
            if status is OnlineStatus.SMALL_IMPROVEMENT:
                emit("SGD terminated with the stopping criteria\n")
            elif status is OnlineStatus.MAX_ITERATIONS:
                emit("SGD terminated with the maximum number of iterations\n")
            losses = [it["loss"] for it in self.iterations]
            emit(f"Loss: {min(losses) if losses else 0.0:f}\n")
        elif status is OnlineStatus.SMALL_LOSS:
            emit("Terminated with the stopping criterion\n")
            emit("\n")
        emit(f"Total seconds required for training: {time.perf_counter() - self._start:.3f}\n")
        emit("\n")


# -- the trainer -----------------------------------------------------------------


class BaseTrainer:
    """Train a CRF and write it as a CRFsuite model file, as ``pycrfsuite.BaseTrainer``.

    Holds a data set (:meth:`append`), a training algorithm
    (:meth:`select`) and its parameters (CRFsuite's names and defaults:
    :meth:`params`, :meth:`get`, :meth:`set`, :meth:`help`); :meth:`train`
    trains with skcrf's fit driver (the model CRFsuite trains) and writes
    the model as a CRFsuite file. CRFsuite's log messages go to
    :meth:`message` as training goes.

    Parameters
    ----------
    algorithm : {'lbfgs', 'l2sgd', 'ap', 'pa', 'arow'}, optional
        See :meth:`select`; default 'lbfgs'.
    params : dict, optional
        ``{name: value}`` parameters (see :meth:`set_params`).
    verbose : bool, default=True
        Whether :meth:`message` prints the log.

    Examples
    --------
    >>> from skcrf.pycrfsuite import Trainer
    >>> trainer = Trainer("l2sgd", params={"c2": 0.1}, verbose=False)
    >>> trainer.get("c2")
    0.1
    >>> trainer.params()[:3]
    ['feature.minfreq', 'feature.possible_states', 'feature.possible_transitions']
    """

    verbose: Any
    _instances: list[tuple[list[dict[str, float]], list[str], int]]
    _weights: dict[int, float]

    def __new__(cls, *args: Any, **kwargs: Any) -> BaseTrainer:  # noqa: D102
        # The state exists even when a subclass's __init__ skips this one's
        # (pycrfsuite sets it up in __cinit__).
        self = super().__new__(cls)
        self._instances = []
        self._weights = {}
        self._select("lbfgs")
        self.verbose = None
        return self

    def __init__(
        self,
        algorithm: str | None = None,
        params: Mapping[str, Any] | None = None,
        verbose: bool = True,
    ) -> None:
        if algorithm is not None:
            self.select(algorithm)
        if params is not None:
            self.set_params(params)
        self.verbose = verbose

    def message(self, message: str) -> None:
        """Receive a piece of the training log (override to capture it).

        By default printed (without a newline added) when ``verbose``.

        Parameters
        ----------
        message : str
        """
        if self.verbose:
            print(message, end="")

    # -- data --------------------------------------------------------------

    def append(self, xseq: Any, yseq: Iterable[Any], group: int = 0) -> None:
        """Add a sequence and its labels to the data set.

        Parameters
        ----------
        xseq : iterable of items, or ItemSequence
            The items' features, in the formats of :class:`ItemSequence`.
        yseq : sequence of str
            One label per item.
        group : int, default=0
            The instance's group; :meth:`train`'s ``holdout`` holds a group
            out for evaluation.

        Raises
        ------
        ValueError
            If ``xseq`` and ``yseq`` differ in length.
        TypeError
            For malformed items or labels that are not strings.
        """
        group = operator.index(group)
        pairs = _converted_pairs(xseq)
        labels = _labels(yseq)
        if len(pairs) != len(labels):
            raise ValueError(
                f"The numbers of items and labels differ: |x| = {len(pairs)}, |y| = {len(labels)}"
            )
        self._instances.append((summed_items(pairs), labels, group))

    def _append_weighted(self, xseq: Any, yseq: Iterable[Any], group: int, weight: float) -> None:
        """:meth:`append` with the instance's weight (CRFsuite's ``@weight``; skcrf's CLI)."""
        self.append(xseq, yseq, group)
        if weight != 1.0:
            self._weights[len(self._instances) - 1] = float(weight)

    def clear(self) -> None:
        """Remove every instance from the data set."""
        self._instances = []
        self._weights = {}

    # -- the algorithm and its parameters ---------------------------------

    def select(self, algorithm: str, type: str = "crf1d") -> None:
        """Choose the training algorithm (its parameters start at their defaults).

        Parameters
        ----------
        algorithm : {'lbfgs', 'l2sgd', 'ap', 'pa', 'arow'}
            Case-insensitive; 'averaged-perceptron' and 'passive-aggressive'
            are the long names of 'ap' and 'pa'.

            * 'lbfgs': gradient descent with L-BFGS (L1 with OWL-QN);
            * 'l2sgd': stochastic gradient descent with an L2 term;
            * 'ap': averaged perceptron;
            * 'pa': passive aggressive;
            * 'arow': adaptive regularization of weight vectors.
        type : str, default='crf1d'
            The graphical model; CRFsuite has only 'crf1d'.

        Raises
        ------
        ValueError
            For another algorithm or type.
        """
        name = algorithm.lower()
        name = _ALGORITHM_ALIASES.get(name, name)
        if name not in _ALGORITHMS or type != "crf1d":
            raise ValueError(f"Bad arguments: algorithm={name!r}, type={type!r}")
        self._select(_ALGORITHMS[name])

    def _select(self, algorithm: str) -> None:
        self._algorithm = algorithm
        self._parameters = _PARAMETERS[algorithm]
        self._values = {name: p.default for name, p in self._parameters.items()}

    def params(self) -> list[str]:
        """The names of the selected algorithm's parameters (CRFsuite's, in its order).

        Returns
        -------
        list of str
        """
        return list(self._parameters)

    def _parameter(self, name: str, value: Any = "") -> _Parameter:
        try:
            return self._parameters[name]
        except (KeyError, TypeError):
            raise ValueError(f"Parameter not found: {name} = {value}") from None

    def set(self, name: str, value: Any) -> None:
        """Set a parameter of the selected algorithm.

        As in CRFsuite the value is read from its text: ``str(value)``
        (bools as 0/1) through C's ``atoi`` / ``atof``, so ``'0.1'`` and
        ``0.1`` are the same and a number's unreadable tail is ignored.

        Parameters
        ----------
        name : str
            A name from :meth:`params`.
        value : object

        Raises
        ------
        ValueError
            If the selected algorithm has no such parameter.
        """
        parameter = self._parameter(name, value)
        if isinstance(value, bool):
            value = int(value)
        self._values[name] = parameter.parse(str(value))

    def get(self, name: str) -> Any:
        """A parameter's value, as pycrfsuite returns it.

        Parameters
        ----------
        name : str

        Returns
        -------
        int, float, bool or str
            Floats as CRFsuite prints them (six decimals, ``%f``); the value
            trained with keeps its full precision.

        Raises
        ------
        ValueError
            If the selected algorithm has no such parameter.
        """
        parameter = self._parameter(name)
        return parameter.cast(parameter.text(self._values[name]))

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Set several parameters: ``{name: value}`` (see :meth:`set`)."""
        for name, value in params.items():
            self.set(name, value)

    def get_params(self) -> dict[str, Any]:
        """Every parameter of the selected algorithm: ``{name: value}`` (see :meth:`get`)."""
        return {name: self.get(name) for name in self._parameters}

    def help(self, name: str) -> str:
        """CRFsuite's description of a parameter of the selected algorithm.

        Parameters
        ----------
        name : str

        Returns
        -------
        str

        Raises
        ------
        ValueError
            If the selected algorithm has no such parameter.
        """
        if name not in self._parameters:
            raise ValueError(f"Parameter not found: {name}")
        return self._parameters[name].help

    # -- training --------------------------------------------------------------

    def train(self, model: str | os.PathLike[str], holdout: int = -1) -> None:
        """Train on the data set and write the model as a CRFsuite file.

        Parameters
        ----------
        model : str or path-like
            The model file to write (replaced atomically); ``''`` writes
            none.
        holdout : int, default=-1
            A group to hold out: its instances are not trained on but scored
            at every iteration (the log's per-label figures and accuracies).
            -1: train on every instance.

        Raises
        ------
        ValueError
            For a parameter value out of its range.
        CRFSuiteError
            If l2sgd overflows (no model is written).
        """
        self._before_train()
        holdout = operator.index(holdout)
        path = os.fspath(model)
        emit = self.message
        parameters, values = self._parameters, dict(self._values)
        algorithm, settings = self._settings(values)

        X, y, X_dev, y_dev, weights = [], [], [], [], []
        for k, (tokens, labels, group) in enumerate(self._instances):
            if group == holdout:
                X_dev.append(tokens)
                y_dev.append(labels)
            else:
                X.append(tokens)
                y.append(labels)
                weights.append(self._weights.get(k, 1.0))

        if holdout >= 0:
            emit(f"Holdout group: {holdout + 1}\n")
            emit("\n")
        emit("Feature generation\n")
        emit("type: CRF1d\n")
        for name in _FEATURE_NAMES:
            emit(f"{name}: {parameters[name].text(values[name])}\n")
        for k in range(11):  # CRFsuite's progress: 0....1....2 ... 10
            emit(str(k))
            if k < 10:
                for _ in range(4):
                    emit(".")
        emit("\n")

        log = _CRFsuiteLog(emit, algorithm, parameters, values)
        # CRFsuite numbers labels by first appearance in the data set
        seen = dict.fromkeys(label for _, labels, _ in self._instances for label in labels)
        log.label_order = list(seen)
        log.n_instances = len(X)
        if not any(map(len, y)):
            status = LBFGSStatus.ALREADY_MINIMIZED if algorithm == "lbfgs" else None
            log.finish(status or OnlineStatus.EPOCHS_DONE, "no training data")
            log.end(n_features=0)
            fitted = _empty_model(list(seen))
        else:
            dev = (X_dev, y_dev) if any(map(len, y_dev)) else None
            log.dev_totals = (sum(map(len, y_dev)), sum(1 for labels in y_dev if labels))
            # scikit-learn and the fit driver are imported when a Trainer trains,
            # never by import skcrf.pycrfsuite
            from sklearn.exceptions import ConvergenceWarning

            from .._training import _fit as fit_driver

            with warnings.catch_warnings():
                # the log says how training ended, as CRFsuite's does
                warnings.simplefilter("ignore", ConvergenceWarning)
                result = fit_driver.fit(
                    X,
                    y,
                    algorithm,
                    settings,
                    Vocabulary(),
                    n_jobs=None,
                    random_state=np.random.RandomState(0),
                    monitor_options={"verbose": False, "dev": dev, "log": log},
                    sample_weight=np.asarray(weights) if self._weights else None,
                    # CRFsuite's labels: the whole data set's, the held-out group's too
                    classes=np.array(list(seen), dtype=object),
                )
            if not log.prepared:  # no iteration ran
                log.end(n_features=result.model.n_features)
            if result.status is OnlineStatus.OVERFLOW:
                raise CRFSuiteError(CRFSuiteError.OVERFLOW)
            fitted = _in_label_order(result.model, list(seen))
        if path:
            self._store(fitted, path)

    def _settings(self, values: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The algorithm and settings of skcrf, checked by :class:`~skcrf.CRFTagger`'s rules."""
        from .._tagger import CRFTagger  # imports scikit-learn: only when training

        params = {
            p.skcrf_name: p.skcrf_value(values[name]) for name, p in self._parameters.items()
        }
        estimator = CRFTagger(algorithm=self._algorithm, **params)
        try:
            estimator._validate_params()
        except ValueError as exc:
            names = ", ".join(f"{_CRFSUITE_NAMES.get(k, k)!r}" for k in params)
            raise ValueError(
                f"Invalid trainer parameter value ({self._algorithm}; parameters {names}): {exc}"
            ) from None
        return estimator._settings()

    def _store(self, model: CRFModel, path: str) -> None:
        emit = self.message
        start = time.perf_counter()
        stored = model.without_zeros()
        emit("Storing the model\n")
        emit(f"Number of active features: {stored.n_features} ({model.n_features})\n")
        emit(f"Number of active attributes: {stored.n_attributes} ({model.n_attributes})\n")
        emit(f"Number of active labels: {stored.n_labels} ({model.n_labels})\n")
        write_crfsuite(stored, path)
        emit("Writing labels\n")
        emit("Writing attributes\n")
        emit("Writing feature references for transitions\n")
        emit("Writing feature references for attributes\n")
        emit(f"Seconds required: {time.perf_counter() - start:.3f}\n")
        emit("\n")

    def _before_train(self) -> None:
        pass


def _in_label_order(model: CRFModel, labels: list[str]) -> CRFModel:
    """``model`` with its labels renumbered in the order of ``labels`` (exactly the same model)."""
    index = {label: k for k, label in enumerate(model.classes.tolist())}
    order = np.array([index[label] for label in labels if label in index], dtype=np.intp)
    n_labels = len(order)
    new_id = np.empty(n_labels, dtype=np.intp)
    new_id[order] = np.arange(n_labels)
    state_labels = new_id[model.state_labels]
    by_attribute = np.lexsort((state_labels, model.state_attributes()))
    source, target = np.divmod(model.transition_index, n_labels)
    transition_index = new_id[source] * n_labels + new_id[target]
    by_pair = np.argsort(transition_index, kind="stable")
    return CRFModel(
        classes=model.classes[order],
        attributes=model.attributes,
        state_ptr=model.state_ptr,
        state_labels=state_labels[by_attribute].astype(np.int32),
        state_weights=model.state_weights[by_attribute],
        transition_index=transition_index[by_pair].astype(np.int64),
        transition_weights=model.transition_weights[by_pair],
        value_separator=model.value_separator,
    )


def _empty_model(labels: list[str]) -> CRFModel:
    """The model of no training data: ``labels`` (the held-out ones) and no features.

    What CRFsuite writes then: the labels of every instance appended, no
    attributes, no features.
    """
    classes = np.empty(len(labels), dtype=object)
    classes[:] = labels
    return CRFModel(
        classes=classes,
        attributes=[],
        state_ptr=np.zeros(1, dtype=np.int64),
        state_labels=np.zeros(0, dtype=np.int32),
        state_weights=np.zeros(0),
        transition_index=np.zeros(0, dtype=np.int64),
        transition_weights=np.zeros(0),
    )


class Trainer(BaseTrainer):
    """A :class:`BaseTrainer` that parses its log and calls a hook per event.

    As ``pycrfsuite.Trainer``: during :meth:`~BaseTrainer.train`,
    ``logparser`` (a :class:`TrainLogParser`) reads every message; when
    ``verbose``, each event calls its ``on_*`` method with the event's log
    text (by default printed): :meth:`on_start`,
    :meth:`on_featgen_progress`, :meth:`on_featgen_end`,
    :meth:`on_prepared`, :meth:`on_prepare_error`, :meth:`on_iteration`
    (with the iteration's dict), :meth:`on_optimization_end`,
    :meth:`on_end`. After training, ``logparser.iterations`` holds one dict
    per iteration (``loss``, ``feature_norm``, ..., and with a holdout group
    the per-label ``scores`` and accuracies).
    """

    logparser: TrainLogParser | None = None

    def _before_train(self) -> None:
        self.logparser = TrainLogParser()

    def message(self, message: str) -> None:
        """Feed the log parser; call the event's hook when ``verbose``."""
        parser = self.logparser
        if parser is None:
            parser = self.logparser = TrainLogParser()
        event = parser.feed(message)
        if not self.verbose or event is None:
            return
        log = parser.last_log
        if event == "featgen_progress":
            self.on_featgen_progress(log, parser.featgen_percent)
        elif event == "iteration":
            self.on_iteration(log, parser.last_iteration or {})
        else:
            getattr(self, f"on_{event}")(log)

    def on_start(self, log: str) -> None:
        """Training started."""
        print(log, end="")

    def on_featgen_progress(self, log: str, percent: float) -> None:
        """Feature generation progressed (``percent`` done)."""
        print(log, end="")

    def on_featgen_end(self, log: str) -> None:
        """Feature generation ended."""
        print(log, end="")

    def on_prepared(self, log: str) -> None:
        """The algorithm's settings are printed; iterations follow."""
        print(log, end="")

    def on_prepare_error(self, log: str) -> None:
        """The algorithm could not start (no features)."""
        print(log, end="")

    def on_iteration(self, log: str, info: dict[str, Any]) -> None:
        """An iteration ended; ``info`` is its dict (see :class:`TrainLogParser`)."""
        print(log, end="")

    def on_optimization_end(self, log: str) -> None:
        """Optimization ended."""
        print(log, end="")

    def on_end(self, log: str) -> None:
        """The model is written."""
        print(log, end="")
