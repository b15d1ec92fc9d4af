"""Feature templates for raw tokens: the Pythonic spec and the template types.

:class:`~skcrf.TemplateFeaturizer` takes templates in four syntaxes (CRF++,
Wapiti, CRFsuite's ``crfutils`` and the Pythonic spec below) and runs them in
compiled code; this module holds what the Pythonic spec is written with,
and ready-made specs of well-known feature functions. See the user guide,
"From raw text".

>>> from skcrf.templates import BOS, EOS, word
>>> spec = {"bias": 1.0, "word.lower()": word.lower(), "-1:word": word.at(-1), "BOS": BOS}
>>> from skcrf import TemplateFeaturizer
>>> first, second = TemplateFeaturizer(spec).transform([["The", "cat"]])[0]
>>> first
{'bias': 1.0, 'word.lower()': 'the', 'BOS': True}
>>> second
{'bias': 1.0, 'word.lower()': 'cat', '-1:word': 'The'}
"""

# TemplateFeaturizer: importable from here, documented as skcrf.TemplateFeaturizer
from ._template import _python
from ._template._featurizer import TemplateFeaturizer as TemplateFeaturizer
from ._template._plan import Boundary, TemplateError
from ._template._python import Col, Expr, outside, parse_python, transition, window
from ._template._recipes import (
    sequence_featurizer_spec,
    treebank_seed_spec,
    treebank_window_spec,
    tutorial_spec,
)

__all__ = [
    "BOS",
    "EOS",
    "Boundary",
    "Col",
    "Expr",
    "TemplateError",
    "is_first",
    "is_last",
    "outside",
    "parse_python",
    "sequence_featurizer_spec",
    "transition",
    "treebank_seed_spec",
    "treebank_window_spec",
    "tutorial_spec",
    "window",
    "word",
]

#: The token's word: column 0 (``Col(0)``).
word = _python.word
#: True at a sequence's first token, False at the others (``{'is_first': i == 0}``).
is_first = _python.is_first
#: True at a sequence's last token, False at the others.
is_last = _python.is_last
#: The marker ``{'BOS': True}``: present at a sequence's first token only.
BOS = _python.BOS
#: The marker ``{'EOS': True}``: present at a sequence's last token only.
EOS = _python.EOS
