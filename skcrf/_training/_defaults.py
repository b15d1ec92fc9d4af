"""The trainers' parameters and CRFsuite's defaults, without the fit driver.

Kept apart from :mod:`skcrf._training._fit` (which re-exports them) so that
``skcrf.pycrfsuite``, whose ``Trainer`` lists the parameters at import,
loads the training code only when it trains.
"""

from __future__ import annotations

from typing import Any

from ._online_train import DEFAULTS as ONLINE_DEFAULTS

#: The parameters of each training algorithm (CRFsuite's), with CRFsuite's
#: defaults; ``None`` for a parameter means the algorithm's default.
ALGORITHM_DEFAULTS: dict[str, dict[str, Any]] = {
    "lbfgs": {
        "c1": 0.0,
        "c2": 1.0,
        "max_iterations": None,
        "num_memories": 6,
        "epsilon": 1e-5,
        "period": 10,
        "delta": 1e-5,
        "linesearch": "MoreThuente",
        "max_linesearch": 20,
    },
    **ONLINE_DEFAULTS,
}

#: Feature-generation parameters, common to every algorithm, with defaults.
FEATURE_DEFAULTS: dict[str, Any] = {
    "min_freq": 0.0,
    "all_possible_states": False,
    "all_possible_transitions": False,
}

#: Every trainer parameter name (of any algorithm).
TRAINER_PARAMETERS = frozenset(p for params in ALGORITHM_DEFAULTS.values() for p in params)
