"""How ``sklearn_crfsuite_log_*.pkl`` and ``sklearn_crfsuite_log_expected.json`` were made.

They are pickles of ``sklearn_crfsuite.CRF`` objects fitted by real
sklearn-crfsuite and python-crfsuite with held-out data, so that each keeps
its training log: a ``pycrfsuite._logparser.TrainLogParser`` whose
iterations hold ``pycrfsuite._logparser.LabelScore`` tuples. Packages such
as pyvi and khmer-nltk ship pickles like these. ``tests/test_pycrfsuite_install.py``
loads them in a process where real pycrfsuite cannot be imported and
``skcrf.pycrfsuite.install()`` serves ``pycrfsuite``, and checks that they
predict what they predicted here. The JSON holds, per version, the globals
the pickle names, the predictions and marginals of the pickle's own
tagger, the transition weights and a summary of the training log.

Run it once per version, each in a throwaway virtual environment (Python
3.11), from the repository's root::

    python3 -m venv /tmp/crf036
    /tmp/crf036/bin/pip install sklearn-crfsuite==0.3.6 python-crfsuite==0.9.9 \
        scikit-learn==1.3.2 "numpy<2"
    /tmp/crf036/bin/python tests/data/make_sklearn_crfsuite_log_pickles.py tests/data 2

    python3 -m venv /tmp/crf050
    /tmp/crf050/bin/pip install sklearn-crfsuite==0.5.0 python-crfsuite==0.9.12 \
        scikit-learn==1.9.1
    /tmp/crf050/bin/python tests/data/make_sklearn_crfsuite_log_pickles.py tests/data 4

The last argument is the pickle protocol (2: the ``GLOBAL`` opcode, as
older Pythons wrote by default; 4: ``STACK_GLOBAL``). It is not a test and
is not run by the test suite; it needs no skcrf.
"""

import io
import json
import os
import pickle
import sys
import warnings
from fractions import Fraction
from importlib.metadata import version

import sklearn_crfsuite

# Toy sentences: word identity, suffix and a capitalisation flag per token.
SENTENCES = [
    [("John", "PER"), ("lives", "O"), ("in", "O"), ("Paris", "LOC")],
    [("Mary", "PER"), ("visited", "O"), ("London", "LOC")],
    [("the", "O"), ("city", "O"), ("of", "O"), ("Berlin", "LOC")],
    [("Anna", "PER"), ("and", "O"), ("John", "PER"), ("left", "O")],
    [("Paris", "LOC"), ("is", "O"), ("big", "O")],
]
DEV = [
    [("Mary", "PER"), ("lives", "O"), ("in", "O"), ("Berlin", "LOC")],
    [("Anna", "PER"), ("visited", "O"), ("Rome", "LOC")],
    [("Rome", "LOC"), ("and", "O"), ("Berlin", "PER")],
]
TEST = [
    ["John", "visited", "Berlin"],
    ["the", "city", "of", "London", "is", "big"],
    ["Anna", "lives", "in", "Rome"],
    ["Unknown"],
]


def features(words):
    return [
        {"w": word.lower(), "suffix": word[-2:], "title": word.istitle(), "bias": 1.0}
        for word in words
    ]


def split(sentences):
    X = [features([w for w, _ in s]) for s in sentences]
    y = [[label for _, label in s] for s in sentences]
    return X, y


class _Recorder(pickle.Unpickler):
    """An unpickler that records the globals the pickle names."""

    def __init__(self, file):
        super().__init__(file)
        self.named = []

    def find_class(self, module, name):
        self.named.append(f"{module}.{name}")
        return super().find_class(module, name)


def globals_named(data):
    """The ``module.name`` of every global the pickle names, in order of appearance."""
    recorder = _Recorder(io.BytesIO(data))
    recorder.load()
    return list(dict.fromkeys(recorder.named))


def plain(value):
    """A JSON-serializable form of a training log's value."""
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, tuple):  # LabelScore
        return list(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def main(folder, protocol):
    release = version("sklearn-crfsuite")
    X, y = split(SENTENCES)
    X_dev, y_dev = split(DEV)
    crf = sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=0.05, c2=0.01, max_iterations=15, all_possible_transitions=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crf.fit(X, y, X_dev, y_dev)
    data = pickle.dumps(crf, protocol=protocol)
    with open(os.path.join(folder, f"sklearn_crfsuite_log_{release}.pkl"), "wb") as file:
        file.write(data)

    X_test = [features(words) for words in TEST]
    log = crf.training_log_
    expected_path = os.path.join(folder, "sklearn_crfsuite_log_expected.json")
    expected = {}
    if os.path.exists(expected_path):
        with open(expected_path, encoding="utf-8") as file:
            expected = json.load(file)
    expected["X_test"] = X_test
    expected[release] = {
        "made_with": {
            name: version(name)
            for name in ("sklearn-crfsuite", "python-crfsuite", "scikit-learn", "numpy")
        },
        "python": sys.version.split()[0],
        "protocol": protocol,
        "globals": globals_named(data),
        "predict": [[str(label) for label in seq] for seq in crf.predict(X_test)],
        "marginals": [
            [{k: round(v, 12) for k, v in token.items()} for token in seq]
            for seq in crf.predict_marginals(X_test)
        ],
        "transitions": [[a, b, w] for (a, b), w in sorted(crf.transition_features_.items())],
        "log": {
            "n_iterations": len(log.iterations),
            "n_messages": len(log.log),
            "events": [event for event, _, _ in log.events],
            "featgen_num_features": log.featgen_num_features,
            "last_iteration": plain(log.last_iteration),
        },
    }
    with open(expected_path, "w", encoding="utf-8") as file:
        json.dump(expected, file, indent=1, sort_keys=True)
        file.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
