"""Trainers: the ``Trainer`` loop, its hooks, and checkpoints that resume exactly.

Example:
    >>> from torchrl_lite.trainers import Trainer, ReplayBufferTrainer, LogReward
"""

from torchrl_lite.trainers.checkpoint import load_checkpoint, save_checkpoint
from torchrl_lite.trainers.hooks import (
    ClearCudaCache,
    OptimizerHook,
    ReplayBufferTrainer,
    RewardNormalizer,
    TrainerHookBase,
    UpdateWeights,
)
from torchrl_lite.trainers.log_hooks import (
    CountFramesLog,
    LogReward,
    LogScalar,
    LogValidationReward,
    Recorder,
)
from torchrl_lite.trainers.minibatches import BatchSubSampler, ComputeAdvantage, ShuffledMiniBatches
from torchrl_lite.trainers.trainers import Trainer

__all__ = [
    "Trainer",
    "TrainerHookBase",
    "OptimizerHook",
    "ReplayBufferTrainer",
    "ShuffledMiniBatches",
    "ComputeAdvantage",
    "BatchSubSampler",
    "RewardNormalizer",
    "UpdateWeights",
    "ClearCudaCache",
    "LogScalar",
    "LogReward",
    "CountFramesLog",
    "Recorder",
    "LogValidationReward",
    "save_checkpoint",
    "load_checkpoint",
]
