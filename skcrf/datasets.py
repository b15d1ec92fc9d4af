"""The NLTK Penn Treebank sample as a sequence-labelling task.

The task (the project's benchmark): ``nltk.corpus.treebank.tagged_sents()``,
the first 80% of sentences train and the rest test, no shuffling; each token
is described by :func:`treebank_token_features`.

The data comes from NLTK's data path (set ``NLTK_DATA`` to use a local copy).
When it is missing, :func:`load_treebank` calls ``nltk.download('treebank')``
and says so; without network access it raises an error naming ``NLTK_DATA``.
"""

import sys
from collections.abc import Iterable, Sequence

__all__ = ["load_treebank", "treebank_sentence_features", "treebank_token_features"]


def load_treebank(
    train_fraction: float = 0.8, download: bool = True, max_sentences: int | None = None
) -> tuple[list[list[tuple[str, str]]], list[list[tuple[str, str]]]]:
    """Tagged sentences of the NLTK treebank sample, split for training.

    Parameters
    ----------
    train_fraction : float, default=0.8
        Fraction of sentences, taken from the start, used for training.
    download : bool, default=True
        Whether to call ``nltk.download('treebank')`` when the data is missing.
    max_sentences : int or None, default=None
        Keep only the first ``max_sentences`` of each part (a quick run).

    Returns
    -------
    train, test : list of list of (word, tag)
        3,131 and 783 sentences with the default fraction.
    """
    try:
        import nltk
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The treebank data helpers need nltk: pip install nltk "
            "(or pip install 'skcrf[examples]')."
        ) from exc
    try:
        sentences = list(nltk.corpus.treebank.tagged_sents())
    except LookupError:
        if not download:
            raise LookupError(_missing_message()) from None
        print(
            "The NLTK treebank sample is missing; downloading it with "
            "nltk.download('treebank') ...",
            file=sys.stderr,
        )
        if not nltk.download("treebank", quiet=True):
            raise LookupError(_missing_message()) from None
        sentences = list(nltk.corpus.treebank.tagged_sents())
    n_train = int(len(sentences) * train_fraction)
    train, test = sentences[:n_train], sentences[n_train:]
    if max_sentences is not None:
        train, test = train[:max_sentences], test[:max_sentences]
    return train, test


def _missing_message():
    return (
        "The NLTK treebank sample is not available and could not be downloaded. "
        "Run nltk.download('treebank') on a machine with network access, or set "
        "the NLTK_DATA environment variable to a folder that holds "
        "corpora/treebank (or corpora/treebank.zip)."
    )


def treebank_token_features(words: Sequence[str], i: int) -> dict[str, str | bool]:
    """Features of token ``i`` of a sentence, as defined by the Treebank task.

    Examples
    --------
    >>> features = treebank_token_features(["The", "well-known", "cat"], 1)
    >>> features["word"], features["prev_word"], features["has_hyphen"]
    ('well-known', 'The', True)
    """
    word = words[i]
    return {
        "word": word,
        "is_first": i == 0,
        "is_last": i == len(words) - 1,
        "is_capitalized": word[0].upper() == word[0],
        "is_all_caps": word.upper() == word,
        "is_all_lower": word.lower() == word,
        "prefix-1": word[:1],
        "prefix-2": word[:2],
        "prefix-3": word[:3],
        "suffix-1": word[-1:],
        "suffix-2": word[-2:],
        "suffix-3": word[-3:],
        "prev_word": "" if i == 0 else words[i - 1],
        "next_word": "" if i == len(words) - 1 else words[i + 1],
        "has_hyphen": "-" in word,
        "is_numeric": word.isdigit(),
        "capitals_inside": word[1:].lower() != word[1:],
    }


def treebank_sentence_features(
    tagged_sentences: Iterable[Sequence[tuple[str, str]]],
) -> tuple[list[list[dict[str, str | bool]]], list[list[str]]]:
    """Features and tags of tagged sentences, ready for ``CRFTagger.fit``.

    Parameters
    ----------
    tagged_sentences : list of list of (word, tag)

    Returns
    -------
    X : list of list of dict
    y : list of list of str
    """
    X, y = [], []
    for sentence in tagged_sentences:
        words = [word for word, _ in sentence]
        X.append([treebank_token_features(words, i) for i in range(len(words))])
        y.append([tag for _, tag in sentence])
    return X, y
