"""Write the CRFsuite frontend's outputs that tests/test_cli.py compares skcrf's with.

Run from the repository root with CRFsuite 0.12's frontend (built outside
the repository from github:chokkan/crfsuite and github:chokkan/liblbfgs):

    NLTK_DATA=... python tests/data/cli/make_fixtures.py /path/to/crfsuite

It writes the seed features of the first 30 training sentences of the
Treebank sample and of the first 12 test ones as CRFsuite data files (in a
temporary folder: the tests write them again with :func:`write_seed_data`),
trains a model with ``crfsuite learn`` and keeps here the model, its
``crfsuite dump`` and the ``crfsuite tag`` outputs of each option set.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

#: The ``crfsuite tag`` option sets whose outputs are kept (name: options).
TAG_OPTIONS = {
    "plain": [],
    "reference": ["-r"],
    "probability": ["-p"],
    "marginal": ["-i"],
    "everything": ["-r", "-p", "-i", "-l"],
    "test_quiet": ["-t", "-q"],
}
#: The ``crfsuite learn`` options of the model.
LEARN_OPTIONS = ["-p", "c1=1", "-p", "c2=0.1", "-p", "max_iterations=60"]


def _escape(text):
    return text.replace("\\", "\\\\").replace(":", "\\:")


def write_seed_data(sentences, path):
    """The Treebank seed features of ``sentences`` as a CRFsuite data file.

    String features as ``key=value`` attributes (colons and backslashes
    escaped), bools as ``key:1`` / ``key:0`` (scales).
    """
    from skcrf.datasets import treebank_sentence_features

    X, y = treebank_sentence_features(sentences)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for tokens, tags in zip(X, y):
            for features, tag in zip(tokens, tags):
                fields = [_escape(tag)]
                for key, value in features.items():
                    if isinstance(value, bool):
                        fields.append(f"{_escape(key)}:{int(value)}")
                    else:
                        fields.append(_escape(f"{key}={value}"))
                f.write("\t".join(fields) + "\n")
            f.write("\n")


def seed_files(folder):
    """(train, test) data files of the fixtures, written into ``folder``."""
    from skcrf.datasets import load_treebank

    train, test = load_treebank(download=False)
    paths = os.path.join(folder, "train.txt"), os.path.join(folder, "test.txt")
    write_seed_data(train[:30], paths[0])
    write_seed_data(test[:12], paths[1])
    return paths


def main(crfsuite):
    with tempfile.TemporaryDirectory() as tmp:
        train, test = seed_files(tmp)
        model = os.path.join(HERE, "seed.crfsuite")
        subprocess.run(
            [crfsuite, "learn", *LEARN_OPTIONS, "-m", model, train],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        with open(os.path.join(HERE, "seed.dump"), "wb") as f:
            subprocess.run([crfsuite, "dump", model], check=True, stdout=f)
        for name, options in TAG_OPTIONS.items():
            out = subprocess.run(
                [crfsuite, "tag", "-m", model, *options, test], check=True, capture_output=True
            ).stdout
            # the elapsed time differs from run to run
            lines = [line for line in out.split(b"\n") if not line.startswith(b"Elapsed time")]
            with open(os.path.join(HERE, f"tag_{name}.txt"), "wb") as f:
                f.write(b"\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
