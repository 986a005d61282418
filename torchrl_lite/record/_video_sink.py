"""``VideoSink``: stream an env's rendered frames to a video file, one step at a time.

What ``torchrl-lite eval --video`` uses: each step's ``"pixels"`` goes straight to the
writer (ffmpeg, or the GIF encoder) and is then dropped from the env's output, so memory
does not grow with the episodes. The path is checked when the sink is built, before the
first episode; the file is written beside and renamed into place by :meth:`finish`.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from torchrl_lite import _keys as K
from torchrl_lite.envs.transforms.keys import ExcludeTransform

__all__ = ["VideoSink"]

_FORMATS = (".mp4", ".gif", ".mov", ".mkv", ".avi", ".webm")


class VideoSink(ExcludeTransform):
    """Write each step's ``"pixels"`` ``[H, W, 3]`` uint8 to ``path``, then drop them.

    Args:
        path: the video file (``.mp4``, ``.gif``, ``.mov``, ``.mkv``, ``.avi``, ``.webm``).
        fps: frames per second.

    Raises:
        ValueError: an unknown extension, or a folder that does not exist.
        PermissionError: the folder is not writable.
        ImportError: imageio (and, but for ``.gif``, imageio-ffmpeg) is not installed.
    """

    def __init__(self, path, fps: int = 30):
        super().__init__(K.PIXELS)
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in _FORMATS:
            raise ValueError(
                f"--video {path}: the extension {suffix or '(none)'!r} is not a video format "
                f"this writes; use one of {', '.join(_FORMATS)}."
            )
        folder = self.path.parent
        if not folder.is_dir():
            raise ValueError(
                f"--video {path}: the folder {folder} does not exist; create it first."
            )
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(f"--video {path}: the folder {folder} is not writable.")
        if self.path.is_dir():
            raise ValueError(f"--video {path}: this is a folder; pass a file name.")
        needed = ["imageio"] + ([] if suffix == ".gif" else ["imageio_ffmpeg"])
        missing = [name for name in needed if importlib.util.find_spec(name) is None]
        if missing:
            raise ImportError(
                f"--video {path} needs {' and '.join(missing)}: pip install "
                f"'torchrl-lite[rendering]'."
            )
        self.fps = fps
        self.frames = 0
        self._tmp = folder / f".{self.path.stem}.tmp-{os.getpid()}{suffix}"
        self._writer = None

    def _step(self, tensordict, next_tensordict):
        pixels = next_tensordict.get(K.PIXELS, None)
        if pixels is not None:
            self._write(pixels)
        return self._call(next_tensordict)

    def _write(self, pixels) -> None:
        from torchrl_lite.record.loggers.common import codec_friendly

        frames = pixels.reshape(-1, *pixels.shape[-3:]).cpu().numpy()  # [N, H, W, 3]
        if self._writer is None:
            import imageio.v2 as imageio

            options = {} if self._tmp.suffix == ".gif" else {"macro_block_size": 1}
            self._writer = imageio.get_writer(self._tmp, fps=self.fps, **options)
        for frame in codec_friendly(frames):
            self._writer.append_data(frame)
            self.frames += 1

    def finish(self) -> Path:
        """Close the writer and move the file into place; returns the path."""
        if self._writer is None:
            raise ValueError(f"--video {self.path}: no frame was rendered, nothing written.")
        self._writer.close()
        self._writer = None
        os.replace(self._tmp, self.path)
        return self.path

    def discard(self) -> None:
        """Close and remove an unfinished file (after an error); the target is untouched."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._tmp.unlink(missing_ok=True)
