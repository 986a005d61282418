"""VideoRecorder: a transform that keeps the frames an env shows and writes them as a video.

Inside a ``TransformedEnv`` it records the frame of each reset and each step (one frame in
``skip``); ``dump()`` hands the video to a logger (``log_video``) and empties the buffer.
The data passing through is left unchanged.
"""

from __future__ import annotations

import copy
import warnings

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.envs.transforms._utils import AbsentKeyError
from torchrl_lite.envs.transforms.transforms import Transform, _reset_mask, td_get
from torchrl_lite.record.loggers.common import _channels_first, make_grid

__all__ = ["VideoRecorder"]


class VideoRecorder(Transform):
    """Record the frames of an env (or of a stored batch) and log them as a video.

    Frames are uint8 ``[H, W, 3]`` (``GymEnv(..., from_pixels=True)``), float
    ``[C, H, W]`` in ``[0, 1]`` (after ``ToTensorImage``) or grey ``[H, W]``. In a batched
    env (frames ``[B, H, W, 3]``) each recorded frame tiles the ``B`` envs on a grid
    (``make_grid=True``) or shows the first env. Frames are copied to the CPU as uint8
    ``[C, H, W]``; ``dump`` logs them as one ``[1, T, C, H, W]`` video.

    Args:
        logger: a logger (``log_video`` is called by ``dump``), or None to keep frames only.
        tag: the video's name; ``dump(suffix=...)`` appends ``_{suffix}``.
        in_keys: the frame entry, one key (default ``["pixels"]``).
        skip: record one frame in ``skip`` (default 1: every frame, the reset frame first).
        center_crop: crop each frame to its central ``center_crop x center_crop`` square.
        make_grid: tile the frames of batched envs (else record the first env only).
        fps: frames per second of the video (default: the logger's ``video_fps``).
        **kwargs: further arguments of the logger's ``log_video``.

    Example:
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> from torchrl_lite.record import VideoRecorder
        >>> recorder = VideoRecorder(logger=None, tag="cartpole")
        >>> env = TransformedEnv(GymEnv("CartPole-v1", from_pixels=True), recorder)
        >>> _ = env.rollout(4, break_when_any_done=False)
        >>> recorder.frames.shape  # the reset frame and 4 steps, [T, C, H, W]
        torch.Size([5, 3, 400, 600])
        >>> recorder.dump()  # logs the video (with a logger) and empties the buffer
        >>> len(recorder.obs)
        0
    """

    def __init__(
        self,
        logger,
        tag: str,
        in_keys=None,
        skip: int | None = None,
        center_crop: int | None = None,
        make_grid: bool = True,
        fps: int | None = None,
        **kwargs,
    ) -> None:
        super().__init__(in_keys=[K.PIXELS] if in_keys is None else in_keys)
        if len(self.in_keys) != 1:
            raise ValueError(
                f"VideoRecorder records one frame entry, got in_keys={self.in_keys}; "
                "use one VideoRecorder per entry."
            )
        if logger is not None and not callable(getattr(logger, "log_video", None)):
            raise TypeError(
                f"VideoRecorder: logger must have a log_video method (a Logger) or be None, "
                f"got {type(logger).__name__}"
            )
        if not isinstance(tag, str) or not tag:
            raise ValueError(f"VideoRecorder: tag must be a non-empty string, got {tag!r}")
        skip = 1 if skip is None else skip
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 1:
            raise ValueError(f"VideoRecorder: skip must be an integer >= 1, got {skip!r}")
        if center_crop is not None and (not isinstance(center_crop, int) or center_crop < 1):
            raise ValueError(
                f"VideoRecorder: center_crop must be a positive integer or None, got {center_crop!r}"
            )
        self.logger = logger
        self.tag = tag
        self.skip = skip
        self.center_crop = center_crop
        self.make_grid = make_grid
        self.video_kwargs = dict(kwargs) if fps is None else {**kwargs, "fps": fps}
        self.iter = 0  # number of dumps: the default step of the next video
        self.count = 0  # frames seen since the last dump (recorded or skipped)
        self.obs: list[torch.Tensor] = []  # recorded frames, uint8 [C, H, W] on the CPU

    def _attach(self, specs) -> None:
        # an entry no spec declares (e.g. the frames a DreamerDecoder writes from a world
        # model's latent state) is recorded from the steps that carry it, as in TorchRL
        try:
            super()._attach(specs)
        except AbsentKeyError as err:
            warnings.warn(
                f"{err.args[0]} It records that entry from the steps that carry it (as "
                "TorchRL) and nothing otherwise: check the key if that is a typo.",
                UserWarning,
                stacklevel=2,
            )

    # -- recording ---------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        frame = td_get(next_tensordict, self.in_keys[0])
        if frame is not None:
            self._record(frame, next_tensordict.batch_dims)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        # A partial reset of a batched env returns every env's frame, and the envs not
        # being reset show the frame of the step just recorded: record it only if the
        # shown envs (all of them on a grid, the first otherwise) were all reset.
        mask = _reset_mask(tensordict, tensordict_reset.batch_size)
        if mask is not None:
            shown = mask.all() if self.make_grid else mask.reshape(-1)[0]
            if not shown:
                return tensordict_reset
        return self._call(tensordict_reset)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Record the frames of a stored batch ``[*B, T]``: ``T`` frames, ``B`` tiled."""
        self._check_present(tensordict, self._pairs)
        frames = tensordict.get(self.in_keys[0])
        batch_dims = tensordict.batch_dims
        if batch_dims == 0:
            self._record(frames, 0)
            return tensordict
        time_first = frames.movedim(batch_dims - 1, 0)  # [T, *B, *image]
        for frame in time_first:
            self._record(frame, batch_dims - 1)
        return tensordict

    def _record(self, frame: torch.Tensor, batch_dims: int) -> None:
        self.count += 1
        if (self.count - 1) % self.skip:
            return
        self.obs.append(self._to_frame(frame, batch_dims))

    def _to_frame(self, frame: torch.Tensor, batch_dims: int) -> torch.Tensor:
        """One uint8 CPU frame ``[C, H, W]`` from ``[*B, H, W, C]``, ``[*B, C, H, W]``, ``[*B, H, W]``."""
        image_dims = frame.ndim - batch_dims
        if image_dims == 2:
            frame = frame.unsqueeze(-3)  # grey [*B, 1, H, W]
        elif image_dims == 3:
            if not _channels_first(frame.shape, frame.is_floating_point()):
                frame = frame.movedim(-1, -3)  # [*B, C, H, W]
        else:
            raise ValueError(
                f"VideoRecorder: {self.in_keys[0]!r} has frames shaped {list(frame.shape)} "
                f"with {batch_dims} batch dims; expected [H, W, C], [C, H, W] or [H, W]."
            )
        frame = frame.detach()
        if self.center_crop is not None:
            frame = self._crop(frame)
        frame = frame.reshape(-1, *frame.shape[-3:])  # [M, C, H, W]
        frame = make_grid(frame) if self.make_grid and frame.shape[0] > 1 else frame[0]
        if frame.is_floating_point():
            frame = frame.cpu()
            low, high = frame.min().item(), frame.max().item()
            if low < 0.0 or high > 1.0:
                raise ValueError(
                    f"VideoRecorder: float frames of {self.in_keys[0]!r} must lie in [0, 1], "
                    f"got values in [{low:.4g}, {high:.4g}]"
                )
            return (frame * 255).round().to(torch.uint8)
        if frame.dtype != torch.uint8:
            raise TypeError(
                f"VideoRecorder: frames of {self.in_keys[0]!r} must be uint8 or float, got {frame.dtype}"
            )
        return frame.to("cpu", copy=True)  # the env may reuse its buffer

    def _crop(self, frame: torch.Tensor) -> torch.Tensor:
        size, (height, width) = self.center_crop, frame.shape[-2:]
        if size > height or size > width:
            raise ValueError(
                f"VideoRecorder: center_crop={size} is larger than the frames ({height}x{width})"
            )
        top, left = (height - size) // 2, (width - size) // 2
        return frame[..., top : top + size, left : left + size]

    # -- output ------------------------------------------------------------------------
    @property
    def frames(self) -> torch.Tensor:
        """The recorded frames, uint8 ``[T, C, H, W]`` (``T`` may be 0)."""
        if not self.obs:
            return torch.zeros(0, 3, 0, 0, dtype=torch.uint8)
        return torch.stack(self.obs)

    def dump(self, suffix: str | None = None, step: int | None = None) -> None:
        """Log the recorded frames as one video and empty the buffer (no-op if empty).

        Args:
            suffix: appended to the tag (``f"{tag}_{suffix}"``).
            step: the video's step (default: the number of previous dumps).
        """
        if self.obs and self.logger is not None:
            tag = self.tag if suffix is None else f"{self.tag}_{suffix}"
            video = self.frames.unsqueeze(0)  # [1, T, C, H, W]
            step = self.iter if step is None else step
            self.logger.log_video(tag, video, step=step, **self.video_kwargs)
        # cleared only once the video is written: a failed write keeps the frames
        self.obs = []
        self.count = 0
        self.iter += 1

    # -- specs: the data is unchanged ---------------------------------------------------
    def transform_observation_spec(self, observation_spec):
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        return reward_spec

    def transform_done_spec(self, done_spec):
        return done_spec

    def __deepcopy__(self, memo):
        # Copies (clone(), batched envs) share the logger, which holds open files.
        memo[id(self.logger)] = self.logger
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for name, value in self.__dict__.items():
            new.__dict__[name] = copy.deepcopy(value, memo)
        return new

    def extra_repr(self) -> str:
        return f"tag={self.tag!r}, in_keys={self.in_keys}, skip={self.skip}, frames={len(self.obs)}"
