"""Loggers: CSV files, TensorBoard and Weights & Biases behind one ``Logger`` interface.

Importing this package imports none of tensorboard, wandb or imageio: each logger
imports what it needs when it is built or writes a video.
"""

from torchrl_lite.record.loggers.common import Logger
from torchrl_lite.record.loggers.csv import CSVLogger
from torchrl_lite.record.loggers.tensorboard import TensorboardLogger
from torchrl_lite.record.loggers.utils import generate_exp_name, get_logger
from torchrl_lite.record.loggers.wandb import WandbLogger

__all__ = [
    "CSVLogger",
    "Logger",
    "TensorboardLogger",
    "WandbLogger",
    "generate_exp_name",
    "get_logger",
]
