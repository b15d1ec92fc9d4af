"""The one place where skcrf imports private scikit-learn names.

scikit-learn does not promise these across releases; keeping them here means a
rename upstream is a one-line fix.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from sklearn.utils._param_validation import HasMethods, Interval, StrOptions

if TYPE_CHECKING:
    _F = TypeVar("_F", bound=Callable[..., object])

    # scikit-learn is untyped: without this, every fit it decorates is Any
    def _fit_context(*, prefer_skip_nested_validation: bool) -> Callable[[_F], _F]: ...

else:
    from sklearn.base import _fit_context

__all__ = ["HasMethods", "Interval", "StrOptions", "_fit_context", "param_names"]


_PARAM_NAMES: dict[type, tuple[str, ...]] = {}


def param_names(cls: type) -> tuple[str, ...]:
    """``cls._get_param_names()`` (scikit-learn's, private), read once per class.

    It inspects ``__init__``'s signature on every call: a tenth of a
    millisecond in each model ``load``.
    """
    names = _PARAM_NAMES.get(cls)
    if names is None:  # (threads may both compute it: the same tuple)
        names = _PARAM_NAMES[cls] = tuple(cls._get_param_names())  # type: ignore[attr-defined]
    return names
