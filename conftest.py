"""pytest's configuration for the whole checkout (the doctests of skcrf/ included).

skcrf/torch.py needs PyTorch (the ``torch`` extra): without it, its doctests
are not collected (tests/test_torch.py skips with the reason).
"""

import importlib.util

collect_ignore = []
try:
    _HAS_TORCH = importlib.util.find_spec("torch") is not None
except (ImportError, ValueError):
    _HAS_TORCH = False
if not _HAS_TORCH:
    collect_ignore.append("skcrf/torch.py")
