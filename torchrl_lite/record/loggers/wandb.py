"""WandbLogger: log to Weights & Biases (an optional dependency: ``pip install wandb``)."""

from __future__ import annotations

import importlib
import os

from torchrl_lite.record.loggers.common import Logger, video_to_frames

__all__ = ["WandbLogger"]

_STEP_KEY = "trainer/step"


def _import_wandb():
    try:
        return importlib.import_module("wandb")
    except ImportError as err:
        raise ImportError(
            "WandbLogger needs wandb, which is not installed. Install it with "
            "`pip install wandb`, or log with CSVLogger or TensorboardLogger instead."
        ) from err


class WandbLogger(Logger):
    """A logger sending scalars, hyperparameters, videos and histograms to a W&B run.

    Steps are logged as the ``"trainer/step"`` value of each entry rather than as W&B's
    own step, so that values may arrive out of order (W&B drops a smaller step).

    Args:
        exp_name: the run's name.
        offline: write the run locally only (``wandb sync`` uploads it later).
        save_dir: the folder of W&B's local files (default: W&B's, ``./wandb``).
        project: the W&B project (default: W&B's).
        video_fps: frames per second of logged videos (``log_video(..., fps=)``
            overrides it per video).
        **kwargs: passed to ``wandb.init`` (``entity``, ``group``, ``tags``, ``id``, ...).

    Example:
        >>> from torchrl_lite.record import WandbLogger
        >>> logger = WandbLogger("demo", offline=True, project="torchrl-lite")  # doctest: +SKIP
        >>> logger.log_scalar("reward", 1.5, step=10)  # doctest: +SKIP
        >>> logger.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        exp_name: str,
        offline: bool = False,
        save_dir: str | None = None,
        project: str | None = None,
        video_fps: int = 30,
        **kwargs,
    ) -> None:
        self._wandb = _import_wandb()
        self.offline = offline
        self.project = project
        self.video_fps = video_fps
        self._init_kwargs = kwargs
        super().__init__(exp_name, save_dir)

    def _create_experiment(self):
        if self.log_dir is not None:
            os.makedirs(self.log_dir, exist_ok=True)
        return self._wandb.init(
            name=self.exp_name,
            project=self.project,
            dir=self.log_dir,
            mode="offline" if self.offline else "online",
            **self._init_kwargs,
        )

    def _log_scalar(self, name, value, step):
        self.experiment.log({name: value, _STEP_KEY: step})

    def _log_hparams(self, cfg):
        self.experiment.config.update(cfg, allow_val_change=True)

    def _log_video(self, name, video, step, fps=None, **kwargs):
        frames = video_to_frames(video).transpose(0, 3, 1, 2)  # [T, 3, H, W], as W&B wants
        fps = self.video_fps if fps is None else fps
        kwargs.setdefault("format", "mp4")
        media = self._wandb.Video(frames, fps=fps, **kwargs)
        self.experiment.log({name: media, _STEP_KEY: step})

    def _log_histogram(self, name, data, step, bins: int = 64, **kwargs):
        histogram = self._wandb.Histogram(data.numpy(), num_bins=bins, **kwargs)
        self.experiment.log({name: histogram, _STEP_KEY: step})

    def _close(self):
        self.experiment.finish()
