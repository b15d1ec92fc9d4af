r"""Wapiti's regular expressions: its small subset, with bounded work.

Wapiti 1.5.0 (``src/pattern.c``: ``rex_match``, ``rex_matchme``,
``rex_matchit``) matches ``%t`` and ``%m`` patterns with a backtracking
interpreter of this subset, on the bytes of a token:

- an item is one byte: ``.`` (any byte), ``\d \a \w \l \u \p \s``
  (digit, letter, letter or digit, lower case, upper case, punctuation,
  white space, in the C locale: ASCII only), their upper-case complements
  (``\D`` ...: every other byte, bytes >= 0x80 included), ``\`` before any
  other byte (that byte: ``\n`` is ``n``), or any other byte itself
  (``( ) [ + | {`` are plain bytes);
- an item may be followed by one ``*`` (any number of it) or ``?`` (at
  most one); a ``*`` or ``?`` where an item should start is refused (Wapiti
  stops with "unescaped * or ?" when its matcher reaches it);
- a ``^`` first anchors the match at the start; a ``$`` last (where an item
  would start) anchors it at the end; anywhere else both are plain bytes.

Which match: the leftmost start; at that start, the first match in
Wapiti's backtracking order, where ``?`` first tries with its byte
(greedy) and ``*`` first tries with none (lazy: ``a*`` matches the empty
string, ``\d\d*`` one digit). That order is run here as a Pike VM (the
threads of a Thompson NFA kept in priority order), so a search costs
O(len(pattern) x len(data)) whatever the pattern, where Wapiti's own
matcher can take exponential time. The compiled twin is
:mod:`skcrf._template._regex_c`.

Where the answers differ from Wapiti 1.5.0 (its bugs, not its design):
after a ``?`` whose byte matched but whose rest failed, ``rex_matchme``
restores the match length from a value the failed attempt changed, so
``%m`` can report a longer match than the one found (``a?a`` on ``a``:
two bytes, copying the string's terminator); this module gives the match
it found. The data is taken with its length (a NUL byte is a byte; Wapiti
sees C strings, in which it ends the token).
"""

from functools import lru_cache

from ._plan import template_error

__all__ = ["CLASSES", "Regex", "compile_regex"]

ONE, OPTIONAL, STAR = 0, 1, 2


def _class(test):
    return frozenset(b for b in range(256) if test(b))


def _isalpha(b):
    return 65 <= b <= 90 or 97 <= b <= 122


def _isdigit(b):
    return 48 <= b <= 57


def _ispunct(b):
    # C locale: the printable ASCII bytes that are neither letters, digits nor space
    return 33 <= b <= 126 and not _isalpha(b) and not _isdigit(b)


#: The byte sets of the class escapes (C locale, as Wapiti's <ctype.h> calls see them).
CLASSES: dict[str, frozenset[int]] = {
    "a": _class(_isalpha),
    "d": _class(_isdigit),
    "l": _class(lambda b: 97 <= b <= 122),
    "p": _class(_ispunct),
    "s": _class(lambda b: 9 <= b <= 13 or b == 32),
    "u": _class(lambda b: 65 <= b <= 90),
    "w": _class(lambda b: _isalpha(b) or _isdigit(b)),
}
_ALL = frozenset(range(256))
for _name in list(CLASSES):
    CLASSES[_name.upper()] = _ALL - CLASSES[_name]


class Regex:
    """A compiled pattern: items of (byte set, quantifier) and two anchors.

    Parameters
    ----------
    pattern : str
        The pattern, as written in the template.
    items : tuple of (frozenset of int, int)
        Each item's bytes and quantifier (0: one, 1: ``?``, 2: ``*``).
    anchored_start, anchored_end : bool
        Whether a ``^`` starts it, a ``$`` ends it.
    """

    __slots__ = ("anchored_end", "anchored_start", "items", "pattern")

    def __init__(self, pattern, items, anchored_start, anchored_end):
        self.pattern = pattern
        self.items = items
        self.anchored_start = anchored_start
        self.anchored_end = anchored_end

    def __repr__(self):
        return f"compile_regex({self.pattern!r})"

    def _closure(self, out, seen, state, start, at_end):
        """Append the threads state ``state`` stands for, highest priority first.

        A ``?`` item's consuming thread comes before its skip, a ``*``
        item's skip before its consuming thread (Wapiti's order); a state
        already in the list keeps its earlier, higher-priority thread.
        """
        deferred = []
        items, m = self.items, len(self.items)
        while True:
            if state in seen:
                break
            seen.add(state)
            if state == m:
                if at_end or not self.anchored_end:
                    out.append((m, start))
                break
            quantifier = items[state][1]
            if quantifier == ONE:
                out.append((state, start))
                break
            if quantifier == OPTIONAL:
                out.append((state, start))
            else:
                deferred.append(state)
            state += 1
        for state in reversed(deferred):
            out.append((state, start))

    def _run(self, data, first):
        items, m, n = self.items, len(self.items), len(data)
        current, seen = [], set()
        found = None
        for pos in range(n + 1):
            if found is None and (pos == 0 or not self.anchored_start):
                # the new start has the lowest priority: every earlier start is leftmost
                self._closure(current, seen, 0, pos, pos == n)
            if not current:
                if found is not None or self.anchored_start:
                    break
                seen = set()
                continue
            following, seen = [], set()
            for state, start in current:
                if state == m:
                    found = (start, pos)
                    if first:
                        return found
                    break  # the threads after it have lower priority
                if pos < n and data[pos] in items[state][0]:
                    following_state = state if items[state][1] == STAR else state + 1
                    self._closure(following, seen, following_state, start, pos + 1 == n)
            current = following
        return found

    def search(self, data):
        """The match in ``data`` as ``(start, end)`` byte offsets, or None.

        Parameters
        ----------
        data : bytes
            The token's bytes.

        Returns
        -------
        tuple of (int, int) or None
            The leftmost match Wapiti's ``%m`` takes.
        """
        return self._run(data, False)

    def test(self, data):
        """Whether the pattern matches somewhere in ``data`` (Wapiti's ``%t``)."""
        return self._run(data, True) is not None


def _error(message, raw, offset, pattern):
    """A TemplateError naming the column of byte ``offset`` (``.column``, ``.reason``)."""
    column = len(raw[:offset].decode("utf-8", "surrogateescape")) + 1
    error = template_error(f"regex: {message}", column=column, text=pattern)
    error.column = column  # type: ignore[attr-defined]
    error.reason = message  # type: ignore[attr-defined]
    return error


@lru_cache(maxsize=1024)
def compile_regex(pattern):
    r"""Compile a pattern of Wapiti's subset (cached).

    Parameters
    ----------
    pattern : str
        The pattern; it is matched on the UTF-8 bytes, byte by byte.

    Returns
    -------
    Regex

    Raises
    ------
    TemplateError
        A ``*`` or ``?`` with no item before it, or a trailing ``\``,
        naming its column in the pattern.
    """
    if not isinstance(pattern, str):
        raise TypeError(f"a regex pattern must be a str, got {type(pattern).__name__}")
    raw = pattern.encode("utf-8", "surrogateescape")
    pos, n = 0, len(raw)
    anchored_start = n > 0 and raw[0] == 0x5E  # '^'
    if anchored_start:
        pos = 1
    items = []
    anchored_end = False
    while pos < n:
        byte = raw[pos]
        if byte == 0x24 and pos == n - 1:  # '$' where the last item would start
            anchored_end = True
            break
        if byte in (0x2A, 0x3F):  # '*' '?'
            raise _error(
                f"'{chr(byte)}' with nothing to repeat (escape it as '\\{chr(byte)}')",
                raw,
                pos,
                pattern,
            )
        if byte == 0x5C:  # '\\'
            if pos + 1 == n:
                raise _error("a trailing '\\' escapes nothing", raw, pos, pattern)
            escaped = raw[pos + 1]
            letter = chr(escaped)
            bytes_ = CLASSES[letter] if letter in CLASSES else frozenset((escaped,))
            pos += 2
        elif byte == 0x2E:  # '.'
            bytes_, pos = _ALL, pos + 1
        else:
            bytes_, pos = frozenset((byte,)), pos + 1
        quantifier = ONE
        if pos < n and raw[pos] == 0x2A:
            quantifier, pos = STAR, pos + 1
        elif pos < n and raw[pos] == 0x3F:
            quantifier, pos = OPTIONAL, pos + 1
        items.append((bytes_, quantifier))
    return Regex(pattern, tuple(items), anchored_start, anchored_end)
