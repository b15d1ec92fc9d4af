"""The one place where skcrf imports private scikit-learn names.

scikit-learn does not promise these across releases; keeping them here means a
rename upstream is a one-line fix.
"""

from collections.abc import Callable
from inspect import CO_VARARGS, CO_VARKEYWORDS
from types import FunctionType
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

    scikit-learn inspects ``__init__``'s signature, which costs a fresh
    process (one that only loads a model and tags) a few tenths of a
    millisecond; a plain ``__init__`` (no ``*args``, ``**kwargs``, wrapper
    or ``__signature__``) gives the same sorted names from its code object.
    """
    names = _PARAM_NAMES.get(cls)
    if names is None:  # (threads may both compute it: the same tuple)
        names = _init_argument_names(cls)
        if names is None:
            names = tuple(cls._get_param_names())  # type: ignore[attr-defined]
        _PARAM_NAMES[cls] = names
    return names


def _init_argument_names(cls: type) -> tuple[str, ...] | None:
    """The sorted argument names of a plain ``cls.__init__``, or None."""
    init = cls.__init__  # type: ignore[misc]
    if (
        type(init) is not FunctionType
        or hasattr(init, "__wrapped__")
        or hasattr(init, "__signature__")
    ):
        return None
    code = init.__code__
    if code.co_flags & (CO_VARARGS | CO_VARKEYWORDS):
        return None
    return tuple(sorted(code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]))
