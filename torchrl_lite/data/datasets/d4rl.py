"""D4RL datasets from a local HDF5 file, as a replay buffer.

The file follows D4RL's layout: ``observations [N, ...]``, ``actions [N, ...]``,
``rewards [N]``, ``terminals [N]``, optionally ``timeouts [N]``, ``next_observations``
and an ``infos/`` group of per-step arrays.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict

from torchrl_lite import _keys
from torchrl_lite._utils import require
from torchrl_lite.data.datasets.common import BaseDatasetExperienceReplay, traj_ids_from_ends

__all__ = ["D4RLExperienceReplay", "d4rl_dataset_dir", "d4rl_file_names", "read_d4rl_hdf5"]


def _bool_column(file, name: str, size: int) -> torch.Tensor:
    if name not in file:
        return torch.zeros(size, dtype=torch.bool)
    return torch.from_numpy(np.asarray(file[name][:]).reshape(size).astype(bool))


def read_d4rl_hdf5(path, use_truncated_as_done: bool = True) -> TensorDict:
    """Read a D4RL HDF5 file into a flat TensorDict of transitions ``[N]``.

    Without ``next_observations`` the next observation of step ``i`` is observation
    ``i + 1``; steps whose next observation is then unknown (a timeout, whose next row
    starts a new episode, and the file's last row unless terminal) are left out, and the
    step before a left-out timeout is marked truncated. The next observation of a terminal
    step is a placeholder (never bootstrapped from). Trajectory ids go to ``("collector", "traj_ids")``
    and ``infos/<name>`` arrays to ``("info", <name>)``. The root ``"reward"`` is the
    previous row's reward (0 for the first row), as TorchRL's D4RL reader keeps it.

    Args:
        path: the ``.hdf5`` file.
        use_truncated_as_done: ``("next", "done")`` is ``terminated | truncated`` if True,
            ``terminated`` only if False.

    Example:
        >>> # data = read_d4rl_hdf5("maze2d-open-v0.hdf5")
    """
    h5py = require("h5py", "utils")
    with h5py.File(path, "r") as file:
        missing = [k for k in ("observations", "actions", "rewards", "terminals") if k not in file]
        if missing:
            raise KeyError(f"{path} is not a D4RL file: it lacks {missing} (has {list(file)}).")
        obs = torch.from_numpy(np.asarray(file["observations"][:]))
        size = obs.shape[0]
        actions = torch.from_numpy(np.asarray(file["actions"][:]))
        rewards = torch.from_numpy(np.asarray(file["rewards"][:], dtype=np.float32)).reshape(
            size, 1
        )
        terminated = _bool_column(file, "terminals", size)
        truncated = _bool_column(file, "timeouts", size)
        has_next = "next_observations" in file
        next_obs = torch.from_numpy(np.asarray(file["next_observations"][:])) if has_next else None
        infos = {}
        if "infos" in file and hasattr(file["infos"], "keys"):
            for name in file["infos"]:
                value = file["infos"][name]
                if hasattr(value, "shape") and value.shape[:1] == (size,):
                    infos[name] = torch.from_numpy(np.asarray(value[:]))
    ends = terminated | truncated
    ends[-1] = True
    traj_ids = traj_ids_from_ends(ends)
    keep = torch.ones(size, dtype=torch.bool)
    if next_obs is None:
        next_obs = torch.cat([obs[1:], obs[-1:]])
        keep = ~truncated
        keep[-1] = bool(terminated[-1])
        # the step before a dropped timeout now ends its trajectory, cut short
        before_dropped = torch.zeros(size, dtype=torch.bool)
        before_dropped[:-1] = ~keep[1:] & (traj_ids[:-1] == traj_ids[1:])
        truncated = truncated | (before_dropped & ~terminated)
    done = terminated | truncated if use_truncated_as_done else terminated.clone()
    count = int(keep.sum())
    flags = {
        _keys.DONE: done[keep].unsqueeze(-1),
        _keys.TERMINATED: terminated[keep].unsqueeze(-1),
        _keys.TRUNCATED: truncated[keep].unsqueeze(-1),
    }
    data = TensorDict(
        {
            _keys.OBSERVATION: obs[keep],
            _keys.ACTION: actions[keep],
            _keys.TRAJ_IDS: traj_ids[keep],
            (_keys.NEXT, _keys.OBSERVATION): next_obs[keep],
            (_keys.NEXT, _keys.REWARD): rewards[keep],
        },
        batch_size=[count],
    )
    kept_rewards = rewards[keep]
    data.set(_keys.REWARD, torch.cat([torch.zeros_like(kept_rewards[:1]), kept_rewards[:-1]]))
    for key, flag in flags.items():
        data.set(key, torch.zeros_like(flag))
        data.set((_keys.NEXT, key), flag)
    for name, value in infos.items():
        data.set(("info", name), value[keep])
    return data


_GYM_MUJOCO = re.compile(r"^(halfcheetah|hopper|walker2d|ant)-([a-z-]+)-(v[12])$")


def d4rl_dataset_dir() -> Path:
    """The d4rl package's download folder: ``$D4RL_DATASET_DIR`` or ``~/.d4rl/datasets``."""
    return Path(os.environ.get("D4RL_DATASET_DIR", Path.home() / ".d4rl" / "datasets"))


def d4rl_file_names(dataset_id: str) -> list[str]:
    """File names a D4RL dataset may have in d4rl's folder (its URL's last part).

    The gym-mujoco v1/v2 files join the task's words with ``_``
    (``halfcheetah-medium-v2`` -> ``halfcheetah_medium-v2.hdf5``); ``<id>.hdf5`` is
    accepted for every dataset.

    Example:
        >>> d4rl_file_names("hopper-medium-replay-v2")
        ['hopper-medium-replay-v2.hdf5', 'hopper_medium_replay-v2.hdf5']
    """
    names = [f"{dataset_id}.hdf5"]
    match = _GYM_MUJOCO.match(dataset_id)
    if match:
        env, task, version = match.groups()
        names.append(f"{env}_{task.replace('-', '_')}-{version}.hdf5")
    return names


class D4RLExperienceReplay(BaseDatasetExperienceReplay):
    """A D4RL dataset read from the local caches, sampled like a replay buffer.

    Looked for, in order: in ``root`` (the names of :func:`d4rl_file_names`, or a
    ``<dataset_id>/`` memory-mapped folder), TorchRL's cache ``~/.cache/torchrl/d4rl/``,
    d4rl's download folder (``$D4RL_DATASET_DIR`` or ``~/.d4rl/datasets``) and
    ``$TORCHRL_LITE_DATA_DIR/d4rl/<dataset_id>.hdf5``. An HDF5 file is converted once into
    memory-mapped files next to it (see :func:`read_d4rl_hdf5` for the keys).
    ``tools/make_offline_cache.py`` writes a small dataset in d4rl's layout from rollouts.

    Args:
        dataset_id: e.g. ``"halfcheetah-medium-v2"``.
        batch_size: default batch size of ``sample`` and iteration.
        sampler: e.g. ``SamplerWithoutReplacement(drop_last=True)`` to iterate epochs.
        writer, collate_fn, pin_memory, prefetch, transform: as in
            :class:`~torchrl_lite.data.datasets.BaseDatasetExperienceReplay`.
        split_trajs: store padded trajectories ``[K, max_len]`` with
            ``("collector", "mask")``; samples are then ``[batch_size, max_len]``.
        root: a folder to look in first.
        download: if found nowhere, fetch it from the URL ``d4rl`` lists (needs ``d4rl`` and
            the network); ``False`` never touches the network.
        use_truncated_as_done: whether timeouts count as ``done``.
        direct_download: TorchRL's downloader choice; the files read are the same.
        from_env: reading through d4rl's gym envs: not supported (``ValueError``).
        terminate_on_end: accepted for TorchRL's signature; the files are read whole.

    Example:
        >>> from torchrl_lite.data.replay_buffers import SamplerWithoutReplacement
        >>> data = D4RLExperienceReplay(  # doctest: +SKIP
        ...     "halfcheetah-medium-v2", batch_size=128, direct_download=True,
        ...     sampler=SamplerWithoutReplacement(drop_last=True),
        ... )
        >>> data.sample()["observation"].shape  # doctest: +SKIP
        torch.Size([128, 17])
    """

    dataset_name = "d4rl"

    def __init__(
        self,
        dataset_id: str,
        batch_size: int | None = None,
        *,
        use_truncated_as_done=True,
        direct_download: bool | None = None,
        from_env: bool = False,
        terminate_on_end: bool | None = None,
        **kwargs,
    ):
        if from_env:
            raise ValueError(
                "D4RLExperienceReplay(from_env=True) reads through d4rl's gym environments, "
                "which are not supported; pass from_env=False to read the dataset's HDF5 file."
            )
        del direct_download, terminate_on_end  # the same files are read either way
        self.use_truncated_as_done = use_truncated_as_done
        super().__init__(dataset_id, batch_size, **kwargs)

    def _candidates(self) -> list[Path]:
        out = []
        if self.root is not None:
            out += [self.root / name for name in d4rl_file_names(self.dataset_id)]
            out.append(self.root / self.dataset_id)
        out.append(self.torchrl_cache_root() / self.dataset_id)
        out += [d4rl_dataset_dir() / name for name in d4rl_file_names(self.dataset_id)]
        out.append(self.default_root() / f"{self.dataset_id}.hdf5")
        return out

    def _convert(self, source: Path) -> TensorDict:
        return read_d4rl_hdf5(source, self.use_truncated_as_done)

    def _missing_message(self, looked: list[Path]) -> str:
        return (
            super()._missing_message(looked)
            + f"\nPut the dataset's D4RL HDF5 file in {d4rl_dataset_dir()} (where the d4rl "
            "package saves it), write a small one from rollouts with "
            f"`python tools/make_offline_cache.py d4rl {self.dataset_id} --env ENV_ID`, or "
            "pass root=<folder holding <dataset_id>.hdf5>. Nothing is downloaded unless "
            "download=True with the d4rl package installed."
        )

    def _download(self) -> None:
        import urllib.request

        try:
            infos = importlib.import_module("d4rl.infos")
        except ImportError:
            return  # the message names the folders to fill instead
        url = infos.DATASET_URLS.get(self.dataset_id)
        if url is None:
            raise ValueError(f"the d4rl package lists no URL for {self.dataset_id!r}.")
        source = d4rl_dataset_dir() / url.rsplit("/", 1)[-1]
        source.parent.mkdir(parents=True, exist_ok=True)
        partial = source.with_name(source.name + ".part")
        urllib.request.urlretrieve(url, partial)
        partial.rename(source)
