"""Objectives: value estimators and loss modules.

``from torchrl_lite.objectives.value import GAE`` and the functional estimators in
``torchrl_lite.objectives.value.functional`` follow TorchRL's import paths.
"""

from torchrl_lite.objectives.a2c import A2CLoss
from torchrl_lite.objectives.common import HardUpdate, LossModule, SoftUpdate
from torchrl_lite.objectives.dqn import DistributionalDQNLoss, DQNLoss
from torchrl_lite.objectives.ppo import ClipPPOLoss, KLPENPPOLoss, PPOLoss
from torchrl_lite.objectives.reinforce import ReinforceLoss
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
    "A2CLoss",
    "ClipPPOLoss",
    "DQNLoss",
    "DistributionalDQNLoss",
    "KLPENPPOLoss",
    "PPOLoss",
    "ReinforceLoss",
    "GAE",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "ValueEstimatorBase",
    "ValueEstimators",
]
