"""Logger: the interface every logger follows, and the video helpers the loggers share.

A logger subclass implements the hooks on top of ``Logger``:

* ``_create_experiment()`` — open the files, writer or run; its result is ``experiment``.
* ``_log_scalar(name, value, step)`` — ``value`` is a python float, ``step`` an int.
* ``_log_hparams(cfg)`` — ``cfg`` is a plain dict.
* ``_log_video(name, video, step, **kwargs)`` — ``video`` is a CPU uint8 tensor
  ``[N, T, C, H, W]`` with ``C`` in ``{1, 3}``.
* ``_log_histogram(name, data, step, **kwargs)`` (optional) and ``_close()``.

The public methods (``log_scalar``, ``log_metrics``, ``log_hparams``, ``log_video``,
``log_histogram``, ``close``) validate and convert their input once, here: a tensor value
is read with ``.item()`` only at this point (one host sync per logged value, or one per
``log_metrics`` call), so that a training loop can hand over detached 0-d tensors.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections import defaultdict
from collections.abc import Mapping

import numpy as np
import torch

__all__ = ["Logger", "as_video", "make_grid", "video_to_frames"]


class Logger:
    """Base class of loggers: scalars, hyperparameters, videos and histograms.

    Args:
        exp_name: the experiment name (a folder or run name).
        log_dir: where the experiment is written (its meaning depends on the logger).

    Example:
        >>> class PrintLogger(Logger):
        ...     def _log_scalar(self, name, value, step):
        ...         print(f"{name}@{step}: {value}")
        >>> logger = PrintLogger("demo", log_dir=None)
        >>> logger.log_scalar("loss", torch.tensor(0.5))
        loss@0: 0.5
        >>> logger.log_metrics({"loss": torch.tensor(0.25), "lr": 1e-3}, step=10)
        loss@10: 0.25
        lr@10: 0.001
    """

    def __init__(self, exp_name: str, log_dir: str | None) -> None:
        if not isinstance(exp_name, str) or not exp_name:
            raise ValueError(f"exp_name must be a non-empty string, got {exp_name!r}")
        self.exp_name = exp_name
        self.log_dir = None if log_dir is None else str(log_dir)
        self._counts: defaultdict = defaultdict(int)  # default step per (kind, name)
        self._closed = False
        self.experiment = self._create_experiment()

    # -- the contract ----------------------------------------------------------------
    def _create_experiment(self):
        """Open what the logger writes to (files, a writer, a run); stored as ``experiment``."""
        return None

    def _log_scalar(self, name: str, value: float, step: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not log scalars")

    def _log_hparams(self, cfg: dict) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not log hyperparameters")

    def _log_video(self, name: str, video: torch.Tensor, step: int, **kwargs) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not log videos")

    def _log_histogram(self, name: str, data: torch.Tensor, step: int, **kwargs) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} does not log histograms; use TensorboardLogger or WandbLogger"
        )

    def _close(self) -> None:
        """Flush and release files, writers or runs."""

    # -- public API ------------------------------------------------------------------
    def log_scalar(self, name: str, value, step: int | None = None) -> None:
        """Log one scalar.

        Args:
            name: the scalar's name (``"/"`` groups names, e.g. ``"train/reward"``).
            value: a python number or a one-element tensor (read with ``.item()`` here).
            step: the x coordinate; default: how many values ``name`` received before.
        """
        self._check_open()
        _check_name(name)
        self._log_scalar(name, _to_float(name, value), self._step("scalar", name, step))

    def log_metrics(self, metrics, step: int | None = None) -> None:
        """Log several scalars with one host sync (a dict or a TensorDict of scalars).

        Args:
            metrics: a mapping ``name -> value`` or a TensorDict (nested keys are joined
                with ``"/"``); values as in ``log_scalar``.
            step: the step of every value; default: per-name counters as in ``log_scalar``.
        """
        self._check_open()
        items = _metric_items(metrics)
        names = [name for name, _ in items]
        for name in names:
            _check_name(name)
        tensors = [(i, v) for i, (_, v) in enumerate(items) if isinstance(v, torch.Tensor)]
        values = [v for _, v in items]
        if tensors and all(v.numel() == 1 for _, v in tensors):
            if len({v.device for _, v in tensors}) == 1:
                stacked = torch.stack([v.detach().reshape(()).double() for _, v in tensors])
                for (i, _), x in zip(tensors, stacked.tolist()):  # one host sync
                    values[i] = x
        values = [_to_float(name, v) for name, v in zip(names, values)]  # all checked first
        steps = [self._step("scalar", name, step) for name in names]
        for name, value, s in zip(names, values, steps):
            self._log_scalar(name, value, s)

    def log_hparams(self, cfg) -> None:
        """Log the experiment's hyperparameters.

        Args:
            cfg: a mapping of names to values, or a dataclass instance (a recipe config).
        """
        self._check_open()
        if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
            cfg = dataclasses.asdict(cfg)
        if not isinstance(cfg, Mapping):
            raise TypeError(
                f"log_hparams expects a dict or a dataclass instance, got {type(cfg).__name__}"
            )
        self._log_hparams(dict(cfg))

    def log_video(self, name: str, video, step: int | None = None, **kwargs) -> None:
        """Log a video.

        Args:
            name: the video's name.
            video: uint8 in ``[0, 255]`` or float in ``[0, 1]``, shaped ``[T, C, H, W]``,
                ``[T, H, W, C]``, ``[N, T, C, H, W]`` or ``[N, T, H, W, C]`` with
                ``C`` in ``{1, 3}`` (``N`` videos play side by side, as a grid).
            step: default: how many videos ``name`` received before.
            **kwargs: passed to the logger's writer (e.g. ``fps``).
        """
        self._check_open()
        _check_name(name)
        self._log_video(name, as_video(video, name), self._step("video", name, step), **kwargs)

    def log_histogram(self, name: str, data, step: int | None = None, **kwargs) -> None:
        """Log the distribution of the values of a tensor (TensorBoard, W&B).

        Args:
            name: the histogram's name.
            data: a tensor or array of values (any shape).
            step: default: how many histograms ``name`` received before.
            **kwargs: passed to the logger's writer (e.g. ``bins``).
        """
        self._check_open()
        _check_name(name)
        data = torch.as_tensor(data).detach().cpu()
        self._log_histogram(name, data, self._step("histogram", name, step), **kwargs)

    def close(self) -> None:
        """Flush everything to disk and release the logger's files (idempotent)."""
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> Logger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(exp_name={self.exp_name!r}, log_dir={self.log_dir!r})"

    # -- helpers ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; create a new logger to log more.")

    def _step(self, kind: str, name: str, step) -> int:
        if step is None:
            step = self._counts[kind, name]
        else:
            step = _to_step(step)
        self._counts[kind, name] = max(self._counts[kind, name], step + 1)
        return step


# -- value conversion -------------------------------------------------------------------
def _check_name(name) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"A logged name must be a non-empty string, got {name!r}")


def _scalar_error(name, value) -> str:
    shape = list(getattr(value, "shape", []))
    return (
        f"log_scalar({name!r}): the value must be a number or a one-element tensor, "
        f"got {type(value).__name__} of shape {shape}"
    )


def _to_float(name: str, value) -> float:
    """A python float from a number, a one-element tensor or a one-element array."""
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.item())
    if isinstance(value, (np.ndarray, np.generic)) and value.size == 1:
        return float(value.item())
    raise TypeError(_scalar_error(name, value))


def _to_step(step) -> int:
    if isinstance(step, torch.Tensor) and step.numel() == 1 and not step.is_floating_point():
        step = step.item()
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise TypeError(f"step must be an integer, got {type(step).__name__}: {step!r}")
    return int(step)


def _metric_items(metrics) -> list:
    from tensordict import TensorDictBase

    if isinstance(metrics, TensorDictBase):
        keys = metrics.keys(include_nested=True, leaves_only=True)
        return [("/".join(k) if isinstance(k, tuple) else k, metrics.get(k)) for k in keys]
    if isinstance(metrics, Mapping):
        return list(metrics.items())
    raise TypeError(f"log_metrics expects a dict or a TensorDict, got {type(metrics).__name__}")


# -- videos -----------------------------------------------------------------------------
def _channels_first(shape, floating: bool) -> bool:
    """Whether the last three dims ``shape`` are ``[C, H, W]`` (else ``[H, W, C]``)."""
    first, last = shape[-3] in (1, 3), shape[-1] in (1, 3)
    if first and last:
        return floating  # ambiguous tiny image: float images are [C, H, W] by convention
    if first or last:
        return first
    raise ValueError(
        f"Cannot find the colour channel of a frame shaped {list(shape)}: expected "
        "[C, H, W] or [H, W, C] with C in {1, 3}."
    )


def as_video(video, name: str = "video") -> torch.Tensor:
    """A video as a CPU uint8 tensor ``[N, T, C, H, W]`` (see ``Logger.log_video``).

    Args:
        video: a tensor or array ``[T, C, H, W]``, ``[T, H, W, C]``, ``[N, T, C, H, W]``
            or ``[N, T, H, W, C]``; uint8 in ``[0, 255]`` or float in ``[0, 1]``.
        name: the video's name, for error messages.

    Example:
        >>> as_video(torch.zeros(5, 8, 8, 3, dtype=torch.uint8)).shape
        torch.Size([1, 5, 3, 8, 8])
    """
    video = torch.as_tensor(video).detach().cpu()
    if video.ndim not in (4, 5):
        raise ValueError(
            f"log_video({name!r}): expected [T, C, H, W] or [N, T, C, H, W] (channels may "
            f"also come last), got shape {list(video.shape)}"
        )
    if video.ndim == 4:
        video = video.unsqueeze(0)
    if not _channels_first(video.shape, video.is_floating_point()):
        video = video.permute(0, 1, 4, 2, 3)
    if video.shape[1] == 0:
        raise ValueError(f"log_video({name!r}): the video has no frames")
    if video.is_floating_point():
        low, high = video.min().item(), video.max().item()
        if low < 0.0 or high > 1.0:
            raise ValueError(
                f"log_video({name!r}): a float video must lie in [0, 1], got values in "
                f"[{low:.4g}, {high:.4g}]; pass uint8 frames or rescale them."
            )
        video = (video * 255).round().to(torch.uint8)
    elif video.dtype != torch.uint8:
        raise TypeError(f"log_video({name!r}): expected uint8 or float frames, got {video.dtype}")
    return video.contiguous()


def make_grid(frames: torch.Tensor) -> torch.Tensor:
    """Tile images side by side: ``[N, *L, C, H, W]`` -> ``[*L, C, rows * H, cols * W]``.

    Args:
        frames: ``N`` images (or ``N`` videos with leading dims ``L``), tiled row by row
            on a near-square grid (``cols = ceil(sqrt(N))``); empty cells are black.

    Example:
        >>> make_grid(torch.ones(3, 1, 2, 2)).shape
        torch.Size([1, 4, 4])
    """
    n, lead, (c, h, w) = frames.shape[0], frames.shape[1:-3], frames.shape[-3:]
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    if rows * cols > n:
        pad = frames.new_zeros((rows * cols - n, *frames.shape[1:]))
        frames = torch.cat([frames, pad])
    flat = frames.reshape(rows, cols, -1, c, h, w)  # [rows, cols, L, C, H, W]
    grid = flat.permute(2, 3, 0, 4, 1, 5)  # [L, C, rows, H, cols, W]
    return grid.reshape(*lead, c, rows * h, cols * w)


def video_to_frames(video: torch.Tensor) -> np.ndarray:
    """The RGB frames of a video for a file writer: ``[N, T, C, H, W]`` -> ``[T, H', W', 3]``.

    Several videos (``N > 1``) are tiled as a grid; grey frames are repeated to RGB.

    Args:
        video: a uint8 tensor ``[N, T, C, H, W]`` (as from ``as_video``).

    Example:
        >>> video_to_frames(torch.zeros(4, 2, 1, 8, 8, dtype=torch.uint8)).shape
        (2, 16, 16, 3)
    """
    frames = video[0] if video.shape[0] == 1 else make_grid(video)  # [T, C, H, W]
    if frames.shape[1] == 1:
        frames = frames.expand(-1, 3, -1, -1)
    return frames.permute(0, 2, 3, 1).contiguous().numpy()


def codec_friendly(frames: np.ndarray, multiple: int = 16) -> np.ndarray:
    """Pad ``[T, H, W, C]`` frames with black rows/columns to sizes that are multiples of
    ``multiple``: video codecs (libx264's macro blocks) need them, and writers would
    otherwise rescale every frame with a warning.

    Example:
        >>> codec_friendly(np.ones((2, 400, 600, 3), dtype=np.uint8)).shape
        (2, 400, 608, 3)
    """
    t, h, w, c = frames.shape
    height, width = -(-h // multiple) * multiple, -(-w // multiple) * multiple  # [T, H', W', C]
    if (height, width) == (h, w):
        return frames
    padded = np.zeros((t, height, width, c), dtype=frames.dtype)
    padded[:, :h, :w] = frames
    return padded
