"""CRF++ templates, Wapiti patterns and crfutils templates: the reference tools' names.

The fixtures under ``tests/data/templates`` were written by the tools
themselves (CRF++'s ``crf_learn``, Wapiti 1.5.0 and its ``rex_match``,
CRFsuite's ``crfutils`` read back by CRFsuite's data reader); their script,
``make_fixtures.py``, holds the templates and sentences. When a tool is at
hand the same comparison runs live: ``crf_learn`` on the PATH (or the
``crfpy`` wheel's module), ``$SKCRF_WAPITI`` (a built Wapiti source tree),
``$SKCRF_CRFSUITE_SRC`` (CRFsuite's source tree, and a C compiler).
"""

import importlib.util
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path

import pytest

from skcrf._template._crfpp import parse_crfpp
from skcrf._template._crfsuite import parse_crfsuite
from skcrf._template._plan import Boundary, Feature, Plan, Ref, TemplateError, check_plan
from skcrf._template._reference import expand_dicts, expand_sequence
from skcrf._template._regex import compile_regex
from skcrf._template._regex_c import CompiledRegex
from skcrf._template._wapiti import parse_wapiti

DATA = Path(__file__).parent / "data" / "templates"


def _load_fixture_script():
    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MF = _load_fixture_script()
SEQUENCES = [[tuple(row[:3]) for row in sentence] for sentence in MF.SENTENCES]


def _fixture(name):
    return json.loads((DATA / name).read_text(encoding="ascii"))


def _names(plan, sequences, *, every_position=False):
    """The distinct attribute names the plan gives on the sequences.

    ``every_position``: transition features at the first token too (Wapiti
    stores the observation there although no transition uses it).
    """
    if every_position:
        plan = plan._replace(features=tuple(f._replace(kind="state") for f in plan.features))
    out = set()
    for i, seq in enumerate(sequences):
        for state, transition in expand_sequence(plan, seq, i):
            out.update(key for key, _ in state)
            out.update(key for key, _ in transition)
    return out


def _constant_lines(text, types, *, wapiti):
    """The lines of the given types with no command (their name is the line itself)."""
    out = set()
    for line in text.split("\n"):
        if wapiti:  # a comment runs from any '#', the type letter is lower-cased
            line = line.split("#")[0].rstrip()
            line = line[:1].lower() + line[1:]
        if line and line[0] in types and "%" not in line:
            out.add(line)
    return out


# ---------------------------------------------------------------- CRF++


def _crfpp_expected(template, sequences):
    # crf_learn also stores a bigram line with no %x under its own name (B);
    # the plan has it as Plan.transitions instead
    return _names(parse_crfpp(template), sequences) | _constant_lines(template, "B", wapiti=False)


def test_crfpp_names_equal_crf_learn_fixture():
    fixture = _fixture("crfpp.json")
    assert fixture["template"] == MF.CRFPP_TEMPLATE
    names = _crfpp_expected(fixture["template"], SEQUENCES)
    assert names == set(fixture["names"])
    # the fixture reaches every form: both boundaries at +-8, empty numbers, literals
    assert {"U03:_B-8|_B+8", "B03:_B+8", "U06:UH/Hi/_B+1", "U05: a[b] B-NP é"} <= names


def _crf_learn():
    exe = shutil.which("crf_learn")
    if exe:
        return [exe]
    if importlib.util.find_spec("CRFPP") is not None:  # the crfpy wheel, no script on PATH
        return [
            sys.executable,
            "-c",
            "import sys; from CRFPP import crfpp_learn; crfpp_learn(sys.argv)",
        ]
    return None


CRFPP_TEMPLATES = [
    MF.CRFPP_TEMPLATE,
    "U:%x[0,0]%x[0,1]%x[0,2]\nB:%x[-1,0]\n",
    "# only unigrams, one with no macro\nUbias\nU1:%x[-3,1]=%x[3,2]\n",
    "B\nU[%x[2,0]]:%x[-2,0]\n",
]


@pytest.mark.parametrize("template", CRFPP_TEMPLATES)
def test_crfpp_names_equal_live_crf_learn(template):
    crf_learn = _crf_learn()
    if crf_learn is None:
        if os.environ.get("SKCRF_REQUIRE_CRFPP"):
            pytest.fail("SKCRF_REQUIRE_CRFPP is set but crf_learn is absent (crfpy)")
        pytest.skip("crf_learn is absent (pip install crfpy ships CRF++'s crf_learn)")
    names, _ = MF.crfpp_names(crf_learn, template)
    assert _crfpp_expected(template, SEQUENCES) == set(names)


def test_crfpp_semantics_by_hand():
    plan = parse_crfpp("# c\n\nU00:%x[-1,0]/%x[1,1]\nU01\nB02:%x[0,0]\n")
    assert plan.syntax == "crfpp" and plan.transitions is False
    assert [f.kind for f in plan.features] == ["state", "state", "transition"]
    seq = [("a", "X"), ("b", "Y")]
    (s0, t0), (s1, t1) = expand_sequence(plan, seq)
    assert [k for k, _ in s0] == ["U00:_B-1/Y", "U01"]
    assert [k for k, _ in s1] == ["U00:a/_B+1", "U01"]
    assert t0 == [] and [k for k, _ in t1] == ["B02:b"]
    # a bare B, or a B line with no %x, is the plain transition
    assert parse_crfpp("B\n").transitions and parse_crfpp("B01\n").features == ()
    assert parse_crfpp("U:%x[0,0]\n").transitions is False
    # a CRLF file gives its LF twin's features
    assert parse_crfpp("U:%x[0,0]\r\nB\r\n") == parse_crfpp("U:%x[0,0]\nB\n")


def test_crfpp_column_beyond_the_tokens_names_the_token():
    plan = parse_crfpp("U:%x[0,2]\n")
    with pytest.raises(
        IndexError, match=r"X\[1\]\[0\] has 2 column\(s\); the template reads column 2"
    ):
        expand_dicts(plan, [[("a", "b", "c")], [("a", "b")]])


CRFPP_ERRORS = [
    ("U:%x[0,0]\n u:%x[0,0]\n", 2, 1, "unknown template type ' '"),
    ("X01:%x[0,0]\n", 1, 1, "unknown template type 'X'"),
    ("U:%y[0,0]\n", 1, 3, "unknown command"),
    ("U:100%\n", 1, 6, "unknown command"),
    ("U:%x(0,0)\n", 1, 5, "must be followed by '[row,col]'"),
    ("U:%x[9,0]\n", 1, 6, "offset out of range: row 9"),
    ("# ok\nU:%x[-10,0]\n", 2, 7, "offset out of range: row -10"),
    ("U:%x[+1,0]\n", 1, 6, "bad number"),
    ("U:%x[1, 0]\n", 1, 8, "bad number"),
    ("U:%x[0,-1]\n", 1, 8, "bad number"),
    ("U:%x[0,1\n", 1, 9, "unbalanced brackets"),
    ("U:%x[0\n", 1, 7, "unbalanced brackets"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), CRFPP_ERRORS)
def test_crfpp_errors_name_line_and_column(text, line, column, fragment):
    with pytest.raises(TemplateError) as info:
        parse_crfpp(text, source="tmpl")
    message = str(info.value)
    assert message.startswith(f"tmpl, line {line}, column {column}: ")
    assert fragment in message


# ---------------------------------------------------------------- Wapiti


def _wapiti_expected(patterns, sequences):
    # a b line with no command is Plan.transitions; Wapiti stores its name
    return _names(parse_wapiti(patterns), sequences, every_position=True) | _constant_lines(
        patterns, "b", wapiti=True
    )


def test_wapiti_observations_equal_wapiti_fixture():
    fixture = _fixture("wapiti.json")
    assert fixture["patterns"] == MF.WAPITI_PATTERNS
    observations = _wapiti_expected(fixture["patterns"], SEQUENCES)
    assert observations == set(fixture["observations"])
    # padding capped at 4 (_x-#), absolute offsets, commands on the padding, %X
    assert "u:_x-#/_x+#/_x-4/_x+4" in observations
    assert "u:Hi/Hi/_x-1/_x+2/_x-3" in observations
    assert "b:_x-1/hi/false" in observations and "u:mixed/_x-1" in observations
    assert "u:Émile's/IN" in observations  # %X leaves the non-ASCII É


def _wapiti():
    root = os.environ.get("SKCRF_WAPITI")
    if root and os.access(os.path.join(root, "wapiti"), os.X_OK):
        return root
    return None


WAPITI_PATTERNS = [
    MF.WAPITI_PATTERNS,
    '*:%x[0,0]/%M[0,0,"\\a\\a*"]\nb\n',
    'u:%t[@2,0,"^\\U*$"]%x[@-2,1]\nB:%X[1,0]\n',
]


@pytest.mark.parametrize("patterns", WAPITI_PATTERNS)
def test_wapiti_observations_equal_live_wapiti(patterns):
    root = _wapiti()
    if root is None:
        pytest.skip("Wapiti is absent: set SKCRF_WAPITI to a built Wapiti 1.5.0 source tree")
    observations = MF.wapiti_observations(os.path.join(root, "wapiti"), patterns)
    assert _wapiti_expected(patterns, SEQUENCES) == set(observations)


def test_wapiti_semantics_by_hand():
    plan = parse_wapiti(
        "U:%x[@1,0]/%x[@-1,0]/%x[@0,0]/%x[@5,0]  # absolute\n"
        '*:%T[-1,0,"\\d"]/%m[-1,0,"x."]\n'
        "b:%X[0,0]\n"
    )
    assert plan.syntax == "wapiti" and plan.transitions is False
    assert [f.kind for f in plan.features] == ["state", "both", "transition"]
    seq = ["Ab", "ÉcoLE", "z"]
    out = expand_sequence(plan, seq)
    # @1 the first token, @-1 the last, @0 always the padding before the first
    assert out[0][0][0][0] == "u:Ab/z/_x-1/_x+2"
    # the padding goes through %t / %m: '1' of _x-1 is a digit, 'x-' matches x.
    assert out[0][0][1][0] == "*:true/x-"
    assert out[1][0][1][0] == "*:false/"
    # %X lower-cases ASCII only (C's tolower), per byte
    assert [k for k, _ in out[1][1]] == ["*:false/", "b:École"]
    assert out[0][1] == []  # no transition into the first token
    assert parse_wapiti("b\n").transitions and parse_wapiti("*\n").features[0].key == ("*",)


def test_wapiti_numbers_are_read_as_sscanf_does():
    plan = parse_wapiti("u:%x[ -0x2,\t1]/%x[010,0]/%x[+1,+0]\n")
    refs = [part for part in plan.features[0].key if isinstance(part, Ref)]
    assert [(r.offset, r.column) for r in refs] == [(-2, 1), (8, 0), (1, 0)]


WAPITI_ERRORS = [
    ("u:%x[0,0]\n x:%x[0,0]\n", 2, 1, "unknown pattern type ' '"),
    ("q:%x[0,0]\n", 1, 1, "unknown pattern type 'q'"),
    ("u:%y[0,0]\n", 1, 3, "unknown command"),
    ("u:50%\n", 1, 5, "unknown command"),
    ("u:%x(0,0)\n", 1, 5, "unbalanced brackets"),
    ("u:%x[0,0\n", 1, 9, "unbalanced brackets"),
    ("u:%x[0 ,0]\n", 1, 7, "expected ','"),
    ("u:%x[08,0]\n", 1, 7, "expected ','"),
    ("u:%x[a,0]\n", 1, 6, "bad number"),
    ("u:%x[0,-1]\n", 1, 8, "bad number: a column cannot be negative"),
    ("u:%x[9999999999,0]\n", 1, 6, "offset out of range"),
    ("u:%t[0,0]\n", 1, 9, "takes a regex"),
    ('u:%t[0,0,"abc]\n', 1, 10, "unended regex"),
    ('u:%m[0,0,"a#b"]\n', 1, 10, "unended regex"),  # '#' starts a comment, even there
    ('u:%m[0,0,"a"\n', 1, 13, "unbalanced brackets"),
    ('u:%t[0,0,"ab**"]\n', 1, 14, "a regex Wapiti would reject"),
    ('\n\nb:%t[0,0,"?a"]\n', 3, 11, "nothing to repeat"),
    ('u:%t[0,0,"^*"]\n', 1, 12, "nothing to repeat"),
]


@pytest.mark.parametrize(("text", "line", "column", "fragment"), WAPITI_ERRORS)
def test_wapiti_errors_name_line_and_column(text, line, column, fragment):
    with pytest.raises(TemplateError) as info:
        parse_wapiti(text, source="patterns")
    message = str(info.value)
    assert message.startswith(f"patterns, line {line}, column {column}: ")
    assert fragment in message


# ---------------------------------------------------------------- Wapiti's regex


def _ours(pattern, text):
    found = compile_regex(pattern).search(text.encode("utf-8"))
    return (-1, 0) if found is None else (found[0], found[1] - found[0])


def test_regex_equals_wapiti_rex_match_fixture():
    cases = _fixture("wapiti_regex.json")["cases"]
    assert len(cases) == 3000
    length_bug = 0
    for pattern, text, start, length in cases:
        ours = _ours(pattern, text)
        assert ours[0] == start, (pattern, text)
        if ours[1] != length:
            # Wapiti's '?' restores its length from a clobbered value (see _regex)
            assert "?" in pattern, (pattern, text)
            length_bug += 1
    assert length_bug < len(cases) // 20


def test_regex_equals_live_wapiti_rex_match():
    root = _wapiti()
    if root is None or shutil.which("cc") is None:
        pytest.skip("Wapiti is absent (SKCRF_WAPITI: a built Wapiti 1.5.0 source tree), or no cc")
    cases = MF.random_regex_cases(seed=41, count=5000)
    for (pattern, text), (start, length) in zip(cases, MF.wapiti_rex_match(root, cases)):
        ours = _ours(pattern, text)
        assert ours[0] == start, (pattern, text)
        assert ours[1] == length or "?" in pattern, (pattern, text)


def test_regex_semantics_by_hand():
    assert _ours("a*", "baa") == (0, 0)  # '*' is lazy: the empty match at 0
    assert _ours("ba*", "baa") == (0, 1)
    assert _ours("ba*$", "baa") == (0, 3)
    assert _ours("a?a?", "aaa") == (0, 2)  # '?' is greedy
    assert _ours("\\d\\d*", "ab123") == (2, 1)
    assert _ours("^\\u\\l*$", "Hello") == (0, 5) and _ours("^\\u\\l*$", "HeLlo") == (-1, 0)
    assert _ours("a$b", "xa$b") == (1, 3)  # '$' not last: a plain byte
    assert _ours("x^", "x^") == (0, 2)
    assert _ours("\\n", "an") == (1, 1)  # an escaped letter that is no class: itself
    assert _ours("(a*)*", "((aa))") == (0, 1)  # no groups: plain bytes
    assert _ours("\\A", "é") == (0, 1)  # bytes >= 0x80 are in no class
    assert _ours(".", "é") == (0, 1)
    assert _ours("é*x", "ééx") == (2, 3)  # "*" repeats the last byte of é only
    assert compile_regex("a*b") is compile_regex("a*b")  # cached


@pytest.mark.parametrize(
    ("pattern", "column"), [("*a", 1), ("a**", 3), ("ab?*", 4), ("^?", 2), ("é?*", 3), ("a\\", 2)]
)
def test_regex_errors_name_the_column(pattern, column):
    with pytest.raises(TemplateError, match=f"column {column}: regex: "):
        compile_regex(pattern)
    with pytest.raises(TemplateError):
        CompiledRegex(pattern)


def test_hostile_regex_is_bounded():
    # exponential for a backtracking matcher (Wapiti's), linear here
    pattern = "a*" * 25 + "b"
    data = b"a" * 3000
    start = time.perf_counter()
    assert compile_regex(pattern).search(data) is None
    assert CompiledRegex(pattern).search(data * 100) is None
    assert CompiledRegex("a?" * 200 + "a" * 200).search(b"a" * 10_000) == (0, 400)
    assert time.perf_counter() - start < 20


def _random_pattern(rng):
    atoms = [*MF.REGEX_ATOMS, "\\", "*", "?", "ab", "\x00"]
    pattern = "^" if rng.random() < 0.2 else ""
    for _ in range(rng.randint(0, 8)):
        pattern += rng.choice(atoms) + rng.choice(["", "", "*", "?"])
    return pattern + ("$" if rng.random() < 0.2 else "")


def test_compiled_regex_equals_python_regex_on_random_cases():
    rng = random.Random(41)
    alphabet = "ab1A.-_ $^\\é\x00\t"
    checked = 0
    for _ in range(4000):
        pattern = _random_pattern(rng)
        try:
            python = compile_regex(pattern)
        except TemplateError:
            with pytest.raises(TemplateError):
                CompiledRegex(pattern)
            continue
        compiled = CompiledRegex(pattern)
        for _ in range(3):
            data = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))).encode()
            assert compiled.search(data) == python.search(data), (pattern, data)
            assert compiled.test(data) == python.test(data) == (python.search(data) is not None)
            checked += 1
    assert checked > 8000


def test_compiled_regex_long_patterns_use_the_heap_path():
    rng = random.Random(7)
    for _ in range(50):
        pattern = "".join(
            rng.choice(["a", "b", "a*", "b?", "."]) for _ in range(rng.randint(60, 140))
        )
        data = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 300)))
        assert CompiledRegex(pattern).search(data) == compile_regex(pattern).search(data)


# ---------------------------------------------------------------- crfutils


def _crfsuite_attributes(templates, fields, sequences):
    plan = parse_crfsuite(templates, columns=fields)
    return [
        [[key for key, _ in state] for state, _ in expand_sequence(plan, [tuple(r) for r in seq])]
        for seq in sequences
    ]


def test_crfsuite_attributes_equal_crfutils_fixture():
    fixture = _fixture("crfsuite.json")
    templates = [tuple(tuple(pair) for pair in t) for t in fixture["templates"]]
    assert templates == list(MF.CRFSUITE_TEMPLATES)
    got = _crfsuite_attributes(templates, fixture["fields"], MF.CRFSUITE_SENTENCES)
    # the same attributes, in the same order, token by token
    assert got == fixture["attributes"]
    flat = {a for seq in got for token in seq for a in token}
    assert "w[0]=a__COLON__b" in flat and "w[0]=c\\d\\" in flat


def test_crfsuite_attributes_equal_live_crfutils():
    src = os.environ.get("SKCRF_CRFSUITE_SRC")
    if not src or not (Path(src) / "example" / "crfutils.py").exists():
        pytest.skip("CRFsuite's source tree is absent: set SKCRF_CRFSUITE_SRC")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build CRFsuite's data reader")
    templates = [*MF.CRFSUITE_TEMPLATES, (("chk", -1), ("pos", 1), ("w", 3))]
    expected = MF.crfutils_attributes(src, templates)
    assert _crfsuite_attributes(templates, MF.CRFSUITE_FIELDS, MF.CRFSUITE_SENTENCES) == expected


def test_crfsuite_semantics_by_hand():
    plan = parse_crfsuite([(("w", -1), ("w", 0)), (("p", 1),)], columns={"w": 0, "p": 1})
    assert plan.syntax == "crfsuite" and plan.transitions
    out = expand_sequence(plan, [("x:y", "A"), ("z", "B")])
    assert [k for k, _ in out[0][0]] == ["p[1]=B"]
    assert [k for k, _ in out[1][0]] == ["w[-1]|w[0]=x__COLON__y|z"]


@pytest.mark.parametrize(
    ("templates", "fragment"),
    [
        ([(("w", 0),), (("x", 0),)], "templates[1][0]: unknown field 'x'"),
        ([(("w", 0), ("w", 1.0))], "templates[0][1]: bad number"),
        ([(("w", 0), ("w",))], "templates[0][1]: a template's items are (field, offset) pairs"),
        ([()], "templates[0]: a template is a non-empty tuple"),
        ([("w", 0)], "templates[0][0]: a template's items"),
    ],
)
def test_crfsuite_errors_name_the_template(templates, fragment):
    with pytest.raises(TemplateError) as info:
        parse_crfsuite(templates, columns=["w"])
    assert fragment in str(info.value)


# ---------------------------------------------------------------- the plan's additions


def test_boundary_limit_and_steps_through_the_padding():
    boundary = Boundary("_x-", "_x+", limit=4, through_steps=True)
    assert [boundary.text(p, 2) for p in (-1, -4, -5, 2, 5, 6)] == [
        "_x-1", "_x-4", "_x-#", "_x+1", "_x+4", "_x+#",
    ]  # fmt: skip
    feature = Feature(key=(Ref(-1, 0, (("regex_match", "\\d"),)),), outside=boundary)
    assert expand_sequence(Plan((feature,)), ["a"])[0][0] == [("1", 1.0)]
    plain = feature._replace(outside=boundary._replace(through_steps=False))
    assert expand_sequence(Plan((plain,)), ["a"])[0][0] == [("_x-1", 1.0)]
    with pytest.raises(TemplateError, match="limit"):
        check_plan(Plan((feature._replace(outside=boundary._replace(limit=0)),)))


def test_replace_step_is_checked_and_runs():
    with pytest.raises(TemplateError, match="replace"):
        check_plan(Plan((Feature(key=(Ref(0, 0, (("replace", "", "x"),)),)),)))
    feature = Feature(key=("k=", Ref(0, 0, (("replace", "a", "bc"),))))
    assert expand_sequence(check_plan(Plan((feature,))), ["aXa"])[0][0] == [("k=bcXbc", 1.0)]
