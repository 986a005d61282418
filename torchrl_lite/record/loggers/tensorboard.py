"""TensorboardLogger: scalars, hyperparameters, histograms and videos as TensorBoard events.

``torch.utils.tensorboard`` (and so ``tensorboard``) is imported when a logger is built,
not when this module is. Videos are written as animated GIF image summaries encoded with
pillow, so, unlike ``SummaryWriter.add_video``, they need no ``moviepy``.
"""

from __future__ import annotations

import io
import numbers
import os

import torch

from torchrl_lite._utils import require
from torchrl_lite.record.loggers.common import Logger, video_to_frames

__all__ = ["TensorboardLogger"]


class TensorboardLogger(Logger):
    """A logger writing TensorBoard event files under ``{log_dir}/{exp_name}``.

    Args:
        exp_name: the run's folder name, under ``log_dir``.
        log_dir: the parent folder (``tensorboard --logdir {log_dir}`` shows every run).
        video_fps: frames per second of logged videos (``log_video(..., fps=)``
            overrides it per video).
        purge_step: TensorBoard hides the events this experiment logged before at this
            step and after (a run resumed from a checkpoint rewinds to it); None: keep all.

    Example:
        >>> import tempfile
        >>> from torchrl_lite.record import TensorboardLogger
        >>> with tempfile.TemporaryDirectory() as log_dir:
        ...     with TensorboardLogger("demo", log_dir=log_dir) as logger:
        ...         logger.log_scalar("reward", 1.5, step=10)
        ...         logger.log_hparams({"lr": 3e-4, "gamma": 0.99})
        ...     print(sorted(os.listdir(log_dir)))
        ['demo']
    """

    def __init__(
        self, exp_name: str, log_dir: str = "tb_logs", video_fps: int = 30, purge_step=None
    ) -> None:
        if not isinstance(video_fps, (int, float)) or video_fps <= 0:
            raise ValueError(
                f"TensorboardLogger: video_fps must be a positive number, got {video_fps!r}"
            )
        self.video_fps = video_fps
        self.purge_step = purge_step
        super().__init__(exp_name, log_dir)

    def _create_experiment(self):
        require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        folder = os.path.join(self.log_dir, self.exp_name)
        return SummaryWriter(log_dir=folder, purge_step=self.purge_step)

    def _log_scalar(self, name, value, step):
        self.experiment.add_scalar(name, value, global_step=step)

    def _log_hparams(self, cfg):
        """The hparams summary (TensorBoard's HPARAMS tab) and a text table (TEXT tab)."""
        from torch.utils.tensorboard.summary import hparams

        flat = {k: _hparam_value(v) for k, v in _flatten(cfg).items()}
        writer = self.experiment._get_file_writer()
        for summary in hparams(flat, {}):
            writer.add_summary(summary)
        table = "\n".join(f"| {k} | {v} |" for k, v in sorted(flat.items()))
        self.experiment.add_text("hparams", "| name | value |\n|---|---|\n" + table)

    def _log_video(self, name, video, step, fps=None, **kwargs):
        """One GIF image summary per video (several videos are tiled into one grid)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        if kwargs:
            raise TypeError(
                f"TensorboardLogger.log_video got unexpected arguments {sorted(kwargs)}"
            )
        frames = video_to_frames(video)  # [T, H, W, 3]
        fps = self.video_fps if fps is None else fps
        image = Summary.Image(
            height=frames.shape[1],
            width=frames.shape[2],
            colorspace=3,
            encoded_image_string=_encode_gif(frames, fps),
        )
        summary = Summary(value=[Summary.Value(tag=name, image=image)])
        self.experiment._get_file_writer().add_summary(summary, global_step=step)

    def _log_histogram(self, name, data, step, **kwargs):
        self.experiment.add_histogram(name, data, global_step=step, **kwargs)

    def _close(self):
        self.experiment.flush()
        self.experiment.close()


def _flatten(cfg: dict, prefix: str = "") -> dict:
    """Nested dicts to one level: ``{"optim": {"lr": 1}}`` -> ``{"optim/lr": 1}``."""
    out = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "/"))
        else:
            out[name] = value
    return out


def _hparam_value(value):
    """A value the hparams plugin accepts: a bool, a number or a string."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Real):
        return float(value) if not isinstance(value, numbers.Integral) else int(value)
    return str(value)


def _encode_gif(frames, fps: float) -> bytes:
    """The bytes of an animated GIF of ``frames`` (uint8 ``[T, H, W, 3]``), looping."""
    image_module = require("PIL.Image", "rendering")
    images = [image_module.fromarray(frame) for frame in frames]
    buffer = io.BytesIO()
    images[0].save(
        buffer,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=max(1, round(1000 / fps)),
        loop=0,
    )
    return buffer.getvalue()
