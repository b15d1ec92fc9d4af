"""The two Treebank tasks of the benchmark: the data, the split and both feature sets.

One place for data loading, used by every benchmark process. The data is the
NLTK Penn Treebank sample (``skcrf.datasets.load_treebank``: the first 80% of
sentences train, the rest test, no shuffling); the tasks differ only in the
token features (/work/shared/reference/treebank-task.md):

- ``seed``: the task's seed features (``skcrf.datasets.treebank_token_features``),
  a small vocabulary (39.7k DictVectorizer attributes);
- ``window``: the feature-rich window template of §2 (:func:`window_token_features`),
  248k attributes;
- ``universal``: the window features with the tags mapped to NLTK's universal
  tagset (12 labels): few labels and many attributes, where the state-score
  and expected-count scatters weigh most against the forward-backward (a
  proxy for chunking-like tasks).
- ``rich``: more attributes still, the same 12 labels: the window features plus
  the neighbours' affixes and shapes and the word trigrams
  (:func:`rich_token_features`).
- ``names``: the rich features with three labels, the BIO tags of proper-noun
  runs (``NNP``/``NNPS``: ``B-NAME``, ``I-NAME``, ``O``): a named-entity-like
  task, many attributes and few labels, where the names and lookup tables of
  the attributes weigh most against the optimizer's vectors.
"""

import json

from skcrf.datasets import load_treebank, treebank_token_features

TASKS = ("seed", "window", "universal", "rich", "names")

# --quick: the first sentences of each part only (a smoke test).
QUICK_SENTENCES = (300, 100)  # train, test


def word_shape(word):
    """Upper-case letters → 'X', lower-case → 'x', digits → 'd', anything else kept."""
    return "".join(
        "X" if ch.isupper() else "x" if ch.islower() else "d" if ch.isdigit() else ch
        for ch in word
    )


def window_token_features(words, i):
    """Features of token ``i`` in the window template (treebank-task.md §2)."""
    word = words[i]
    n = len(words)
    lower = {k: words[i + k].lower() for k in range(-2, 3) if 0 <= i + k < n}
    features = {"bias": 1.0}
    for k, w in lower.items():
        features[f"w[{k}]"] = w
    for k in range(-2, 2):
        if k in lower and k + 1 in lower:
            features[f"w[{k}]|w[{k + 1}]"] = lower[k] + "|" + lower[k + 1]
    for m in range(1, 5):
        features[f"prefix-{m}"] = word[:m]
    for m in range(1, 5):
        features[f"suffix-{m}"] = word[-m:]
    features["shape"] = word_shape(word)
    features["is_title"] = word.istitle()
    features["is_upper"] = word.isupper()
    features["has_digit"] = any(ch.isdigit() for ch in word)
    if i == 0:
        features["BOS"] = True
    if i == n - 1:
        features["EOS"] = True
    return features


def rich_token_features(words, i):
    """The window features plus the neighbours' affixes and shapes and word trigrams."""
    features = window_token_features(words, i)
    n = len(words)
    for k in (-2, -1, 1, 2):
        if 0 <= i + k < n:
            word = words[i + k]
            features[f"suffix-3[{k}]"] = word[-3:].lower()
            features[f"prefix-3[{k}]"] = word[:3].lower()
            features[f"shape[{k}]"] = word_shape(word)
    lower = [w.lower() for w in words]
    for k in (-2, -1, 0):
        if 0 <= i + k and i + k + 2 < n:
            features[f"w[{k}..{k + 2}]"] = "|".join(lower[i + k : i + k + 3])
    return features


def tutorial_word2features(sent, i):
    """sklearn-crfsuite's CoNLL 2002 tutorial ``word2features``; tokens ``(word, postag)``."""
    word = sent[i][0]
    postag = sent[i][1]
    features = {
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
    if i > 0:
        word1 = sent[i - 1][0]
        postag1 = sent[i - 1][1]
        features.update(
            {
                "-1:word.lower()": word1.lower(),
                "-1:word.istitle()": word1.istitle(),
                "-1:word.isupper()": word1.isupper(),
                "-1:postag": postag1,
                "-1:postag[:2]": postag1[:2],
            }
        )
    else:
        features["BOS"] = True
    if i < len(sent) - 1:
        word1 = sent[i + 1][0]
        postag1 = sent[i + 1][1]
        features.update(
            {
                "+1:word.lower()": word1.lower(),
                "+1:word.istitle()": word1.istitle(),
                "+1:word.isupper()": word1.isupper(),
                "+1:postag": postag1,
                "+1:postag[:2]": postag1[:2],
            }
        )
    else:
        features["EOS"] = True
    return features


TOKEN_FEATURES = {
    "seed": treebank_token_features,
    "window": window_token_features,
    "universal": window_token_features,
    "rich": rich_token_features,
    "names": rich_token_features,
    "tutorial": tutorial_word2features,
}


def _templates():
    from skcrf.templates import treebank_seed_spec, treebank_window_spec, tutorial_spec

    return {"seed": treebank_seed_spec, "window": treebank_window_spec, "tutorial": tutorial_spec}


class _Templates(dict):
    """task -> a function returning its template (a Pythonic spec), imported on use."""

    def __missing__(self, task):
        self.update(_templates())
        return dict.__getitem__(self, task)


#: The template of each task's features (the same attributes as TOKEN_FEATURES).
TEMPLATES = _Templates()


def raw_task(task, split=None, quick=False):
    """``X_train, y_train, X_test, y_test`` as raw tokens (no features).

    Words for ``seed`` and ``window`` (labels: Penn tags); ``(word, Penn tag)``
    tuples for ``tutorial`` (labels: the universal tags).
    """
    if split is None:
        train, test = load_treebank()
    else:
        with open(split) as f:
            parts = json.load(f)
        train, test = parts["train"], parts["test"]
    if quick:
        train, test = train[: QUICK_SENTENCES[0]], test[: QUICK_SENTENCES[1]]
    out = []
    for part in (train, test):
        if task == "tutorial":
            universal = universal_tags(part)
            out.append([[(w, t) for w, t in s] for s in part])
            out.append([[t for _, t in s] for s in universal])
        else:
            out.append([[w for w, _ in s] for s in part])
            out.append([[t for _, t in s] for s in part])
    return tuple(out)


def universal_tags(tagged_sentences):
    """The sentences with their Penn Treebank tags mapped to the universal tagset."""
    from nltk.tag.mapping import map_tag

    return [
        [(word, map_tag("en-ptb", "universal", tag)) for word, tag in s] for s in tagged_sentences
    ]


def name_tags(tagged_sentences):
    """The sentences with BIO tags of their proper-noun runs (``NNP``, ``NNPS``)."""
    tagged = []
    for sentence in tagged_sentences:
        tags, inside = [], False
        for _, tag in sentence:
            name = tag in ("NNP", "NNPS")
            tags.append(("I-NAME" if inside else "B-NAME") if name else "O")
            inside = name
        tagged.append([(word, tag) for (word, _), tag in zip(sentence, tags)])
    return tagged


def sentence_features(tagged_sentences, token_features):
    """Token feature dicts and tags of tagged sentences."""
    X, y = [], []
    for sentence in tagged_sentences:
        words = [word for word, _ in sentence]
        X.append([token_features(words, i) for i in range(len(words))])
        y.append([tag for _, tag in sentence])
    return X, y


def save_split(path):
    """Write the tagged sentences of both parts to ``path`` (JSON), for :func:`load_task`.

    Parsing the corpus with NLTK takes several seconds; the benchmark does it
    once and every measuring process reads this file instead.
    """
    train, test = load_treebank()
    with open(path, "w") as f:
        json.dump({"train": train, "test": test}, f)


def load_task(task, quick=False, split=None):
    """``X_train, y_train, X_test, y_test`` of ``task`` ('seed' or 'window').

    ``split``: a file written by :func:`save_split`; None loads the corpus with NLTK.
    """
    if split is None:
        train, test = load_treebank()
    else:
        with open(split) as f:
            parts = json.load(f)
        train, test = parts["train"], parts["test"]
    if quick:
        train, test = train[: QUICK_SENTENCES[0]], test[: QUICK_SENTENCES[1]]
    if task in ("universal", "rich"):
        train, test = universal_tags(train), universal_tags(test)
    elif task == "names":
        train, test = name_tags(train), name_tags(test)
    token_features = TOKEN_FEATURES[task]
    return (*sentence_features(train, token_features), *sentence_features(test, token_features))


def n_tokens(X):
    return sum(len(seq) for seq in X)
