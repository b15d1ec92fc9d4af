"""python-crfsuite's ``pycrfsuite._dumpparser``: the dump parser and :class:`ParsedDump`.

The parser reads the text that ``Tagger.dump`` (and ``crfsuite dump``)
writes, line by line, into a :class:`ParsedDump`: the object
``Tagger.info()`` returns.
"""

from __future__ import annotations

from .._tagger_view import ParsedDump

__all__ = ["CRFsuiteDumpParser", "ParsedDump"]

_SECTIONS = ("FILEHEADER", "LABELS", "ATTRIBUTES", "TRANSITIONS", "STATE_FEATURES")
_ARROW = " --> "


class CRFsuiteDumpParser:
    """Reads a CRFsuite model dump into a :class:`ParsedDump`.

    Feed the dump's lines in order; :attr:`result` holds what they gave:
    the header fields, ``{label: id}`` and ``{attribute: id}`` (ids as
    strings), ``{(label_from, label_to): weight}`` and ``{(attribute,
    label): weight}``. Leading whitespace and the line ending are dropped
    (whitespace at the end of a name is kept); blank lines are skipped.

    Attributes
    ----------
    result : ParsedDump
    state : str or None
        The section being read (``'LABELS'``, ...), None between sections.

    Examples
    --------
    >>> from skcrf.pycrfsuite._dumpparser import CRFsuiteDumpParser
    >>> parser = CRFsuiteDumpParser()
    >>> for line in ["LABELS = {", "  0: B", "  1: I", "}", "TRANSITIONS = {",
    ...              "  (1) B --> I: 1.500000", "}"]:
    ...     parser.feed(line)
    >>> parser.result.labels, parser.result.transitions
    ({'B': '0', 'I': '1'}, {('B', 'I'): 1.5})
    """

    def __init__(self) -> None:
        self.state: str | None = None
        self.result = ParsedDump()

    def feed(self, line: str) -> None:
        """Read one line of the dump."""
        line = line.lstrip().rstrip("\r\n")
        if not line:
            return
        head, _, rest = line.partition(" = ")
        if head in _SECTIONS and rest == "{":
            self.state = head
        elif line == "}":
            self.state = None
        elif self.state is None:
            raise ValueError(f"A line outside the dump's sections: {line!r}.")
        elif self.state in ("FILEHEADER", "LABELS", "ATTRIBUTES"):
            key, separator, value = line.partition(": ")
            if not separator:
                raise ValueError(f"Not a '{self.state}' line of a dump: {line!r}.")
            if self.state == "FILEHEADER":
                self.result.header[key] = value
            elif self.state == "LABELS":
                self.result.labels[value] = key
            else:
                self.result.attributes[value] = key
        elif self.state == "TRANSITIONS":
            source, target, weight = self._feature(line, self.result.labels)
            self.result.transitions[(source, target)] = weight
        else:
            attribute, label, weight = self._feature(line, self.result.attributes)
            self.result.state_features[(attribute, label)] = weight

    def _feature(self, line: str, sources: dict) -> tuple[str, str, float]:
        """``(source, label, weight)`` of a feature line ``(type) source --> label: weight``."""
        kind, _, rest = line.partition(") ")
        pair, _, weight = rest.rpartition(": ")
        if not kind.startswith("(") or _ARROW not in pair:
            raise ValueError(f"Not a '{self.state}' line of a dump: {line!r}.")
        # Names may hold ' --> ': take the split whose two sides are declared.
        splits = []
        start = pair.find(_ARROW)
        while start >= 0:
            splits.append((pair[:start], pair[start + len(_ARROW) :]))
            start = pair.find(_ARROW, start + 1)
        known = [s for s in splits if s[0] in sources and s[1] in self.result.labels]
        if not known:
            raise ValueError(f"A '{self.state}' line naming undeclared names: {line!r}.")
        source, label = known[-1]
        try:
            value = float(weight)
        except ValueError:
            raise ValueError(f"Not a '{self.state}' line of a dump: {line!r}.") from None
        return source, label, value
