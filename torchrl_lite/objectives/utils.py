"""Loss utilities, at TorchRL's import path ``torchrl.objectives.utils``.

The maths helpers live in ``_loss_maths.py``, the target-network updaters in
``common.py`` and the estimator names in ``value/``; this module only re-exports them, as
TorchRL's scripts and custom losses import them from here.
"""

from torchrl_lite.objectives._loss_maths import (  # noqa: F401  (check_distance: cql.py)
    action_index,
    check_distance,
    distance_loss,
    entropy_of,
    group_optimizers,
    log_prob_of,
)
from torchrl_lite.objectives.common import (
    HardUpdate,
    SoftUpdate,
    TargetNetUpdater,
    default_value_kwargs,
)
from torchrl_lite.objectives.value import ValueEstimators

__all__ = [
    "distance_loss",
    "log_prob_of",
    "entropy_of",
    "action_index",
    "HardUpdate",
    "SoftUpdate",
    "TargetNetUpdater",
    "ValueEstimators",
    "default_value_kwargs",
    "group_optimizers",
]
