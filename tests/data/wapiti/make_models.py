"""How the Wapiti model fixtures of ``tests/test_wapiti_model.py`` were made.

Regenerate from the repository's root with Wapiti 1.5.0 built (``git clone
https://github.com/Jekub/Wapiti /tmp/wapiti && make -C /tmp/wapiti``)::

    SKCRF_WAPITI=/tmp/wapiti python tests/data/wapiti/make_models.py

- ``tiny.model``: ``wapiti train -c -p tiny.pat`` (every kind of pattern;
  compacted: the observations without a nonzero weight dropped) on the
  first 40 sentences of ``../crfpp/train.data`` with NP chunks only (the
  other chunks ``O``), as ``../crfpp/make_models.py`` labels them;
- ``tiny.labels``: ``wapiti label -m tiny.model ../crfpp/tiny_test.data``
  (Viterbi), ``tiny.posteriors``: ``wapiti label -p -s -m tiny.model
  ../crfpp/tiny_test.data`` (each token's largest posterior marginal, and
  the sequences' products of them); ``tiny.scores`` (``-s``: Viterbi's
  unnormalised scores), ``tiny.nbest3`` (``-n 3``), ``tiny.nbest3_scores``
  (``-s -n 3``), ``tiny.check`` (the
  standard error of ``-c``: error rates and per-label statistics) and
  ``tiny.dump`` (``wapiti dump tiny.model``), which ``tests/test_cli_wapiti.py``
  compares ``skcrf wapiti label`` / ``dump`` with.
- ``chunking.pat``: CRFsuite's chunking template as Wapiti patterns, with
  Wapiti's other commands; the live tests train it on ``../crfpp/train.data``.

It is not a test and is not run by the test suite.
"""

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CRFPP = HERE.parent / "crfpp"
N_TINY = 40


def np_only(text):
    """The column file's text with every chunk but NP's labelled ``O``."""
    out = []
    for line in text.split("\n"):
        columns = line.split()
        if columns and not columns[-1].endswith("-NP"):
            columns[-1] = "O"
        out.append(" ".join(columns))
    return "\n".join(out)


def main():
    root = os.environ.get("SKCRF_WAPITI")
    if not root:
        sys.exit("set SKCRF_WAPITI to a built Wapiti 1.5.0 source tree")
    wapiti = str(Path(root) / "wapiti")
    sentences = (CRFPP / "train.data").read_text(encoding="utf-8").split("\n\n")
    train = HERE / "tiny.data"
    train.write_text(np_only("\n\n".join(sentences[:N_TINY])) + "\n\n", encoding="utf-8")
    subprocess.run(
        [wapiti, "train", "-c", "-t", "1", "-p", "tiny.pat", "tiny.data", "tiny.model"],
        cwd=HERE,
        check=True,
        capture_output=True,
    )
    train.unlink()
    test = str(CRFPP / "tiny_test.data")
    outputs = (
        ([], "tiny.labels"),
        (["-p", "-s"], "tiny.posteriors"),
        (["-s"], "tiny.scores"),
        (["-n", "3"], "tiny.nbest3"),
        (["-s", "-n", "3"], "tiny.nbest3_scores"),
    )
    for options, name in outputs:
        result = subprocess.run(
            [wapiti, "label", *options, "-m", "tiny.model", test],
            cwd=HERE,
            check=True,
            capture_output=True,
        )
        (HERE / name).write_bytes(result.stdout)
    # -c writes its statistics to the standard error
    result = subprocess.run(
        [wapiti, "label", "-c", "-m", "tiny.model", test],
        cwd=HERE,
        check=True,
        capture_output=True,
    )
    (HERE / "tiny.check").write_bytes(result.stderr)
    result = subprocess.run(
        [wapiti, "dump", "tiny.model"], cwd=HERE, check=True, capture_output=True
    )
    (HERE / "tiny.dump").write_bytes(result.stdout)


if __name__ == "__main__":
    main()
