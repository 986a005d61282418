"""Recording: loggers (CSV, TensorBoard, W&B) and the VideoRecorder transform.

``import torchrl_lite.record`` imports none of tensorboard, wandb, imageio or matplotlib;
they are imported by the loggers that use them, when those are built or write a video.
"""

from torchrl_lite.record.loggers import (
    CSVLogger,
    Logger,
    TensorboardLogger,
    WandbLogger,
    generate_exp_name,
    get_logger,
)
from torchrl_lite.record.recorder import VideoRecorder

__all__ = [
    "CSVLogger",
    "Logger",
    "TensorboardLogger",
    "VideoRecorder",
    "WandbLogger",
    "generate_exp_name",
    "get_logger",
]
