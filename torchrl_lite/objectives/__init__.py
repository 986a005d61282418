"""Objectives: value estimators and loss modules.

``from torchrl_lite.objectives.value import GAE`` and the functional estimators in
``torchrl_lite.objectives.value.functional`` follow TorchRL's import paths.
"""

from torchrl_lite.objectives.value import (
    GAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimatorBase,
    ValueEstimators,
)

__all__ = [
    "GAE",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "ValueEstimatorBase",
    "ValueEstimators",
]
