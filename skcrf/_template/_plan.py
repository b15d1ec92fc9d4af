"""The plan: feature templates of every syntax, as one data structure.

Every template syntax (CRF++, Wapiti, CRFsuite's ``crfutils`` and the
Pythonic spec) is parsed into a :class:`Plan`; the compiled expander
(:mod:`skcrf._template._expand`) and the reference expander
(:mod:`skcrf._template._reference`) run plans and know no syntax.

Conventions
-----------
- A sequence has ``n`` tokens; a token is a ``str`` (one column, the word)
  or a tuple of ``str`` columns (CoNLL columns; column 0 first).
- A :class:`Ref` reads one column of the token at a position: relative
  (``t + offset`` for token ``t``) or absolute (``offset`` from the start
  when ``offset >= 0``, ``n + offset`` from the end when negative), then
  applies its ``steps`` in order (see :data:`STEPS`).
- A :class:`Feature` gives at most one attribute per token: its name is the
  text of ``key`` (literals and refs, concatenated), followed by the value
  separator and the text of ``value`` when ``value`` is given (a
  string-valued feature ``{key: value}``, CRFsuite's ``key:value``); its
  value is the number ``weight`` gives (a bool counts 1.0 or 0.0): a Ref's
  result, or a constant (a bool, int or float, kept as given: the
  Pythonic spec's ``{'BOS': True}``), or 1.0 when ``weight`` is None.
- A ref at a position outside the sequence gives the feature's ``outside``
  text (a :class:`Boundary`: CRF++'s ``_B-1``, Wapiti's ``_x+1``, or a
  fixed text); with ``outside=None`` the feature is dropped for that
  token. A step may also drop it (a word missing from a ``lookup``).
- ``when_outside=k``: the feature exists only for tokens whose position
  ``t + k`` is outside the sequence (``BOS`` is ``when_outside=-1``);
  ``when_inside=k``: only for those whose ``t + k`` is inside (the two
  together give a bool at every token: ``is_first`` is True with
  ``when_outside=-1`` and False with ``when_inside=-1``).
- ``kind``: ``'state'`` features are the token's attributes, observed
  with each label; ``'transition'`` ones are input-conditioned transition
  attributes of the token (observed with the pair of labels ending at the
  token, none at a sequence's first token: skcrf's ``'__transition__'``
  feature); ``'both'`` gives the attribute to both (Wapiti's ``*``).
- :attr:`Plan.transitions` says whether the template asks for the plain
  label-to-label transitions (CRF++'s bare ``B``, Wapiti's ``b`` / ``*``
  with no observation); skcrf always learns them, the flag is kept for
  files and the command line.

Attribute names are the text's UTF-8 bytes; steps that work on characters
(``lower``, ``slice``, ...) follow Python's ``str`` methods, those named
``ascii_*`` and the regex steps work on the UTF-8 bytes as the C tools do.
"""

import math
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import NamedTuple

__all__ = [
    "STEPS",
    "Boundary",
    "Feature",
    "Plan",
    "Ref",
    "TemplateError",
    "check_plan",
    "step_kind",
]


class TemplateError(ValueError):
    """A template that cannot be compiled; the message names the line and column."""


def template_error(message, *, line=None, column=None, source=None, text=None):
    """A :class:`TemplateError` naming where (``line`` and ``column`` 1-based)."""
    where = []
    if source:
        where.append(str(source))
    if line is not None:
        where.append(f"line {line}")
    if column is not None:
        where.append(f"column {column}")
    prefix = (", ".join(where) + ": ") if where else ""
    shown = f" in {text!r}" if text is not None else ""
    return TemplateError(f"{prefix}{message}{shown}")


#: Each step: its name -> (what it takes, what it gives, number of arguments).
#: ``str`` -> ``str`` steps may follow each other; a ``str`` -> ``bool`` or
#: ``int`` step ends the chain (``not`` may follow a ``bool``).
STEPS: dict[str, tuple[str, str, int]] = {
    # str -> str, on characters (Python's str methods)
    "lower": ("str", "str", 0),
    "upper": ("str", "str", 0),
    "slice": ("str", "str", 2),  # (start, stop): Python's s[start:stop], None allowed
    "shape": ("str", "str", 0),  # skcrf.word_shape(s)
    "shape_collapsed": ("str", "str", 0),  # skcrf.word_shape(s, collapse=True)
    "lookup": ("str", "str", 1),  # (mapping,): mapping[s]; a missing s drops the feature
    "replace": ("str", "str", 2),  # (old, new): s.replace(old, new) (CRFsuite's escapes)
    "min_length": ("str", "str", 1),  # (k,): s itself if len(s) >= k; else the feature drops
    # each character on its own, no run cut: isupper 'X', islower 'x', isdigit 'd', else kept
    "char_shape": ("str", "str", 0),
    # str -> str, on UTF-8 bytes (the C tools)
    "ascii_lower": ("str", "str", 0),  # A-Z -> a-z, other bytes kept (Wapiti's %X)
    "regex_test": ("str", "str", 1),  # (pattern,): 'true' / 'false' (Wapiti's %t)
    "regex_match": ("str", "str", 1),  # (pattern,): the match, '' if none (Wapiti's %m)
    # str -> bool
    "is_title": ("str", "bool", 0),
    "is_upper": ("str", "bool", 0),
    "is_lower": ("str", "bool", 0),
    "is_digit": ("str", "bool", 0),
    "is_alpha": ("str", "bool", 0),
    "has_digit": ("str", "bool", 0),  # any(c.isdigit() for c in s)
    "contains": ("str", "bool", 1),  # (text,): text in s  (has_hyphen: contains '-')
    "in_set": ("str", "bool", 1),  # (set of str,): s in it (a gazetteer)
    "equals_upper": ("str", "bool", 0),  # s.upper() == s
    "equals_lower": ("str", "bool", 0),  # s.lower() == s
    "not": ("bool", "bool", 0),
    # str -> int
    "length": ("str", "int", 0),  # len(s), in characters
    # any -> str, bool, int, float or None (dropped): Python only, no save
    "call": ("str", "any", 1),  # (function,)
}


class Boundary(NamedTuple):
    """The text of a ref outside the sequence.

    Before the start, position ``p < 0`` gives ``before + str(-p)``; after
    the end, position ``p >= n`` gives ``after + str(p - n + 1)``; with
    ``numbered=False`` the number is left out (a fixed text). A distance
    above ``limit`` is written ``#`` (Wapiti: ``_x-4``, then ``_x-#``).
    With ``through_steps`` the text goes through the ref's steps as a
    token's column would (Wapiti's ``%t``, ``%m`` and ``%X`` see it);
    otherwise it is the ref's text as it is.
    """

    before: str
    after: str
    numbered: bool = True
    limit: int | None = None
    through_steps: bool = False

    def text(self, position, n):
        distance = -position if position < 0 else position - n + 1
        if not self.numbered:
            number = ""
        elif self.limit is not None and distance > self.limit:
            number = "#"
        else:
            number = str(distance)
        return (self.before if position < 0 else self.after) + number


class Ref(NamedTuple):
    """One column of the token at a position, through ``steps``."""

    offset: int
    column: int = 0
    steps: tuple = ()  # of tuples (name, *arguments), see STEPS
    absolute: bool = False

    def position(self, t, n):
        if self.absolute:
            return self.offset if self.offset >= 0 else n + self.offset
        return t + self.offset


class Feature(NamedTuple):
    """One attribute per token (or none), see the module's conventions."""

    key: tuple  # of str literals and Refs
    value: tuple | None = None  # of str literals and Refs; None: no string value
    weight: Ref | bool | int | float | None = None  # a Ref giving a number or bool,
    # or a constant; None: 1.0
    outside: Boundary | None = None
    when_outside: int | None = None
    kind: str = "state"  # 'state', 'transition' or 'both'
    source: str = ""  # the template text it came from (for messages)
    when_inside: int | None = None  # (last, so that positional Features keep their meaning)


class Plan(NamedTuple):
    """A template: features in order (their order numbers new attributes)."""

    features: tuple  # of Feature
    transitions: bool = True
    syntax: str = "python"
    separator: str = ":"  # between a feature's key and its string value


def step_kind(steps):
    """What a chain of steps gives: 'str', 'bool', 'int' or 'any'; raises if invalid."""
    kind = "str"
    for step in steps:
        if not isinstance(step, tuple) or not step or step[0] not in STEPS:
            raise TemplateError(f"unknown step {step!r}; the steps are {sorted(STEPS)}")
        takes, gives, n_args = STEPS[step[0]]
        if len(step) != 1 + n_args:
            raise TemplateError(f"step {step[0]!r} takes {n_args} argument(s), got {step[1:]!r}")
        if kind != takes and not (kind == "str" and takes == "str"):
            raise TemplateError(f"step {step[0]!r} takes a {takes}, not the {kind} before it")
        _check_step_arguments(step)
        kind = gives
    return kind


def _check_step_arguments(step):
    name, args = step[0], step[1:]
    if name == "slice":
        for bound in args:
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
                raise TemplateError(f"slice bounds must be int or None, got {args!r}")
    elif name == "replace":
        if not all(isinstance(arg, str) for arg in args) or not args[0]:
            raise TemplateError(f"replace takes a non-empty str and a str, got {args!r}")
    elif name == "min_length" and (
        isinstance(args[0], bool) or not isinstance(args[0], int) or args[0] < 0
    ):
        raise TemplateError(f"min_length takes an int >= 0, got {args[0]!r}")
    elif name == "lookup" and not isinstance(args[0], Mapping):
        raise TemplateError(f"lookup takes a mapping of str to str, got {type(args[0]).__name__}")
    elif name == "in_set" and not isinstance(args[0], AbstractSet):
        raise TemplateError(f"in_set takes a set of str, got {type(args[0]).__name__}")
    elif name in ("contains", "regex_test", "regex_match") and not isinstance(args[0], str):
        raise TemplateError(f"{name} takes a str, got {type(args[0]).__name__}")
    elif name == "call" and not isinstance(args[0], Callable):  # type: ignore[arg-type]
        raise TemplateError(f"call takes a function, got {type(args[0]).__name__}")


def _check_text(parts, feature, what):
    if not isinstance(parts, tuple):
        raise TemplateError(f"{feature.source or 'a feature'}: {what} must be a tuple of parts")
    for part in parts:
        if isinstance(part, str):
            continue
        if not isinstance(part, Ref):
            raise TemplateError(
                f"{feature.source or 'a feature'}: a {what} part must be a str or a Ref, "
                f"got {type(part).__name__}"
            )
        if part.column < 0:
            raise TemplateError(f"{feature.source or 'a feature'}: negative column {part.column}")
        kind = step_kind(part.steps)
        if kind not in ("str", "any"):
            raise TemplateError(
                f"{feature.source or 'a feature'}: a ref in the {what} gives a {kind}, "
                "not text (use it as the feature's weight)"
            )


def check_plan(plan):
    """Check a plan's structure; return it. Raises :class:`TemplateError`."""
    if not isinstance(plan, Plan):
        raise TypeError(f"expected a Plan, got {type(plan).__name__}")
    if not isinstance(plan.separator, str) or len(plan.separator) != 1:
        raise TemplateError(f"the separator must be one character, got {plan.separator!r}")
    for feature in plan.features:
        if not isinstance(feature, Feature):
            raise TypeError(f"a plan's features must be Feature, got {type(feature).__name__}")
        _check_text(feature.key, feature, "key")
        if not feature.key:
            raise TemplateError(f"{feature.source or 'a feature'}: an empty key")
        if feature.value is not None:
            _check_text(feature.value, feature, "value")
        if isinstance(feature.weight, bool | int | float):
            if not math.isfinite(feature.weight):
                raise TemplateError(
                    f"{feature.source or 'a feature'}: a constant weight must be finite, "
                    f"got {feature.weight!r}"
                )
        elif feature.weight is not None:
            if not isinstance(feature.weight, Ref):
                raise TemplateError(
                    f"{feature.source or 'a feature'}: the weight must be a Ref or a number"
                )
            if step_kind(feature.weight.steps) == "str":
                raise TemplateError(
                    f"{feature.source or 'a feature'}: the weight's steps give text, not a number"
                )
        if feature.kind not in ("state", "transition", "both"):
            raise TemplateError(
                f"{feature.source or 'a feature'}: kind must be 'state', 'transition' "
                f"or 'both', got {feature.kind!r}"
            )
        if feature.outside is not None and not isinstance(feature.outside, Boundary):
            raise TemplateError(f"{feature.source or 'a feature'}: outside must be a Boundary")
        if feature.outside is not None and feature.outside.limit is not None:
            limit = feature.outside.limit
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise TemplateError(
                    f"{feature.source or 'a feature'}: a boundary's limit must be an int >= 1"
                )
        for name in ("when_outside", "when_inside"):
            k = getattr(feature, name)
            if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
                raise TemplateError(f"{feature.source or 'a feature'}: {name} must be an int")
    return plan


def refs(feature):
    """Every Ref of a feature, in the order the expander reads them."""
    out = [part for part in feature.key if isinstance(part, Ref)]
    if feature.value is not None:
        out.extend(part for part in feature.value if isinstance(part, Ref))
    if isinstance(feature.weight, Ref):
        out.append(feature.weight)
    return out


def columns_read(plan):
    """The largest column index the plan reads, or -1."""
    return max((ref.column for f in plan.features for ref in refs(f)), default=-1)


def uses_python(plan):
    """Whether a step of the plan runs user Python code (no save without pickle)."""
    return any(step[0] == "call" for f in plan.features for ref in refs(f) for step in ref.steps)


# -- plain data (model files) -------------------------------------------------


def _step_to_data(step, where):
    name, args = step[0], step[1:]
    out = [name]
    for arg in args:
        if name == "call":
            raise TemplateError(
                f"{where}: a template with a Python function (step 'call', "
                f"{arg!r:.80}) cannot be saved without pickle; pickle the estimator, "
                "or express the feature with the built-in steps."
            )
        if isinstance(arg, Mapping):
            out.append({"mapping": {str(k): str(v) for k, v in arg.items()}})
        elif isinstance(arg, AbstractSet):
            out.append({"set": sorted(str(item) for item in arg)})
        else:
            out.append(arg)
    return out


def _step_from_data(data):
    name, args = data[0], []
    for arg in data[1:]:
        if isinstance(arg, dict) and "mapping" in arg:
            args.append(dict(arg["mapping"]))
        elif isinstance(arg, dict) and "set" in arg:
            args.append(frozenset(arg["set"]))
        else:
            args.append(arg)
    return (name, *args)


def _ref_to_data(ref, where):
    return {
        "offset": ref.offset,
        "column": ref.column,
        "steps": [_step_to_data(step, where) for step in ref.steps],
        "absolute": ref.absolute,
    }


def _ref_from_data(data):
    return Ref(
        int(data["offset"]),
        int(data["column"]),
        tuple(_step_from_data(step) for step in data["steps"]),
        bool(data["absolute"]),
    )


def _text_to_data(parts, where):
    return [part if isinstance(part, str) else _ref_to_data(part, where) for part in parts]


def _text_from_data(parts):
    return tuple(part if isinstance(part, str) else _ref_from_data(part) for part in parts)


def _weight_to_data(weight, where):
    if weight is None:
        return None
    if isinstance(weight, Ref):
        return _ref_to_data(weight, where)
    return {"constant": weight}


def _weight_from_data(data):
    if data is None:
        return None
    if "constant" in data:
        return data["constant"]
    return _ref_from_data(data)


def plan_to_data(plan):
    """The plan as plain values (str, int, bool, None, lists, dicts), for model files.

    Raises :class:`TemplateError` for a plan with a Python function.
    """
    features = []
    for k, f in enumerate(plan.features):
        where = f.source or f"feature {k}"
        features.append(
            {
                "key": _text_to_data(f.key, where),
                "value": None if f.value is None else _text_to_data(f.value, where),
                "weight": _weight_to_data(f.weight, where),
                "outside": None if f.outside is None else list(f.outside),
                "when_outside": f.when_outside,
                "when_inside": f.when_inside,
                "kind": f.kind,
                "source": f.source,
            }
        )
    return {
        "features": features,
        "transitions": plan.transitions,
        "syntax": plan.syntax,
        "separator": plan.separator,
    }


def plan_from_data(data):
    """The plan of :func:`plan_to_data`'s values (checked)."""
    try:
        features = tuple(
            Feature(
                key=_text_from_data(f["key"]),
                value=None if f["value"] is None else _text_from_data(f["value"]),
                weight=_weight_from_data(f["weight"]),
                outside=None if f["outside"] is None else Boundary(*f["outside"]),
                when_outside=f["when_outside"],
                when_inside=f.get("when_inside"),
                kind=f["kind"],
                source=f["source"],
            )
            for f in data["features"]
        )
        plan = Plan(
            features=features,
            transitions=bool(data["transitions"]),
            syntax=data["syntax"],
            separator=data["separator"],
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise TemplateError(f"a saved template is not valid: {exc!r:.200}") from None
    return check_plan(plan)
