"""Old path of :mod:`skcrf._training._online_train` (pickles keep loading).

Pickles made before the subpackages name this path; it only re-exports.
"""

from ._training._online_train import OnlineResult, OnlineState, OnlineStatus

__all__ = ["OnlineResult", "OnlineState", "OnlineStatus"]
