"""Objectives: value estimators and loss modules.

``from torchrl_lite.objectives.value import GAE`` and the functional estimators in
``torchrl_lite.objectives.value.functional`` follow TorchRL's import paths.
"""

from torchrl_lite.objectives.common import HardUpdate, LossModule, SoftUpdate
from torchrl_lite.objectives.value import (
    GAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimatorBase,
    ValueEstimators,
)

__all__ = [
    "HardUpdate",
    "LossModule",
    "SoftUpdate",
    "GAE",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "ValueEstimatorBase",
    "ValueEstimators",
]
