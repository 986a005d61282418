"""``CheckpointRotation``: a folder of numbered checkpoints, the last N (and the best) kept."""

from __future__ import annotations

import math
import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from torchrl_lite.checkpoint._adapters import to_json
from torchrl_lite.checkpoint._checkpoint import Checkpoint, CheckpointError, _local

__all__ = ["CheckpointBest", "CheckpointMetricMode", "CheckpointRotation"]

CheckpointMetricMode = Literal["min", "max"]
CheckpointBest = tuple[str, CheckpointMetricMode]


class CheckpointRotation:
    """Save checkpoints as ``<directory>/<prefix>-<step, 12 digits>`` (``.torchrl`` for
    archives) and keep the newest ``keep_last`` of them, plus the best by a metadata
    metric when ``keep_best=(key, "min" | "max")`` is given.

    Args:
        directory: where the checkpoints live.
        keep_last: how many of the newest checkpoints to keep (>= 1).
        keep_best: ``(metadata key, "min" or "max")``: also keep the best checkpoint; each
            save must then give that key in ``metadata``.
        prefix: the checkpoints' name prefix.

    Example:
        >>> import tempfile
        >>> rotation = CheckpointRotation(tempfile.mkdtemp(), keep_last=2)
        >>> ckpt = Checkpoint(progress={"frames": 0})
        >>> paths = [rotation.save(ckpt, step=s) for s in (1, 2, 3)]
        >>> [p.name for p in rotation.checkpoints()]
        ['checkpoint-000000000002', 'checkpoint-000000000003']
    """

    def __init__(
        self,
        directory,
        *,
        keep_last: int,
        keep_best: CheckpointBest | None = None,
        prefix: str = "checkpoint",
    ):
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
            raise ValueError(f"keep_last must be an int >= 1, got {keep_last!r}.")
        if not isinstance(prefix, str) or not prefix or "/" in prefix or "\\" in prefix:
            raise ValueError(f"prefix must be a non-empty file name prefix, got {prefix!r}.")
        if keep_best is not None:
            if (
                not isinstance(keep_best, tuple)
                or len(keep_best) != 2
                or not isinstance(keep_best[0], str)
                or keep_best[1] not in ("min", "max")
            ):
                raise ValueError(
                    f"keep_best must be (metadata key, 'min' or 'max'), got {keep_best!r}."
                )
        self.directory = _local(directory)
        self.keep_last, self.keep_best, self.prefix = keep_last, keep_best, prefix

    def save(
        self,
        checkpoint: Checkpoint,
        *,
        step: int,
        metadata=None,
        components=None,
        component_options=None,
    ) -> Path:
        """Save ``checkpoint`` as step ``step``, then remove what the policy does not keep."""
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(f"expected a Checkpoint, got {type(checkpoint).__name__}.")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an int >= 0, got {step!r}.")
        metadata = dict(metadata or {})
        if self.keep_best is not None:
            key = self.keep_best[0]
            if key not in metadata:
                raise KeyError(f"keep_best reads the metric {key!r}; pass it in metadata=.")
            _metric(metadata[key])
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self._path(step, checkpoint.format)
        checkpoint.save(
            path, components=components, component_options=component_options, metadata=metadata
        )
        other = self._path(step, "archive" if checkpoint.format == "directory" else "directory")
        if other.exists():
            _remove(other)
        self.prune()
        return path

    def checkpoints(self) -> tuple[Path, ...]:
        """The readable checkpoints, oldest step first."""
        return tuple(path for path, _, _ in self._records())

    def latest(self) -> Path | None:
        records = self._records()
        return records[-1][0] if records else None

    def best(self) -> Path | None:
        """The best checkpoint by ``keep_best`` (None without it or without any)."""
        best = self._best(self._records())
        return None if best is None else best[0]

    def prune(self) -> tuple[Path, ...]:
        """Remove the checkpoints the policy does not keep; return their paths."""
        records = self._records()
        keep = {path for path, _, _ in records[-self.keep_last :]}
        best = self._best(records)
        if best is not None:
            keep.add(best[0])
        removed = tuple(path for path, _, _ in records if path not in keep)
        for path in removed:
            _remove(path)
        return removed

    def load_latest(self, checkpoint: Checkpoint, **kwargs):
        """``checkpoint.load`` of the newest checkpoint (keywords as for ``load``)."""
        latest = self.latest()
        if latest is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory} (prefix {self.prefix!r}).")
        return checkpoint.load(latest, **kwargs)

    def _path(self, step: int, fmt: str) -> Path:
        return self.directory / f"{self.prefix}-{step:012d}{'.torchrl' if fmt == 'archive' else ''}"

    def _records(self) -> list[tuple[Path, int, float | None]]:
        """``(path, step, metric)`` of each readable checkpoint, by step then age."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in self.directory.iterdir():
            stem = path.name.removesuffix(".torchrl")
            digits = stem.removeprefix(f"{self.prefix}-")
            if digits == stem or not digits.isdigit():
                continue
            try:
                manifest = Checkpoint.manifest(path)
            except (CheckpointError, OSError):
                continue  # a leftover of a killed save, or not ours
            metric = None
            if self.keep_best is not None:
                try:
                    metric = _metric(manifest.get("metadata", {}).get(self.keep_best[0]))
                except (TypeError, ValueError):
                    metric = None
            created = manifest.get("created_at", "")
            found.append((int(digits), _when(created), path, metric))
        found.sort(key=lambda r: (r[0], r[1], r[2].name))
        latest = {}
        for step, _, path, metric in found:  # one checkpoint per step: the newest
            latest[step] = (path, step, metric)
        return list(latest.values())

    def _best(self, records):
        if self.keep_best is None:
            return None
        scored = [r for r in records if r[2] is not None]
        if not scored:
            return None
        sign = 1.0 if self.keep_best[1] == "max" else -1.0
        return max(scored, key=lambda r: (sign * r[2], r[1]))  # ties: the latest step


def _metric(value) -> float:
    value = to_json(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a keep_best metric must be a number, got {value!r}.")
    if not math.isfinite(value):
        raise ValueError(f"a keep_best metric must be finite, got {value!r}.")
    return float(value)


def _when(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return datetime.min.replace(tzinfo=timezone.utc)


def _remove(path: Path) -> None:
    """Rename first, then delete: a half-deleted checkpoint never keeps its name."""
    doomed = path.with_name(f".{path.name}.delete-{uuid.uuid4().hex}")
    os.replace(path, doomed)
    if doomed.is_dir():
        shutil.rmtree(doomed, ignore_errors=True)
    else:
        doomed.unlink(missing_ok=True)
