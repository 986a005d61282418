"""Minari datasets from a local dataset folder, as a replay buffer.

Minari's HDF5 layout: ``<root>/<dataset_id>/data/main_data.hdf5`` holds one group per
episode (``episode_0``, ``episode_1``, ...) with ``observations [T + 1, ...]`` (a group
of arrays for dict observations), ``actions [T, ...]``, ``rewards [T]``,
``terminations [T]``, ``truncations [T]`` and an optional ``infos`` group.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict

from torchrl_lite import _keys
from torchrl_lite._utils import require
from torchrl_lite.data.datasets.common import BaseDatasetExperienceReplay

__all__ = ["MinariExperienceReplay", "minari_datasets_dir", "read_minari_hdf5"]


def _read(node):
    """An HDF5 dataset as a tensor, or a group as a dict of them."""
    if hasattr(node, "keys"):
        return {name: _read(node[name]) for name in node}
    return torch.from_numpy(np.asarray(node[:]))


def _steps(value, count: int, first: int):
    """Rows ``first ... first + count`` of a tensor or of every tensor of a dict."""
    if isinstance(value, dict):
        return {k: _steps(v, count, first) for k, v in value.items()}
    return value[first : first + count]


def _cat(parts: list):
    if isinstance(parts[0], dict):
        return {k: _cat([p[k] for p in parts]) for k in parts[0]}
    return torch.cat(parts)


def read_minari_hdf5(path) -> TensorDict:
    """Read a Minari ``main_data.hdf5`` into a flat TensorDict of transitions ``[N]``.

    Episode ``e`` gives ``T`` transitions with ``("collector", "traj_ids") = e``;
    observation ``t`` and ``t + 1`` become ``"observation"`` and ``("next", "observation")``
    (nested keys for dict observations); ``infos`` go to ``("next", "info", <name>)``.

    Args:
        path: the ``main_data.hdf5`` file.

    Example:
        >>> # data = read_minari_hdf5("~/.minari/datasets/D4RL/door/human-v2/data/main_data.hdf5")
    """
    h5py = require("h5py", "utils")
    parts = []
    with h5py.File(path, "r") as file:
        names = sorted((n for n in file if n.startswith("episode_")), key=lambda n: int(n[8:]))
        if not names:
            raise KeyError(f"{path} holds no episode_<i> groups: not a Minari HDF5 file.")
        for name in names:
            episode = file[name]
            steps = int(np.asarray(episode["rewards"]).shape[0])
            obs = _read(episode["observations"])
            infos = _read(episode["infos"]) if "infos" in episode else {}
            next_infos = {k: v[-steps:] for k, v in infos.items() if isinstance(v, torch.Tensor)}
            part = {
                _keys.OBSERVATION: _steps(obs, steps, 0),
                (_keys.NEXT, _keys.OBSERVATION): _steps(obs, steps, 1),
                _keys.ACTION: _read(episode["actions"]),
                (_keys.NEXT, _keys.REWARD): _read(episode["rewards"]).float().reshape(steps, 1),
                (_keys.NEXT, _keys.TERMINATED): _read(episode["terminations"])
                .bool()
                .reshape(steps, 1),
                (_keys.NEXT, _keys.TRUNCATED): _read(episode["truncations"])
                .bool()
                .reshape(steps, 1),
                _keys.TRAJ_IDS: torch.full((steps,), int(name[8:]), dtype=torch.long),
                (_keys.NEXT, "info"): next_infos,
            }
            parts.append(part)
    merged = {key: _cat([p[key] for p in parts]) for key in parts[0]}
    if not merged[(_keys.NEXT, "info")]:
        del merged[(_keys.NEXT, "info")]
    count = merged[_keys.TRAJ_IDS].shape[0]
    data = TensorDict({}, batch_size=[count])
    for key, value in merged.items():
        data.set(key, TensorDict(value, batch_size=[count]) if isinstance(value, dict) else value)
    terminated = data.get((_keys.NEXT, _keys.TERMINATED))
    data.set((_keys.NEXT, _keys.DONE), terminated | data.get((_keys.NEXT, _keys.TRUNCATED)))
    for flag in _keys.DONE_KEYS:
        data.set(flag, torch.zeros_like(terminated))
    return data


def minari_datasets_dir() -> Path:
    """Minari's local dataset folder: ``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``."""
    return Path(os.environ.get("MINARI_DATASETS_PATH", Path.home() / ".minari" / "datasets"))


class MinariExperienceReplay(BaseDatasetExperienceReplay):
    """A Minari dataset read from the local caches, sampled like a replay buffer.

    Looked for, in order: ``<root>/<dataset_id>/data/main_data.hdf5`` and
    ``<root>/<dataset_id>/`` (when ``root`` is given), TorchRL's converted cache
    ``~/.cache/torchrl/minari/<dataset_id>/`` (skipped with ``load_from_local_minari``),
    then Minari's own folder ``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``
    (``<dataset_id>/data/main_data.hdf5``). Only Minari's HDF5 storage is read; see
    :func:`read_minari_hdf5` for the keys. ``tools/make_offline_cache.py`` writes a small
    dataset in Minari's layout from rollouts.

    Args:
        dataset_id: e.g. ``"D4RL/door/human-v2"`` (namespaces are sub-folders).
        batch_size: default batch size of ``sample`` and iteration.
        sampler, writer, collate_fn, pin_memory, prefetch, transform: as in
            :class:`~torchrl_lite.data.datasets.BaseDatasetExperienceReplay`.
        split_trajs: store padded episodes ``[K, max_len]`` with ``("collector", "mask")``.
        root: a folder to look in first.
        download: if found nowhere, fetch it with ``minari.download_dataset`` (needs the
            ``minari`` package and network access; it saves to Minari's folder);
            ``False`` never touches the network.
        load_from_local_minari: read Minari's local folder only (a dataset made with
            Minari's ``DataCollector``), never downloading.

    Example:
        >>> data = MinariExperienceReplay("D4RL/door/human-v2", batch_size=32)  # doctest: +SKIP
        >>> data.sample()["observation"].shape  # doctest: +SKIP
        torch.Size([32, 39])
    """

    dataset_name = "minari"

    def __init__(
        self,
        dataset_id: str,
        batch_size: int | None = None,
        *,
        load_from_local_minari: bool = False,
        download: bool | str = False,
        **kwargs,
    ):
        self.load_from_local_minari = load_from_local_minari
        download = False if load_from_local_minari else download
        super().__init__(dataset_id, batch_size, download=download, **kwargs)

    @classmethod
    def default_root(cls) -> Path:
        return minari_datasets_dir()

    def _candidates(self) -> list[Path]:
        main = Path("data") / "main_data.hdf5"
        out = []
        if self.root is not None:
            out += [self.root / self.dataset_id / main, self.root / self.dataset_id]
        if not self.load_from_local_minari:
            out.append(self.torchrl_cache_root() / self.dataset_id)
        out.append(minari_datasets_dir() / self.dataset_id / main)
        return out

    def _convert(self, source: Path) -> TensorDict:
        return read_minari_hdf5(source)

    def _missing_message(self, looked: list[Path]) -> str:
        hint = ""
        folder = minari_datasets_dir() / self.dataset_id / "data"
        if folder.is_dir():
            hint = (
                f"\n{folder} exists but holds {sorted(p.name for p in folder.iterdir())}: "
                "only Minari's HDF5 storage (main_data.hdf5) is read."
            )
        return (
            super()._missing_message(looked)
            + hint
            + f"\nDownload it with `minari download {self.dataset_id}` (pip install minari), "
            "write a small one from rollouts with `python tools/make_offline_cache.py minari "
            f"{self.dataset_id} --env ENV_ID`, or pass root=<folder of Minari datasets>. "
            "Nothing is downloaded unless download=True with the minari package installed."
        )

    def _download(self) -> None:
        try:
            minari = importlib.import_module("minari")
        except ImportError:
            return  # the message names the folders to fill instead
        minari.download_dataset(self.dataset_id)
