"""How the CRF++ model fixtures of ``tests/test_crfpp_model.py`` were made.

Regenerate from the repository's root (needs nltk with the treebank sample
and CRF++'s ``crf_learn`` / ``crf_test``, which ``pip install crfpy`` ships)::

    python tests/data/crfpp/make_models.py

- ``train.data`` / ``test.data``: CoNLL-2000-style column files (word, POS,
  chunk) from the NLTK Penn Treebank sample: the chunk of a word is the
  phrase that directly holds it when that phrase holds words only (a base
  phrase, function tags dropped), else ``O``; traces (``-NONE-``) are left
  out. The live tests train ``chunking.template`` (CRFsuite's chunking
  template, ``example/chunking.py``, written for CRF++) on ``train.data``.
- ``tiny.model`` / ``tiny.model.txt``: ``crf_learn -t -f 2`` with
  ``tiny.template`` (a bigram template with ``%x``, a constant unigram line)
  on the first 40 sentences of ``train.data`` with NP chunks only (the
  other chunks ``O``: three labels, a small model); ``tiny_test.data``: the
  first 20 sentences of ``test.data`` so labelled, and ``tiny.v2`` what
  ``crf_test -v2 -m tiny.model tiny_test.data`` prints (the tests check
  skcrf against it without CRF++), ``tiny.n3`` what ``crf_test -n 3 -v1``
  prints (the 3 best labellings).

It is not a test and is not run by the test suite.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
N_TRAIN, N_TEST, N_TINY, N_TINY_TEST = 250, 60, 40, 20

CHUNKING_TEMPLATE = """\
# CRFsuite's chunking template (example/chunking.py): w is column 0, pos column 1
U00:%x[-2,0]
U01:%x[-1,0]
U02:%x[0,0]
U03:%x[1,0]
U04:%x[2,0]
U05:%x[-1,0]/%x[0,0]
U06:%x[0,0]/%x[1,0]
U07:%x[-2,1]
U08:%x[-1,1]
U09:%x[0,1]
U10:%x[1,1]
U11:%x[2,1]
U12:%x[-2,1]/%x[-1,1]
U13:%x[-1,1]/%x[0,1]
U14:%x[0,1]/%x[1,1]
U15:%x[1,1]/%x[2,1]
U16:%x[-2,1]/%x[-1,1]/%x[0,1]
U17:%x[-1,1]/%x[0,1]/%x[1,1]
U18:%x[0,1]/%x[1,1]/%x[2,1]

B
"""

TINY_TEMPLATE = """\
U00:%x[0,0]
U01:%x[-1,1]/%x[0,1]
U02:%x[1,1]
Ubias
B
B01:%x[0,1]
"""


def _base_label(label):
    return label.split("-")[0].split("=")[0]


def chunked_sentences(trees):
    """(word, POS, chunk) rows of each tree (see the module's notes)."""
    from nltk import Tree

    out = []
    for tree in trees:
        rows = []
        for position in tree.treepositions("leaves"):
            preterminal = tree[position[:-1]]
            pos = preterminal.label()
            if pos == "-NONE-":
                continue
            parent = tree[position[:-2]] if len(position) >= 2 else None
            chunk = "O"
            if parent is not None and parent is not tree:
                words_only = all(
                    isinstance(child, Tree) and child.height() == 2 for child in parent
                )
                if words_only:
                    chunk = _base_label(parent.label()) or "O"
            rows.append([tree[position], pos, chunk, position[:-2]])
        tags = []
        for k, (_, _, chunk, phrase) in enumerate(rows):  # B- on a phrase's first word
            same = k > 0 and rows[k - 1][3] == phrase and rows[k - 1][2] == chunk
            tags.append("O" if chunk == "O" else ("I-" if same else "B-") + chunk)
        out.append([(word, pos, tag) for (word, pos, _, _), tag in zip(rows, tags)])
    return out


def np_only(sentences):
    """The sentences with every chunk but NP's labelled ``O``."""
    return [
        [(word, pos, tag if tag.endswith("-NP") else "O") for word, pos, tag in sentence]
        for sentence in sentences
    ]


def write_columns(path, sentences):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for sentence in sentences:
            for row in sentence:
                f.write(" ".join(row) + "\n")
            f.write("\n")


def _tool(name):
    exe = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not os.path.exists(exe):
        sys.exit(f"{name} not found (pip install crfpy)")
    return exe


def main():
    import nltk

    trees = nltk.corpus.treebank.parsed_sents()
    sentences = chunked_sentences(trees[: N_TRAIN + N_TEST])
    write_columns(HERE / "train.data", sentences[:N_TRAIN])
    write_columns(HERE / "test.data", sentences[N_TRAIN:])
    (HERE / "chunking.template").write_text(CHUNKING_TEMPLATE, encoding="ascii")
    (HERE / "tiny.template").write_text(TINY_TEMPLATE, encoding="ascii")
    write_columns(HERE / "tiny.data", np_only(sentences[:N_TINY]))
    write_columns(HERE / "tiny_test.data", np_only(sentences[N_TRAIN : N_TRAIN + N_TINY_TEST]))
    learn = [_tool("crf_learn"), "-t", "-f", "2", "tiny.template", "tiny.data", "tiny.model"]
    subprocess.run(learn, cwd=HERE, check=True, stdout=subprocess.DEVNULL)
    (HERE / "tiny.data").unlink()
    for options, name in ((["-v2"], "tiny.v2"), (["-n", "3", "-v1"], "tiny.n3")):
        test = [_tool("crf_test"), *options, "-m", "tiny.model", "tiny_test.data"]
        result = subprocess.run(test, cwd=HERE, check=True, capture_output=True)
        (HERE / name).write_bytes(result.stdout)


if __name__ == "__main__":
    main()
