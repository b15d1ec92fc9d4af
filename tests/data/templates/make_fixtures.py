"""How the template fixtures of ``tests/test_template_syntaxes.py`` were made.

Each fixture holds what a reference tool itself produced from the
templates and sentences defined here; the tests check that skcrf's parsers
and the reference expander give exactly those names. Regenerate with::

    python tests/data/templates/make_fixtures.py crfpp --crf-learn "crf_learn"
    python tests/data/templates/make_fixtures.py wapiti --wapiti-src /tmp/wapiti
    python tests/data/templates/make_fixtures.py crfsuite --crfsuite-src /tmp/crfsuite

- ``crfpp.json``: the feature strings of the text model ``crf_learn -t -f 1``
  writes (the ``crfpy`` wheel ships CRF++'s ``crf_learn``: ``pip install
  crfpy``; its command is given with ``--crf-learn``).
- ``wapiti.json``: the observations Wapiti 1.5.0 stores in its model file
  (``wapiti train -p``, no compaction: every observation of the data), and
  ``wapiti_regex.json``: Wapiti's own matcher (``rex_match`` of
  ``src/pattern.c``) on seeded random patterns and strings. Both need
  Wapiti's source tree built (``git clone https://github.com/Jekub/Wapiti
  /tmp/wapiti && make -C /tmp/wapiti``); a small C driver calling
  ``rex_match`` is compiled against it here (needs ``cc``).
- ``crfsuite.json``: the attributes CRFsuite reads from what its
  ``example/crfutils.py`` writes (``apply_templates`` and
  ``output_features`` run from the CRFsuite source tree, then the data
  file read by CRFsuite's own reader, ``frontend/iwa.c``, compiled here
  with a small driver): ``git clone https://github.com/chokkan/crfsuite``.

It is not a test and is not run by the test suite; the tests import its
data (and, when the tools are at hand, its runners).
"""

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Sentences of (word, POS, chunk, label) rows: a long one (rows up to +-8 reach
# inside it), a one-token one, non-ASCII and upper-case words, ':' '\\' '%' '#'.
SENTENCES = [
    [
        ("The", "DT", "B-NP", "O"),
        ("U.S.", "NNP", "I-NP", "B-LOC"),
        ("café", "NN", "I-NP", "O"),
        ("costs", "VBZ", "B-VP", "O"),
        ("$", "$", "B-NP", "O"),
        ("3.50", "CD", "I-NP", "O"),
        ("in", "IN", "B-PP", "O"),
        ("Émile's", "NNP", "B-NP", "B-PER"),
        ("SHOP", "NN", "I-NP", "O"),
        ("at", "IN", "B-PP", "O"),
        ("10:30", "CD", "B-NP", "O"),
        (".", ".", "O", "O"),
    ],
    [("Hi", "UH", "O", "O")],
    [("A-1", "NNP", "B-NP", "B-ORG"), ("wins", "VBZ", "B-VP", "O"), ("x\\y", "SYM", "O", "O")],
    [
        ("MIXED", "NNP", "B-NP", "B-ORG"),
        ("Case", "NN", "I-NP", "O"),
        ("%x", "SYM", "O", "O"),
        ("#5", "CD", "B-NP", "O"),
        ("naïve", "JJ", "B-ADJP", "O"),
        ("aaab", "NN", "I-NP", "O"),
    ],
]

# Every CRF++ form: comments and blank lines, literal text around and
# between macros (brackets, spaces, non-ASCII), rows -8 .. 8, empty numbers
# (CRF++ reads them as 0), leading zeros, a constant U line, a bare B, B
# lines with macros.
CRFPP_TEMPLATE = """\
# Unigram
U00:%x[0,0]
U01:%x[-1,0]/%x[0,0]
U02:%x[1,1]/%x[2,2]
U03:%x[-8,0]|%x[8,0]
U04:%x[-2,1]%x[-3,2]
U05: a[b] %x[0,2] é
U06:%x[,1]/%x[-,0]/%x[1,]
U07:%x[-01,0]/%x[007,1]
U08

U09:%x[5,0]/%x[-5,0]/%x[7,1]
U10:%x[0,0] # not a comment]]
# Bigram
B
B01:%x[0,0]
B02:%x[-1,1]/%x[1,2]
B03:%x[8,0]
"""

# Every Wapiti form: u/U/b/B/* lines, %x %X %t %T %m %M, absolute offsets
# (@1, @-1, @0, @3 beyond short sentences), offsets beyond 4 (_x-#), white
# space, sign, hex and octal in the brackets, comments and trailing blanks,
# regex classes, anchors, escapes, '*' and '?', regexes on the padding.
WAPITI_PATTERNS = """\
# Wapiti patterns
u:%x[0,0]
U:%X[0,0]/%x[-1,1]   # upper-case type letter, lower-cased command
u:%x[-1,0]/%x[+1,2]
u:%x[-5,0]/%x[6,0]/%x[-4,1]/%x[4,1]
u:%x[ -2, 1]/%x[0x1,0]/%x[010,0]
u:%x[@1,0]/%x[@-1,0]/%x[@0,0]/%x[@3,1]/%x[@-4,0]
u:cap=%t[0,0,"^\\u"] dig=%T[0,0,"\\d"] all=%t[0,0,"^\\u\\u*$"]
u:pre=%m[0,0,"^.?.?.?"] suf=%M[0,0,".\\a$"] low=%m[0,0,"\\l\\l*"]
u:%m[0,0,"a*b"]/%m[0,0,"\\w\\W"]/%t[0,0,"\\p"]/%t[0,0,"\\P\\S"]
u:%t[-1,0,"\\d"]/%m[1,0,"_x."]/%m[-6,0,"-\\P"]/%t[5,0,"\\d$"]
u:%m[0,0,"\\."]/%t[0,0,"\\$"]/%m[0,0,"é"]/%m[0,0,"^\\A*"]/%M[0,0,"\\U\\U*"]
u:%m[0,0,"x\\\\y"]/%t[0,0,"\\%"]/%m[0,0,"."]
*:%t[0,0,"^\\u"]
*
b
B:%x[0,1]
b:%x[-1,1]/%X[0,0]/%t[0,0,"s$"]
u:const
"""

# crfutils templates: CRFsuite's example/pos.py kind (fields and offsets,
# conjunctions, windows) over the columns w pos chk.
CRFSUITE_FIELDS = ("w", "pos", "chk")
CRFSUITE_TEMPLATES = [
    (("w", 0),),
    (("w", -1),),
    (("w", 1),),
    (("w", -2), ("w", -1)),
    (("w", -1), ("w", 0), ("w", 1)),
    (("pos", 0), ("chk", 0)),
    (("w", 0), ("pos", -9)),
    (("chk", 2), ("w", -2), ("pos", 0)),
    (("w", 0), ("w", 0)),
]

# Tokens for crfutils: ':' (escaped as __COLON__) and backslashes (CRFsuite's
# reader folds a doubled one), beside the sentences above.
CRFSUITE_SENTENCES = [[row[:3] for row in sentence] for sentence in SENTENCES] + [
    [("a:b", "NN", "O"), ("c\\\\d\\", "NN", "O"), ("x\\:y", ":", "O"), ("\\\\\\", "SYM", "O")],
]


def column_file(sentences):
    """The sentences as a whitespace-separated column file (blank line between)."""
    return "".join(
        "".join(" ".join(row) + "\n" for row in sentence) + "\n" for sentence in sentences
    )


# ---------------------------------------------------------------- CRF++


def crfpp_names(crf_learn, template=CRFPP_TEMPLATE, sentences=SENTENCES):
    """The feature strings of the text model ``crf_learn -t -f 1`` writes."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "template").write_text(template, encoding="utf-8")
        (tmp / "train.txt").write_text(column_file(sentences), encoding="utf-8")
        command = [*crf_learn, "-t", "-f", "1", "-p", "1", "-m", "2", "template", "train.txt"]
        run = subprocess.run(
            [*command, "model"], cwd=tmp, capture_output=True, text=True, check=False
        )
        model = tmp / "model.txt"
        if not model.exists():
            raise RuntimeError(f"crf_learn wrote no model:\n{run.stdout}\n{run.stderr}")
        sections = model.read_text(encoding="utf-8").split("\n\n")
    # header, labels, templates, "id name" lines, weights
    names = [line.split(" ", 1)[1] for line in sections[3].splitlines()]
    run = subprocess.run([*crf_learn, "--version"], capture_output=True, text=True, check=False)
    return sorted(names), run.stdout.strip()


# ---------------------------------------------------------------- Wapiti


def wapiti_observations(wapiti, patterns=WAPITI_PATTERNS, sentences=SENTENCES):
    """The observations Wapiti stores in its (uncompacted) model file."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "patterns").write_text(patterns, encoding="utf-8")
        (tmp / "train.txt").write_text(column_file(sentences), encoding="utf-8")
        run = subprocess.run(
            [wapiti, "train", "-p", "patterns", "-i", "2", "train.txt", "model"],
            cwd=tmp,
            capture_output=True,
            check=False,
        )
        if run.returncode:
            raise RuntimeError(f"wapiti failed:\n{run.stderr.decode(errors='replace')}")
        model = (tmp / "model").read_bytes()
    # the model file: "#qrk#<count>" then "<length>:<string>," per entry; the
    # second quark is the observations (the first the labels)
    quarks = []
    pos = 0
    while True:
        at = model.find(b"#qrk#", pos)
        if at < 0:
            break
        end = model.index(b"\n", at)
        count = int(model[at + 5 : end])
        pos = end + 1
        entries = []
        for _ in range(count):
            colon = model.index(b":", pos)
            length = int(model[pos:colon])
            entries.append(
                model[colon + 1 : colon + 1 + length].decode("utf-8", "surrogateescape")
            )
            pos = colon + 1 + length + 2  # ",\n"
        quarks.append(entries)
    return sorted(quarks[1])


_REX_DRIVER = r"""
/* Reads lines "<hex pattern> <hex string>", prints "<start> <length>" as
   Wapiti's rex_match gives them (pattern.c is included for its static functions). */
#include "pattern.c"
static void unhex(const char *h, char *out) {
    unsigned v;
    while (h[0] && h[1] && h[0] != ' ' && h[0] != '\n') {
        sscanf(h, "%2x", &v);
        *out++ = (char) v;
        h += 2;
    }
    *out = '\0';
}
int main(void) {
    static char line[1 << 16], re[1 << 15], str[1 << 15];
    while (fgets(line, sizeof line, stdin)) {
        char *space = strchr(line, ' ');
        unhex(line, re);
        unhex(space + 1, str);
        uint32_t len = 0;
        int32_t pos = rex_match(re, str, &len);
        printf("%d %u\n", (int) pos, pos < 0 ? 0u : (unsigned) len);
    }
    return 0;
}
"""

REGEX_ATOMS = [
    "a", "b", "x", ".", "-", "1", "$", "^", "é", "\\.", "\\*", "\\?", "\\\\",
    "\\d", "\\D", "\\a", "\\A", "\\w", "\\W", "\\l", "\\L", "\\u", "\\U",
    "\\p", "\\P", "\\s", "\\S", "\\n",
]  # fmt: skip
REGEX_ALPHABET = "abxAB1-. _$^*?\\né"


def random_regex_cases(seed=20251205, count=3000):
    """Seeded random (pattern, string) pairs of Wapiti's subset (valid patterns)."""
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        pattern = "^" if rng.random() < 0.25 else ""
        for _ in range(rng.randint(0, 6)):
            pattern += rng.choice(REGEX_ATOMS) + rng.choice(["", "", "*", "?"])
        if rng.random() < 0.25:
            pattern += "$"
        if pattern.startswith(("^*", "^?")):
            continue  # an anchor, then nothing to repeat: Wapiti stops
        text = "".join(rng.choice(REGEX_ALPHABET) for _ in range(rng.randint(0, 10)))
        cases.append((pattern, text))
    return cases


def wapiti_rex_match(wapiti_src, cases):
    """Wapiti's rex_match on each (pattern, string): (start, length), start -1 if none."""
    src = Path(wapiti_src) / "src"
    with tempfile.TemporaryDirectory() as tmp:
        driver = Path(tmp) / "rexdrv.c"
        driver.write_text(_REX_DRIVER)
        binary = Path(tmp) / "rexdrv"
        subprocess.run(
            ["cc", "-O1", "-std=c99", "-w", f"-I{src}", "-o", binary, driver, src / "tools.c"],
            check=True,
        )
        lines = "".join(f"{p.encode().hex()} {s.encode().hex()}\n" for p, s in cases)
        out = subprocess.run([binary], input=lines, capture_output=True, text=True, check=True)
    return [tuple(map(int, line.split())) for line in out.stdout.splitlines()]


# ---------------------------------------------------------------- CRFsuite

_IWA_DRIVER = r"""
/* Reads a CRFsuite data file with CRFsuite's own reader (iwa.c) and prints
   each item's attributes (the first field of an item is its label) in hex. */
#include <stdio.h>
#include "iwa.h"
int main(void) {
    iwa_t *iwa = iwa_reader(stdin);
    const iwa_token_t *token;
    int first = 1;
    while ((token = iwa_read(iwa)) != NULL) {
        if (token->type == IWA_BOI) {
            first = 1;
        } else if (token->type == IWA_ITEM) {
            if (!first) {
                for (const unsigned char *c = (const unsigned char *) token->attr; *c; ++c)
                    printf("%02x", *c);
                printf(" ");
            }
            first = 0;
        } else if (token->type == IWA_EOI) {
            printf("\n");
        } else if (token->type == IWA_NONE) {
            printf("=\n");
        }
    }
    iwa_delete(iwa);
    return 0;
}
"""


def crfutils_attributes(crfsuite_src, templates=CRFSUITE_TEMPLATES, sentences=CRFSUITE_SENTENCES):
    """Each token's attributes: crfutils' output read back by CRFsuite's reader."""
    crfsuite_src = Path(crfsuite_src)
    sys.path.insert(0, str(crfsuite_src / "example"))
    try:
        import crfutils
    finally:
        sys.path.pop(0)
    import io

    data = io.StringIO()
    for sentence in sentences:
        X = [{"F": [], "y": "O", **dict(zip(CRFSUITE_FIELDS, row))} for row in sentence]
        crfutils.apply_templates(X, templates)
        crfutils.output_features(data, X, "y")
    with tempfile.TemporaryDirectory() as tmp:
        driver = Path(tmp) / "iwadrv.c"
        driver.write_text(_IWA_DRIVER)
        binary = Path(tmp) / "iwadrv"
        frontend = crfsuite_src / "frontend"
        subprocess.run(
            ["cc", "-O1", "-w", f"-I{frontend}", "-o", binary, driver, frontend / "iwa.c"],
            check=True,
        )
        out = subprocess.run(
            [binary], input=data.getvalue().encode("utf-8"), capture_output=True, check=True
        ).stdout.decode()
    sequences, current = [], []
    for line in out.splitlines():
        if line == "=":
            sequences.append(current)
            current = []
        else:
            current.append([bytes.fromhex(h).decode("utf-8") for h in line.split()])
    return sequences


# ---------------------------------------------------------------- main


def _write(name, payload):
    """The payload as JSON (ASCII: names may hold lone bytes), one list item a line."""
    lines = []
    for key, value in payload.items():
        if isinstance(value, list | tuple):
            items = ",\n  ".join(json.dumps(item) for item in value)
            lines.append(f" {json.dumps(key)}: [\n  {items}\n ]")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    path = HERE / name
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="ascii")
    print(f"wrote {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="tool", required=True)
    crfpp = sub.add_parser("crfpp")
    crfpp.add_argument("--crf-learn", default="crf_learn", help="the crf_learn command")
    wapiti = sub.add_parser("wapiti")
    wapiti.add_argument("--wapiti-src", required=True, help="Wapiti's built source tree")
    crfsuite = sub.add_parser("crfsuite")
    crfsuite.add_argument("--crfsuite-src", required=True, help="CRFsuite's source tree")
    args = parser.parse_args(argv)
    if args.tool == "crfpp":
        names, version = crfpp_names(shlex.split(args.crf_learn))
        _write(
            "crfpp.json",
            {"tool": f"crf_learn -t -f 1 of {version}", "template": CRFPP_TEMPLATE,
             "names": names},
        )  # fmt: skip
    elif args.tool == "wapiti":
        binary = os.path.join(args.wapiti_src, "wapiti")
        observations = wapiti_observations(binary)
        _write(
            "wapiti.json",
            {"tool": "wapiti train -p (1.5.0)", "patterns": WAPITI_PATTERNS,
             "observations": observations},
        )  # fmt: skip
        cases = random_regex_cases()
        results = wapiti_rex_match(args.wapiti_src, cases)
        _write(
            "wapiti_regex.json",
            {"tool": "rex_match of Wapiti 1.5.0's src/pattern.c",
             "cases": [[p, s, start, length] for (p, s), (start, length) in zip(cases, results)]},
        )  # fmt: skip
    else:
        sequences = crfutils_attributes(args.crfsuite_src)
        _write(
            "crfsuite.json",
            {"tool": "crfutils.apply_templates + output_features, read by frontend/iwa.c",
             "templates": CRFSUITE_TEMPLATES, "fields": CRFSUITE_FIELDS,
             "attributes": sequences},
        )  # fmt: skip


if __name__ == "__main__":
    main()
