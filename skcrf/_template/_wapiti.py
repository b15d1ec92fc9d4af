r"""Wapiti patterns parsed into a plan.

The semantics are Wapiti 1.5.0's, read from its sources:

- ``src/reader.c`` (``rdr_loadpat``, ``rdr_readline``): lines end at
  ``\n``; everything from the first ``#`` is a comment (so a pattern can
  hold no ``#``, not even in a regex); trailing white space is dropped; an
  empty line is skipped; the first character, lower-cased, is the type:
  ``u`` (unigram), ``b`` (bigram) or ``*`` (both); anything else, a space
  included, is an error.
- ``src/reader.c`` (``rdr_pattok2seq``): the observation is the whole
  expanded line, its lower-cased type letter included (``U:%x[0,0]`` gives
  ``u:word``); ``u`` observations are the token's attributes, ``b`` ones
  condition the transition into the token (Wapiti's gradient and decoder
  use them from the second token on: ``kind='transition'``), ``*`` ones
  both (``kind='both'``).
- ``src/pattern.c`` (``pat_comp``): ``%`` starts a command, ``%x[off,col]``,
  ``%t[off,col,"regex"]`` or ``%m[off,col,"regex"]``, the letter in either
  case (no escape for a literal ``%``); ``off`` and ``col`` are read by
  ``sscanf("[%i,%u")``: white space may precede each number, ``off`` takes
  a sign and C's ``0x`` (hex) and leading-``0`` (octal) forms, ``col`` a
  decimal; ``[@off,`` makes the offset absolute. The regex runs to the next
  ``"`` not escaped by ``\`` and keeps its escapes.
- ``src/pattern.c`` (``pat_exec``): the token ``off`` away (``@k`` for
  ``k > 0``: the k-th token, 1-based; ``@-k``: the k-th from the end;
  ``@0``: before the start, always ``_x-1``); outside the sequence it is
  ``_x-1`` ... ``_x-4`` then ``_x-#`` before the start, ``_x+1`` ...
  ``_x+4`` then ``_x+#`` after the end; that text then goes through the
  command like a token (``%t[-1,0,"\d"]`` at the first token tests
  ``_x-1``: ``true``). ``%x`` copies the token, ``%t`` gives ``true`` or
  ``false``, ``%m`` the match (``""`` if none; see
  :mod:`skcrf._template._regex`); an upper-case command letter lower-cases
  its result with C's ``tolower`` in the C locale (ASCII letters only:
  step ``ascii_lower``). A column beyond the token's columns is fatal in
  Wapiti ("missing tokens"); here it is the reference expander's error
  naming ``X[i][j]``.

A ``b`` line with no command is the plain label-to-label transition
(:attr:`Plan.transitions`); a ``*`` line with none is a constant
attribute of every token and the plain transition; a ``u`` line with none
a constant attribute (a per-label bias).

Not copied (Wapiti's bugs or oddities): ``pat_comp`` accepts a regex
argument that starts with ``,`` or with ``"`` alone (it tests ``p[pos] !=
','`` *and* ``p[pos + 1] != '"'``); here it must start with ``,"``. A
column written with a minus sign (``%u`` wraps it to a huge number, which
Wapiti reports only when applying the pattern), ``0x`` with no hex digit
(glibc reads it as 0), and numbers beyond 32 bits are errors here.
"""

from ._plan import Boundary, Feature, Plan, Ref, TemplateError, check_plan, template_error
from ._reference import apply_steps
from ._regex import compile_regex

__all__ = ["BOUNDARY", "parse_wapiti"]

#: Wapiti's padding: _x-1 .. _x-4, _x-#, and _x+1 .. _x+4, _x+#, seen by the commands.
BOUNDARY = Boundary("_x-", "_x+", numbered=True, limit=4, through_steps=True)

_SPACE = " \t\n\v\f\r"  # C's isspace in the C locale
_TYPES = {"u": "state", "b": "transition", "*": "both"}
_INT32 = (-(2**31), 2**31 - 1)


class _Line:
    """A pattern line being read, for errors naming its line and column."""

    def __init__(self, text, lineno, source):
        self.text = text
        self.lineno = lineno
        self.source = source

    def error(self, message, pos):
        return template_error(
            message, line=self.lineno, column=pos + 1, source=self.source, text=self.text
        )


def _skip_space(text, pos):
    while pos < len(text) and text[pos] in _SPACE:
        pos += 1
    return pos


def _scan_int(line, pos, what):
    """C's ``%i`` at ``pos``: (value, position after it)."""
    text = line.text
    pos = start = _skip_space(text, pos)
    sign = 1
    if pos < len(text) and text[pos] in "+-":
        sign = -1 if text[pos] == "-" else 1
        pos += 1
    if text[pos : pos + 2] in ("0x", "0X"):
        digits_at, base, alphabet = pos + 2, 16, "0123456789abcdefABCDEF"
    elif text[pos : pos + 1] == "0":
        digits_at, base, alphabet = pos, 8, "01234567"
    else:
        digits_at, base, alphabet = pos, 10, "0123456789"
    end = digits_at
    while end < len(text) and text[end] in alphabet:
        end += 1
    if end == digits_at:
        raise line.error(f"bad number: the {what} must be an integer", start)
    value = sign * int(text[digits_at:end], base)
    if not _INT32[0] <= value <= _INT32[1]:
        raise line.error(f"offset out of range: the {what} {value} is beyond 32 bits", start)
    return value, end


def _scan_column(line, pos):
    """C's ``%u`` at ``pos`` (a non-negative decimal): (value, position after it)."""
    text = line.text
    pos = start = _skip_space(text, pos)
    if pos < len(text) and text[pos] == "+":
        pos += 1
    end = pos
    while end < len(text) and text[end] in "0123456789":
        end += 1
    if end == pos:
        if pos < len(text) and text[pos] == "-":
            raise line.error("bad number: a column cannot be negative", start)
        raise line.error("bad number: the column must be a decimal integer", start)
    value = int(text[pos:end])
    if value > _INT32[1]:
        raise line.error(f"offset out of range: column {value}", start)
    return value, end


def _expect(line, pos, char, message):
    if pos >= len(line.text) or line.text[pos] != char:
        raise line.error(message, pos)
    return pos + 1


def _command(line, pos):
    """The command at ``line.text[pos]`` (its ``%``): (a Ref or a text, position after it)."""
    text = line.text
    letter = text[pos + 1] if pos + 1 < len(text) else ""
    command = letter.lower()
    if command not in ("x", "t", "m") or not letter:
        shown = repr(letter) if letter else "the end of the line"
        raise line.error(
            f"unknown command: '%' followed by {shown}; Wapiti knows %x, %t and %m (or "
            "%X, %T, %M) and has no escape for a literal '%'",
            pos,
        )
    pos += 2
    pos = _expect(line, pos, "[", f"unbalanced brackets: %{letter} must be followed by '['")
    absolute = pos < len(text) and text[pos] == "@"
    if absolute:
        pos += 1
    offset, pos = _scan_int(line, pos, "offset")
    pos = _expect(line, pos, ",", "expected ',' after the offset")
    column, pos = _scan_column(line, pos)
    steps = []
    if command in ("t", "m"):
        if text[pos : pos + 2] != ',"':
            raise line.error(f'%{letter} takes a regex: expected ,"regex" after the column', pos)
        pos += 2
        regex_start = pos
        while pos < len(text) and text[pos] != '"':
            pos += 2 if text[pos] == "\\" and pos + 1 < len(text) else 1
        if pos >= len(text):
            raise line.error("an unended regex: no closing '\"'", regex_start - 1)
        pattern = text[regex_start:pos]
        try:
            compile_regex(pattern)
        except TemplateError as error:
            reason = getattr(error, "reason", str(error))
            raise line.error(
                f'a regex Wapiti would reject: {reason}, in "{pattern}"',
                regex_start + getattr(error, "column", 1) - 1,
            ) from None
        steps.append(("regex_test" if command == "t" else "regex_match", pattern))
        pos += 1
    pos = _expect(line, pos, "]", f"unbalanced brackets: %{letter}[...] is not closed by ']' here")
    # %T lower-cases 'true' / 'false': nothing to do
    if letter.isupper() and command != "t":
        steps.append(("ascii_lower",))
    steps = tuple(steps)
    if absolute and offset == 0:
        # @0 is always the token before the first: a constant through the command
        return apply_steps(BOUNDARY.text(-1, 1), steps), pos
    if absolute:
        return Ref(offset - 1 if offset > 0 else offset, column, steps, absolute=True), pos
    return Ref(offset, column, steps), pos


def _parts(line):
    parts = []
    literal = []
    text = line.text
    pos = 0
    while pos < len(text):
        if text[pos] != "%":
            literal.append(text[pos])
            pos += 1
            continue
        part, pos = _command(line, pos)
        if isinstance(part, str):
            literal.append(part)
            continue
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(part)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


def parse_wapiti(text, *, source=None):
    r"""Parse a Wapiti pattern file's text into a :class:`~skcrf._template._plan.Plan`.

    Parameters
    ----------
    text : str
        The pattern file's content.
    source : str, optional
        Where it came from (a file name), for error messages.

    Returns
    -------
    Plan
        ``syntax='wapiti'``: one feature per line with a command, of kind
        ``'state'`` (``u``), ``'transition'`` (``b``) or ``'both'`` (``*``);
        ``transitions`` is True when a ``b`` or ``*`` line has no command.

    Raises
    ------
    TemplateError
        Naming the line and column: an unknown type or command, a bad
        number, a missing bracket or quote, a regex Wapiti would reject.

    Examples
    --------
    >>> plan = parse_wapiti('u:%X[0,0]/%t[1,0,"^\\d"]  # a comment\nb\n')
    >>> plan.features[0].key[1].steps, plan.features[0].key[3].steps
    ((('ascii_lower',),), (('regex_test', '^\\d'),))
    >>> plan.transitions
    True
    """
    if not isinstance(text, str):
        raise TypeError(f"a Wapiti pattern file is a str, got {type(text).__name__}")
    features = []
    transitions = False
    for lineno, raw in enumerate(text.split("\n"), 1):
        end = raw.find("#")
        content = raw if end < 0 else raw[:end]
        content = content.rstrip(_SPACE)
        if not content:
            continue
        content = content[0].lower() + content[1:]
        line = _Line(content, lineno, source)
        if content[0] not in _TYPES:
            raise line.error(
                f"unknown pattern type {raw[0]!r}: a Wapiti pattern starts with 'u' "
                "(unigram), 'b' (bigram) or '*' (both); '#' starts a comment",
                0,
            )
        kind = _TYPES[content[0]]
        parts = _parts(line)
        if not any(isinstance(part, Ref) for part in parts):
            if kind != "state":
                transitions = True
            if kind == "transition":
                continue
            kind = "state"
        features.append(Feature(key=parts, outside=BOUNDARY, kind=kind, source=content))
    return check_plan(Plan(tuple(features), transitions=transitions, syntax="wapiti"))
