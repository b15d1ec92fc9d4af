"""How ``model_v1.skcrf`` and ``model_v1_expected.json`` were made.

They are fixtures of the format version 1 written by skcrf 0.1 (commit
ba32f9f): the tests check that a version-1 file still loads and predicts
exactly what skcrf 0.1 predicted. This script needs skcrf 0.1 itself (it
calls ``CRFTagger`` and ``skcrf.io.save_model`` of that version), for
instance::

    git worktree add --detach /tmp/v1tree ba32f9f
    PYTHONPATH=/tmp/v1tree python tests/data/make_model_v1.py tests/data

It is not a test and is not run by the test suite.
"""

import json
import os
import sys
import warnings

from sklearn.exceptions import ConvergenceWarning

import skcrf
from skcrf import CRFTagger
from skcrf.io import FORMAT_VERSION, save_model

# Every kind of token feature 0.1 accepts: string values (attribute
# "key=value"), numbers and bools (attribute "key"), nested dicts ("key:sub"
# and "key:sub=value"), lists of strings ("key=item"), and list tokens.
X_TRAIN = [
    [{"w": "the", "bias": 1.0}, {"w": "dog", "len": 3}, {"w": "barks", "suffix": ["ks", "s"]}],
    [{"w": "a", "is_short": True}, {"w": "cat", "shape": {"cap": False, "kind": "x"}}],
    [{"w": "cats"}, {"w": "sleep", "n": 2.5}, {"w": "quietly", "suffix": ["ly", "y"]}],
    [["w=a", "bias"], ["w=dog", "noun"], ["w=sleeps", "verb", "verb"]],
    [
        {"w": "The", "shape": {"cap": True, "kind": "X"}},
        {"w": "dogs", "len": 4},
        {"w": "run", "is_short": False},
        {"w": "fast", "suffix": ["st", "t"]},
    ],
    [{"w": "birds", "prev": {"w": "<s>"}}, {"w": "sing", "prev": {"w": "birds"}}],
    [{"w": "run"}, {"w": "quietly"}],
    [
        {"w": "a"},
        {"w": "bird", "prev": {"w": "a"}},
        {"w": "sings", "suffix": ["gs", "s"]},
        {"w": "loudly", "suffix": ["ly", "y"]},
    ],
]
Y_TRAIN = [
    ["D", "N", "V"],
    ["D", "N"],
    ["N", "V", "A"],
    ["D", "N", "V"],
    ["D", "N", "V", "A"],
    ["N", "V"],
    ["V", "A"],
    ["D", "N", "V", "A"],
]
X_TEST = X_TRAIN + [
    [{"w": "a"}, {"w": "cat"}, {"w": "barks"}, {"w": "quietly"}],
    [{"w": "the", "shape": {"cap": True, "kind": "X"}}, {"w": "bird"}, {"w": "runs"}],
    [{"w": "unseen"}, {"w": "dog", "len": 7, "n": -1.5}],
    [["noun"], ["verb", "w=the"], []],
    [{"w": "sleeps"}],
    [{"w": "dogs"}, {"w": "sing"}, {"w": "fast"}],
    [{"w": "quietly", "suffix": ["ly"]}, {"w": "run"}],
    [],
]


def main(directory):
    tagger = CRFTagger(c1=0.02, c2=0.05, max_iterations=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        tagger.fit(X_TRAIN, Y_TRAIN)
    assert FORMAT_VERSION == 1
    save_model(tagger, os.path.join(directory, "model_v1.skcrf"))
    expected = {
        "written_by": f"skcrf {skcrf.__version__}, format version {FORMAT_VERSION}",
        "X": X_TEST,
        "predict": tagger.predict(X_TEST),
        "predict_marginals": tagger.predict_marginals(X_TEST),
        "classes": tagger.classes_.tolist(),
        "attributes": list(tagger.vectorizer_.feature_names_),
        "state_features": [
            [attribute, label, weight]
            for (attribute, label), weight in tagger.state_features_.items()
        ],
        "transition_features": [
            [a, b, weight] for (a, b), weight in tagger.transition_features_.items()
        ],
        "n_iter": tagger.n_iter_,
        "status": tagger.status_.name,
    }
    with open(os.path.join(directory, "model_v1_expected.json"), "w") as file:
        json.dump(expected, file, indent=1)
        file.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
