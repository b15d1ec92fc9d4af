"""How ``sklearn_crfsuite_*.pkl`` and ``sklearn_crfsuite_expected.json`` were made.

They are pickles of fitted ``sklearn_crfsuite.CRF`` objects, made by the
sklearn-crfsuite versions users still have pickles of: those before 0.5
keep neither ``model_filename`` nor ``keep_tempfiles`` as attributes, so
``get_params`` fails on them once unpickled with a later version (and
``CRFTagger.from_crfsuite`` must not rely on it). Each pickle embeds its
model file (sklearn-crfsuite pickles the file's bytes). The JSON holds, per
version, what the pickle's own tagger predicted when it was made.

Run it once per version, in a throwaway virtual environment (Python 3.11)::

    python3 -m venv /tmp/oldcrf
    /tmp/oldcrf/bin/pip install python-crfsuite scikit-learn six tqdm tabulate
    for v in 0.3 0.3.3 0.3.6 0.4.0 0.5.0; do
        /tmp/oldcrf/bin/pip install --no-deps sklearn-crfsuite==$v
        /tmp/oldcrf/bin/python tests/data/legacy/make_sklearn_crfsuite_pickles.py tests/data/legacy
    done

It is not a test and is not run by the test suite; it needs no skcrf.
"""

import json
import os
import pickle
import sys
import warnings
from importlib.metadata import version

import sklearn_crfsuite

# Weather diary tokens (str, numeric and bool features) and their labels.
X_TRAIN = [
    [{"w": "umbrella", "wet": 1.0}, {"w": "coat", "cold": True}, {"w": "sunglasses"}],
    [{"w": "sunglasses", "bright": 0.5}, {"w": "sunglasses"}, {"w": "umbrella", "wet": 0.5}],
    [{"w": "coat", "cold": True}, {"w": "umbrella", "wet": 1.0}],
    [{"w": "sunglasses", "bright": 1.0}, {"w": "coat"}, {"w": "coat", "cold": True}],
]
Y_TRAIN = [
    ["rain", "rain", "sun"],
    ["sun", "sun", "rain"],
    ["rain", "rain"],
    ["sun", "rain", "rain"],
]
X_TEST = X_TRAIN + [
    [{"w": "umbrella"}, {"w": "sunglasses", "bright": 1.0}, {"w": "unknown"}],
    [{"w": "coat", "wet": 2.0}],
]


def main(folder):
    release = version("sklearn-crfsuite")
    crf = sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=0.05, c2=0.01, max_iterations=50, all_possible_transitions=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crf.fit(X_TRAIN, Y_TRAIN)
    with open(os.path.join(folder, f"sklearn_crfsuite_{release}.pkl"), "wb") as file:
        pickle.dump(crf, file, protocol=4)
    expected_path = os.path.join(folder, "sklearn_crfsuite_expected.json")
    expected = {}
    if os.path.exists(expected_path):
        with open(expected_path, encoding="utf-8") as file:
            expected = json.load(file)
    expected["X_test"] = X_TEST
    marginals = crf.predict_marginals(X_TEST)
    expected[release] = {
        "predict": [[str(label) for label in seq] for seq in crf.predict(X_TEST)],
        "marginals": [[{k: round(v, 12) for k, v in m.items()} for m in s] for s in marginals],
        "attributes": sorted(a for a in vars(crf) if not a.startswith("_")),
    }
    with open(expected_path, "w", encoding="utf-8") as file:
        json.dump(expected, file, indent=1, sort_keys=True)
        file.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
