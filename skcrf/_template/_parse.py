"""Templates in any syntax parsed into a checked :class:`~skcrf._template._plan.Plan`.

Apart from :class:`~skcrf.TemplateFeaturizer` (a scikit-learn estimator) so
that the command line parses templates without importing scikit-learn.
"""

from collections.abc import Mapping, Sequence

from ._plan import Plan, check_plan

__all__ = ["SYNTAXES", "parse_templates"]

SYNTAXES = ("auto", "crfpp", "wapiti", "crfsuite", "python")


def _guess_syntax(templates):
    """The syntax of ``templates`` when ``syntax='auto'``."""
    if isinstance(templates, Plan):
        return "plan"
    if isinstance(templates, str):
        for line in templates.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            return "wapiti" if line[0] in "ub*" else "crfpp"
        return "crfpp"
    if isinstance(templates, Mapping):
        return "python"
    if isinstance(templates, Sequence) and templates:
        first = templates[0]
        if (
            isinstance(first, tuple)
            and first
            and all(isinstance(pair, tuple) and len(pair) == 2 for pair in first)
        ):
            return "crfsuite"
        return "python"
    raise TypeError(
        "templates must be a template text (CRF++ or Wapiti), a list of CRFsuite "
        "templates (tuples of (field, offset) pairs), a Pythonic spec (a dict of "
        f"features) or a Plan; got {type(templates).__name__}"
    )


def parse_templates(templates, syntax="auto", columns=None):
    """The :class:`Plan` of ``templates`` in ``syntax`` (checked)."""
    if syntax == "auto":
        syntax = _guess_syntax(templates)
    if isinstance(templates, Plan):
        return check_plan(templates)
    if syntax == "crfpp":
        from ._crfpp import parse_crfpp

        return parse_crfpp(_text(templates, syntax))
    if syntax == "wapiti":
        from ._wapiti import parse_wapiti

        return parse_wapiti(_text(templates, syntax))
    if syntax == "crfsuite":
        from ._crfsuite import parse_crfsuite

        return parse_crfsuite(templates, columns=columns)
    if syntax == "python":
        from ._python import parse_python

        return parse_python(templates, columns=columns)
    raise ValueError(f"syntax must be one of {SYNTAXES}; got {syntax!r}")


def _text(templates, syntax):
    if not isinstance(templates, str):
        raise TypeError(
            f"syntax={syntax!r} takes the template file's text (a str); got "
            f"{type(templates).__name__}"
        )
    return templates
