"""
Beyond one best path: n-best, confidence, constraints and partial labels
========================================================================

On the NLTK Penn Treebank sample:

1. a part-of-speech tagger's **n-best** label sequences for a sentence, with
   their probabilities (``predict_nbest``);
2. the test sentences **ranked by the model's confidence** in its own answer
   (``sequence_log_proba``: the log-probability of the Viterbi path), with
   the accuracy of the least and most confident ones;
3. an **entity task** built from the treebank: noun-phrase chunks derived
   from the gold tags (a maximal run of determiners, adjectives, numbers,
   possessives and nouns is one ``NP``), in BIO tags. A chunker that sees
   only the words makes BIO mistakes (an ``I-NP`` after ``O``);
   ``allowed_transitions='BIO'`` removes them, and fixing some labels
   (``partial_labels``) conditions the rest on them;
4. **training from partially labelled sentences**: half of the chunk labels
   hidden at random, trained with ``missing_label``, next to a tagger trained
   on the sentences that kept all their labels and one trained on all labels.

::

    python examples/structured_outputs.py
    python examples/structured_outputs.py --sentences 1500 --max-iterations 30   # faster

The data comes from NLTK's data path (NLTK_DATA for an offline copy of
corpora/treebank.zip).
"""

import argparse
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger
from skcrf.datasets import load_treebank, treebank_sentence_features
from skcrf.metrics import entity_f1_score, flat_accuracy_score

NP_TAGS = {"DT", "PDT", "JJ", "JJR", "JJS", "CD", "PRP$", "POS", "NN", "NNS", "NNP", "NNPS"}
HIDDEN = "?"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument(
        "--sentences", type=int, default=None, help="use only the first N sentences of the corpus"
    )
    parser.add_argument("--max-iterations", type=int, default=60)
    parser.add_argument("--nbest", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def np_chunks(tags):
    """BIO noun-phrase chunks of a tag sequence."""
    out, inside = [], False
    for tag in tags:
        if tag in NP_TAGS:
            out.append("I-NP" if inside else "B-NP")
            inside = True
        else:
            out.append("O")
            inside = False
    return out


def word_features(words, i):
    """Words only (no tags): a chunker that makes mistakes worth constraining."""
    word = words[i]
    features = {"bias": 1.0, "w": word.lower(), "suffix3": word[-3:], "title": word.istitle()}
    if i > 0:
        features["-1:w"] = words[i - 1].lower()
    if i + 1 < len(words):
        features["+1:w"] = words[i + 1].lower()
    return features


def bio_errors(sequences):
    """How many I-NP follow O or start a sentence."""
    return sum(
        tag == "I-NP" and prev == "O" for seq in sequences for prev, tag in zip(["O"] + seq, seq)
    )


def main(argv=None):
    args = parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    train, test = load_treebank(max_sentences=args.sentences)
    params = dict(c1=0.1, c2=0.1, max_iterations=args.max_iterations, n_jobs=-1)

    # 1. n-best POS tags of one sentence
    X_train, y_train = treebank_sentence_features(train)
    X_test, y_test = treebank_sentence_features(test)
    pos = CRFTagger(**params, all_possible_transitions=True).fit(X_train, y_train)
    words = [w for w, _ in test[0]][:12]
    X_one, _ = treebank_sentence_features([[(w, "") for w in words]])
    print(f"1. the {args.nbest} best tag sequences of: {' '.join(words)}")
    for rank, (tags, log_p) in enumerate(pos.predict_nbest(X_one, n=args.nbest)[0], 1):
        print(f"   {rank}. p={np.exp(log_p):.4f}  {' '.join(tags)}")

    # 2. sentences ranked by the model's confidence
    confidence = pos.sequence_log_proba(X_test)
    predicted = pos.predict(X_test)
    order = np.argsort(confidence)
    fifth = max(1, len(order) // 5)
    for name, part in (("least", order[:fifth]), ("most", order[-fifth:])):
        accuracy = flat_accuracy_score([y_test[i] for i in part], [predicted[i] for i in part])
        print(
            f"2. the {fifth} {name} confident test sentences: token accuracy {accuracy:.3f}, "
            f"mean p(path) {np.exp(confidence[part]).mean():.3f}"
        )
    lowest = int(order[0])
    print(
        f"   least confident: p={np.exp(confidence[lowest]):.2e} "
        f"{' '.join(w for w, _ in test[lowest][:15])} ..."
    )

    # 3. NP chunks in BIO tags, decoded with and without the BIO constraint
    Xc_train = [[word_features([w for w, _ in s], i) for i in range(len(s))] for s in train]
    Xc_test = [[word_features([w for w, _ in s], i) for i in range(len(s))] for s in test]
    yc_train = [np_chunks([t for _, t in s]) for s in train]
    yc_test = [np_chunks([t for _, t in s]) for s in test]
    chunker = CRFTagger(c1=1.0, c2=1.0, max_iterations=max(5, args.max_iterations // 6))
    chunker.fit(Xc_train, yc_train)
    free = chunker.predict(Xc_test)
    bio = chunker.predict(Xc_test, allowed_transitions="BIO")
    print("3. NP chunking (words only, a weak model):")
    print(
        f"   unconstrained: {bio_errors(free)} BIO errors, "
        f"entity F1 {entity_f1_score(yc_test, free, scheme='BIO'):.3f}"
    )
    print(
        f"   allowed_transitions='BIO': {bio_errors(bio)} BIO errors, "
        f"entity F1 {entity_f1_score(yc_test, bio, scheme='BIO'):.3f}"
    )
    rng = np.random.default_rng(args.seed)
    partial = [[tag if rng.random() < 0.2 else None for tag in seq] for seq in yc_test]
    fixed = chunker.predict(Xc_test, allowed_transitions="BIO", partial_labels=partial)
    print(
        f"   ... and 20% of the labels given (partial_labels): entity F1 "
        f"{entity_f1_score(yc_test, fixed, scheme='BIO'):.3f}"
    )

    # 4. training with half the POS labels hidden
    hidden = [[HIDDEN if rng.random() < 0.5 else tag for tag in seq] for seq in y_train]
    complete = [i for i, seq in enumerate(hidden) if HIDDEN not in seq]
    print("4. POS tagging with 50% of the training labels hidden:")
    print(f"   all labels:                        test accuracy {pos.score(X_test, y_test):.4f}")
    weak = CRFTagger(**params, missing_label=HIDDEN, all_possible_transitions=True)
    weak.fit(X_train, hidden)
    print(f"   hidden labels, missing_label fit:  test accuracy {weak.score(X_test, y_test):.4f}")
    if complete:
        only = CRFTagger(**params).fit(
            [X_train[i] for i in complete], [y_train[i] for i in complete]
        )
        score = f"{only.score(X_test, y_test):.4f}"
    else:
        score = "n/a (no sentence kept all its labels)"
    print(f"   complete sentences only ({len(complete)}):   test accuracy {score}")


if __name__ == "__main__":
    main()
