r"""CRFsuite's example templates (``crfutils``) parsed into a plan.

The semantics are those of CRFsuite's ``example/crfutils.py``
(``apply_templates``, ``escape``, ``output_features``) and of the reader
of its data files (``frontend/iwa.c``: ``read_field_unescaped``), through
which ``crfsuite learn`` takes the attributes ``crfutils`` writes:

- a template is a tuple of ``(field, offset)`` pairs; its name joins
  ``'%s[%d]' % (field, offset)`` with ``|`` (``w[-1]|w[0]``, no ``+`` on a
  positive offset); at token ``t`` it gives ``name=values``, the values of
  the fields at ``t + offset`` joined with ``|`` (``w[-1]|w[0]=the|cat``),
  and nothing when any ``t + offset`` falls outside the sequence;
- ``output_features`` writes each attribute through ``escape``, which
  replaces every ``:`` by ``__COLON__``; CRFsuite's reader then turns
  ``\\`` into ``\`` (and ``\:`` into ``:``, which cannot occur any more).
  The attribute CRFsuite stores is that result, which is what the plan's
  names are: each value and the name go through the ``replace`` steps
  ``(':', '__COLON__')`` then ``('\\\\', '\\')``. (``crfutils.to_crfsuite``,
  its tagging path through the Python module, skips the reader, so a value
  with two backslashes in a row gets another name there: the training
  file's name is kept.)

Attributes are in template order at each token, as ``apply_templates``
appends them; each has the value 1.
"""

from collections.abc import Mapping, Sequence

from ._plan import Feature, Plan, Ref, TemplateError, check_plan

__all__ = ["ESCAPES", "parse_crfsuite"]

#: crfutils' escape, then CRFsuite's reader: the steps every name and value goes through.
ESCAPES = (("replace", ":", "__COLON__"), ("replace", "\\\\", "\\"))


def _escaped(text):
    for _, old, new in ESCAPES:
        text = text.replace(old, new)
    return text


def _columns(columns):
    if isinstance(columns, Mapping):
        out = dict(columns)
    elif isinstance(columns, Sequence) and not isinstance(columns, str):
        # crfutils' field names in order, as its ``fields`` ('w pos y'.split())
        out = {name: index for index, name in enumerate(columns)}
    else:
        raise TypeError(
            "columns must map field names to column indices (or list the field names "
            f"in column order), got {type(columns).__name__}"
        )
    for name, index in out.items():
        if not isinstance(name, str):
            raise TypeError(f"a field name must be a str, got {name!r}")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise TypeError(f"field {name!r}: a column index must be an int >= 0, got {index!r}")
    return out


def _template(template, i, columns):
    where = f"templates[{i}]"
    if isinstance(template, str) or not isinstance(template, Sequence) or not template:
        raise TemplateError(
            f"{where}: a template is a non-empty tuple of (field, offset) pairs, got {template!r}"
        )
    pairs = []
    for j, pair in enumerate(template):
        if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise TemplateError(
                f"{where}[{j}]: a template's items are (field, offset) pairs, got {pair!r}"
            )
        field, offset = pair
        if field not in columns:
            raise TemplateError(
                f"{where}[{j}]: unknown field {field!r}; the fields are {sorted(columns)}"
            )
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise TemplateError(
                f"{where}[{j}]: bad number: the offset must be an int, got {offset!r}"
            )
        pairs.append((field, offset))
    return pairs


def parse_crfsuite(templates, *, columns):
    """Parse ``crfutils`` templates into a :class:`~skcrf._template._plan.Plan`.

    Parameters
    ----------
    templates : sequence of tuples of (str, int)
        Each template's ``(field, offset)`` pairs, as in CRFsuite's
        ``example/pos.py`` and ``ner.py``.
    columns : mapping of str to int, or sequence of str
        The column of each field name in the tokens (column 0 first), or
        the field names in column order.

    Returns
    -------
    Plan
        ``syntax='crfsuite'``: one state feature per template, dropped
        where an offset falls outside the sequence; ``transitions=True``
        (CRFsuite always learns them).

    Raises
    ------
    TemplateError
        Naming ``templates[i][j]``: not a pair, an unknown field, an offset
        that is not an int.

    Examples
    --------
    >>> plan = parse_crfsuite([(("w", -1), ("w", 0))], columns=["w", "pos"])
    >>> from skcrf._template._reference import expand_sequence
    >>> expand_sequence(plan, [("the", "DT"), ("cat", "NN")])[1][0]
    [('w[-1]|w[0]=the|cat', 1.0)]
    """
    columns = _columns(columns)
    if isinstance(templates, str) or not isinstance(templates, Sequence):
        raise TypeError(
            f"templates must be a sequence of templates, got {type(templates).__name__}"
        )
    features = []
    for i, template in enumerate(templates):
        pairs = _template(template, i, columns)
        # crfutils' '%s[%d]': an int offset, no '+'
        name = "|".join(f"{field}[{offset:d}]" for field, offset in pairs)
        key = [_escaped(name + "=")]
        for j, (field, offset) in enumerate(pairs):
            if j:
                key.append("|")
            key.append(Ref(offset, columns[field], ESCAPES))
        features.append(Feature(key=tuple(key), source=repr(tuple(pairs))))
    return check_plan(Plan(tuple(features), transitions=True, syntax="crfsuite"))
