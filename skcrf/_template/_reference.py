"""The reference expander: a plan run in plain Python, token by token.

The oracle of the compiled expander (:mod:`skcrf._template._expand`), and
what :meth:`skcrf.TemplateFeaturizer.transform` returns: the feature dicts
the tagger's dict path turns into the same attributes and values.
"""

from collections.abc import Mapping

from ._plan import Ref, TemplateError

__all__ = ["apply_steps", "expand_dicts", "expand_sequence", "read_column"]

#: What a step that drops its feature returns.
DROP = None


def read_column(token, column, i, j, name="X"):
    """Column ``column`` of the token ``name[i][j]`` (a str is column 0)."""
    if isinstance(token, str):
        if column == 0:
            return token
        raise IndexError(
            f"{name}[{i}][{j}] is a str (one column, the word); the template reads "
            f"column {column}. Give tokens as tuples of columns."
        )
    if isinstance(token, tuple | list):
        if column >= len(token):
            raise IndexError(
                f"{name}[{i}][{j}] has {len(token)} column(s); the template reads column {column}"
            )
        value = token[column]
        if not isinstance(value, str):
            raise TypeError(
                f"{name}[{i}][{j}][{column}] must be a str, got {type(value).__name__}"
            )
        return value
    hint = ""
    if isinstance(token, Mapping):
        hint = (
            ". A template featurizes raw tokens (featurizer=...): give it the tokens, "
            "not feature dicts."
        )
    raise TypeError(
        f"{name}[{i}][{j}] must be a str or a tuple of str columns, "
        f"got {type(token).__name__}{hint}"
    )


def _shape(text, collapse):
    from .._featurize._featurizer import word_shape

    return word_shape(text, collapse=collapse)


def _char_shape(text):
    return "".join(
        "X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in text
    )


def _regex(pattern):
    from ._regex import compile_regex

    return compile_regex(pattern)


def _ascii_lower(text):
    return text.encode("utf-8", "surrogateescape").lower().decode("utf-8", "surrogateescape")


def _regex_test(text, pattern):
    data = text.encode("utf-8", "surrogateescape")
    return "true" if _regex(pattern).search(data) is not None else "false"


def _regex_match(text, pattern):
    data = text.encode("utf-8", "surrogateescape")
    found = _regex(pattern).search(data)
    if found is None:
        return ""
    start, end = found
    return data[start:end].decode("utf-8", "surrogateescape")


def _call(text, function):
    out = function(text)
    if out is None or isinstance(out, str | bool | int | float):
        return out
    raise TypeError(
        f"a template function must return str, bool, int, float or None; "
        f"{function!r} returned {type(out).__name__} for {text!r}"
    )


_FUNCTIONS = {
    "lower": str.lower,
    "upper": str.upper,
    "slice": lambda s, start, stop: s[start:stop],
    "shape": lambda s: _shape(s, False),
    "shape_collapsed": lambda s: _shape(s, True),
    "lookup": lambda s, mapping: mapping.get(s, DROP),
    "replace": lambda s, old, new: s.replace(old, new),
    "min_length": lambda s, k: s if len(s) >= k else DROP,
    "char_shape": _char_shape,
    "ascii_lower": _ascii_lower,
    "regex_test": _regex_test,
    "regex_match": _regex_match,
    "is_title": str.istitle,
    "is_upper": str.isupper,
    "is_lower": str.islower,
    "is_digit": str.isdigit,
    "is_alpha": str.isalpha,
    "has_digit": lambda s: any(c.isdigit() for c in s),
    "contains": lambda s, text: text in s,
    "in_set": lambda s, items: s in items,
    "equals_upper": lambda s: s.upper() == s,
    "equals_lower": lambda s: s.lower() == s,
    "not": lambda b: not b,
    "length": len,
    "call": _call,
}


def apply_steps(text, steps):
    """``text`` through ``steps``; None when a step drops the feature."""
    for step in steps:
        text = _FUNCTIONS[step[0]](text, *step[1:])
        if text is DROP:
            return DROP
    return text


def _ref_value(ref, seq, t, n, boundary, i, name):
    """The ref's value for token ``t``: (value, inside); value None drops."""
    p = ref.position(t, n)
    if 0 <= p < n:
        return apply_steps(read_column(seq[p], ref.column, i, p, name), ref.steps), True
    if boundary is None:
        return DROP, False
    if boundary.through_steps:
        return apply_steps(boundary.text(p, n), ref.steps), False
    return boundary.text(p, n), False


def _text(parts, seq, t, n, feature, i, name):
    out = []
    for part in parts:
        if isinstance(part, Ref):
            value, _ = _ref_value(part, seq, t, n, feature.outside, i, name)
            if value is DROP:
                return DROP
            if not isinstance(value, str):
                raise TemplateError(
                    f"{feature.source or 'a feature'}: a ref in a name gave "
                    f"{type(value).__name__}, not text, at {name}[{i}][{t}]"
                )
            out.append(value)
        else:
            out.append(part)
    return "".join(out)


def _feature_item(feature, seq, t, n, i, name):
    """(key, value) of the feature at token ``t`` as a dict item, or None."""
    if feature.when_outside is not None and 0 <= t + feature.when_outside < n:
        return None
    if feature.when_inside is not None and not 0 <= t + feature.when_inside < n:
        return None
    key = _text(feature.key, seq, t, n, feature, i, name)
    if key is DROP:
        return None
    if feature.value is not None:
        value = _text(feature.value, seq, t, n, feature, i, name)
        if value is DROP:
            return None
        return key, value
    if feature.weight is None:
        return key, 1.0
    if not isinstance(feature.weight, Ref):  # a constant, kept as given
        return key, feature.weight
    weight, inside = _ref_value(feature.weight, seq, t, n, None, i, name)
    if weight is DROP:
        return None
    if isinstance(weight, str):
        raise TemplateError(
            f"{feature.source or 'a feature'}: its weight gave text {weight!r} at "
            f"{name}[{i}][{t}], not a number"
        )
    return key, weight


def expand_sequence(plan, seq, i=0, name="X"):
    """Each token's (state items, transition items): lists of (key, value).

    A string value ``v`` of key ``k`` is the attribute ``k`` + separator +
    ``v`` with value 1.0; any other value is the attribute ``k``'s number.
    """
    n = len(seq)
    out = []
    for t in range(n):
        state, transition = [], []
        for feature in plan.features:
            item = _feature_item(feature, seq, t, n, i, name)
            if item is None:
                continue
            if feature.kind != "transition":
                state.append(item)
            if feature.kind != "state" and t > 0:
                transition.append(item)
        out.append((state, transition))
    return out


def expand_dicts(plan, X, name="X"):
    """The feature dicts of every token (transition items under ``'__transition__'``).

    Items with the same key in one token add up when numeric; a repeated
    string-valued key keeps the last value, as a dict would (the compiled
    path keeps both: templates that need that are tested on names).
    """
    from .._featurize._transitions import TRANSITION_KEY

    out = []
    for i, seq in enumerate(X):
        tokens = []
        for state, transition in expand_sequence(plan, seq, i, name):
            token = _as_dict(state)
            if transition:
                token[TRANSITION_KEY] = _as_dict(transition)
            tokens.append(token)
        out.append(tokens)
    return out


def _as_dict(items):
    token = {}
    for key, value in items:
        if key in token and not isinstance(value, str) and not isinstance(token[key], str):
            token[key] = float(token[key]) + float(value)
        else:
            token[key] = value
    return token
