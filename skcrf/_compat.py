"""The one place where skcrf imports private scikit-learn names.

scikit-learn does not promise these across releases; keeping them here means a
rename upstream is a one-line fix.
"""

from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["Interval", "StrOptions", "_fit_context"]
