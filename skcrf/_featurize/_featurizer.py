"""Turn raw token sequences into per-token feature dicts.

:class:`SequenceFeaturizer` is the usual first step of a pipeline ending in
a CRF: it maps ``[["John", "lives", "in", "Paris"], ...]`` (or sequences of
``(word, pos, ...)`` tuples) to the list-of-lists-of-dicts input that the
tagger expects.
"""

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, TransformerMixin

from .._compat import Interval, _fit_context
from ._embeddings import Embeddings
from ._validation import check_sequences

__all__ = ["SequenceFeaturizer", "word_shape"]


def word_shape(word: str, *, collapse: bool = False) -> str:
    """Return the orthographic shape of ``word``.

    Upper-case letters map to ``'X'``, other letters to ``'x'``, digits to
    ``'d'``; any other character is kept as is.  Runs of the same shape
    character are cut to 4 (``"Washington"`` -> ``'Xxxxx'``), or to 1 when
    ``collapse=True`` (``'Xx'``).

    Parameters
    ----------
    word : str
        The word.
    collapse : bool, default=False
        Whether to collapse every run of the same shape character to one.

    Returns
    -------
    shape : str
        The shape string (empty for an empty word).

    Examples
    --------
    >>> from skcrf._featurize._featurizer import word_shape
    >>> word_shape("Paris"), word_shape("1984"), word_shape("Paris", collapse=True)
    ('Xxxxx', 'dddd', 'Xx')
    >>> word_shape("U.S.-based"), word_shape("Washington")
    ('X.X.-xxxx', 'Xxxxx')
    """
    max_run = 1 if collapse else 4
    out: list[str] = []
    last = None
    run = 0
    for ch in word:
        if ch.isdigit():
            s = "d"
        elif ch.isupper():
            s = "X"
        elif ch.isalpha():
            s = "x"
        else:
            s = ch
        if s == last:
            run += 1
        else:
            last = s
            run = 1
        if run <= max_run:
            out.append(s)
    return "".join(out)


def _column_value(value):
    """Normalise an extra-column value to str, bool, int or float."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def _describe(obj):
    """Short type description for error messages."""
    return type(obj).__name__


def _check_X(X):
    """Validate the structure of X; return it as a list, and its parsed tokens.

    The containers are checked as :meth:`skcrf.CRFTagger.fit` checks them,
    the estimator's rules (lists, tuples and arrays accepted; generators, str,
    dicts and sets rejected, with messages naming ``X[i]``); the tokens here.
    Each parsed sequence is a list of ``(word, columns)`` pairs; the original
    sequences are returned as well (for ``feature_func``).
    """
    if isinstance(X, (list, tuple)) and X and all(isinstance(seq, str) for seq in X):
        raise TypeError(
            "X must be a list of sequences (lists of tokens); got a list of "
            "str: X[0] is the word " + repr(X[0])[:60] + ". Wrap a single "
            "sentence as [sentence]."
        )
    try:
        X = check_sequences(X, name="X", single_hint=False)
    except TypeError as exc:
        if isinstance(X, (list, tuple)) and any(isinstance(seq, Mapping) for seq in X):
            raise TypeError(
                f"{exc} (X looks already featurized; pass it to the tagger directly)"
            ) from None
        raise
    parsed = []
    for i, seq in enumerate(X):
        tokens = []
        for j, tok in enumerate(seq):
            if isinstance(tok, str):
                tokens.append((str(tok), ()))
                continue
            if isinstance(tok, (tuple, list)):
                if len(tok) == 0:
                    raise ValueError(
                        f"X[{i}][{j}] is an empty {_describe(tok)}; a tuple token "
                        "must start with the word"
                    )
                if not isinstance(tok[0], str):
                    raise TypeError(
                        f"X[{i}][{j}]: the first element (the word) must be a str, "
                        f"got {_describe(tok[0])}"
                    )
                tokens.append((str(tok[0]), tuple(tok[1:])))
                continue
            hint = ""
            if isinstance(tok, Mapping):
                hint = " (X looks already featurized; pass it to the tagger directly)"
            raise TypeError(
                f"X[{i}][{j}] must be a str or a tuple/list (word, extra "
                f"columns...); got {_describe(tok)}{hint}"
            )
        parsed.append(tokens)
    return X, parsed


class SequenceFeaturizer(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):  # type: ignore[call-arg]
    """Map token sequences to per-token feature dicts for a CRF.

    A stateless transformer: ``fit`` only validates the parameters, and
    ``transform`` can be called without fitting.  Put it in front of the
    tagger with :func:`~sklearn.pipeline.make_pipeline` so that its
    parameters (e.g. ``sequencefeaturizer__window``) can be grid-searched.

    Parameters
    ----------
    feature_func : callable or None, default=None
        ``feature_func(sequence, i) -> dict`` returning the features of token
        ``i`` of ``sequence`` (the sequence exactly as passed in ``X``).  When
        given it replaces the built-in template, and ``window``,
        ``affix_length`` and ``lowercase`` are ignored.  It must be a
        module-level function for the featurizer to be picklable.
    window : int, default=1
        Number of neighbouring tokens on each side whose features are added
        with an offset prefix (``'-1:'``, ``'+1:'``, ``'-2:'`` ...).
    affix_length : int, default=3
        Longest prefix and suffix feature.  0 disables affix features.
    lowercase : bool, default=True
        Whether the word identity feature is lowercased.  It is named
        ``'word.lower'`` when lowercased and ``'word'`` otherwise.  Affixes
        are taken from the same (possibly lowercased) form.
    embeddings : Embeddings, mapping or None, default=None
        Word vectors: each token gets the feature ``'emb'``, the vector of
        its word (a dense vector feature: the attributes ``emb[0]`` ...
        ``emb[d-1]``, trained through BLAS). A word not found is looked up
        lower-cased; a word still not found gets the zero vector and
        ``'emb.unknown'`` (True). Wrap the vectors in
        :class:`skcrf.Embeddings` (a dict or a gensim
        ``KeyedVectors``): ``clone`` and ``get_params`` then share them
        instead of copying them (a bare dict would be deep-copied by every
        clone of a grid search). Used by the built-in template only.
    embedding_window : int, default=0
        Also add the vectors of the neighbours up to this offset on each
        side, as ``'-1:emb'``, ``'+1:emb'``, ... (none outside the sequence).

    See Also
    --------
    word_shape : The shape function used by the template.

    Notes
    -----
    A token is a ``str`` (the word) or a tuple/list ``(word, col1, col2,
    ...)``.  With the built-in template, token ``i`` of a sequence of ``n``
    tokens gets these features:

    - ``'bias'``: 1.0;
    - ``'word.lower'`` (``'word'`` if ``lowercase=False``): the word;
    - ``'shape'``: :func:`word_shape`, e.g. ``'Xxxxx'``, ``'dd'``;
    - ``'shape.short'``: collapsed shape, e.g. ``'Xx'``, ``'d'``;
    - ``'prefix1'`` ... ``'prefixK'`` and ``'suffix1'`` ... ``'suffixK'``
      for ``K = min(affix_length, len(word))``;
    - booleans ``'is_title'``, ``'is_upper'``, ``'is_digit'``,
      ``'has_hyphen'``, ``'has_digit'``;
    - ``'col1'``, ``'col2'``, ...: the extra columns (strings stay strings,
      numbers and booleans stay numeric, anything else goes through
      ``str``), so a POS column becomes the CRF feature ``'col1=NN'``;
    - ``'BOS'`` (True) on the first token, ``'EOS'`` (True) on the last;
    - for each offset ``d`` in ``-window..-1, 1..window`` with ``i + d``
      inside the sequence, the neighbour's ``'word.lower'``, ``'shape'``,
      ``'is_title'``, ``'is_upper'`` and ``'colK'`` prefixed by ``'-1:'``,
      ``'+2:'``, etc.;
    - for an offset with ``|d| >= 2`` that falls outside the sequence,
      ``'-2:BOS'`` / ``'+2:EOS'`` (True).  (``'-1:BOS'`` would duplicate
      ``'BOS'``, so it is not emitted.)

    The output is deterministic: same input, same dicts in the same key
    order.

    Examples
    --------
    >>> from skcrf import SequenceFeaturizer
    >>> feats = SequenceFeaturizer(affix_length=2).fit_transform(
    ...     [["I", "saw", "Paris"]])
    >>> len(feats), len(feats[0])
    (1, 3)
    >>> f = feats[0][2]
    >>> f["word.lower"], f["shape"], f["shape.short"], f["suffix2"], f["is_title"]
    ('paris', 'Xxxxx', 'Xx', 'is', True)
    >>> f["-1:word.lower"], f["EOS"], "+1:word.lower" in f
    ('saw', True, False)

    Tuple tokens carry extra columns, here a POS tag:

    >>> feats = SequenceFeaturizer().transform([[("I", "PRP"), ("ran", "VBD")]])
    >>> feats[0][1]["col1"], feats[0][1]["-1:col1"]
    ('VBD', 'PRP')

    A custom feature function replaces the template:

    >>> def my_features(sequence, i):
    ...     return {"word": sequence[i], "first": i == 0}
    >>> SequenceFeaturizer(feature_func=my_features).transform(
    ...     [["Hi", "there"]])
    [[{'word': 'Hi', 'first': True}, {'word': 'there', 'first': False}]]
    """

    _parameter_constraints: dict = {
        "feature_func": [callable, None],
        "window": [Interval(numbers.Integral, 0, None, closed="left")],
        "affix_length": [Interval(numbers.Integral, 0, None, closed="left")],
        "lowercase": ["boolean"],
        "embeddings": "no_validation",
        "embedding_window": [Interval(numbers.Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        *,
        feature_func: Callable[[Sequence[Any], int], Mapping[str, Any]] | None = None,
        window: int = 1,
        affix_length: int = 3,
        lowercase: bool = True,
        embeddings: Embeddings | Mapping[str, ArrayLike] | None = None,
        embedding_window: int = 0,
    ) -> None:
        self.feature_func = feature_func
        self.window = window
        self.affix_length = affix_length
        self.lowercase = lowercase
        self.embeddings = embeddings
        self.embedding_window = embedding_window

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.transformer_tags.preserves_dtype = []
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Sequence[Sequence[Any]], y: Any = None) -> "SequenceFeaturizer":
        """Validate the parameters and the structure of ``X``.

        The featurizer learns nothing from the data.

        Parameters
        ----------
        X : list of sequences
            Each sequence is a list of tokens; a token is a str or a
            tuple/list ``(word, col1, ...)``.
        y : None
            Ignored; present for pipeline compatibility.

        Returns
        -------
        self : SequenceFeaturizer
            This featurizer.
        """
        _check_X(X)
        return self

    def transform(self, X: Sequence[Sequence[Any]]) -> list[list[dict[str, Any]]]:
        """Map every token of every sequence to a feature dict.

        Parameters
        ----------
        X : list of sequences
            Each sequence is a list of tokens; a token is a str or a
            tuple/list ``(word, col1, ...)``.

        Returns
        -------
        X_features : list of list of dict
            One dict per token (str keys; str, bool, int or float values),
            with the same sequence lengths as ``X``.
        """
        self._validate_params()
        return self._transform(X)

    def fit_transform(
        self, X: Sequence[Sequence[Any]], y: Any = None, **fit_params: Any
    ) -> list[list[dict[str, Any]]]:
        """Validate the parameters and transform ``X``.

        Parameters
        ----------
        X : list of sequences
            Each sequence is a list of tokens; a token is a str or a
            tuple/list ``(word, col1, ...)``.
        y : None
            Ignored; present for pipeline compatibility.
        **fit_params : dict
            Ignored.

        Returns
        -------
        X_features : list of list of dict
            One dict per token, with the same sequence lengths as ``X``.
        """
        self._validate_params()
        return self._transform(X)

    # -- implementation -------------------------------------------------

    def _transform(self, X):
        raw, parsed = _check_X(X)
        if self.feature_func is not None:
            return [self._apply_feature_func(seq, i) for i, seq in enumerate(raw)]
        return [self._featurize_sequence(tokens) for tokens in parsed]

    def _apply_feature_func(self, seq, i):
        out = []
        for j in range(len(seq)):
            feats = self.feature_func(seq, j)
            if not isinstance(feats, dict):
                if isinstance(feats, Mapping):
                    feats = dict(feats)
                else:
                    raise TypeError(
                        f"feature_func must return a dict; for X[{i}][{j}] it "
                        f"returned {_describe(feats)}"
                    )
            for key in feats:
                if not isinstance(key, str):
                    raise TypeError(
                        f"feature_func returned a non-str key {key!r} "
                        f"({_describe(key)}) for X[{i}][{j}]"
                    )
            out.append(feats)
        return out

    def _token_features(self, word, cols):
        """Features of one token on its own (no context, no prefix)."""
        form = word.lower() if self.lowercase else word
        word_key = "word.lower" if self.lowercase else "word"
        feats = {
            "bias": 1.0,
            word_key: form,
            "shape": word_shape(word),
            "shape.short": word_shape(word, collapse=True),
        }
        for k in range(1, min(self.affix_length, len(form)) + 1):
            feats[f"prefix{k}"] = form[:k]
        for k in range(1, min(self.affix_length, len(form)) + 1):
            feats[f"suffix{k}"] = form[-k:]
        feats["is_title"] = word.istitle()
        feats["is_upper"] = word.isupper()
        feats["is_digit"] = word.isdigit()
        feats["has_hyphen"] = "-" in word
        feats["has_digit"] = any(ch.isdigit() for ch in word)
        for c, value in enumerate(cols, start=1):
            feats[f"col{c}"] = _column_value(value)
        return feats

    def _embeddings(self):
        """The embeddings as an :class:`Embeddings` (None without)."""
        embeddings = self.embeddings
        if embeddings is None or isinstance(embeddings, Embeddings):
            return embeddings
        # a bare mapping: wrapped once per featurizer (kept out of get_params)
        wrapped = self.__dict__.get("_wrapped_embeddings")
        if wrapped is None or wrapped.vectors is not embeddings:
            wrapped = Embeddings(embeddings)
            self._wrapped_embeddings = wrapped
        return wrapped

    def _featurize_sequence(self, tokens):
        n = len(tokens)
        base = [self._token_features(word, cols) for word, cols in tokens]
        embeddings = self._embeddings()
        if embeddings is not None:
            vectors = []
            for k, (word, _) in enumerate(tokens):
                vector = embeddings.lookup(word)
                if vector is None:
                    base[k]["emb.unknown"] = True
                    vector = embeddings.zeros
                vectors.append(vector)
        word_key = "word.lower" if self.lowercase else "word"
        context_keys = (word_key, "shape", "is_title", "is_upper")
        out = []
        for i in range(n):
            feats = dict(base[i])
            if i == 0:
                feats["BOS"] = True
            if i == n - 1:
                feats["EOS"] = True
            for d in (*range(-self.window, 0), *range(1, self.window + 1)):
                j = i + d
                prefix = f"{d:+d}:"
                if 0 <= j < n:
                    nb = base[j]
                    for key in context_keys:
                        feats[prefix + key] = nb[key]
                    for c in range(1, len(tokens[j][1]) + 1):
                        key = f"col{c}"
                        feats[prefix + key] = nb[key]
                elif abs(d) >= 2:
                    feats[prefix + ("BOS" if d < 0 else "EOS")] = True
            if embeddings is not None:
                feats["emb"] = vectors[i]
                for d in (*range(-self.embedding_window, 0), *range(1, self.embedding_window + 1)):
                    if 0 <= i + d < n:
                        feats[f"{d:+d}:emb"] = vectors[i + d]
            out.append(feats)
        return out
