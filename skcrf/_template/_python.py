"""The Pythonic template spec (``syntax="python"``): features written as in ``word2features``.

A spec is a dict (or a list of ``(key, value)`` pairs) from feature keys to
**expressions** over the tokens of a sequence: ``word`` is the token's word
(column 0), ``Col("pos")`` another column, and the expressions read like the
Python a feature function would run on the token's strings::

    {
        "bias": 1.0,
        "word.lower()": word.lower(),
        "word[-3:]": word[-3:],
        "word.isupper()": word.isupper(),
        "-1:word.lower()": word.at(-1).lower(),
        "BOS": BOS,
    }

:func:`parse_python` compiles a spec to the plan every template syntax
shares (:mod:`skcrf._template._plan`): no Python runs per token unless the
spec asks for it with :meth:`Col.apply`.

What each value gives, token by token (the dict a feature function would
return):

- a text expression (``word.lower()``): ``{key: text}``, the attribute
  ``key:text``; a bool or int expression (``word.isupper()``,
  ``word.length()``): ``{key: value}``, the attribute ``key`` with that
  value (True is 1.0, False 0.0: still an attribute, as in the dict);
- a constant (``1.0``, ``True``, ``"en"``): the same at every token;
- ``BOS`` / ``EOS``: ``{key: True}`` at the first / last token only;
  ``is_first`` / ``is_last``: True or False at every token;
- ``x.at(k)`` reads the token ``k`` positions away; where that is outside
  the sequence the feature is left out, unless ``outside=`` gives the text
  to use instead (as given: no step applies to it).

The steps follow Python's ``str`` methods exactly (Unicode case mappings:
``'ß'.upper()`` is ``'SS'``, ``'İ'.lower()`` has two characters; Unicode
digits: ``'²'.isdigit()`` is True; lengths and slices count characters),
where the CRF++ and Wapiti syntaxes follow their tools (bytes, ASCII).
Indexing ``x[i]`` is the slice ``x[i:i+1]``: an empty text where Python
would raise ``IndexError``.

Word vectors (:class:`skcrf.Embeddings`) are not part of templates yet.
"""

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._plan import Boundary, Feature, Plan, Ref, TemplateError, check_plan

__all__ = [
    "BOS",
    "EOS",
    "Boundary",
    "Col",
    "Expr",
    "feature_dicts",
    "is_first",
    "is_last",
    "outside",
    "parse_python",
    "transition",
    "window",
    "word",
]

_TRANSITION_KEY = "__transition__"  # skcrf's key of input-conditioned transitions


class Expr:
    """A template expression: evaluated per token when the template runs.

    Expressions are immutable: every method returns a new one. They have no
    truth value and no ``str`` (``if word.isupper():`` or an f-string of an
    expression would silently compute something else at spec time).
    """

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # == builds an expression

    def __bool__(self):
        raise TypeError(
            f"{self!r} is a template expression, computed for each token when the template "
            "runs: it has no truth value now. Give it as a feature's value ('and', 'or', "
            "'not' and 'if' do not combine expressions; use ~, == / != or .apply(function))"
        )

    def __str__(self):
        raise TypeError(
            f"{self!r} is a template expression, not text: join expressions with + "
            "(word + '|' + Col('pos')), not with str(), % or f-strings"
        )

    def __format__(self, spec):
        return self.__str__()

    def __eq__(self, other):  # type: ignore[override]
        raise TypeError(f"{self!r} cannot be compared with {other!r} in a template")

    def __ne__(self, other):  # type: ignore[override]
        raise TypeError(f"{self!r} cannot be compared with {other!r} in a template")

    # immutable: copies (scikit-learn's clone deep-copies parameters) share it
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _check_int(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, got {value!r}")
    return int(value)


def _check_outside(outside):
    if outside is None or isinstance(outside, str | Boundary):
        return outside
    raise TypeError(
        f"outside= is the text of a position outside the sequence: a str (or a Boundary), "
        f"got {type(outside).__name__}"
    )


def _gives(kind):
    """How a kind reads in a message: 'gives text', 'gives a bool', 'gives an int'."""
    return {"str": "gives text", "int": "gives an int"}.get(kind, f"gives a {kind}")


def _short(obj):
    """A short repr of a step's argument (a gazetteer may hold a million words)."""
    if isinstance(obj, str):
        return repr(obj)
    if isinstance(obj, Mapping | frozenset):
        return f"<{type(obj).__name__} of {len(obj)}>"
    return getattr(obj, "__qualname__", None) or type(obj).__name__


class Col(Expr):
    """A column of a token, through the ``str`` methods applied to it.

    ``Col(0)`` (or ``word``) is the token's word: the token itself when
    tokens are ``str``, the first column of tuple tokens. ``Col("pos")``
    names a column of the ``columns`` given with the spec.

    Parameters
    ----------
    column : int or str, default=0
        The column's index, or its name in ``columns``.

    Examples
    --------
    >>> spec = {"w": word.lower(), "pos": Col("pos"), "pos[:2]": Col("pos")[:2]}
    >>> X = [[("Dogs", "NNS"), ("bark", "VBP")]]
    >>> for token in feature_dicts(spec, X, columns=("word", "pos"))[0]:
    ...     print(token)
    {'w': 'dogs', 'pos': 'NNS', 'pos[:2]': 'NN'}
    {'w': 'bark', 'pos': 'VBP', 'pos[:2]': 'VB'}
    """

    __slots__ = ("column", "offset", "steps", "outside_text", "absolute", "kind", "_repr")

    column: int | str
    offset: int
    steps: tuple
    outside_text: str | Boundary | None
    absolute: bool
    kind: str  # what the steps give: 'str', 'bool', 'int' (or .apply's 'float')
    _repr: str

    def __init__(self, column: int | str = 0) -> None:
        if isinstance(column, bool) or not isinstance(column, numbers.Integral | str):
            raise TypeError(f"a column is an int index or a str name, got {column!r}")
        if not isinstance(column, str):
            column = int(column)
            if column < 0:
                raise ValueError(f"a column index must be >= 0, got {column}")
        self.column = column
        self.offset = 0
        self.steps = ()
        self.outside_text = None
        self.absolute = False
        self.kind = "str"
        self._repr = f"Col({column!r})"

    def _derive(self, shown, step=None, kind=None, **changes):
        """A copy of self with one more step (and other fields changed)."""
        if self.steps and self.steps[-1][0] == "call" and step is not None:
            raise TypeError(f"{self!r}: .apply(...) must be the last step of an expression")
        new = object.__new__(Col)
        for name in Col.__slots__:
            setattr(new, name, getattr(self, name))
        if step is not None:
            new.steps = self.steps + (step,)
        if kind is not None:
            new.kind = kind
        for name, value in changes.items():
            setattr(new, name, value)
        new._repr = shown
        return new

    def _text_step(self, name, shown, step, kind="str"):
        if self.kind != "str":
            raise TypeError(f"{self!r} {_gives(self.kind)}; .{name} takes text")
        return self._derive(f"{self._repr}{shown}", step, kind)

    def __repr__(self):
        return self._repr

    def __reduce_ex__(self, protocol):
        state = {name: getattr(self, name) for name in Col.__slots__}
        return (_rebuild_col, (state,))

    # -- position ------------------------------------------------------

    def at(
        self, offset: int, *, outside: str | Boundary | None = None, absolute: bool = False
    ) -> "Col":
        """The same expression on the token ``offset`` positions away.

        Parameters
        ----------
        offset : int
            Relative to the current token (``-1`` the previous one); added to
            the expression's own offset. With ``absolute=True``, a position in
            the sequence: ``0`` the first token, ``-1`` the last.
        outside : str, Boundary or None, default=None
            The text where the position is outside the sequence (used as
            given, no step applies to it); None leaves the feature out there.
        absolute : bool, default=False
            Whether ``offset`` is a position in the sequence. A relative
            ``at`` does not move an absolute position.

        Returns
        -------
        expr : Col

        Examples
        --------
        >>> spec = {"prev": word.at(-1), "prev_word": word.at(-1, outside=""),
        ...         "next.lower": word.lower().at(1), "first": word.at(0, absolute=True)}
        >>> for token in feature_dicts(spec, [["The", "Cat"]])[0]:
        ...     print(token)
        {'prev_word': '', 'next.lower': 'cat', 'first': 'The'}
        {'prev': 'The', 'prev_word': 'The', 'first': 'The'}
        """
        offset = _check_int(offset, "offset")
        outside = _check_outside(outside)
        shown = f"{self._repr}.at({offset}"
        shown += f", outside={outside!r}" if outside is not None else ""
        shown += ", absolute=True)" if absolute else ")"
        changes: dict = {}
        if absolute:
            changes.update(offset=offset, absolute=True)
        elif not self.absolute:
            changes.update(offset=self.offset + offset)
        if outside is not None:
            changes.update(outside_text=outside)
        return self._derive(shown, **changes)

    # -- str -> str ----------------------------------------------------

    def lower(self) -> "Col":
        """``str.lower`` (Unicode full case mapping).

        Examples
        --------
        >>> feature_dicts({"w": word.lower()}, [["ÉCOLE", "İ"]])
        [[{'w': 'école'}, {'w': 'i̇'}]]
        """
        return self._text_step("lower()", ".lower()", ("lower",))

    def upper(self) -> "Col":
        """``str.upper`` (``'ß'`` becomes ``'SS'``)."""
        return self._text_step("upper()", ".upper()", ("upper",))

    def __getitem__(self, index: int | slice) -> "Col":
        """``x[start:stop]`` and ``x[i]`` in characters; ``x[i]`` is ``x[i:i+1]``.

        An index past the end gives ``''`` where Python would raise
        ``IndexError``; a slice step other than 1 is not supported.

        Examples
        --------
        >>> feature_dicts({"p2": word[:2], "s3": word[-3:], "w0": word[0]}, [["ab", ""]])
        [[{'p2': 'ab', 's3': 'ab', 'w0': 'a'}, {'p2': '', 's3': '', 'w0': ''}]]
        """
        if isinstance(index, slice):
            if index.step not in (None, 1):
                raise TypeError(f"{self!r}[{index!r}]: a slice step other than 1 is not supported")
            start = None if index.start is None else _check_int(index.start, "a slice bound")
            stop = None if index.stop is None else _check_int(index.stop, "a slice bound")
            shown = f"[{'' if start is None else start}:{'' if stop is None else stop}]"
            return self._text_step("__getitem__", shown, ("slice", start, stop))
        i = _check_int(index, "an index")
        step = ("slice", i, None if i == -1 else i + 1)
        return self._text_step("__getitem__", f"[{i}]", step)

    def shape(self, *, collapse: bool = False) -> "Col":
        """The word shape of :func:`skcrf.SequenceFeaturizer`'s template.

        Digits ``'d'``, upper-case letters ``'X'``, other letters ``'x'``,
        anything else kept; runs of one shape character are cut to 4, or to
        1 with ``collapse=True``.

        Examples
        --------
        >>> feature_dicts({"s": word.shape(), "c": word.shape(collapse=True)}, [["Washington"]])
        [[{'s': 'Xxxxx', 'c': 'Xx'}]]
        """
        if collapse:
            return self._text_step("shape()", ".shape(collapse=True)", ("shape_collapsed",))
        return self._text_step("shape()", ".shape()", ("shape",))

    def char_shape(self) -> "Col":
        """Each character's class, with no run cut (the Treebank window task's shape).

        ``isupper`` gives ``'X'``, ``islower`` ``'x'``, ``isdigit`` ``'d'``;
        other characters are kept.

        Examples
        --------
        >>> feature_dicts({"shape": word.char_shape()}, [["Washington-1984"]])
        [[{'shape': 'Xxxxxxxxxx-dddd'}]]
        """
        return self._text_step("char_shape()", ".char_shape()", ("char_shape",))

    def lookup(self, mapping: Mapping[str, str]) -> "Col":
        """``mapping[text]`` (word clusters); a text not in it leaves the feature out.

        The mapping (str to str) is copied when the expression is made.

        Examples
        --------
        >>> clusters = {"paris": "0110", "london": "0110"}
        >>> feature_dicts({"cluster": word.lower().lookup(clusters)}, [["Paris", "is"]])
        [[{'cluster': '0110'}, {}]]
        """
        _refuse_embeddings(mapping, ".lookup")
        if not isinstance(mapping, Mapping):
            raise TypeError(f".lookup takes a mapping of str to str, got {type(mapping).__name__}")
        copied = dict(mapping)
        for k, v in copied.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(
                    f".lookup takes a mapping of str to str; it maps {k!r} to "
                    f"{type(v).__name__} (word vectors are not supported by templates yet)"
                )
        return self._text_step("lookup()", f".lookup({_short(copied)})", ("lookup", copied))

    def if_len_at_least(self, n: int) -> "Col":
        """The text itself when it has at least ``n`` characters; else the feature is left out.

        Examples
        --------
        >>> spec = {"prefix3": word.lower().if_len_at_least(3)[:3]}
        >>> feature_dicts(spec, [["Paris", "is"]])
        [[{'prefix3': 'par'}, {}]]
        """
        n = _check_int(n, "n")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return self._text_step("if_len_at_least()", f".if_len_at_least({n})", ("min_length", n))

    # -- str -> bool / int ---------------------------------------------

    def isupper(self) -> "Col":
        """``str.isupper``."""
        return self._text_step("isupper()", ".isupper()", ("is_upper",), "bool")

    def islower(self) -> "Col":
        """``str.islower``."""
        return self._text_step("islower()", ".islower()", ("is_lower",), "bool")

    def istitle(self) -> "Col":
        """``str.istitle``."""
        return self._text_step("istitle()", ".istitle()", ("is_title",), "bool")

    def isdigit(self) -> "Col":
        """``str.isdigit`` (Unicode digits: ``'²'`` and ``'٣'`` are digits).

        Examples
        --------
        >>> feature_dicts({"d": word.isdigit(), "has": word.has_digit()}, [["1984", "x²"]])
        [[{'d': True, 'has': True}, {'d': False, 'has': True}]]
        """
        return self._text_step("isdigit()", ".isdigit()", ("is_digit",), "bool")

    def isalpha(self) -> "Col":
        """``str.isalpha``."""
        return self._text_step("isalpha()", ".isalpha()", ("is_alpha",), "bool")

    def has_digit(self) -> "Col":
        """Whether a character ``isdigit``: ``any(c.isdigit() for c in text)``."""
        return self._text_step("has_digit()", ".has_digit()", ("has_digit",), "bool")

    def contains(self, text: str) -> "Col":
        """``text in x`` (Python's ``in`` cannot build an expression).

        Examples
        --------
        >>> feature_dicts({"has_hyphen": word.contains("-")}, [["well-known"]])
        [[{'has_hyphen': True}]]
        """
        if not isinstance(text, str):
            raise TypeError(f".contains takes a str, got {type(text).__name__}")
        return self._text_step("contains()", f".contains({text!r})", ("contains", text), "bool")

    def in_set(self, items: Iterable[str]) -> "Col":
        """Whether the text is one of ``items`` (a gazetteer), copied when the expression is made.

        Examples
        --------
        >>> cities = {"paris", "london"}
        >>> feature_dicts({"city": word.lower().in_set(cities)}, [["Paris", "is"]])
        [[{'city': True}, {'city': False}]]
        """
        if isinstance(items, str | bytes) or not isinstance(items, Iterable):
            raise TypeError(f".in_set takes a set of str, got {type(items).__name__}")
        frozen = frozenset(items)
        for item in frozen:
            if not isinstance(item, str):
                raise TypeError(f".in_set takes a set of str; it holds {item!r}")
        return self._text_step(
            "in_set()", f".in_set({_short(frozen)})", ("in_set", frozen), "bool"
        )

    def length(self) -> "Col":
        """``len(x)`` in characters (Python's ``len`` cannot build an expression).

        Examples
        --------
        >>> feature_dicts({"len": word.length()}, [["naïve"]])
        [[{'len': 5}]]
        """
        return self._text_step("length()", ".length()", ("length",), "int")

    def __invert__(self) -> "Col":
        """``~x``: not ``x``, for a bool expression."""
        if self.kind != "bool":
            raise TypeError(f"~ negates a bool expression; {self!r} {_gives(self.kind)}")
        return self._derive(f"~{self._repr}", ("not",))

    def __eq__(self, other):  # type: ignore[override]
        """``x == "text"``, or ``x.upper() == x`` / ``x.lower() == x`` (a bool).

        Examples
        --------
        >>> spec = {"is_capitalized": word[0].upper() == word[0],
        ...         "capitals_inside": word[1:].lower() != word[1:],
        ...         "the": word.lower() == "the"}
        >>> for token in feature_dicts(spec, [["The", "iPhone"]])[0]:
        ...     print(token)
        {'is_capitalized': True, 'capitals_inside': False, 'the': True}
        {'is_capitalized': False, 'capitals_inside': True, 'the': False}
        """
        return self._compare(other, "==")

    def __ne__(self, other):  # type: ignore[override]
        return self._compare(other, "!=")

    def _compare(self, other, op):
        negate = ("not",) if op == "!=" else ()
        supported = (
            "the supported comparisons are x == 'text', x.upper() == x and x.lower() == x "
            "(and != of each), where x is a text expression"
        )
        if self.kind != "str":
            raise TypeError(f"{self!r} {op} {other!r}: {self!r} {_gives(self.kind)}; {supported}")
        shown = f"({self._repr} {op} {other!r})"
        if isinstance(other, str):
            return self._derive(shown, ("in_set", frozenset((other,))), "bool")._negated(negate)
        if isinstance(other, Col) and other.kind == "str" and self._same_place(other):
            for case in ("upper", "lower"):
                if self.steps == other.steps + ((case,),):
                    return other._derive(shown, (f"equals_{case}",), "bool")._negated(negate)
                if other.steps == self.steps + ((case,),):
                    return self._derive(shown, (f"equals_{case}",), "bool")._negated(negate)
        raise TypeError(f"{self!r} {op} {other!r}: {supported}")

    def _negated(self, negate):
        return self._derive(self._repr, negate) if negate else self

    def _same_place(self, other):
        return (self.column, self.offset, self.absolute, self.outside_text) == (
            other.column,
            other.offset,
            other.absolute,
            other.outside_text,
        )

    # -- escape hatch ----------------------------------------------------

    def apply(self, function: Callable[[str], Any], *, returns: type = str) -> "Col":
        """``function(text)`` for each token: Python code, run per token (slow).

        The escape hatch for what the steps cannot say. A featurizer whose
        template calls Python cannot be saved without pickle. ``function``
        takes the text and returns a value of the type ``returns`` (a text
        feature for ``str``, a weighted one for ``bool``, ``int`` or
        ``float``) or None to leave the feature out. It must be the last
        step of an expression.

        Parameters
        ----------
        function : callable
            ``function(text) -> returns`` or None.
        returns : {str, bool, int, float}, default=str
            What ``function`` returns.

        Returns
        -------
        expr : Col

        Examples
        --------
        >>> def vowels(text):
        ...     return sum(c in "aeiou" for c in text)
        >>> feature_dicts({"vowels": word.apply(vowels, returns=int)}, [["Paris"]])
        [[{'vowels': 2}]]
        """
        if not callable(function):
            raise TypeError(f".apply takes a function, got {type(function).__name__}")
        if returns not in (str, bool, int, float):
            raise TypeError(f".apply(returns=...) is str, bool, int or float, got {returns!r}")
        name = getattr(function, "__qualname__", type(function).__name__)
        shown = f".apply({name}" + (")" if returns is str else f", returns={returns.__name__})")
        kind = {str: "str", bool: "bool", int: "int", float: "float"}[returns]
        return self._text_step("apply()", shown, ("call", function), kind)

    # -- conjunctions ------------------------------------------------------

    def __add__(self, other):
        return Concat((self,)) + other

    def __radd__(self, other):
        return other + Concat((self,))


def _rebuild_col(state):
    new = object.__new__(Col)
    for name, value in state.items():
        setattr(new, name, value)
    return new


class Concat(Expr):
    """Text expressions and literal text joined by ``+``: one text feature of several parts.

    Examples
    --------
    >>> spec = {"w[-1]|w[0]": word.at(-1).lower() + "|" + word.lower()}
    >>> feature_dicts(spec, [["The", "Cat"]])
    [[{}, {'w[-1]|w[0]': 'the|cat'}]]
    """

    __slots__ = ("parts",)

    parts: tuple

    def __init__(self, parts):
        for part in parts:
            if not isinstance(part, str | Col):
                raise TypeError(
                    f"only text and text expressions can be joined with +, got {part!r}"
                )
        self.parts = tuple(parts)

    def __repr__(self):
        return " + ".join(repr(part) for part in self.parts)

    def __reduce_ex__(self, protocol):
        return (Concat, (self.parts,))

    def __add__(self, other):
        if isinstance(other, Concat):
            return Concat(self.parts + other.parts)
        if isinstance(other, str | Col):
            return Concat((*self.parts, other))
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, str | Col):
            return Concat((other, *self.parts))
        return NotImplemented

    def at(self, offset: int, *, outside: str | Boundary | None = None) -> "Concat":
        """Every part on the token ``offset`` positions away (see :meth:`Col.at`).

        Examples
        --------
        >>> bigram = word.lower() + "|" + word.at(1).lower()
        >>> feature_dicts({"w[-1]|w[0]": bigram.at(-1)}, [["The", "Cat"]])
        [[{}, {'w[-1]|w[0]': 'the|cat'}]]
        """
        return Concat(
            tuple(
                part.at(offset, outside=outside) if isinstance(part, Col) else part
                for part in self.parts
            )
        )


class Edge(Expr):
    """Whether the position ``offset`` away is outside the sequence: see :func:`outside`."""

    __slots__ = ("offset", "marker", "_repr")

    offset: int
    marker: bool
    _repr: str

    def __init__(self, offset, marker, shown):
        self.offset = offset
        self.marker = marker
        self._repr = shown

    def __repr__(self):
        return self._repr

    def __reduce_ex__(self, protocol):
        return (Edge, (self.offset, self.marker, self._repr))


def outside(offset: int, *, marker: bool = False) -> Expr:
    """Whether the token ``offset`` positions away is outside the sequence.

    ``outside(-1)`` is ``is_first`` (True or False at every token);
    ``outside(-1, marker=True)`` is ``BOS``: the feature ``{key: True}``
    only where it holds (a window's ``'-2:BOS'`` is ``outside(-2, marker=True)``).

    Parameters
    ----------
    offset : int
        Not 0 (the current token is always inside).
    marker : bool, default=False
        Whether the feature is left out where the position is inside.

    Returns
    -------
    expr : Expr

    Examples
    --------
    >>> spec = {"is_first": is_first, "BOS": BOS, "-2:BOS": outside(-2, marker=True)}
    >>> for token in feature_dicts(spec, [["a", "b", "c"]])[0]:
    ...     print(token)
    {'is_first': True, 'BOS': True, '-2:BOS': True}
    {'is_first': False, '-2:BOS': True}
    {'is_first': False}
    """
    offset = _check_int(offset, "offset")
    if offset == 0:
        raise ValueError("outside(0): the current token is always inside the sequence")
    names = {(-1, False): "is_first", (1, False): "is_last", (-1, True): "BOS", (1, True): "EOS"}
    marker = bool(marker)
    shown = names.get(
        (offset, marker), f"outside({offset}" + (", marker=True)" if marker else ")")
    )
    return Edge(offset, marker, shown)


class Transition(Expr):
    """A feature given to the transitions (see :func:`transition`)."""

    __slots__ = ("value", "also_state")

    def __init__(self, value, also_state):
        self.value = value
        self.also_state = also_state

    def __repr__(self):
        return f"transition({self.value!r}" + (", also_state=True)" if self.also_state else ")")

    def __reduce_ex__(self, protocol):
        return (Transition, (self.value, self.also_state))

    def at(self, offset, *, outside=None):
        """The wrapped expression at ``offset`` (see :meth:`Col.at`)."""
        if not isinstance(self.value, Col | Concat):
            raise TypeError(f"{self!r} has no position to move")
        return Transition(self.value.at(offset, outside=outside), self.also_state)


def transition(value: Any, *, also_state: bool = False) -> Expr:
    """An input-conditioned transition feature: seen with the label pair ending at the token.

    skcrf's ``'__transition__'`` feature (CRF++'s ``B`` line with ``%x``,
    Wapiti's ``b``): the feature dicts hold it under ``'__transition__'``;
    a sequence's first token has none. The plain label-to-label
    transitions are always learnt, they need no feature.

    Parameters
    ----------
    value : expression or constant
        What a spec value may be (not another ``transition``).
    also_state : bool, default=False
        Whether the token's state features get it too (Wapiti's ``*``).

    Returns
    -------
    expr : Expr

    Examples
    --------
    >>> feature_dicts({"w": word, "tw": transition(word.lower())}, [["The", "Cat"]])
    [[{'w': 'The'}, {'w': 'Cat', '__transition__': {'tw': 'cat'}}]]
    """
    if isinstance(value, Transition):
        raise TypeError(f"transition({value!r}): already a transition")
    return Transition(value, bool(also_state))


def window(
    expr: Expr, offsets: Iterable[int], *, key: str | Callable[[int], str]
) -> dict[str, Expr]:
    """One feature per offset: ``{key(k): expr.at(k) for k in offsets}``.

    Splice the dict into a spec with ``**``.

    Parameters
    ----------
    expr : Col, Concat or transition
        The expression at offset 0.
    offsets : iterable of int
        The offsets, in the order of the features.
    key : str or callable
        A format string of ``offset`` (``"w[{offset}]"``, ``"{offset:+d}:word"``)
        or a function of the offset returning the key.

    Returns
    -------
    spec : dict

    Examples
    --------
    >>> window(word.lower(), range(-1, 2), key="w[{offset}]")
    {'w[-1]': word.lower().at(-1), 'w[0]': word.lower().at(0), 'w[1]': word.lower().at(1)}
    >>> spec = window(word.lower() + "|" + word.at(1).lower(), [-1, 0],
    ...               key=lambda k: f"w[{k}]|w[{k + 1}]")
    >>> for token in feature_dicts(spec, [["a", "b", "c"]])[0]:
    ...     print(token)
    {'w[0]|w[1]': 'a|b'}
    {'w[-1]|w[0]': 'a|b', 'w[0]|w[1]': 'b|c'}
    {'w[-1]|w[0]': 'b|c'}
    """
    if not isinstance(expr, Col | Concat | Transition):
        raise TypeError(f"window takes a column expression or a join of them, got {expr!r}")
    if isinstance(key, str):
        pattern = key

        def key(offset):
            return pattern.format(offset=offset)

    elif not callable(key):
        raise TypeError(f"key is a format string or a function of the offset, got {key!r}")
    out: dict = {}
    for offset in offsets:
        offset = _check_int(offset, "an offset")
        name = key(offset)
        if not isinstance(name, str):
            raise TypeError(f"the key of offset {offset} is {name!r}, not a str")
        if name in out:
            raise ValueError(f"window: offsets give the same key {name!r} twice")
        out[name] = expr.at(offset)
    return out


#: The token's word: column 0 (the token itself when tokens are str).
word = Col(0)
word._repr = "word"
#: True at every sequence's first token, False elsewhere.
is_first = outside(-1)
#: True at every sequence's last token, False elsewhere.
is_last = outside(1)
#: ``{key: True}`` at every sequence's first token only.
BOS = outside(-1, marker=True)
#: ``{key: True}`` at every sequence's last token only.
EOS = outside(1, marker=True)


# -- the compiler ---------------------------------------------------------------


def _refuse_embeddings(value, where):
    if type(value).__name__ != "Embeddings":
        return
    from .._featurize._embeddings import Embeddings

    if isinstance(value, Embeddings):
        raise TemplateError(
            f"{where}: word vectors (skcrf.Embeddings) are not supported by templates yet; "
            "use SequenceFeaturizer(embeddings=...) for them"
        )


class _Compiler:
    def __init__(self, columns):
        if columns is not None:
            if isinstance(columns, str) or not isinstance(columns, Iterable):
                raise TypeError(f"columns is a sequence of column names, got {columns!r}")
            columns = tuple(columns)
            for name in columns:
                if not isinstance(name, str):
                    raise TypeError(f"columns are named by str, got {name!r}")
            if len(set(columns)) != len(columns):
                raise ValueError(f"columns name a column twice: {columns!r}")
        self.columns = columns

    def error(self, key, message):
        return TemplateError(f"feature {key!r}: {message}")

    def column(self, key, col):
        if isinstance(col.column, int):
            return col.column
        if self.columns is None:
            raise self.error(
                key, f"{col!r} names the column {col.column!r}, but no columns= were given"
            )
        if col.column not in self.columns:
            raise self.error(
                key, f"unknown column {col.column!r} in {col!r}; the columns are {self.columns!r}"
            )
        return self.columns.index(col.column)

    def ref(self, key, col):
        return Ref(col.offset, self.column(key, col), col.steps, col.absolute)

    def features(self, key, value, kind):
        if not isinstance(key, str):
            raise TemplateError(
                f"feature keys are str, got {key!r} ({type(key).__name__}) for {value!r}"
            )
        if not key:
            raise self.error(key, "an empty key")
        if key == _TRANSITION_KEY:
            raise self.error(
                key, f"the key {key!r} is reserved: wrap a value in transition(...) instead"
            )
        source = f"{key!r}: {value!r}"
        _refuse_embeddings(value, f"feature {key!r}")
        if isinstance(value, Transition):
            if kind != "state":
                raise self.error(key, "a transition inside a transition")
            kind = "both" if value.also_state else "transition"
            value = value.value
            _refuse_embeddings(value, f"feature {key!r}")
        if isinstance(value, bool | numbers.Real) and not isinstance(value, Expr):
            return [self.constant(key, value, kind, source)]
        if isinstance(value, str):
            return [Feature((key,), (value,), kind=kind, source=source)]
        if isinstance(value, Col):
            if value.kind in ("str",):
                return [self.text(key, (value,), kind, source)]
            if value.outside_text is not None:
                raise self.error(
                    key,
                    f"{value!r} {_gives(value.kind)}: outside= is text, it cannot stand for "
                    "one (leave outside= out: the feature is then left out there)",
                )
            return [Feature((key,), weight=self.ref(key, value), kind=kind, source=source)]
        if isinstance(value, Concat):
            return [self.text(key, value.parts, kind, source)]
        if isinstance(value, Edge):
            if value.marker:
                return [
                    Feature(
                        (key,), weight=True, when_outside=value.offset, kind=kind, source=source
                    )
                ]
            return [
                Feature((key,), weight=True, when_outside=value.offset, kind=kind, source=source),
                Feature((key,), weight=False, when_inside=value.offset, kind=kind, source=source),
            ]
        raise self.error(
            key,
            f"a spec value is an expression (word.lower(), Col('pos')[:2], BOS, ...), a "
            f"join of them with +, a str, bool, int or float; got {type(value).__name__} "
            f"{value!r}",
        )

    def constant(self, key: str, value: Any, kind: str, source: str) -> Feature:
        if isinstance(value, bool):
            weight: bool | int | float | None = value
        elif isinstance(value, numbers.Integral):
            weight = int(value)
        else:
            weight = float(value)
            if not math.isfinite(weight):
                raise self.error(key, f"a constant must be finite, got {value!r}")
            if type(value) is float and weight == 1.0:
                weight = None  # the plan's plain feature (value 1.0)
        return Feature((key,), weight=weight, kind=kind, source=source)

    def text(self, key, parts, kind, source):
        out = []
        texts = set()  # the outside texts of the parts that can be outside
        for part in parts:
            if isinstance(part, str):
                out.append(part)
                continue
            if part.kind not in ("str",):
                raise self.error(
                    key,
                    f"{part!r} {_gives(part.kind)}, not text: it cannot be part of a text "
                    "feature (give it a key of its own, or use .apply(..., returns=str))",
                )
            if part.absolute or part.offset != 0:
                texts.add(part.outside_text)
            out.append(self.ref(key, part))
        if len(texts) > 1:
            raise self.error(
                key,
                "the parts that can fall outside the sequence must share one outside= text "
                f"(or all have none), got {sorted(map(repr, texts))}",
            )
        text = texts.pop() if texts else None
        boundary = Boundary(text, text, numbered=False) if isinstance(text, str) else text
        return Feature((key,), tuple(out), outside=boundary, kind=kind, source=source)


def _pairs(spec):
    if isinstance(spec, Mapping):
        return list(spec.items())
    if isinstance(spec, str | bytes) or not isinstance(spec, Iterable):
        raise TypeError(
            "a Pythonic spec is a dict (or a list of (key, value) pairs) of features, got "
            f"{type(spec).__name__} (a CRF++ or Wapiti template is text: syntax='crfpp' / "
            "'wapiti')"
        )
    pairs = []
    for item in spec:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"a spec given as a list holds (key, value) pairs, got {item!r}")
        pairs.append(tuple(item))
    return pairs


def parse_python(
    spec: Mapping[str, Any] | Iterable[tuple[str, Any]], *, columns: Iterable[str] | None = None
) -> Plan:
    """Compile a Pythonic spec to a plan.

    Parameters
    ----------
    spec : dict or list of (str, value) pairs
        Feature keys to expressions or constants, in the order of the
        features (see the module's documentation).
    columns : sequence of str or None, default=None
        The names of the token's columns, for ``Col("name")``.

    Returns
    -------
    plan : Plan

    Raises
    ------
    TemplateError
        For a value that is not a feature, naming its key.

    Examples
    --------
    >>> plan = parse_python({"bias": 1.0, "w": word.lower(), "BOS": BOS})
    >>> [feature.source for feature in plan.features]
    ["'bias': 1.0", "'w': word.lower()", "'BOS': BOS"]
    >>> try:
    ...     parse_python({"w": Col("lemma")}, columns=("word", "pos"))
    ... except ValueError as error:
    ...     print(error)
    feature 'w': unknown column 'lemma' in Col('lemma'); the columns are ('word', 'pos')
    """
    compiler = _Compiler(columns)
    features = []
    seen = set()
    for key, value in _pairs(spec):
        if isinstance(key, str) and key in seen:
            raise TemplateError(f"feature {key!r}: the key is given twice")
        features.extend(compiler.features(key, value, "state"))
        seen.add(key)
    return check_plan(Plan(tuple(features), transitions=True, syntax="python", separator=":"))


def feature_dicts(
    spec: Mapping[str, Any] | Iterable[tuple[str, Any]],
    X: Iterable[Any],
    *,
    columns: Iterable[str] | None = None,
) -> list[list[dict[str, Any]]]:
    """The feature dicts of a spec for token sequences, computed in plain Python.

    What the spec's compiled featurizer gives, as the dicts a
    ``word2features``-style function returns (input-conditioned transition
    features under ``'__transition__'``).

    Parameters
    ----------
    spec : dict or list of (str, value) pairs
        See :func:`parse_python`.
    X : list of sequences
        A sequence is a list of tokens: str, or tuples of str columns.
    columns : sequence of str or None, default=None
        The names of the token's columns.

    Returns
    -------
    X_features : list of list of dict

    Examples
    --------
    >>> spec = {"bias": 1.0, "word.lower()": word.lower(), "word.isupper()": word.isupper()}
    >>> for token in feature_dicts(spec, [["NASA", "flies"]])[0]:
    ...     print(token)
    {'bias': 1.0, 'word.lower()': 'nasa', 'word.isupper()': True}
    {'bias': 1.0, 'word.lower()': 'flies', 'word.isupper()': False}
    """
    from ._reference import expand_dicts

    return expand_dicts(parse_python(spec, columns=columns), X)
