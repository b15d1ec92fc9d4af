"""``TemplateFeaturizer``: feature templates, parsed once, run by compiled code."""

from collections.abc import Sequence
from typing import Any

from sklearn.base import BaseEstimator, TransformerMixin

from .._compat import StrOptions, _fit_context
from ._parse import SYNTAXES as _SYNTAXES
from ._parse import parse_templates
from ._plan import TemplateError
from ._reference import expand_dicts

__all__ = ["TemplateFeaturizer"]


class TemplateFeaturizer(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):  # type: ignore[call-arg]
    r"""Feature templates for raw tokens, compiled: CRF++, Wapiti, CRFsuite or Pythonic.

    Give it to :class:`~skcrf.CRFTagger` as ``featurizer=``: the tagger then
    fits and predicts on raw token sequences, the template runs in compiled
    code (attribute names built as bytes and looked up in C, no Python
    object per feature, the GIL released), and the fitted model keeps the
    template (``save`` / ``load`` and pickle included). On its own it is a
    stateless scikit-learn transformer whose ``transform`` returns the
    equivalent feature dicts (for inspection, sklearn-crfsuite or
    python-crfsuite).

    Parameters
    ----------
    templates : str, list, dict or Plan
        The templates: a CRF++ template file's text (``syntax='crfpp'``), a
        Wapiti pattern file's text (``'wapiti'``), a list of CRFsuite
        ``crfutils`` templates (``'crfsuite'``: tuples of ``(field,
        offset)`` pairs), or a Pythonic spec (``'python'``: see the user
        guide, "From raw text").
    syntax : {'auto', 'crfpp', 'wapiti', 'crfsuite', 'python'}, default='auto'
        How to read ``templates``; ``'auto'`` guesses from its type (a text
        whose first template line starts with ``u``, ``b`` or ``*`` is
        Wapiti's, else CRF++'s).
    columns : sequence of str, optional
        The names of the token columns (``('word', 'pos')``), for the
        syntaxes that name them (CRFsuite's fields, the Pythonic spec).

    Notes
    -----
    A token is a ``str`` (one column) or a tuple of ``str`` columns (a CoNLL
    line's columns without the label). Each syntax keeps its reference
    tool's semantics (CRF++ and Wapiti work on the UTF-8 bytes); the
    Pythonic spec follows Python's ``str`` methods exactly.

    Examples
    --------
    >>> from skcrf import TemplateFeaturizer
    >>> crfpp = "U00:%x[-1,0]\nU01:%x[0,0]/%x[0,1]\nB\n"
    >>> TemplateFeaturizer(crfpp).transform([[("The", "DT"), ("cat", "NN")]])[0][1]
    {'U00:The': 1.0, 'U01:cat/NN': 1.0}
    """

    _parameter_constraints: dict = {
        "templates": "no_validation",
        "syntax": [StrOptions(set(_SYNTAXES))],
        "columns": [list, tuple, None],
    }

    def __init__(
        self,
        templates: Any = None,
        *,
        syntax: str = "auto",
        columns: Sequence[str] | None = None,
    ) -> None:
        self.templates = templates
        self.syntax = syntax
        self.columns = columns

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.input_tags.two_d_array = False
        tags.input_tags.string = True
        tags.transformer_tags.preserves_dtype = []
        return tags

    def plan(self):
        """The parsed template: the plan the compiled expander runs (checked).

        Raises :class:`~skcrf.templates.TemplateError` naming the line and
        column of a bad template.
        """
        self._validate_params()
        if self.templates is None:
            raise TemplateError("TemplateFeaturizer needs templates; got None")
        return parse_templates(self.templates, self.syntax, self.columns)

    def compile(self):
        """The plan laid out for the compiled expander."""
        from ._expand import CompiledPlan

        return CompiledPlan(self.plan())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any = None, y: Any = None) -> "TemplateFeaturizer":
        """Check the templates (the featurizer learns nothing from data).

        Parameters
        ----------
        X, y : ignored

        Returns
        -------
        self : TemplateFeaturizer
        """
        self.plan()
        return self

    def transform(self, X: Sequence[Sequence[Any]]) -> list[list[dict[str, Any]]]:
        """The feature dicts of every token (what the compiled path encodes).

        Parameters
        ----------
        X : list of sequences of tokens
            A token is a ``str`` or a tuple of ``str`` columns.

        Returns
        -------
        X_features : list of list of dict
            One dict per token; transition features under the key
            ``'__transition__'``. A string-valued feature ``{key: value}`` is
            the attribute ``key:value``; others are weighted attributes.
        """
        plan = self.plan()
        from .._featurize._validation import check_sequences

        return expand_dicts(plan, check_sequences(X, name="X"))
