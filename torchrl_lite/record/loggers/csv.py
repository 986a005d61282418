"""CSVLogger: scalars, hyperparameters and videos as plain files, with no dependency.

The layout is TorchRL's, plus a wide ``metrics.csv`` and ``hparams.json``::

    {log_dir}/{exp_name}/
        scalars/{name}.csv      one "step,value" row per logged value (no header)
        metrics.csv             header "step,<name>,...": one row per step, all scalars
        hparams.json            the logged hyperparameters
        videos/{name}_{step}.{pt,mp4,gif}

Every file is flushed after each write, so a run that stops early leaves complete files.
A logger opened on an existing experiment folder continues it (a resumed run): scalar
files and ``metrics.csv`` keep their rows, ``hparams.json`` its entries.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os

import numpy as np
import torch

from torchrl_lite._utils import require
from torchrl_lite.record.loggers.common import Logger, video_to_frames

__all__ = ["CSVLogger", "CSVExperiment"]

VIDEO_FORMATS = ("pt", "mp4", "gif")


class CSVLogger(Logger):
    """A logger writing CSV files (and videos as ``.pt`` tensors, mp4 or gif files).

    Args:
        exp_name: the experiment's folder name, under ``log_dir``.
        log_dir: the parent folder (default ``"csv_logs"``), created if missing.
        video_format: ``"pt"`` (the uint8 ``[N, T, C, H, W]`` tensor, with ``torch.save``),
            ``"mp4"`` (needs ``imageio`` and ``imageio-ffmpeg``) or ``"gif"`` (needs
            ``imageio`` and ``pillow``); both from ``pip install 'torchrl-lite[rendering]'``.
        video_fps: frames per second of mp4 and gif files (``log_video(..., fps=)``
            overrides it per video).

    Example:
        >>> import tempfile
        >>> from torchrl_lite.record import CSVLogger
        >>> with tempfile.TemporaryDirectory() as log_dir:
        ...     with CSVLogger("demo", log_dir=log_dir) as logger:
        ...         logger.log_scalar("reward", 1.5, step=10)
        ...         logger.log_scalar("loss", torch.tensor(0.25), step=10)
        ...     print(open(f"{log_dir}/demo/scalars/reward.csv").read().strip())
        ...     print(open(f"{log_dir}/demo/metrics.csv").read().strip())
        10,1.5
        step,reward,loss
        10,1.5,0.25
    """

    experiment: CSVExperiment

    def __init__(
        self,
        exp_name: str,
        log_dir: str | None = None,
        video_format: str = "pt",
        video_fps: int = 30,
    ) -> None:
        if video_format not in VIDEO_FORMATS:
            raise ValueError(
                f"CSVLogger: unknown video_format {video_format!r}; expected one of {VIDEO_FORMATS}"
            )
        if not isinstance(video_fps, (int, float)) or video_fps <= 0:
            raise ValueError(f"CSVLogger: video_fps must be a positive number, got {video_fps!r}")
        _check_video_backend(video_format)
        self.video_format = video_format
        self.video_fps = video_fps
        super().__init__(exp_name, "csv_logs" if log_dir is None else log_dir)

    def _create_experiment(self) -> CSVExperiment:
        return CSVExperiment(
            os.path.join(self.log_dir, self.exp_name), self.video_format, self.video_fps
        )

    def _log_scalar(self, name, value, step):
        self.experiment.add_scalar(name, value, step)

    def _log_hparams(self, cfg):
        self.experiment.add_hparams(cfg)

    def _log_video(self, name, video, step, **kwargs):
        self.experiment.add_video(name, video, step, **kwargs)

    def _close(self):
        self.experiment.close()


class CSVExperiment:
    """The files of one CSV experiment (``CSVLogger.experiment``).

    Args:
        log_dir: the experiment's folder.
        video_format: ``"pt"``, ``"mp4"`` or ``"gif"``.
        video_fps: frames per second of mp4 and gif files.
    """

    def __init__(self, log_dir: str, video_format: str = "pt", video_fps: int = 30) -> None:
        self.log_dir = log_dir
        self.video_format = video_format
        self.video_fps = video_fps
        os.makedirs(os.path.join(log_dir, "scalars"), exist_ok=True)
        os.makedirs(os.path.join(log_dir, "videos"), exist_ok=True)
        self.scalar_files: dict = {}
        self.metrics = _WideTable(os.path.join(log_dir, "metrics.csv"))
        hparams_path = os.path.join(log_dir, "hparams.json")
        self.hparams: dict = {}
        if os.path.exists(hparams_path):
            with open(hparams_path) as f:
                self.hparams = json.load(f)

    def add_scalar(self, name: str, value: float, step: int) -> None:
        """Append ``step,value`` to ``scalars/{name}.csv`` and fill ``metrics.csv``."""
        f = self.scalar_files.get(name)
        if f is None:
            path = self._path("scalars", name + ".csv")
            f = self.scalar_files[name] = open(path, "a", newline="")
        f.write(f"{step},{value!r}\n")
        f.flush()
        self.metrics.add(step, name, value)

    def add_hparams(self, cfg: dict) -> None:
        """Merge ``cfg`` into ``hparams.json`` (values json cannot store are written as text)."""
        hparams = {**self.hparams, **cfg}
        text = json.dumps(hparams, indent=2, sort_keys=True, default=str)
        with open(os.path.join(self.log_dir, "hparams.json"), "w") as f:
            f.write(text + "\n")
        self.hparams = hparams

    def add_video(self, name: str, video: torch.Tensor, step: int, fps=None, **kwargs) -> str:
        """Write ``videos/{name}_{step}.{format}``; returns the path.

        Args:
            name: the video's name.
            video: uint8 ``[N, T, C, H, W]``.
            step: the step in the file name.
            fps: frames per second (default: the experiment's ``video_fps``).
            **kwargs: passed to ``imageio.v3.imwrite`` (mp4 and gif).
        """
        path = self._path("videos", f"{name}_{step}.{self.video_format}")
        if self.video_format == "pt":
            torch.save(video, path)
            return path
        frames = video_to_frames(video)  # [T, H, W, 3] uint8
        fps = self.video_fps if fps is None else fps
        iio = require("imageio.v3", "rendering")
        if self.video_format == "mp4":
            # libx264 (yuv420p) needs even sizes: pad odd ones with a black row/column
            # rather than let ffmpeg rescale every frame.
            t, h, w, c = frames.shape
            if h % 2 or w % 2:
                padded = np.zeros((t, h + h % 2, w + w % 2, c), dtype=frames.dtype)
                padded[:, :h, :w] = frames
                frames = padded
            kwargs.setdefault("macro_block_size", 1)
            iio.imwrite(path, frames, plugin="FFMPEG", fps=fps, **kwargs)
        else:
            kwargs.setdefault("loop", 0)
            iio.imwrite(path, frames, extension=".gif", duration=1000.0 / fps, **kwargs)
        return path

    def close(self) -> None:
        for f in self.scalar_files.values():
            f.close()
        self.scalar_files = {}
        self.metrics.close()

    def _path(self, folder: str, filename: str) -> str:
        path = os.path.join(self.log_dir, folder, filename)
        os.makedirs(os.path.dirname(path), exist_ok=True)  # "train/reward" -> a subfolder
        return path

    def __repr__(self) -> str:
        return f"CSVExperiment(log_dir={self.log_dir!r})"


class _WideTable:
    """``metrics.csv``: one row per step, one column per scalar name, always complete on disk.

    Values logged one after another at the same step share a row: the last row is
    rewritten in place (seek + truncate). A new name adds a column: the file is rewritten.
    """

    def __init__(self, path: str) -> None:
        self.columns = ["step"]
        self.rows: list[dict] = []
        if os.path.exists(path):  # an experiment continued (a resumed run): keep its rows
            self._load(path)
        self._file = open(path, "w", newline="")
        self._last_row_at = 0
        self._rewrite()

    def _load(self, path: str) -> None:
        with open(path, newline="") as f:
            lines = list(csv.reader(f))
        if not lines:
            return
        header, body = lines[0], lines[1:]
        try:
            if header[0] != "step":
                raise ValueError("no 'step' column")
            rows = [
                {"step": int(cells[0]), **{c: v for c, v in zip(header[1:], cells[1:]) if v}}
                for cells in body
            ]
        except (ValueError, IndexError) as err:
            raise ValueError(
                f"{path} is not a metrics table written by CSVLogger ({err}); move it away "
                "or choose another exp_name."
            ) from err
        self.columns, self.rows = header, rows

    def add(self, step: int, name: str, value: float) -> None:
        last = self.rows[-1] if self.rows else None
        same_row = last is not None and last["step"] == step and name not in last
        if same_row:
            last[name] = value
        else:
            self.rows.append({"step": step, name: value})
        if name not in self.columns:
            self.columns.append(name)
            self._rewrite()
            return
        if same_row:
            self._file.seek(self._last_row_at)
            self._file.truncate()
        else:
            self._last_row_at = self._file.tell()
        self._write_row(self.rows[-1])
        self._file.flush()

    def _rewrite(self) -> None:
        self._file.seek(0)
        self._file.truncate()
        self._file.write(",".join(_csv_field(c) for c in self.columns) + "\n")
        for row in self.rows:
            self._last_row_at = self._file.tell()
            self._write_row(row)
        self._file.flush()

    def _write_row(self, row: dict) -> None:
        cells = [_cell(row[c]) if c in row and c != "step" else "" for c in self.columns]
        cells[0] = str(row["step"])
        self._file.write(",".join(cells) + "\n")

    def close(self) -> None:
        self._file.close()


def _cell(value) -> str:
    return value if isinstance(value, str) else repr(value)  # str: a value read back


def _csv_field(text: str) -> str:
    if any(ch in text for ch in ',"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _check_video_backend(video_format: str) -> None:
    """Fail at construction (without importing them) if the video writers are missing."""
    needed = {"mp4": ("imageio", "imageio_ffmpeg"), "gif": ("imageio", "PIL")}.get(video_format, ())
    for module in needed:
        if importlib.util.find_spec(module) is None:
            raise ImportError(
                f"CSVLogger(video_format={video_format!r}) needs {module}, which is not "
                "installed. Install it with `pip install 'torchrl-lite[rendering]'`, or use "
                "video_format='pt'."
            )
