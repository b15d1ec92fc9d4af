r"""CRF++ 0.58 model files (binary, and the text of ``crf_learn -t``) read into a fitted state.

:func:`read_crfpp_model` turns a model that CRF++'s ``crf_learn`` wrote into
a :class:`~skcrf._model.FittedState` whose template is the model's own: a
tagger made from it (``CRFTagger._from_fitted_state``) tags raw column
files as ``crf_test`` does. Nothing here calls CRF++: the layout below was
read from its sources (``feature_index.cpp``, ``darts.h``, ``tagger.cpp``,
``feature.cpp``).

The binary format
-----------------
Little-endian, as ``crf_learn`` writes it on x86 (``EncoderFeatureIndex::save``):

- ``version`` (uint32; CRF++ accepts ``version // 100 == 1``), ``type``
  (int32, unused), ``cost_factor`` (double; always 1.0: see below),
  ``maxid`` (uint32, the number of weights), ``xsize`` (uint32, the input
  columns the templates read), ``dsize`` (uint32, the trie's bytes);
- the labels: a uint32 size, then that many bytes, each label
  NUL-terminated (CRF++ sorts them: byte order);
- the templates: a uint32 size, then the unigram lines then the bigram
  lines, each NUL-terminated, NUL padding so that the labels and templates
  together take a multiple of 4 bytes;
- the feature strings: a double-array trie (Darts 0.31) of ``dsize``
  bytes, units of (``base`` int32, ``check`` uint32). From a node whose
  base is ``b`` the byte ``c`` leads to unit ``b + c + 1`` if its check is
  ``b``; the key ends at a node whose unit ``b`` has check ``b`` and a
  negative base ``-id - 1``. The root is unit 0. Darts leaves 257 units
  after the last base (so ``b + 256`` is inside the trie) and uses each
  base once.
- the weights: ``maxid`` floats (float32).

A feature string starting with ``U`` (a unigram template's) owns the
``L`` weights ``id .. id + L - 1``, one per label; one starting with ``B``
(a bigram template's) owns ``L * L``, ``id + i * L + j`` for label ``i``
followed by label ``j``.

The text format (``crf_learn -t`` writes ``MODEL.txt`` beside ``MODEL``)
-------------------------------------------------------------------------
Sections separated by an empty line: the header (``version: 100``,
``cost-factor: 1``, ``maxid: N``, ``xsize: K``), the labels one a line,
the template lines, the feature strings (``id string``, one a line), then
``maxid`` weights one a line (16 decimals). The weights are rounded to
float32 here, as ``crf_learn -C`` does when it converts the text into the
binary model that ``crf_test`` reads (the text model is not read by
``crf_test`` itself). A feature string is the rest of its line after the
id and one space (``crf_learn -C`` cuts it at the next space; templates
with a space in their text need this).

How crf_test scores, and the fitted state
------------------------------------------
``crf_test`` (``FeatureIndex::calcCost``) gives label ``y`` of a token the
sum of the weights ``id + y`` of the unigram strings its unigram templates
give and that the trie holds, and the pair (``i`` at ``t - 1``, ``j`` at
``t``) the sum of the weights ``id + i * L + j`` of the bigram strings of
token ``t``; each sum times the cost factor of ``crf_test -c`` (default
1.0: the factor stored in the file, always 1.0, is not used); a string
that is not in the trie adds nothing. No start or end transitions.
Viterbi and forward-backward then run on those scores, which is what
skcrf's decoders do with:

- ``model.attributes``: the unigram strings, in id order, each with the
  ``L`` state features of its weights (all of them, zeros included);
- ``model.transition_*``: the sum of the weights of the strings of the
  bigram lines with no ``%x`` (``B``: the plain transitions), every pair;
- ``model.conditioned``: when a bigram line has a ``%x``, every bigram
  string as an input-conditioned transition attribute (skcrf's
  ``'__transition__'``) with ``L * L`` weights;
- the template: the model's lines parsed as a CRF++ template, kept in the
  state's ``extra`` as ``CRFTagger.save`` keeps a featurizer's (a line
  ending in ``\r``, from a CRLF template, keeps it in its strings as
  CRF++ does).

The weights are CRF++'s float32 values times the cost factor, summed in
double precision (CRF++ sums in float32: scores differ by float32
rounding, about 1e-7 of their size).

Checks
------
Everything is checked before it is used, and any failure is a
:class:`ValueError` naming the file and what is wrong (a line number in a
text model): sizes against the file's, the labels and templates
NUL-terminated, UTF-8 and distinct, every template line a valid CRF++
template reading columns below ``xsize`` (the last column it reads being
``xsize - 1``, as ``crf_learn`` writes it: then skcrf's featurizer refuses
a token that ``crf_test`` refuses, one with fewer than ``xsize`` columns;
a template with no ``%x`` checks no column), every trie unit in use reachable
from the root once and leading only where a byte can lead, every feature
string starting with ``U`` or ``B``, their weights inside ``maxid`` and not
shared, every weight finite.
"""

import os
import re
import struct

import numpy as np

from .._template._crfpp import parse_crfpp
from .._template._plan import Plan, Ref, check_plan
from ._files import read_regular_file
from ._weight_blocks import block_state

__all__ = ["read_crfpp_model"]

_FIXED = struct.Struct("<IidIIII")  # version, type, cost_factor, maxid, xsize, dsize, y size
_UNIT = np.dtype([("base", "<i4"), ("check", "<u4")])
_MAX_FILE_SIZE = 1 << 32  # every size in the file is a uint32
_TEXT_START = b"version:"


class _Parts:
    """What a model file holds, read and checked for itself."""

    def __init__(self, version, cost_factor, xsize, labels, templates, keys, ids, weights):
        self.version = version
        self.cost_factor = cost_factor
        self.xsize = xsize
        self.labels = labels  # list of str
        self.templates = templates  # list of str, the lines (unigram, then bigram)
        self.keys = keys  # list of str, the feature strings
        self.ids = ids  # int64 array: each string's first weight
        self.weights = weights  # float64 array (float32 values), maxid of them


def read_crfpp_model(source, *, cost_factor=1.0):
    """Read a CRF++ model file (binary, or the text of ``crf_learn -t``).

    Parameters
    ----------
    source : str, os.PathLike or bytes
        The model file, or its content.
    cost_factor : float, default=1.0
        ``crf_test -c``'s cost factor: every weight is multiplied by it.

    Returns
    -------
    state : FittedState
        ``params`` empty, ``n_iter`` 0; ``state.model`` scores every
        labelling as ``crf_test`` does (see the module's notes), its labels
        in the file's order; ``state.extra`` holds the template (the tagger
        made from the state has a ``TemplateFeaturizer`` of the model's
        template: raw tokens, tuples of a column file's columns, tag
        directly).

    Raises
    ------
    ValueError
        If the file is not a CRF++ model it can read (not one, truncated,
        corrupted), or not a regular file; the message names the file and
        what is wrong.
    OSError
        If the file cannot be read.
    """
    factor = float(cost_factor)
    if not (np.isfinite(factor) and factor > 0):
        raise ValueError(f"cost_factor must be a positive number, got {cost_factor!r}")
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "(bytes)"
    else:
        path = os.fsdecode(source)
        data, name = read_regular_file(path, "CRF++ model", _MAX_FILE_SIZE), repr(path)
    text = data.startswith(_TEXT_START)
    try:
        parts = _read_text(data) if text else _read_binary(data)
        return _fitted_state(parts, factor)
    except ValueError as exc:
        raise ValueError(f"Cannot read CRF++ model {name}: {exc}") from None
    except (IndexError, KeyError, TypeError, OverflowError, struct.error, RecursionError) as exc:
        # A safety net: the checks should leave nothing for it.
        raise ValueError(
            f"Cannot read CRF++ model {name}: corrupted or invalid file "
            f"({type(exc).__name__}: {exc})"
        ) from exc


# -- binary ------------------------------------------------------------------


def _read_binary(data):
    n_bytes = len(data)
    if n_bytes < _FIXED.size:
        raise ValueError(
            f"not a CRF++ model: {n_bytes} bytes, fewer than the {_FIXED.size}-byte header."
        )
    version, _, stored_factor, maxid, xsize, dsize, labels_size = _FIXED.unpack_from(data, 0)
    _check_version(version)
    pos = _FIXED.size
    labels_bytes, pos = _take(data, pos, labels_size, "the labels")
    if pos + 4 > n_bytes:
        raise ValueError(f"truncated after the labels, at byte {pos}.")
    (templates_size,) = struct.unpack_from("<I", data, pos)
    templates_bytes, pos = _take(data, pos + 4, templates_size, "the templates")
    trie_offset = pos
    _, pos = _take(data, pos, dsize, "the feature strings' trie")
    if n_bytes - pos != 4 * maxid:
        raise ValueError(
            f"the file has {n_bytes - pos} bytes after the trie; its {maxid} weights "
            f"(maxid) take {4 * maxid} (truncated or corrupted)."
        )
    labels = _nul_strings(labels_bytes, "label", allow_padding=False)
    templates = _nul_strings(templates_bytes, "template line", allow_padding=True)
    keys, ids = _trie_keys(data, trie_offset, dsize, _max_key_bytes(n_bytes))
    weights = np.frombuffer(data, dtype="<f4", count=maxid, offset=pos).astype(np.float64)
    return _Parts(version, stored_factor, xsize, labels, templates, keys, ids, weights)


def _max_key_bytes(n_bytes):
    """The most bytes the feature strings of a file of ``n_bytes`` may take.

    A string costs at least 12 bytes of the file (its trie unit and a
    weight) and shares its prefix with others: a real model's strings take
    a few times the file's size at most; a damaged trie could describe far
    more (long chains of prefixes), which is refused before it is built.
    """
    return max(1 << 20, 64 * n_bytes)


def _check_version(version):
    if version // 100 != 1:
        raise ValueError(
            f"model version {version}; CRF++ 0.5x writes version 100 (is this a CRF++ model?)."
        )


def _take(data, pos, size, what):
    end = pos + size
    if end > len(data):
        raise ValueError(
            f"{what} ({size} bytes at byte {pos}) run past the end of the file "
            f"({len(data)} bytes; truncated or corrupted)."
        )
    return data[pos:end], end


def _nul_strings(block, what, *, allow_padding):
    """The NUL-terminated strings of ``block``, decoded (the templates' padding skipped)."""
    if not block:
        return []
    if block[-1:] != b"\0":
        raise ValueError(f"the last {what} is not NUL-terminated.")
    items = block[:-1].split(b"\0")
    if allow_padding:
        items = [item for item in items if item]
    out = []
    for k, item in enumerate(items):
        if not item:
            raise ValueError(f"{what} {k} is empty.")
        out.append(_decode(item, f"{what} {k}"))
    return out


def _decode(raw, what):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{what} is not UTF-8 ({exc.reason} at byte {exc.start}: {raw[:60]!r}); skcrf "
            "reads CRF++ models of UTF-8 data."
        ) from None


def _trie_keys(data, offset, size, max_bytes):
    """The strings of the double-array trie at ``data[offset:offset + size]`` and their ids.

    Walked breadth-first from the root, a level at a time (vectorized): the
    units whose check is a node's base are its children (the unit at the
    base itself ends a key). Every unit in use must be reached, once.
    """
    if size % _UNIT.itemsize:
        raise ValueError(f"the trie's size {size} is not a multiple of {_UNIT.itemsize} bytes.")
    n_units = size // _UNIT.itemsize
    if n_units == 0:
        raise ValueError("the model has no feature strings (an empty trie).")
    units = np.frombuffer(data, dtype=_UNIT, count=n_units, offset=offset)
    base = units["base"].astype(np.int64)
    check = units["check"].astype(np.int64)
    in_use = np.flatnonzero(check)
    by_parent = in_use[np.argsort(check[in_use], kind="stable")]
    parent_bases = check[by_parent]
    parent = np.full(n_units, -1, dtype=np.int64)  # the unit of each node's parent
    byte = np.zeros(n_units, dtype=np.uint8)
    depth = np.zeros(n_units, dtype=np.int64)
    reached = np.zeros(n_units, dtype=bool)
    reached[0] = True
    if base[0] <= 0:
        raise ValueError(f"the trie's root has base {base[0]}; a positive base expected.")
    ends, values = [], []
    frontier = np.array([0], dtype=np.int64)
    while frontier.size:
        bases = base[frontier]
        # Darts leaves room after every base for any byte: a lookup of an
        # unknown string never reads past the trie
        if bases.max() > n_units - 258:
            raise ValueError(
                f"a trie node has base {bases.max()}, too close to the end of the "
                f"{n_units} units (corrupted)."
            )
        lo = np.searchsorted(parent_bases, bases, "left")
        hi = np.searchsorted(parent_bases, bases, "right")
        counts = hi - lo
        if not counts.any():
            break
        rows = np.repeat(np.arange(len(frontier)), counts)  # each child's parent
        first = np.cumsum(counts) - counts  # where each parent's children start in rows
        children = by_parent[np.repeat(lo - first, counts) + np.arange(len(rows))]
        owner = frontier[rows]
        code = children - bases[rows]  # 0: the key ends; c + 1: the byte c
        bad = np.flatnonzero((code < 0) | (code > 256) | (code == 1))
        if bad.size:
            k = int(bad[0])
            raise ValueError(
                f"trie unit {children[k]} hangs from the node of base {bases[rows[k]]} where "
                "no key byte leads (corrupted)."
            )
        if reached[children].any() or np.unique(children).size != children.size:
            raise ValueError("a trie unit is reached twice (corrupted).")
        reached[children] = True
        end = code == 0
        if (base[children[end]] >= 0).any():
            raise ValueError("a key's end in the trie holds no feature id (corrupted).")
        ends.append(owner[end])
        values.append(-base[children[end]] - 1)
        inner = children[~end]
        if (base[inner] <= 0).any():
            raise ValueError("an inner node of the trie has no positive base (corrupted).")
        parent[inner] = owner[~end]
        byte[inner] = (code[~end] - 1).astype(np.uint8)
        depth[inner] = depth[owner[~end]] + 1
        frontier = inner
    if not reached[in_use].all():
        k = int(in_use[np.flatnonzero(~reached[in_use])[0]])
        raise ValueError(f"trie unit {k} is in use but no key reaches it (corrupted).")
    key_nodes = np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)
    if key_nodes.size == 0:
        raise ValueError("the model has no feature strings (an empty trie).")
    return _key_strings(key_nodes, parent, byte, depth, max_bytes), np.concatenate(values)


def _key_strings(nodes, parent, byte, depth, max_bytes):
    """The key of each node: the bytes on its path from the root, decoded.

    Written into one buffer from their last byte back, the longest keys
    first (step ``s`` writes byte ``length - 1 - s`` of the keys longer than
    ``s``): the work is the keys' total length.
    """
    order = np.argsort(-depth[nodes], kind="stable")
    nodes = nodes[order]
    lengths = depth[nodes]
    if lengths[-1] == 0:
        raise ValueError("the trie holds an empty feature string.")
    total = int(lengths.sum())
    if total > max_bytes:
        raise ValueError(
            f"the trie's feature strings take {total} bytes, implausibly many for a file "
            "of this size (corrupted)."
        )
    ends = np.cumsum(lengths)
    buffer = np.empty(total, dtype=np.uint8)
    current = nodes.copy()
    # lengths decrease: the keys longer than ``step`` come first
    n_longer = np.searchsorted(-lengths, -np.arange(int(lengths[0])), "left")
    for step, count in enumerate(n_longer.tolist()):
        buffer[ends[:count] - 1 - step] = byte[current[:count]]
        current[:count] = parent[current[:count]]
    raw = buffer.tobytes()
    starts = (ends - lengths).tolist()
    keys = [None] * len(nodes)
    for k, start, stop in zip(order.tolist(), starts, ends.tolist()):
        keys[k] = _decode(raw[start:stop], f"feature string {k}")
    return keys


# -- text --------------------------------------------------------------------

_HEADER_FIELDS = ("version", "cost-factor", "maxid", "xsize")
_DIGITS = re.compile(rb"[0-9]{1,10}\Z")
_DECIMAL = re.compile(rb"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _read_text(data):
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the newline ending the last line
    sections = []
    start = 0
    for _ in range(4):
        try:
            stop = lines.index(b"", start)
        except ValueError:
            raise ValueError(
                f"truncated: {len(sections) + 1} of the 5 sections separated by empty "
                "lines (header, labels, templates, feature strings, weights) found."
            ) from None
        sections.append((start, lines[start:stop]))
        start = stop + 1
    sections.append((start, lines[start:]))
    (_, header), (first_label, labels), (first_template, templates) = sections[:3]
    (first_key, key_lines), (first_weight, weight_lines) = sections[3:]
    fields = _text_header(header)
    _check_version(fields["version"])
    maxid, xsize = fields["maxid"], fields["xsize"]
    labels = [_line_text(line, first_label + k, "a label") for k, line in enumerate(labels)]
    templates = [
        _line_text(line, first_template + k, "a template line") for k, line in enumerate(templates)
    ]
    keys, ids = [], []
    for k, line in enumerate(key_lines):
        number, sep, key = line.partition(b" ")
        if not sep or not _DIGITS.match(number) or not key:
            raise ValueError(
                f"line {first_key + k + 1}: {line[:60]!r} is not 'id feature-string'."
            )
        ids.append(int(number))
        keys.append(_line_text(key, first_key + k, "a feature string"))
    if not keys:
        raise ValueError("the model has no feature strings.")
    weights = _text_weights(weight_lines, first_weight, maxid)
    return _Parts(
        fields["version"],
        fields["cost-factor"],
        xsize,
        labels,
        templates,
        keys,
        np.array(ids, dtype=np.int64),
        weights,
    )


def _text_header(lines):
    fields = {}
    for k, line in enumerate(lines):
        name, _, value = line.partition(b": ")
        name = name.decode("ascii", "replace")
        if name not in _HEADER_FIELDS or name in fields:
            raise ValueError(f"line {k + 1}: {line[:60]!r} is not a header field of CRF++'s.")
        try:
            number = float(value) if name == "cost-factor" else int(value)
        except ValueError:
            raise ValueError(f"line {k + 1}: {line[:60]!r} has no valid number.") from None
        if name != "cost-factor" and not (_DIGITS.match(value) and number < 1 << 32):
            raise ValueError(f"line {k + 1}: {line[:60]!r} is not a uint32.")
        fields[name] = number
    missing = [name for name in _HEADER_FIELDS if name not in fields]
    if missing:
        raise ValueError(f"the header has no {', '.join(missing)}.")
    return fields


def _line_text(line, index, what):
    return _decode(line, f"line {index + 1}, {what},")


def _text_weights(lines, first, maxid):
    if len(lines) != maxid:
        raise ValueError(
            f"{len(lines)} weights after the feature strings; maxid is {maxid} (truncated "
            "or corrupted)."
        )
    # decimal numbers as C's atof reads them (not Python's "1_0", "nan", " 1"...)
    weights = None
    if not b"\n".join(lines).translate(None, b"0123456789.-+eE\n"):
        try:
            weights = np.array(lines, dtype=np.bytes_).astype(np.float64)
        except ValueError:  # ("1-2", "e"...: found below)
            pass
    if weights is None:
        weights = np.array(
            [float(line) if _DECIMAL.fullmatch(line) else np.nan for line in lines],
            dtype=np.float64,
        )
    # crf_learn -C stores the text's weights as float32, the binary crf_test reads
    with np.errstate(over="ignore"):
        weights = weights.astype(np.float32).astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(weights))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"line {first + k + 1}: {lines[k][:60]!r} is not a finite number (as a float32)."
        )
    return weights


# -- the fitted state ---------------------------------------------------------


def _template_plan(lines, xsize):
    """The plan of the model's template lines; a CR ending a line stays in its strings.

    Returns the plan and the names of the constant bigram lines (CRF++'s
    strings for the plain transitions).
    """
    features, constant_bigrams = [], []
    for k, line in enumerate(lines):
        body, cr = (line[:-1], "\r") if line.endswith("\r") else (line, "")
        if line[0] not in "UB":
            raise ValueError(f"template line {k} {line[:60]!r} starts with neither U nor B.")
        try:
            plan = parse_crfpp(body + "\n", source=f"the model's template line {k}")
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        if not plan.features:  # a bigram line with no %x: the plain transitions
            constant_bigrams.append(line)
            continue
        (feature,) = plan.features
        if cr:
            key = feature.key
            key = (*key[:-1], key[-1] + cr) if isinstance(key[-1], str) else (*key, cr)
            feature = feature._replace(key=key, source=line)
        for part in feature.key:
            if isinstance(part, Ref) and part.column >= xsize:
                raise ValueError(
                    f"template line {k} {line[:60]!r} reads column {part.column}; the model's "
                    f"xsize is {xsize} (crf_test refuses it)."
                )
        features.append(feature)
    columns = [part.column for f in features for part in f.key if isinstance(part, Ref)]
    # crf_test refuses a line of fewer than xsize columns; skcrf's featurizer
    # refuses a token without a column its template reads: the same rule
    # when, as crf_learn writes it, xsize is one more than the last column read
    if columns and xsize != max(columns) + 1:
        raise ValueError(
            f"xsize is {xsize}, but the template reads columns up to {max(columns)} "
            f"(crf_learn writes {max(columns) + 1})."
        )
    plan = Plan(tuple(features), transitions=bool(constant_bigrams), syntax="crfpp")
    return check_plan(plan), constant_bigrams


def _fitted_state(parts, factor):
    labels, keys, ids, weights = parts.labels, parts.keys, parts.ids, parts.weights
    n_labels = len(labels)
    if n_labels == 0:
        raise ValueError("the model has no labels.")
    if len(set(labels)) != n_labels:
        raise ValueError("a label appears twice.")
    if not parts.templates:
        raise ValueError("the model has no template lines.")
    if len(set(keys)) != len(keys):
        raise ValueError("a feature string appears twice.")
    plan, constant_bigrams = _template_plan(parts.templates, parts.xsize)
    kinds = np.array([key[0] for key in keys])
    bad = np.flatnonzero((kinds != "U") & (kinds != "B"))
    if bad.size:
        raise ValueError(f"the feature string {keys[bad[0]][:60]!r} starts with neither U nor B.")
    unigram = kinds == "U"
    sizes = np.where(unigram, n_labels, n_labels * n_labels)
    order = np.argsort(ids, kind="stable")
    starts, stops = ids[order], ids[order] + sizes[order]
    wrong = np.append(stops[:-1] > starts[1:], stops[-1] > len(weights))
    if wrong.any():
        k = int(order[np.flatnonzero(wrong)[0]])
        raise ValueError(
            f"the feature string {keys[k][:60]!r} (id {ids[k]}) has weights beyond the "
            f"{len(weights)} of the model or shared with another string."
        )
    bad = np.flatnonzero(~np.isfinite(weights))
    if bad.size:
        raise ValueError(f"weight {bad[0]} is not finite ({weights[bad[0]]!r}).")
    keys_by_id = [keys[k] for k in order.tolist()]
    unigram_by_id = unigram[order].tolist()
    unigrams = [key for key, u in zip(keys_by_id, unigram_by_id) if u]
    bigrams = [key for key, u in zip(keys_by_id, unigram_by_id) if not u]
    return block_state(
        labels,
        plan,
        weights * factor,
        (unigrams, starts[unigram[order]]),
        (bigrams, starts[~unigram[order]]),
        constant_bigrams,
    )
