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
"""

import json

from skcrf.datasets import load_treebank, treebank_token_features

TASKS = ("seed", "window", "universal")

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


TOKEN_FEATURES = {
    "seed": treebank_token_features,
    "window": window_token_features,
    "universal": window_token_features,
}


def universal_tags(tagged_sentences):
    """The sentences with their Penn Treebank tags mapped to the universal tagset."""
    from nltk.tag.mapping import map_tag

    return [
        [(word, map_tag("en-ptb", "universal", tag)) for word, tag in s] for s in tagged_sentences
    ]


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
    if task == "universal":
        train, test = universal_tags(train), universal_tags(test)
    token_features = TOKEN_FEATURES[task]
    return (*sentence_features(train, token_features), *sentence_features(test, token_features))


def n_tokens(X):
    return sum(len(seq) for seq in X)
