"""Well-known feature functions written as Pythonic specs (for tests, benchmarks and docs).

Each function returns a spec for :func:`skcrf._template._python.parse_python`
whose features are, token by token, the dicts of the feature function it
names: the same keys in the same order, the same values and value types
(``tests/test_template_python.py`` checks it on the Treebank and on hostile
strings).
"""

from ._python import BOS, EOS, Col, is_first, is_last, outside, window, word

__all__ = [
    "sequence_featurizer_spec",
    "treebank_seed_spec",
    "treebank_window_spec",
    "tutorial_spec",
]


def tutorial_spec():
    """sklearn-crfsuite's CoNLL 2002 tutorial ``word2features``, tokens ``(word, postag, ...)``.

    Returns
    -------
    spec : dict
    """
    postag = Col(1)
    spec = {
        "bias": 1.0,
        "word.lower()": word.lower(),
        "word[-3:]": word[-3:],
        "word[-2:]": word[-2:],
        "word.isupper()": word.isupper(),
        "word.istitle()": word.istitle(),
        "word.isdigit()": word.isdigit(),
        "postag": postag,
        "postag[:2]": postag[:2],
    }
    # the neighbours' features where they exist, BOS / EOS where they do not
    for offset, marker, name in ((-1, BOS, "BOS"), (1, EOS, "EOS")):
        w, p = word.at(offset), postag.at(offset)
        spec[f"{offset:+d}:word.lower()"] = w.lower()
        spec[f"{offset:+d}:word.istitle()"] = w.istitle()
        spec[f"{offset:+d}:word.isupper()"] = w.isupper()
        spec[f"{offset:+d}:postag"] = p
        spec[f"{offset:+d}:postag[:2]"] = p[:2]
        spec[name] = marker
    return spec


def treebank_seed_spec():
    """The Treebank task's seed features (``skcrf.datasets.treebank_token_features``), str tokens.

    The dict function fails on an empty word (``word[0]``); the spec gives
    ``is_capitalized`` True there (``''.upper() == ''``).

    Returns
    -------
    spec : dict
    """
    spec = {
        "word": word,
        "is_first": is_first,
        "is_last": is_last,
        "is_capitalized": word[0].upper() == word[0],
        "is_all_caps": word.upper() == word,
        "is_all_lower": word.lower() == word,
    }
    spec.update({f"prefix-{m}": word[:m] for m in range(1, 4)})
    spec.update({f"suffix-{m}": word[-m:] for m in range(1, 4)})
    spec.update(
        {
            "prev_word": word.at(-1, outside=""),
            "next_word": word.at(1, outside=""),
            "has_hyphen": word.contains("-"),
            "is_numeric": word.isdigit(),
            "capitals_inside": word[1:].lower() != word[1:],
        }
    )
    return spec


def treebank_window_spec():
    """The Treebank task's window template (``benchmarks/_tasks.py``), str tokens.

    Returns
    -------
    spec : dict
    """
    w = word.lower()
    return {
        "bias": 1.0,
        **window(w, range(-2, 3), key="w[{offset}]"),
        **window(w + "|" + w.at(1), range(-2, 2), key=lambda k: f"w[{k}]|w[{k + 1}]"),
        **{f"prefix-{m}": word[:m] for m in range(1, 5)},
        **{f"suffix-{m}": word[-m:] for m in range(1, 5)},
        "shape": word.char_shape(),
        "is_title": word.istitle(),
        "is_upper": word.isupper(),
        "has_digit": word.has_digit(),
        "BOS": BOS,
        "EOS": EOS,
    }


def sequence_featurizer_spec(*, window=1, affix_length=3, lowercase=True, n_columns=0):
    """``skcrf.SequenceFeaturizer``'s built-in template (without embeddings).

    Parameters
    ----------
    window, affix_length, lowercase
        As for ``SequenceFeaturizer``.
    n_columns : int, default=0
        The number of columns after the word (``'col1'`` ...): the featurizer
        reads each token's, the spec a fixed number.

    Returns
    -------
    spec : dict
    """
    form = word.lower() if lowercase else word
    word_key = "word.lower" if lowercase else "word"
    spec = {
        "bias": 1.0,
        word_key: form,
        "shape": word.shape(),
        "shape.short": word.shape(collapse=True),
    }
    # an affix exists only up to the form's length
    spec.update({f"prefix{k}": form.if_len_at_least(k)[:k] for k in range(1, affix_length + 1)})
    spec.update({f"suffix{k}": form.if_len_at_least(k)[-k:] for k in range(1, affix_length + 1)})
    spec.update(
        {
            "is_title": word.istitle(),
            "is_upper": word.isupper(),
            "is_digit": word.isdigit(),
            "has_hyphen": word.contains("-"),
            "has_digit": word.has_digit(),
        }
    )
    spec.update({f"col{c}": Col(c) for c in range(1, n_columns + 1)})
    spec["BOS"] = BOS
    spec["EOS"] = EOS
    for d in (*range(-window, 0), *range(1, window + 1)):
        prefix = f"{d:+d}:"
        context = {
            word_key: form,
            "shape": word.shape(),
            "is_title": word.istitle(),
            "is_upper": word.isupper(),
            **{f"col{c}": Col(c) for c in range(1, n_columns + 1)},
        }
        spec.update({prefix + key: expr.at(d) for key, expr in context.items()})
        if abs(d) >= 2:  # a neighbour outside the sequence ('-1:BOS' would repeat 'BOS')
            spec[prefix + ("BOS" if d < 0 else "EOS")] = outside(d, marker=True)
    return spec
