"""Old path of :mod:`skcrf._training._lbfgs` (pickles keep loading).

Pickles made before the subpackages name this path; it only re-exports.
"""

from ._training._lbfgs import IterationInfo, LBFGSResult, LBFGSStatus

__all__ = ["IterationInfo", "LBFGSResult", "LBFGSStatus"]
