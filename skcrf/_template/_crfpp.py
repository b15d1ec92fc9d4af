r"""CRF++ templates parsed into a plan.

The semantics are CRF++'s (0.58, and the 0.59 of its repository, which
the ``crfpy`` wheel builds; they agree here), read from its sources:

- ``feature_index.cpp`` (``EncoderFeatureIndex::openTemplate``): the file
  is read line by line; an empty line or one whose first character is
  ``#`` is skipped; a line starting with ``U`` is a unigram template, with
  ``B`` a bigram one; any other first character (a space included) is an
  error. The whole line, type letter and all, is the template.
- ``feature.cpp`` (``FeatureIndex::applyRule``): the attribute name is the
  line with every ``%x[row,col]`` replaced; every other character is
  copied; ``%`` followed by anything but ``x[`` fails.
- ``feature.cpp`` (``FeatureIndex::getIndex``): ``row`` is an optional
  ``-`` and decimal digits, ``col`` decimal digits (no ``+``, no spaces;
  an empty number is 0, as CRF++ reads it); a row beyond -8..8 fails; the
  token ``row`` away, outside the sequence, is ``_B-1`` ... ``_B-8`` before
  its start and ``_B+1`` ... ``_B+8`` after its end.
- ``feature.cpp`` (``FeatureIndex::buildFeatures``): unigram templates
  give each token's attributes, bigram ones are evaluated from the second
  token on and condition the transition into it (``kind='transition'``).

A column: CRF++ refuses a template whose ``col`` is not below ``xsize``,
the number of columns before the label, when it starts training. Here the
tokens hold only the input columns (no label), so the same rule is met
when the template is expanded: a column beyond a token's columns raises
the reference expander's error naming ``X[i][j]``. (CRF++ checks it even
for a row outside the sequence; the expander reads columns of tokens only.)

A ``B`` line with no ``%x`` is the plain label-to-label transition:
:attr:`Plan.transitions` (CRF++ also stores its constant name, ``B``, as a
feature of its own; skcrf always learns these transitions). A ``U`` line
with no ``%x`` is a constant attribute of every token (a per-label bias).

Not copied: a row or column that CRF++ would read past the end of the
line (``%x[0,1`` at the end) is an error here (CRF++ reads beyond its
buffer); numbers beyond CRF++'s ``int`` are errors. Lines are split at
``\n`` only (as ``std::getline``) and one trailing ``\r`` is dropped (a
CRLF file gives the features of its LF twin; CRF++ on Linux keeps the
``\r`` in every name of the line).
"""

from ._plan import Boundary, Feature, Plan, Ref, check_plan, template_error

__all__ = ["MAX_CONTEXT", "parse_crfpp"]

#: CRF++'s kMaxContextSize: rows from -8 to 8.
MAX_CONTEXT = 8

#: CRF++'s BOS / EOS texts: _B-1 .. _B-8, _B+1 .. _B+8.
BOUNDARY = Boundary("_B-", "_B+")

_DIGITS = "0123456789"


def _number(line, pos, end_char, what, lineno, source):
    """Digits from ``pos`` up to ``end_char``: (value, position after ``end_char``)."""
    start = pos
    while pos < len(line) and line[pos] in _DIGITS:
        pos += 1
    if pos == len(line):
        raise template_error(
            f"unbalanced brackets: '%x[' has no closing ']' (expected {end_char!r} after "
            f"the {what})",
            line=lineno,
            column=pos + 1,
            source=source,
            text=line,
        )
    if line[pos] != end_char:
        raise template_error(
            f"bad number: {line[pos]!r} in the {what} of %x[row,col] (CRF++ reads "
            f"decimal digits, then {end_char!r})",
            line=lineno,
            column=pos + 1,
            source=source,
            text=line,
        )
    return int(line[start:pos] or "0"), pos + 1


def _macro(line, pos, lineno, source):
    """The ``%x[row,col]`` at ``line[pos]`` (the ``%``): (row, col, position after it)."""
    percent = pos
    if pos + 1 >= len(line) or line[pos + 1] != "x":
        shown = repr(line[pos + 1]) if pos + 1 < len(line) else "the end of the line"
        raise template_error(
            f"unknown command: '%' followed by {shown}; CRF++ knows only %x[row,col] "
            "(and has no escape for a literal '%')",
            line=lineno,
            column=pos + 1,
            source=source,
            text=line,
        )
    pos += 2
    if pos >= len(line) or line[pos] != "[":
        raise template_error(
            "%x must be followed by '[row,col]'",
            line=lineno,
            column=pos + 1,
            source=source,
            text=line,
        )
    pos += 1
    negative = pos < len(line) and line[pos] == "-"
    if negative:
        pos += 1
    row_column = pos + 1
    row, pos = _number(line, pos, ",", "row", lineno, source)
    col, pos = _number(line, pos, "]", "column", lineno, source)
    if negative:
        row = -row
    if not -MAX_CONTEXT <= row <= MAX_CONTEXT:
        raise template_error(
            f"offset out of range: row {row} of %x[{row},{col}] (CRF++ reads rows "
            f"-{MAX_CONTEXT} to {MAX_CONTEXT})",
            line=lineno,
            column=row_column,
            source=source,
            text=line,
        )
    if col > 2**31 - 1:
        raise template_error(
            f"offset out of range: column {col} of %x[{row},{col}]",
            line=lineno,
            column=percent + 1,
            source=source,
            text=line,
        )
    return row, col, pos


def _parts(line, lineno, source):
    """The line as literal texts and Refs."""
    parts = []
    literal = []
    pos = 0
    while pos < len(line):
        char = line[pos]
        if char != "%":
            literal.append(char)
            pos += 1
            continue
        row, col, pos = _macro(line, pos, lineno, source)
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(Ref(row, col))
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


def parse_crfpp(text, *, source=None):
    r"""Parse a CRF++ template file's text into a :class:`~skcrf._template._plan.Plan`.

    Parameters
    ----------
    text : str
        The template file's content.
    source : str, optional
        Where it came from (a file name), for error messages.

    Returns
    -------
    Plan
        ``syntax='crfpp'``: one feature per ``U`` line (``kind='state'``) and
        per ``B`` line with a ``%x`` (``kind='transition'``), in the file's
        order; ``transitions`` is True when a ``B`` line has no ``%x``.

    Raises
    ------
    TemplateError
        Naming the line and column: a line that is neither ``U``, ``B``,
        ``#`` nor empty; ``%`` not starting ``%x[row,col]``; a bad number; a
        row beyond -8..8; a missing ``]``.

    Examples
    --------
    >>> plan = parse_crfpp("U01:%x[-1,0]/%x[0,0]\nB\n")
    >>> plan.features[0].key
    ('U01:', Ref(offset=-1, column=0, steps=(), absolute=False), '/', Ref(offset=0, column=0, steps=(), absolute=False))
    >>> plan.transitions
    True
    """  # noqa: E501
    if not isinstance(text, str):
        raise TypeError(f"a CRF++ template is a str, got {type(text).__name__}")
    features = []
    transitions = False
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline ending the last line
    for lineno, line in enumerate(lines, 1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line or line[0] == "#":
            continue
        if line[0] not in "UB":
            raise template_error(
                f"unknown template type {line[0]!r}: a CRF++ template line starts with "
                "'U' (unigram) or 'B' (bigram); '#' starts a comment",
                line=lineno,
                column=1,
                source=source,
                text=line,
            )
        parts = _parts(line, lineno, source)
        constant = not any(isinstance(part, Ref) for part in parts)
        if line[0] == "B" and constant:
            transitions = True
            continue
        features.append(
            Feature(
                key=parts,
                outside=BOUNDARY,
                kind="state" if line[0] == "U" else "transition",
                source=line,
            )
        )
    return check_plan(Plan(tuple(features), transitions=transitions, syntax="crfpp"))
