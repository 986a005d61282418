"""Build a logger by name (``get_logger``) and name experiments (``generate_exp_name``)."""

from __future__ import annotations

import uuid
from datetime import datetime

from torchrl_lite.record.loggers.common import Logger

__all__ = ["get_logger", "generate_exp_name", "LOGGER_TYPES"]

LOGGER_TYPES = ("csv", "tensorboard", "wandb")


def get_logger(logger_type: str, logger_name: str, experiment_name: str, **kwargs) -> Logger | None:
    """A logger of the given type, or None for ``logger_type`` None or ``""``.

    Args:
        logger_type: ``"csv"``, ``"tensorboard"`` or ``"wandb"``.
        logger_name: the folder of the logs (``log_dir``; ``save_dir`` for W&B).
        experiment_name: the experiment's name (a folder under ``logger_name``, or a run).
        **kwargs: passed to the logger's constructor (e.g. ``video_format`` for csv,
            ``project`` for wandb; a ``wandb_kwargs`` dict is accepted too, as in TorchRL,
            and ignored by csv and tensorboard).

    Example:
        >>> import tempfile
        >>> from torchrl_lite.record import get_logger
        >>> with tempfile.TemporaryDirectory() as log_dir:
        ...     logger = get_logger("csv", log_dir, "demo")
        ...     logger.close()
        >>> type(logger).__name__, logger.exp_name
        ('CSVLogger', 'demo')
    """
    if logger_type in (None, ""):
        return None
    if logger_type in ("csv", "tensorboard"):
        kwargs.pop("wandb_kwargs", None)  # W&B's own options, which TorchRL's scripts always pass
    if logger_type == "csv":
        from torchrl_lite.record.loggers.csv import CSVLogger

        return CSVLogger(experiment_name, log_dir=logger_name, **kwargs)
    if logger_type == "tensorboard":
        from torchrl_lite.record.loggers.tensorboard import TensorboardLogger

        return TensorboardLogger(experiment_name, log_dir=logger_name, **kwargs)
    if logger_type == "wandb":
        from torchrl_lite.record.loggers.wandb import WandbLogger

        kwargs = {**kwargs.pop("wandb_kwargs", {}), **kwargs}
        return WandbLogger(experiment_name, save_dir=logger_name, **kwargs)
    raise ValueError(
        f"Unknown logger_type {logger_type!r}; expected one of {list(LOGGER_TYPES)} (or None)."
    )


def generate_exp_name(model_name: str, experiment_name: str) -> str:
    """A unique experiment name: ``{model}_{experiment}_{8 hex}_{yy_mm_dd-HH_MM_SS}``.

    Args:
        model_name: e.g. the algorithm (``"PPO"``).
        experiment_name: e.g. the env id.

    Example:
        >>> from torchrl_lite.record import generate_exp_name
        >>> generate_exp_name("PPO", "Pendulum-v1").startswith("PPO_Pendulum-v1_")
        True
    """
    return "_".join(
        (
            model_name,
            experiment_name,
            uuid.uuid4().hex[:8],
            datetime.now().strftime("%y_%m_%d-%H_%M_%S"),
        )
    )
