"""What every offline dataset shares: convert once to a memory-mapped TensorDict, then act
as a read-only :class:`~torchrl_lite.data.replay_buffers.TensorDictReplayBuffer`.

A dataset subclass says where its source files are (:meth:`_source_path`) and how to read
them into one flat TensorDict of transitions (:meth:`_convert`), with the keys
``"observation"``, ``"action"``, ``("next", "observation")``, ``("next", "reward")``,
``("next", "done" | "terminated" | "truncated")`` and ``("collector", "traj_ids")``.
The conversion is cached as memory-mapped files next to the source (written atomically,
and redone when the source file changes).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys
from torchrl_lite.data.replay_buffers.replay_buffers import TensorDictReplayBuffer
from torchrl_lite.data.replay_buffers.tensor_storage import TensorStorage
from torchrl_lite.data.replay_buffers.writers import Writer

__all__ = ["BaseDatasetExperienceReplay", "default_data_root"]

MASK = ("collector", "mask")
_CACHE_VERSION = 2  # 2: D4RL's root "reward"


def default_data_root() -> Path:
    """``$TORCHRL_LITE_DATA_DIR``, or ``~/.cache/torchrl_lite``: where datasets are looked for."""
    return Path(os.environ.get("TORCHRL_LITE_DATA_DIR", Path.home() / ".cache" / "torchrl_lite"))


def traj_ids_from_ends(ends: torch.Tensor) -> torch.Tensor:
    """Trajectory ids ``[N]`` (0, 1, ...) from flags marking each trajectory's last step.

    Args:
        ends: bool ``[N]``, True on the last step of each trajectory.

    Example:
        >>> traj_ids_from_ends(torch.tensor([False, True, False, False, True])).tolist()
        [0, 0, 1, 1, 1]
    """
    ends = ends.to(torch.long)
    return torch.cumsum(ends, 0) - ends


def pad_trajectories(data: TensorDictBase, traj_key=_keys.TRAJ_IDS) -> TensorDict:
    """Reshape flat transitions ``[N]`` into padded trajectories ``[K, max_len]``.

    The datasets' own flat-data version of ``collectors.split_trajectories`` (which takes
    ``[*B, T]`` rollouts); ``data/`` cannot import the collectors.

    Steps keep their order; padding is zero and ``("collector", "mask")`` is True on real
    steps. Trajectories are the runs of equal ``data[traj_key]``.

    Args:
        data: flat transitions, batch size ``[N]``.
        traj_key: the trajectory-id entry.

    Example:
        >>> data = TensorDict({("collector", "traj_ids"): torch.tensor([0, 0, 0, 1]),
        ...                    "x": torch.arange(4.0)}, batch_size=[4])
        >>> out = pad_trajectories(data)
        >>> out.shape, out["x"].tolist(), out["collector", "mask"].tolist()
        (torch.Size([2, 3]), [[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]], [[True, True, True], [True, False, False]])
    """
    ids = data.get(traj_key).reshape(data.shape[0], -1)[:, 0]
    traj = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(ids[1:] != ids[:-1], 0)])
    count = int(traj[-1]) + 1 if traj.numel() else 0
    lengths = torch.bincount(traj, minlength=count)  # [K]
    starts = torch.cumsum(lengths, 0) - lengths
    position = torch.arange(traj.numel()) - starts[traj]  # [N]: step within its trajectory
    max_len = int(lengths.max()) if count else 0
    out = TensorDict({}, batch_size=[count, max_len])
    for key, value in data.items(True, True):
        padded = torch.zeros((count, max_len, *value.shape[1:]), dtype=value.dtype)
        padded[traj, position] = value
        out.set(key, padded)
    mask = torch.zeros(count, max_len, dtype=torch.bool)
    mask[traj, position] = True
    out.set(MASK, mask)
    return out


class _ReadOnlyWriter(Writer):
    """The writer of offline datasets: they cannot be written to."""

    def add(self, data) -> int:
        raise RuntimeError("offline datasets are read-only: copy samples into another buffer.")

    def extend(self, data) -> torch.Tensor:
        raise RuntimeError("offline datasets are read-only: copy samples into another buffer.")


class BaseDatasetExperienceReplay(TensorDictReplayBuffer):
    """An offline dataset read from local files, sampled like a replay buffer.

    A dataset is looked for in a list of places (:meth:`_candidates`, first found wins):
    a source file (HDF5) is converted once into memory-mapped files next to it; a folder
    holding a memory-mapped TensorDict (TorchRL's own cache, ``~/.cache/torchrl/<name>/<id>``)
    is read as it is. Nothing is downloaded unless ``download`` is true and the dataset's
    downloader is installed; a dataset found nowhere raises ``FileNotFoundError`` naming
    every place looked in.

    Args:
        dataset_id: the dataset's name.
        batch_size: default batch size of ``sample`` and iteration.
        sampler: default :class:`~torchrl_lite.data.replay_buffers.RandomSampler`.
        writer: default read-only (``extend`` raises); pass a writer to allow writes.
        collate_fn, pin_memory, prefetch, transform: as in
            :class:`~torchrl_lite.data.replay_buffers.ReplayBuffer`.
        split_trajs: store padded trajectories ``[K, max_len]`` (with
            ``("collector", "mask")``): a sample is then ``[batch_size, max_len]``.
        root: a folder to look in first (see each dataset for the layout).
        download: allow fetching a dataset found nowhere; ``False`` never touches the
            network. ``"force"`` is read as ``True``.

    Example:
        >>> # see D4RLExperienceReplay and MinariExperienceReplay
    """

    dataset_name = "dataset"

    def __init__(
        self,
        dataset_id: str,
        batch_size: int | None = None,
        *,
        sampler=None,
        writer=None,
        collate_fn=None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform=None,
        split_trajs: bool = False,
        root=None,
        download: bool | str = False,
    ) -> None:
        if download not in (True, False, "force"):
            raise ValueError(f"download must be True, False or 'force', got {download!r}.")
        self.dataset_id = dataset_id
        self.root = Path(root).expanduser() if root is not None else None
        self.split_trajs = split_trajs
        source = self._find()
        if source is None and download:
            self._download()
            source = self._find()
        if source is None:
            raise FileNotFoundError(self._missing_message(self._candidates()))
        self.source = source
        data = self._load_memmap(source) if source.is_dir() else self._cached(source)
        super().__init__(
            storage=TensorStorage(data),
            sampler=sampler,
            writer=_ReadOnlyWriter() if writer is None else writer,
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            prefetch=prefetch,
            transform=transform,
            batch_size=batch_size,
        )

    # -- what a dataset provides ----------------------------------------------------------
    @classmethod
    def default_root(cls) -> Path:
        """This library's own data folder for the dataset kind."""
        return default_data_root() / cls.dataset_name

    @classmethod
    def torchrl_cache_root(cls) -> Path:
        """TorchRL's cache of converted datasets: ``~/.cache/torchrl/<dataset kind>``."""
        return Path.home() / ".cache" / "torchrl" / cls.dataset_name

    def _candidates(self) -> list[Path]:
        """Places the dataset may be, in order: source files or memory-mapped folders."""
        raise NotImplementedError

    def _convert(self, source: Path) -> TensorDict:
        raise NotImplementedError

    def _download(self) -> None:
        raise NotImplementedError

    def _missing_message(self, looked: list[Path]) -> str:
        places = "".join(f"\n  {p}" for p in looked)
        return f"{self.dataset_name} dataset {self.dataset_id!r} not found; looked in:{places}"

    # -- shared ---------------------------------------------------------------------------
    @property
    def data(self) -> TensorDictBase:
        """The whole dataset as a memory-mapped TensorDict."""
        return self._storage._data

    def _find(self) -> Path | None:
        for path in self._candidates():
            if path.is_file() or (path.is_dir() and (path / "meta.json").is_file()):
                return path
        return None

    def _load_memmap(self, folder: Path) -> TensorDictBase:
        """A memory-mapped TensorDict folder (TorchRL's cache layout), read as it is."""
        data = TensorDict.load_memmap(folder)
        if self.split_trajs and data.ndim == 1:
            data = pad_trajectories(data.to_tensordict())
        return data

    def _cached(self, source: Path) -> TensorDictBase:
        suffix = ".split" if self.split_trajs else ""
        cache = source.with_name(f"{source.name}.torchrl_lite{suffix}.memmap")
        stamp_file = cache.with_name(cache.name + ".json")
        stat = source.stat()
        stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "version": _CACHE_VERSION}
        if cache.is_dir() and stamp_file.is_file() and json.loads(stamp_file.read_text()) == stamp:
            return TensorDict.load_memmap(cache)
        data = self._convert(source)
        if self.split_trajs:
            data = pad_trajectories(data)
        stamp_file.unlink(missing_ok=True)
        # written next to the cache, then renamed into place: a crash never leaves a
        # half-written cache (the same on every tensordict release)
        partial = cache.with_name(f"{cache.name}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        data.memmap(prefix=partial)
        shutil.rmtree(cache, ignore_errors=True)
        os.replace(partial, cache)
        stamp_file.write_text(json.dumps(stamp))
        return TensorDict.load_memmap(cache)
