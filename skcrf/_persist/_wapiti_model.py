r"""Wapiti 1.5 model files read into a fitted state that labels as ``wapiti label`` does.

:func:`read_wapiti_model` turns a model that ``wapiti train`` wrote into a
:class:`~skcrf._model.FittedState` whose template is the model's own
patterns: a tagger made from it (``CRFTagger._from_fitted_state``) labels
raw column files as ``wapiti label`` does. Nothing here calls Wapiti: the
layout was read from its sources (``src/model.c``, ``src/reader.c``,
``src/quark.c``, ``src/tools.c``, ``src/decoder.c``).

The format
----------
Text, one item a line (``mdl_save``, ``rdr_save``, ``qrk_save``)::

    #mdl#TYPE#NACT          TYPE 0 maxent, 1 memm, 2 crf; NACT weights below
    #rdr#NPATS/NTOKS/AUTOUNI
    LEN:pattern,            NPATS netstrings: the patterns as Wapiti read them
    #qrk#NLBL
    LEN:label,              the labels, in id order
    #qrk#NOBS
    LEN:observation,        the observations (attribute names), in id order
    F=HEXFLOAT              NACT lines: weight F (C's %la), the others are 0

(an older header ``#mdl#NACT`` is type 0, an older ``#rdr#NPATS/NTOKS`` has
no AUTOUNI.) An observation's first character is its kind: ``u`` owns
``L`` weights (one per label), ``b`` ``L * L`` (label ``i`` then ``j`` at
``i * L + j``), ``*`` both, ``L`` first; the weights are laid out in
observation order (``mdl_sync``).

How ``wapiti label`` scores, and the fitted state
-------------------------------------------------
``tag_expsc`` (maxent and crf models) gives label ``y`` of token ``t`` the
sum of the weights ``y`` of the ``u`` and ``*`` observations its patterns
give that the model holds, and, from the second token on, the pair
(``i``, ``j``) into token ``t`` the sum of the weights ``i * L + j`` of
its ``b`` and ``*`` observations; a pattern given twice counts twice. No
start or end transitions. ``tag_viterbi`` decodes (ties to the lower
label, as skcrf's Viterbi); with ``-p`` it decodes each token's largest
posterior marginal instead (skcrf's ``decoding='posterior'``). In the state:

- ``model.attributes``: the ``u`` and ``*`` observations, in id order,
  each with its ``L`` weights (every one, zeros included);
- ``model.transition_*``: the plain transitions, the sum of the weights of
  the ``b`` and ``*`` patterns with no command (``b``: their observation is
  the pattern itself), every pair;
- ``model.conditioned``: when a pattern with a command gives ``b`` or
  ``*`` observations, every ``b`` and ``*`` observation as an
  input-conditioned transition attribute with its ``L * L`` weights;
- the template: the patterns, parsed as Wapiti's, in the state's ``extra``.

Not read: MEMM models (type 1: a per-token normalization skcrf does not
have), ``--me`` models (AUTOUNI: each line its own sequence) and models
trained without patterns (raw observations in the data); each is a
ValueError saying so.

Checks
------
Every header, count (against the file's size before anything of that size
is made), netstring (its length, ``,`` and newline), UTF-8 text, label and
observation (distinct, non-empty, of a known kind), pattern (Wapiti's
syntax, as :mod:`skcrf._template._wapiti` parses it) and weight line (an
index below the number of weights, given once, a finite number) is checked;
a failure is a :class:`ValueError` naming the file, the line and what is
wrong.
"""

import os
import re

import numpy as np

from .._template._wapiti import parse_wapiti
from ._files import read_regular_file
from ._weight_blocks import block_state

__all__ = ["read_wapiti_model"]

_MAX_FILE_SIZE = 1 << 40
_MDL = re.compile(rb"#mdl#(?:([0-9]+)#)?([0-9]+)\Z")
_RDR = re.compile(rb"#rdr#([0-9]+)/([0-9]+)(?:/(-?[0-9]+))?\Z")
_QRK = re.compile(rb"#qrk#([0-9]+)\Z")
_NETSTRING = re.compile(rb"([0-9]+):")
# C's %la: hexadecimal (what Wapiti writes) or decimal; no "nan", "inf", "1_0"
_WEIGHT = re.compile(rb"([0-9]{1,19})=([-+]?[0-9a-fA-FxX.pP+-]+)\Z")
_TYPES = {0: "maxent", 1: "memm", 2: "crf"}
_MIN_ITEM_BYTES = 4  # "0:,\n": the shortest netstring line


class _Lines:
    """The file's bytes, read line by line with the line number at hand."""

    def __init__(self, data):
        self.data = data
        self.pos = 0
        self.lineno = 0

    def error(self, message):
        return ValueError(f"line {self.lineno}: {message}")

    def line(self, what):
        if self.pos >= len(self.data):
            self.lineno += 1
            raise self.error(f"the file ends where {what} should be (truncated).")
        end = self.data.find(b"\n", self.pos)
        if end < 0:
            end = len(self.data)
        line = self.data[self.pos : end]
        self.pos = end + 1
        self.lineno += 1
        return line

    def header(self, pattern, what):
        line = self.line(what)
        match = pattern.match(line)
        if match is None:
            raise self.error(f"{line[:60]!r} is not {what}.")
        return match

    def count(self, text, what, item_bytes=_MIN_ITEM_BYTES):
        number = int(text)
        if number * item_bytes > len(self.data) - self.pos:
            raise self.error(
                f"{number} {what} cannot fit in the {len(self.data) - self.pos} bytes left "
                "(truncated or corrupted)."
            )
        return number

    def netstrings(self, n, what):
        """``n`` netstrings (``LEN:text,`` then a newline), decoded."""
        out = []
        for k in range(n):
            self.lineno += 1
            match = _NETSTRING.match(self.data, self.pos)
            if match is None or len(match.group(1)) > 10:
                raise self.error(f"{what} {k} is not a netstring 'LEN:text,'.")
            start = match.end()
            stop = start + int(match.group(1))
            if self.data[stop : stop + 2] != b",\n":
                raise self.error(
                    f"{what} {k}: its {stop - start} bytes are not followed by ',' and a "
                    "newline (truncated or corrupted)."
                )
            raw = self.data[start:stop]
            self.lineno += raw.count(b"\n")  # (Wapiti's strings hold none)
            out.append(_decode(raw, f"{what} {k}", self))
            self.pos = stop + 2
        return out


def _decode(raw, what, lines):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise lines.error(
            f"{what} is not UTF-8 ({exc.reason} at byte {exc.start}: {raw[:60]!r}); skcrf "
            "reads Wapiti models of UTF-8 data."
        ) from None


def read_wapiti_model(source):
    """Read a Wapiti 1.5 model file (``wapiti train``'s output).

    Parameters
    ----------
    source : str, os.PathLike or bytes
        The model file, or its content.

    Returns
    -------
    state : FittedState
        ``params`` empty, ``n_iter`` 0; ``state.model`` scores every
        labelling as ``wapiti label`` does (see the module's notes), its
        labels in the file's order; ``state.extra`` holds the template (the
        tagger made from the state has a ``TemplateFeaturizer`` of the
        model's patterns: raw tokens, tuples of a column file's columns,
        tag directly).

    Raises
    ------
    ValueError
        If the file is not a Wapiti model it can read (not one, truncated,
        corrupted, a MEMM or ``--me`` model, one without patterns), or not
        a regular file; the message names the file, the line and what is
        wrong.
    OSError
        If the file cannot be read.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "(bytes)"
    else:
        path = os.fsdecode(source)
        data, name = read_regular_file(path, "Wapiti model", _MAX_FILE_SIZE), repr(path)
    try:
        return _read(data)
    except ValueError as exc:
        raise ValueError(f"Cannot read Wapiti model {name}: {exc}") from None
    except (IndexError, KeyError, TypeError, OverflowError, RecursionError) as exc:
        # A safety net: the checks should leave nothing for it.
        raise ValueError(
            f"Cannot read Wapiti model {name}: corrupted or invalid file "
            f"({type(exc).__name__}: {exc})"
        ) from exc


def _read(data):
    lines = _Lines(data)
    if not data.startswith(b"#mdl#"):
        raise ValueError("not a Wapiti model (it does not start with '#mdl#').")
    match = lines.header(_MDL, "the model header '#mdl#TYPE#COUNT'")
    kind = int(match.group(1) or 0)
    if kind not in _TYPES:
        raise lines.error(f"unknown model type {kind} (0 maxent, 1 memm, 2 crf).")
    if kind == 1:
        raise lines.error("a MEMM model (type 1): skcrf reads maxent and crf models.")
    n_active = lines.count(match.group(2), "weights")
    match = lines.header(_RDR, "the reader header '#rdr#NPATS/NTOKS/AUTOUNI'")
    n_patterns = lines.count(match.group(1), "patterns")
    if match.group(3) is not None and int(match.group(3)) != 0:
        raise lines.error(
            "a model trained with --me (autouni: each line its own sequence); skcrf "
            "reads models of sequences."
        )
    if n_patterns == 0:
        raise lines.error(
            "a model trained without patterns (the data's columns are the "
            "observations); skcrf reads models with patterns."
        )
    patterns = lines.netstrings(n_patterns, "pattern")
    first_pattern = lines.lineno - n_patterns + 1
    n_labels = lines.count(lines.header(_QRK, "the labels header '#qrk#COUNT'").group(1), "labels")
    labels = lines.netstrings(n_labels, "label")
    n_obs = lines.count(
        lines.header(_QRK, "the observations header '#qrk#COUNT'").group(1), "observations"
    )
    observations = lines.netstrings(n_obs, "observation")
    first_obs = lines.lineno - n_obs + 1
    for items, what in ((labels, "label"), (observations, "observation")):
        if len(set(items)) != len(items):
            raise ValueError(f"a {what} appears twice (Wapiti would merge them).")
        if any(not item for item in items):
            raise ValueError(f"an empty {what}.")
    if n_labels == 0 or n_obs == 0:
        raise ValueError("the model has no labels or no observations (Wapiti cannot sync it).")
    kinds = np.array([obs[0] for obs in observations])
    bad = np.flatnonzero(~np.isin(kinds, ["u", "b", "*"]))
    if bad.size:
        raise ValueError(
            f"line {first_obs + bad[0]}: the observation {observations[bad[0]][:60]!r} starts "
            "with neither 'u', 'b' nor '*'."
        )
    unigram = kinds != "b"
    bigram = kinds != "u"
    sizes = unigram * n_labels + bigram * n_labels * n_labels
    offsets = np.cumsum(sizes) - sizes  # mdl_sync: in observation order, u before b
    n_weights = int(sizes.sum())
    weights = _weights(lines, n_active, n_weights)
    plan, constant_bigrams = _plan(patterns, first_pattern)
    return _state(labels, observations, unigram, bigram, offsets, weights, plan, constant_bigrams)


def _weights(lines, n_active, n_weights):
    weights = np.zeros(n_weights)
    seen = np.zeros(n_weights, dtype=bool)
    for _ in range(n_active):
        line = lines.line("a weight 'F=VALUE'")
        match = _WEIGHT.match(line)
        if match is None:
            raise lines.error(f"{line[:60]!r} is not a weight 'F=VALUE'.")
        index = int(match.group(1))
        if index >= n_weights:
            raise lines.error(f"weight {index} is beyond the model's {n_weights} weights.")
        if seen[index]:
            raise lines.error(f"weight {index} is given twice.")
        text = match.group(2).decode("ascii")
        try:
            value = float.fromhex(text) if "x" in text.lower() else float(text)
        except (ValueError, OverflowError):
            value = float("nan")
        if not np.isfinite(value):
            raise lines.error(f"weight {index} is {text[:40]!r}, not a finite number.")
        weights[index] = value
        seen[index] = True
    if lines.pos < len(lines.data):
        lines.lineno += 1
        raise lines.error(
            f"{len(lines.data) - lines.pos} unexpected bytes after the {n_active} weights."
        )
    return weights


def _plan(patterns, first_line):
    """The plan of the model's patterns, and the observations of the constant b / * ones."""
    for k, pattern in enumerate(patterns):
        # Wapiti keeps a pattern file's lines with their comment and trailing
        # space cut and their type lower-cased (rdr_loadpat)
        if not pattern or pattern != pattern.rstrip() or "\n" in pattern or "#" in pattern:
            raise ValueError(
                f"line {first_line + k}: {pattern[:60]!r} is not a pattern Wapiti writes."
            )
        if pattern[0] not in ("u", "b", "*"):
            raise ValueError(
                f"line {first_line + k}: the pattern {pattern[:60]!r} starts with neither "
                "'u', 'b' nor '*'."
            )
    text = "".join(pattern + "\n" for pattern in patterns)
    try:
        plan = parse_wapiti(text, source="the model's patterns")
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    # with no command (no '%'), a pattern's observation is the pattern itself
    constant_bigrams = [p for p in patterns if p[0] in ("b", "*") and "%" not in p]
    return plan, constant_bigrams


def _state(labels, observations, unigram, bigram, offsets, weights, plan, constant_bigrams):
    n_labels = len(labels)
    state_rows = np.flatnonzero(unigram)
    bigram_rows = np.flatnonzero(bigram)
    # a * observation's bigram weights follow its L unigram ones
    bigram_first = offsets[bigram_rows] + np.where(unigram[bigram_rows], n_labels, 0)
    return block_state(
        labels,
        plan,
        weights,
        ([observations[k] for k in state_rows.tolist()], offsets[state_rows]),
        ([observations[k] for k in bigram_rows.tolist()], bigram_first),
        constant_bigrams,
    )
