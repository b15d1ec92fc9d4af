"""Saving and loading fitted CRF models without pickle; reading other toolkits' data files.

The core is two functions over an estimator's *fitted state*, the plain
object ``CRFTagger._get_fitted_state()`` returns (its parameters
``params``, the model arrays ``model``, ``n_iter``, ``status``,
``training_log`` and ``extra``): :func:`save_state` writes one and
:func:`load_state` reads one back.
:func:`save_model` and :func:`load_model` are conveniences for estimators:
``save_model(estimator, path)`` is ``save_state(estimator._get_fitted_state(),
path)`` and ``load_model(path, cls)`` is
``cls._from_fitted_state(load_state(path))``; ``load_model`` without ``cls``
builds a :class:`~skcrf.CRFTagger`. The format's implementation knows no
estimator (it duck-types one); this public module adds the default class.

A model file is one numpy ``.npz`` archive (a zip file; formats 6 and 5 written
as described below, formats 3 and 4 with :func:`numpy.savez`, format 2 with
:func:`numpy.savez_compressed`), which ``numpy.load(path,
allow_pickle=False)`` opens too: loading never unpickles and never executes
anything from the file, so a model file from an untrusted source can at
worst be refused with a :class:`ValueError`.

File layout (format version 6, the default)
-------------------------------------------
What :func:`save_state` (``save_model``, ``CRFTagger.save``) writes unless
asked otherwise: format 5 (below) with the attribute names in a packed
table, about 12 bytes per name beside its UTF-8 bytes where format 5's CQDB
chunk takes about 30, and in a float32 file the state offsets and labels
in the narrowest unsigned type. The archive holds exactly twelve arrays, in
this order: ``metadata``, ``attribute_text``, ``attribute_starts``,
``attribute_table``, then format 5's from ``state_ptr`` on. The JSON
document has format 5's keys. With ``n = n_attributes``:

``attribute_text`` : uint8
    The names' UTF-8 bytes, one after another, in attribute-id order (any
    str encodable in UTF-8: NUL included).
``attribute_starts`` : uint32 (uint64 when the text reaches 4 GiB), shape (n + 1,)
    Name ``k`` is ``attribute_text[starts[k]:starts[k + 1]]``: rising from 0
    to the text's length.
``attribute_table`` : uint32 or uint64, shape (n + n // 2 + 1,)
    Slots of uint32, or of uint64 when ``b = max(1, n.bit_length())``
    exceeds 24. Open addressing with linear probing (wrapping at the end). A slot is 0
    (empty) or ``(tag << b) | (k + 1)`` for name ``k``: each id exactly
    once. A name's 64-bit hash ``h`` (fixed by this format: with ``m = 2**64``,
    ``h = 0x4CF5AD432745937F ^ (len * 0xC2B2AE3D27D4EB4F % m)``, then for
    each 8-byte little-endian word ``w`` of the name, the last zero-padded:
    ``h ^= w * 0x87C37B91114253D5 % m``, ``h`` rotated left by 27 bits,
    ``h = (h * 0x9E3779B97F4A7C15 + 0x52DCE729) % m``; finally ``h ^= h >>
    32``, ``h = h * 0xD6E8FEB86659FD93 % m``, ``h ^= h >> 29``)
    gives its first slot ``((h >> 32) * size) >> 32`` and its ``tag``, the
    low ``32 - b`` (``64 - b``) bits of ``h``. A lookup compares names only
    where the tags agree and stops at an empty slot.
``state_ptr``, ``state_labels``
    As in format 5 (int64, int32) in a float64 file; in a float32 file in
    the narrowest of uint8, uint16 and uint32 that holds their values
    (loading converts them, as it converts the weights).

The name table is used where it lies (``mmap=True``: shared by the
processes that map the file). Its arrays are checked at open (sizes, rising
offsets, every id in the table once: O(n), no name read); the file's CRC-32
vouches for the rest (a table whose slots were moved but whose checksum
matches makes lookups answer "absent", never another name's id), and
:func:`load_state` (the names listed) checks that the names are valid UTF-8
and distinct.

File layout (format version 5)
------------------------------
Written when asked (``format_version=5``): only what prediction needs, laid
out to be used where it lies.

- **Only the features with a nonzero weight** (after conversion to the
  stored dtype), and only the attributes that keep one (in attribute-id
  order, renumbered); every label and every transition attribute stays.
  This is what CRFsuite's trainer writes (with ``c1 > 0`` most features
  weigh 0), and the model predicts exactly what the saved one predicts. A
  warm start (``warm_start=True``) from a loaded model starts from the
  kept features only: save with ``format_version=3`` (4 for a model with
  input-conditioned transitions) to keep every feature.
- **Arrays uncompressed and 64-byte aligned**: the archive is a zip file
  whose members are stored (method 0), each preceded by a local header
  whose extra field (id ``0xD935``, zipalign's) pads it so that the
  member's data start at a multiple of 64 bytes from the start of the
  file; each member is a ``.npy`` (version 1.0) file whose header numpy
  pads to a multiple of 64 bytes, so every array's data start on a 64-byte
  boundary. The members are written in the order below, then the zip
  directory and the end record (no comment, no zip64: a model file is
  below 4 GiB). The first member, ``metadata.npy``, carrying the padding
  field is how a reader tells formats 5 and 6 from the older formats before
  it reads anything else.

The archive holds exactly ten arrays, in this order: ``metadata``,
``attributes``, ``state_ptr``, ``state_labels``, ``state_weights``,
``transition_index``, ``transition_weights``, ``conditioned_ptr``,
``conditioned_pairs``, ``conditioned_weights``: as in formats 3 and 4
(below), except that

- the three weight arrays are float64, or all three float32 (the JSON key
  ``weights_dtype``, ``"float64"`` or ``"float32"``); float32 weights are
  converted to float64 when loaded (the kernels compute in float64);
- a model without input-conditioned transitions has
  ``conditioned_attributes`` null in the JSON document,
  ``conditioned_ptr`` = ``[0]`` and the other two conditioned arrays
  empty.

The JSON document has the keys of format 4 and ``weights_dtype``.

float32 weights (``dtype="float32"``) halve the weights' share of the
file. Each weight is rounded to the nearest float32 (relative change at most
2**-24, about 6e-8), so a sequence's scores move by about that much times
their size: the labels are the same except where two labellings' scores tie
within that (the tests check equal labels on the Treebank tasks), and
marginals move by about 1e-7 (the tests check within 1e-6). Weights beyond
float32's range cannot be saved so (a ValueError).

Mapped files
~~~~~~~~~~~~
``load_state(path, mmap=True)`` (``CRFTagger.load(path, mmap=True)``) maps
a format 5 or 6 file read-only (:class:`mmap.mmap`) and uses the arrays where
they lie: nothing is copied (except what a float32 file holds in other
types than the kernels': its weights, offsets and labels), and
processes that map one file share its pages in the page cache (each
holds only what it builds: the transition matrix, the names it has looked
up, the batch layout of ``predict``). The file is checked whole before it
is used, as without ``mmap``: its size against every member (a file
truncated before it is opened is a ValueError), each member's CRC-32 (read
from the mapping: the pages are read once), then the arrays' contents.
Replacing the file by an atomic rename (as :func:`save_state` writes)
while it is mapped is safe: the mapping keeps the old file. What remains:
truncating or rewriting the mapped file *in place* (``open(path, "wb")``,
``truncate``) while it is mapped changes what the model reads, and a read
past the new end raises SIGBUS, which no check at open can prevent; write
model files atomically (a new file renamed over the old one). On Windows a
mapped file cannot be replaced or deleted until every model mapping it is
gone (the rename fails: an OSError). Files of formats 1 to 4 are read into
memory, as without ``mmap``.

File layout (format version 3)
------------------------------
With ``n_attributes`` attributes, ``L`` labels, ``n_states`` state features
and ``n_transitions`` transition features (weights are one flat vector,
state features then transition features), the archive holds exactly seven
arrays, stored (not compressed), in this order:

``metadata`` : uint8, shape (n_bytes,)
    One UTF-8 (in fact ASCII) JSON document, described below.
``attributes`` : uint8, shape (n_bytes,)
    The attribute names in attribute-id order, as one CQDB chunk: exactly
    the string database that holds the attributes of a CRFsuite model file
    (ids ``0 .. n_attributes - 1``, each name UTF-8 with its NUL, lookup3
    hash tables: CRFsuite's CQDB format), its size the array's. An
    estimator's ``load`` looks names up in its hash tables where they lie
    instead of decoding every one: the chunk's
    structure is checked on loading, its tables and records (every name
    found by its hash) by the first lookup, and the whole chunk (valid
    UTF-8, distinct names) when the names are first listed;
    :func:`load_state` lists them.
``state_ptr`` : int64, shape (n_attributes + 1,)
    The state features of attribute ``a`` are ``state_ptr[a]:state_ptr[a +
    1]``: non-decreasing from 0 to ``n_states``.
``state_labels`` : int32, shape (n_states,)
    The label (an index into ``labels``) of each state feature: in
    ``[0, L)``, strictly increasing within an attribute.
``state_weights`` : float64, shape (n_states,)
    The weight of each state feature; finite.
``transition_index`` : int64, shape (n_transitions,)
    The transition features as flat indices ``i * L + j`` (label ``i``
    followed by label ``j``): strictly increasing, in ``[0, L * L)``.
``transition_weights`` : float64, shape (n_transitions,)
    The weight of each transition feature; finite.

Written when asked (``format_version=3``; earlier skcrf versions wrote it by
default). Every feature of the model is stored, zero weights included (a
warm start needs to know which features exist); weights are stored
bit-exactly (negative zeros too). Nothing is compressed, so that loading
reads each array once, as it lies.

The JSON document is an object with exactly these keys:

``format``
    ``"skcrf-model"``.
``format_version``
    The integer format version, 3 (:data:`FORMAT_VERSION` is the newest
    this skcrf reads, 5).
``skcrf_version``
    The skcrf version that wrote the file (informational only).
``estimator``
    The class that was saved, ``"module.QualName"``, or null (informational
    only).
``params``
    ``{name: value}``: the estimator's ``get_params(deep=False)``, each value
    in the tagged encoding below. Names are Python identifiers that do not
    start with ``_``.
``labels``
    The labels (``classes``) in order, each in the tagged encoding; at least
    one, all distinct and hashable.
``n_attributes``
    The number of attribute names, an integer >= 0.
``value_separator``
    The non-empty string that joins a key and its string value in attribute
    names (``":"``; ``"="`` in models read from format 1).
``n_iter``
    Optimizer iterations run, an integer >= 0.
``status``
    How training stopped, or null: an :class:`~skcrf.LBFGSStatus`
    member name (``"CONVERGED"``), or ``"OnlineStatus."`` and an
    :class:`~skcrf.OnlineStatus` member name for the online
    trainers.
``training_log``
    null, or ``{"iterations": [{key: value, ...}, ...], "status": name or
    null, "message": str, "verbose": value}`` (a
    :class:`~skcrf.TrainingLog`), values in the tagged
    encoding (scalars), except two log-only types: ``{"type": "fraction",
    "value": [numerator, denominator]}`` (held-out accuracies) and
    ``{"type": "label_scores", "value": V}`` for ``scores``, ``V`` a tagged
    list of tuples ``(label, match, model, ref, precision, recall, f1)``.
``extra``
    ``{name: value}``: further fitted values the estimator keeps
    (the fitted state's ``extra``), each in the tagged encoding; may be empty.

Tagged values
~~~~~~~~~~~~~
Labels, parameters, log values and extra values are stored as
``{"type": T, "value": V}`` so that they come back as the same Python type:

===================  =========================================================
``T``                ``V``
===================  =========================================================
``"str"``            the string
``"int"``            a JSON integer
``"float"``          ``repr`` of the float as a string (exact; ``"nan"``,
                     ``"inf"``, ``"-0.0"`` included)
``"bool"``           ``true`` / ``false``
``"none"``           no ``value``
``"bytes"``          the bytes as a hex string
``"tuple"``          a list of tagged values
``"list"``           a list of tagged values (not for labels: unhashable)
``"dict"``           an object ``{str key: tagged value}`` (not for labels)
``"numpy:<dtype>"``  a numpy scalar, ``<dtype>`` one of ``bool``,
                     ``int8`` ... ``int64``, ``uint8`` ... ``uint64``,
                     ``float16``, ``float32``, ``float64`` (``V`` as for bool,
                     int and float) or ``str_`` (``V`` a string)
===================  =========================================================

Tuples, lists and dicts nest at most 32 deep. Types are matched exactly:
numpy scalar labels come back as the same numpy scalar type
(``np.int64(3)`` stays ``np.int64(3)``, not ``3``), so the loaded model
predicts exactly the labels the saved one did. Any other type (subclasses of
``str`` or ``int`` such as enums, complex numbers, frozensets, arbitrary
objects, ...) cannot be stored safely: :func:`save_state` refuses it with a
:class:`TypeError`.

Format version 4 (input-conditioned transitions)
------------------------------------------------
Written, when asked (``format_version=4``), for a model with
input-conditioned transitions (transition attributes, the token key
``'__transition__'``), and only for one: other models are written in
format 3 when asked, which earlier skcrf versions read. Its
archive holds the arrays of format 3 and, after them:

``conditioned_ptr`` : int64, shape (n_transition_attributes + 1,)
    The conditioned features of transition attribute ``a`` are
    ``conditioned_ptr[a]:conditioned_ptr[a + 1]``: non-decreasing from 0 to
    their number.
``conditioned_pairs`` : int32, shape (n_conditioned,)
    The label pair of each, flat ``i * L + j`` (label ``i`` at the previous
    token, ``j`` at the token): in ``[0, L * L)``, strictly increasing
    within a transition attribute.
``conditioned_weights`` : float64, shape (n_conditioned,)
    Their weights; finite. In the flat weight vector they come after the
    transition features.

and its JSON document the keys of format 3 and ``conditioned_attributes``
(the transition attribute names, a list of distinct strings, in id order).

Format version 2
----------------
Written by skcrf 0.2 (with :func:`numpy.savez_compressed`), and by
:func:`save_state` when asked (``format_version=2``) or when an attribute
name cannot be encoded in UTF-8 (a str that is not valid Unicode, such as
one with a lone surrogate; formats 3 to 5 cannot hold a NUL character
either). Its archive holds the
arrays of format 3 but ``attributes``, and its JSON document the keys of
format 3 with ``attributes`` (the names, a list of distinct strings, in
attribute-id order) instead of ``n_attributes``.

Format version 1 (skcrf 0.1)
----------------------------
Files of format version 1 hold exactly the arrays ``metadata`` (as above),
``coef_indices`` (int64, strictly increasing flat C-order indices into the
``(n_attributes, L)`` state weight matrix of its stored entries),
``coef_values`` (float64, the weights of those entries; every other entry is
0) and ``transition`` (float64, shape ``(L, L)``, dense), and the JSON keys
``format``, ``format_version`` (1), ``skcrf_version``, ``estimator`` (a str),
``params``, ``labels``, ``vocabulary`` (the attribute names of
scikit-learn's ``DictVectorizer``, ``key=value`` for string values),
``vectorizer`` (``{"dtype": "float64", "separator": "=", "sparse": true,
"sort": true}``), ``n_features``, ``n_iter``, ``status`` (a member name) and
``training_log`` (an object as above). :func:`load_state` reads them into a
fitted state with the same checks as format 2:

- ``attributes`` are the ``vocabulary`` names unchanged and
  ``value_separator`` is the vectorizer's separator (``"="``), so that
  string values map to the same ``key=value`` attributes and the model
  predicts exactly what skcrf 0.1 predicted;
- the state features are the stored ``coef`` entries, in CSR order (by
  attribute, then label), and the transition features are the nonzero
  entries of ``transition``;
- ``params``, ``n_iter``, ``status`` and ``training_log`` are read as in
  format 2; ``extra`` is empty (``n_features`` and ``vectorizer`` are
  checked, then dropped: the model determines them).

Versioning policy
-----------------
``format_version`` is incremented by every change to the layout or the
meaning of any key or array; the set of keys and arrays of a version is
fixed, and a file with unknown or missing keys or arrays is refused.
:func:`load_state` reads every format version up to its own
(:data:`FORMAT_VERSION`); a file of a newer version is refused with an error
that names both versions (upgrade skcrf to read it), never guessed at. The
estimator parameters are not part of the format: ``FittedState.params`` is
the dict read, and the estimator decides what to do with parameter names it
does not know or that are missing (files written before a parameter
existed).

Safety
------
A format 5 or 6 file is checked by its own reader, without :mod:`zipfile`: the
end record, the directory and every local header (exactly the ten or twelve members,
in order, stored, aligned, inside the file, their headers as written), each
member's CRC-32, the JSON document and the arrays' dtypes, shapes and
contents as for format 4. For the older formats, before any array data is
read, :func:`load_state` checks the zip directory (exactly the members of
one format version, no encryption, stored or deflated only), every member's
``.npy`` header (numeric dtypes only, a size matching the stored size), that
``metadata`` and the weight arrays do not decompress to more than
``_MAX_COMPRESSION_RATIO`` times their compressed size beyond
``_FREE_UNCOMPRESSED_BYTES`` ("zip bombs"; the integer arrays of format 2
compress very well, but their lengths are tied to the metadata and to the
weight arrays, so they are bounded too), the JSON document, and every
array's dtype and shape against the document. Then the arrays are read, each
member's CRC-32 checked as it is read, and their contents checked (the
consistency rules above). Whatever is wrong is a :class:`ValueError` that
names it.

Data files of other toolkits
----------------------------
:func:`read_crfsuite_data` reads CRFsuite's data format (the files of
``crfsuite learn`` and ``crfsuite tag``: a label, then TAB-separated
``name[:scale]`` attributes; ``@weight:W`` sequence weights) and
:func:`read_columns` column files (CoNLL, CRF++ and Wapiti: whitespace
separated columns, the last one the label). Both stream, one sequence at
a time, and refuse a bad file with a :class:`DataFileError` (a
:class:`ValueError`) that names the file and the line: a line longer than
``max_line_bytes``, NUL bytes (a binary file), text not in the encoding, a
scale that is not a finite number, a colon in a label or a second
unescaped colon in an attribute (CRFsuite would read on: a label cut at
the colon, an attribute with an empty name), an unknown ``@``
declaration, a line of a column file whose number of columns is not the
file's; and a path that is a directory, a FIFO or a device, before it is
opened (``'-'`` reads the standard input). A carriage return before a
newline (CRLF files) is dropped. The command line (``skcrf learn``,
``skcrf tag``) reads its files with them.

Examples
--------
>>> import os, tempfile
>>> from skcrf import CRFTagger
>>> from skcrf.io import load_model, load_state, save_model
>>> X, y = [[{"w": "the"}, {"w": "dog"}]], [["D", "N"]]
>>> tagger = CRFTagger(c2=0.1).fit(X, y)
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = os.path.join(tmp, "tagger.skcrf")
...     save_model(tagger, path)               # the same as tagger.save(path)
...     state = load_state(path)               # checked; never unpickles
...     loaded = load_model(path, CRFTagger)   # the same as CRFTagger.load(path)
>>> state.params["c2"], state.model.attributes
(0.1, ['w:the', 'w:dog'])
>>> loaded.predict(X)
[['D', 'N']]
"""

import os
from typing import Any

from ._persist._npz import FORMAT_NAME, FORMAT_VERSION, load_state, save_model, save_state
from ._tagger import CRFTagger
from ._utils._data_files import (
    ColumnSequence,
    CRFsuiteInstance,
    DataFileError,
    read_columns,
    read_crfsuite_data,
)

# documented and shown as skcrf.io's (their module is private)
for _public in (ColumnSequence, CRFsuiteInstance, DataFileError):
    _public.__module__ = __name__

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "ColumnSequence",
    "CRFsuiteInstance",
    "DataFileError",
    "load_model",
    "load_state",
    "read_columns",
    "read_crfsuite_data",
    "save_model",
    "save_state",
]


def load_model(path: "str | os.PathLike[str]", cls: Any = None) -> Any:
    """Load an estimator saved by :func:`save_model`; never unpickles.

    ``cls._from_fitted_state(load_state(path))``: the file is checked as by
    :func:`load_state`, then the class builds the estimator (and decides
    what to do with parameters it does not know).

    Parameters
    ----------
    path : str or os.PathLike
        The model file.
    cls : type, optional
        The estimator class to build: any class with a classmethod
        ``_from_fitted_state(state)``. Default :class:`~skcrf.CRFTagger`.

    Returns
    -------
    estimator : cls
        A fitted estimator equal to the one saved.

    Raises
    ------
    ValueError
        If the file is not a valid skcrf model file; the message says what
        is wrong. (``cls._from_fitted_state`` may raise too, for instance on
        parameters it refuses.)
    OSError
        If the file cannot be opened (for instance FileNotFoundError).

    See Also
    --------
    save_model : Write a model file.
    """
    return (CRFTagger if cls is None else cls)._from_fitted_state(
        load_state(path, lazy_attributes=True)
    )
