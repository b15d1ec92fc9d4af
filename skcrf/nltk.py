"""A drop-in replacement for NLTK's ``nltk.tag.CRFTagger``, trained by skcrf.

NLTK's ``CRFTagger`` trains and runs a CRF through python-crfsuite. This one
has the same constructor, methods, default features and model files, and
trains and tags with :class:`skcrf.CRFTagger`; NLTK code changes only its
import::

    from .nltk import CRFTagger      # was: from nltk.tag import CRFTagger

    tagger = CRFTagger(training_opt={"c2": 0.1})
    tagger.train(train_sents, "model.crf.tagger")
    tagger.tag(["The", "cat", "sat"])

Model files are CRFsuite model files, in both directions: a file written by
NLTK's tagger loads here (:meth:`CRFTagger.set_model_file`) and tags the same,
and a file written here (:meth:`CRFTagger.train`) loads into NLTK's tagger.

Differences from NLTK's tagger, all deliberate:

- ``training_opt`` is checked when the tagger is made: an unknown option, an
  option of another CRFsuite training algorithm (NLTK trains with L-BFGS
  only) or a value that is not a number where one is needed is a
  ``ValueError`` naming the option (python-crfsuite rejects unknown options
  at training time, and reads a malformed number as 0).
- Model paths are not confined to NLTK's data directories (NLTK 3.9+ checks
  them because the native CRFsuite parser reads them; skcrf parses model
  files in Python).
- ``train(data, None)`` trains without writing a file.
- ``n_jobs`` (keyword only) sets the threads used to train and tag.
"""

import re
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

try:
    from nltk.tag.api import TaggerI
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "skcrf.nltk needs nltk: pip install nltk (or pip install 'skcrf[examples]')."
    ) from exc
from sklearn.exceptions import ConvergenceWarning

from ._tagger import CRFTagger as _Estimator
from ._training._fit import ALGORITHM_DEFAULTS, FEATURE_DEFAULTS
from ._utils._cqdb_index import LazyNames

__all__ = ["CRFTagger", "TRAINING_OPTIONS"]

# Unicode punctuation categories: a token made only of these is PUNCTUATION.
_PUNCTUATION = frozenset(("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"))
_DIGIT = re.compile(r"\d")  # any Unicode decimal digit, as NLTK's pattern


def _number(value, kind):
    """``value`` as python-crfsuite would pass it to CRFsuite, checked."""
    if isinstance(value, bool):
        return kind(value)
    if isinstance(value, str):
        value = value.strip()
        try:
            value = int(value) if kind is int else float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
    try:
        converted = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a number") from None
    if kind is int and converted != value:
        raise ValueError(f"{value!r} is not an integer")
    return converted


def _as_float(value):
    return _number(value, float)


def _as_int(value):
    return _number(value, int)


def _as_flag(value):
    # CRFsuite's flags are ints read as 0 / 1 (python-crfsuite sends True as 1).
    if isinstance(value, str):
        value = value.strip()
    if value in (0, 1, "0", "1"):
        return bool(int(value))
    raise ValueError(f"{value!r} is not a flag (0, 1, False or True)")


def _as_str(value):
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a string")
    return value


#: CRFsuite's trainer options (as NLTK passes them to python-crfsuite), each
#: with the :class:`skcrf.CRFTagger` parameter it sets and its conversion.
TRAINING_OPTIONS = {
    "feature.minfreq": ("min_freq", _as_float),
    "feature.possible_states": ("all_possible_states", _as_flag),
    "feature.possible_transitions": ("all_possible_transitions", _as_flag),
    "c1": ("c1", _as_float),
    "c2": ("c2", _as_float),
    "max_iterations": ("max_iterations", _as_int),
    "num_memories": ("num_memories", _as_int),
    "epsilon": ("epsilon", _as_float),
    "period": ("period", _as_int),
    "delta": ("delta", _as_float),
    "linesearch": ("linesearch", _as_str),
    "max_linesearch": ("max_linesearch", _as_int),
    "calibration.eta": ("calibration_eta", _as_float),
    "calibration.rate": ("calibration_rate", _as_float),
    "calibration.samples": ("calibration_samples", _as_int),
    "calibration.candidates": ("calibration_candidates", _as_int),
    "calibration.max_trials": ("calibration_max_trials", _as_int),
    "type": ("pa_type", _as_int),
    "c": ("c", _as_float),
    "error_sensitive": ("error_sensitive", _as_flag),
    "averaging": ("averaging", _as_flag),
    "variance": ("variance", _as_float),
    "gamma": ("gamma", _as_float),
}

# NLTK's tagger trains with python-crfsuite's default algorithm, L-BFGS.
_LBFGS_PARAMETERS = set(ALGORITHM_DEFAULTS["lbfgs"]) | set(FEATURE_DEFAULTS)
_LBFGS_OPTIONS = [key for key, (name, _) in TRAINING_OPTIONS.items() if name in _LBFGS_PARAMETERS]


def estimator_params(training_opt: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :class:`skcrf.CRFTagger` parameters of NLTK ``training_opt``.

    Parameters
    ----------
    training_opt : dict
        CRFsuite trainer options, ``{'c2': 0.1, 'feature.minfreq': 2, ...}``;
        values as python-crfsuite takes them (numbers, bools, or strings
        holding them).

    Returns
    -------
    dict
        Keyword arguments of :class:`skcrf.CRFTagger`.

    Raises
    ------
    ValueError
        For an unknown option, an option of another training algorithm than
        L-BFGS, or an invalid value; the message names the option.

    Examples
    --------
    >>> estimator_params({"c2": "0.5", "feature.possible_transitions": True})
    {'c2': 0.5, 'all_possible_transitions': True}
    """
    if not isinstance(training_opt, Mapping):
        raise TypeError(
            f"training_opt must be a dict of CRFsuite options; got {type(training_opt).__name__}."
        )
    params = {}
    for key, value in training_opt.items():
        if key not in TRAINING_OPTIONS:
            raise ValueError(
                f"training_opt[{key!r}]: unknown CRFsuite training option. The options "
                f"of the L-BFGS trainer are: {', '.join(_LBFGS_OPTIONS)}."
            )
        name, convert = TRAINING_OPTIONS[key]
        if name not in _LBFGS_PARAMETERS:
            owners = [a for a, defaults in ALGORITHM_DEFAULTS.items() if name in defaults]
            raise ValueError(
                f"training_opt[{key!r}] is an option of CRFsuite's {' / '.join(owners)} "
                "training algorithm; NLTK's CRFTagger trains with L-BFGS (python-"
                "crfsuite's default), which has no such option. The L-BFGS options "
                f"are: {', '.join(_LBFGS_OPTIONS)}."
            )
        try:
            params[name] = convert(value)
            # the estimator's own checks (ranges, choices), one option at a time
            # so the error can name it
            _Estimator(**{name: params[name]})._validate_params()
        except ValueError as exc:
            raise ValueError(f"training_opt[{key!r}] = {value!r} is invalid: {exc}") from None
    return params


class CRFTagger(TaggerI):
    """Part-of-speech (or any) tagger with a CRF, NLTK's ``CRFTagger`` API.

    Parameters
    ----------
    feature_func : callable, optional
        ``feature_func(tokens, idx)`` returns the features of
        ``tokens[idx]``: a list of feature names (or a dict of features, in
        python-crfsuite's formats). None uses :meth:`_get_features`, NLTK's
        default features.
    verbose : bool, default=False
        Print the training iterations (to stderr).
    training_opt : dict, optional
        CRFsuite L-BFGS trainer options, with python-crfsuite's names:
        ``feature.minfreq``, ``feature.possible_states``,
        ``feature.possible_transitions``, ``c1``, ``c2``, ``max_iterations``,
        ``num_memories``, ``epsilon``, ``period``, ``delta``, ``linesearch``,
        ``max_linesearch``; CRFsuite's defaults apply to the others (``c2=1``,
        no iteration limit). Checked here: see :data:`TRAINING_OPTIONS` and
        :func:`estimator_params`.
    n_jobs : int, optional
        Keyword only (not in NLTK): threads used to train and tag; None means
        one, -1 all cores.

    Examples
    --------
    >>> import tempfile, os
    >>> train = [[("University", "Noun"), ("is", "Verb"), ("a", "Det"),
    ...           ("good", "Adj"), ("place", "Noun")],
    ...          [("dog", "Noun"), ("eat", "Verb"), ("meat", "Noun")]]
    >>> tagger = CRFTagger(training_opt={"c2": 0.1})
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     tagger.train(train, os.path.join(tmp, "model.crf.tagger"))
    >>> for sentence in tagger.tag_sents([["dog", "is", "good"], ["Cat", "eat", "meat"]]):
    ...     print(sentence)
    [('dog', 'Noun'), ('is', 'Verb'), ('good', 'Adj')]
    [('Cat', 'Noun'), ('eat', 'Verb'), ('meat', 'Noun')]
    >>> tagger.accuracy([[("dog", "Noun"), ("is", "Verb"), ("good", "Adj")]])
    1.0
    """

    def __init__(
        self,
        feature_func: Callable[[list[str], int], list[str]] | None = None,
        verbose: bool = False,
        training_opt: Mapping[str, Any] | None = None,
        *,
        n_jobs: int | None = None,
    ) -> None:
        self._model_file: str | None = ""
        self._estimator = None  # the fitted skcrf.CRFTagger
        self._tagger = None  # its pycrfsuite-like view (NLTK's _tagger is a pycrfsuite.Tagger)
        self._feature_func = self._get_features if feature_func is None else feature_func
        self._verbose = verbose
        # a copy: later changes to the caller's dict must not leak in
        self._training_options = {} if training_opt is None else dict(training_opt)
        self._estimator_params = estimator_params(self._training_options)
        self._n_jobs = n_jobs
        self._feature_cache: dict[Any, Any] = {}  # per token: its features

    # -- features ------------------------------------------------------------

    def _get_features(self, tokens, idx):
        """NLTK's default features of ``tokens[idx]``.

        ``CAPITALIZATION`` (first character upper case), ``HAS_NUM`` (a
        decimal digit anywhere), ``PUNCTUATION`` (every character Unicode
        punctuation), the suffixes ``SUF_`` of 1, 2 and 3 characters shorter
        than the token, and ``WORD_`` + the token. An empty token has none.

        Parameters
        ----------
        tokens : sequence of str
        idx : int

        Returns
        -------
        list of str

        Examples
        --------
        >>> CRFTagger()._get_features(["The", "3rd", "!?"], 1)
        ['HAS_NUM', 'SUF_d', 'SUF_rd', 'WORD_3rd']
        """
        return list(self._cached_features(tokens[idx]))

    def _cached_features(self, token):
        # The features depend on the token alone, so they are kept per token.
        features = self._feature_cache.get(token)
        if features is None:
            if not isinstance(token, str):  # (None would have no features: refused)
                raise TypeError(f"a token must be a str; got {type(token).__name__}")
            features = self._feature_cache[token] = _default_features(token)
        return features

    def clear_feature_cache(self) -> None:
        """Forget the default features remembered per token."""
        self._feature_cache.clear()

    def _sentence_features(self, tokens, where):
        """The estimator's input for one sentence (``where.format(j)`` names token j)."""
        if self._default_features():
            # names as dict keys with value 1: the same attributes as the list,
            # on the encoder's fast path (the default names are distinct)
            cached = self._cached_dict
            try:
                return [cached(token) for token in tokens]
            except TypeError:
                for j, token in enumerate(tokens):
                    if not isinstance(token, str):
                        raise TypeError(
                            f"{where.format(j)} is {type(token).__name__} {token!r:.60}: "
                            "the default features read tokens as str (give a "
                            "feature_func for other tokens)"
                        ) from None
                raise
        feature_func = self._feature_func
        return [feature_func(tokens, i) for i in range(len(tokens))]

    def _default_features(self):
        func = self._feature_func
        return (
            getattr(func, "__self__", None) is self
            and getattr(func, "__func__", None) is CRFTagger._get_features
        )

    def _cached_dict(self, token):
        key = ("dict", token)  # beside the tuples, in the same cache
        features = self._feature_cache.get(key)
        if features is None:
            features = self._feature_cache[key] = dict.fromkeys(self._cached_features(token), 1.0)
        return features

    # -- model ---------------------------------------------------------------

    def set_model_file(self, model_file: str) -> None:
        """Load a CRFsuite model file (written by this tagger, NLTK's or CRFsuite).

        Parameters
        ----------
        model_file : str or path-like

        Raises
        ------
        ValueError
            If the file is not a well-formed CRFsuite model (truncated,
            corrupted, crafted; its attributes' hash tables verified in full
            here, not at the first lookup): the message names the file and
            what is wrong, and the tagger keeps its previous model.
        """
        estimator = _Estimator.from_crfsuite(model_file)
        attributes = estimator._fitted_model().attributes
        if isinstance(attributes, LazyNames):
            # what the first lookup would verify, now: a damaged file keeps
            # the previous model
            attributes.check()
        if self._n_jobs is not None:
            estimator.set_params(n_jobs=self._n_jobs)
        self._set_estimator(estimator)
        self._model_file = model_file

    def _set_estimator(self, estimator):
        self._estimator = estimator
        self._tagger = _view(estimator)

    def train(
        self, train_data: Iterable[Sequence[tuple[str, Any]]], model_file: str | None
    ) -> None:
        """Train a model and write it to ``model_file`` (a CRFsuite model file).

        The tagger then tags with the new model. An existing file is
        replaced.

        Parameters
        ----------
        train_data : list of list of (str, str)
            Tagged sentences.
        model_file : str or path-like, or None
            Where to write the model; None writes no file (an skcrf
            extension).
        """
        X, y = [], []
        for i, sentence in enumerate(train_data):
            sentence = list(sentence)
            for j, pair in enumerate(sentence):
                if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    raise ValueError(
                        f"train_data[{i}][{j}] must be a (token, tag) pair; got {pair!r}."
                    )
            tokens = [token for token, _ in sentence]
            X.append(self._sentence_features(tokens, f"train_data[{i}][{{}}][0]"))
            y.append([tag for _, tag in sentence])
        estimator = _Estimator(
            verbose=self._verbose, n_jobs=self._n_jobs, **self._estimator_params
        )
        with warnings.catch_warnings():
            if "max_iterations" in self._estimator_params:
                # the limit was asked for: reaching it is no news (CRFsuite is silent)
                warnings.filterwarnings(
                    "ignore", message=r".*\(MAX_ITERATIONS,", category=ConvergenceWarning
                )
            estimator.fit(X, y)
        if model_file is not None:
            estimator.to_crfsuite(model_file)
        self._set_estimator(estimator)
        self._model_file = model_file

    # -- tagging -------------------------------------------------------------

    def tag_sents(
        self, sentences: Iterable[Sequence[str]] | None = None, **kwargs: Any
    ) -> list[list[tuple[str, Any]]]:
        """Tag sentences.

        Parameters
        ----------
        sentences : iterable of list of str
            Tokenized sentences (a generator is fine).
        sents : deprecated alias of ``sentences`` (as in NLTK).

        Returns
        -------
        list of list of (str, tag)

        Raises
        ------
        RuntimeError
            If no model is set yet (call :meth:`train` or
            :meth:`set_model_file` first).
        """
        if "sents" in kwargs:
            if sentences is not None:
                raise TypeError(
                    "tag_sents() got both 'sentences' and 'sents'; use 'sentences' only "
                    "('sents' is deprecated)."
                )
            warnings.warn(
                "tag_sents(sents=...) is deprecated; use tag_sents(sentences=...).",
                DeprecationWarning,
                stacklevel=2,
            )
            sentences = kwargs.pop("sents")
        if kwargs:
            unexpected = ", ".join(sorted(kwargs))
            raise TypeError(f"tag_sents() got unexpected keyword arguments: {unexpected}")
        if sentences is None:
            raise TypeError("tag_sents() missing 1 required argument: 'sentences'")
        _check_sentences(sentences)
        if self._estimator is None:
            raise RuntimeError("No model file set; call train() or set_model_file() first.")
        checked = []
        for tokens in sentences:
            _check_sentences([tokens])  # a generator's items are seen only now
            checked.append(list(tokens))
        sentences = checked
        # one batched prediction: every sentence through the compiled decoder
        X = [
            self._sentence_features(tokens, f"sentences[{s}][{{}}]")
            for s, tokens in enumerate(sentences)
        ]
        tags = self._estimator.predict(X)
        return [list(zip(tokens, labels)) for tokens, labels in zip(sentences, tags)]

    def tag(self, tokens: Sequence[str]) -> list[tuple[str, Any]]:
        """Tag one sentence.

        Parameters
        ----------
        tokens : list of str

        Returns
        -------
        list of (str, tag)
        """
        if isinstance(tokens, (str, bytes)):
            raise TypeError(
                "tag() expects a list of tokens, not a single string or bytes. Tokenize "
                "first (e.g. tokens.split() or word_tokenize(s))."
            )
        return self.tag_sents([tokens])[0]


def _default_features(token):
    """NLTK's default features of one token, as a tuple (see ``_get_features``)."""
    if not token:
        return ()
    features = []
    if token[0].isupper():
        features.append("CAPITALIZATION")
    if _DIGIT.search(token) is not None:
        features.append("HAS_NUM")
    category = unicodedata.category
    if all(category(ch) in _PUNCTUATION for ch in token):
        features.append("PUNCTUATION")
    # suffixes strictly shorter than the token
    features.extend("SUF_" + token[-n:] for n in (1, 2, 3) if len(token) > n)
    features.append("WORD_" + token)
    return tuple(features)


def _check_sentences(sentences):
    if isinstance(sentences, (str, bytes)):
        raise TypeError(
            "tag_sents() expects a list of tokenized sentences, not a single string or "
            "bytes object."
        )
    if (
        isinstance(sentences, (list, tuple))
        and sentences
        and isinstance(sentences[0], (str, bytes))
    ):
        raise TypeError(
            "tag_sents() expects a list of tokenized sentences, not a single tokenized sentence."
        )


def _view(estimator):
    """The pycrfsuite-like tagger of a fitted estimator."""
    try:
        return estimator.tagger_
    except AttributeError:  # an skcrf without CRFTagger.tagger_
        from ._tagger_view import CRFsuiteTagger

        predictor = estimator._predictor
        return CRFsuiteTagger(predictor.model, predictor.vocabulary, predictor.decoder)
