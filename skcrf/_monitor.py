"""Old path of :mod:`skcrf._training._monitor` (pickles keep loading).

Pickles made before the subpackages name this path; it only re-exports.
"""

from ._training._monitor import CallbackInfo

__all__ = ["CallbackInfo"]
