"""D4RL datasets from a local HDF5 file, as a replay buffer.

The file follows D4RL's layout: ``observations [N, ...]``, ``actions [N, ...]``,
``rewards [N]``, ``terminals [N]``, optionally ``timeouts [N]``, ``next_observations``
and an ``infos/`` group of per-step arrays.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict

from torchrl_lite import _keys
from torchrl_lite._utils import require
from torchrl_lite.data.datasets.common import BaseDatasetExperienceReplay, traj_ids_from_ends

__all__ = ["D4RLExperienceReplay"]


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
    and ``infos/<name>`` arrays to ``("info", <name>)``.

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
    for key, flag in flags.items():
        data.set(key, torch.zeros_like(flag))
        data.set((_keys.NEXT, key), flag)
    for name, value in infos.items():
        data.set(("info", name), value[keep])
    return data


class D4RLExperienceReplay(BaseDatasetExperienceReplay):
    """A D4RL dataset read from ``<root>/<dataset_id>.hdf5``, sampled like a replay buffer.

    The file is converted once into memory-mapped files next to it
    (``<dataset_id>.hdf5.torchrl_lite[.split].memmap``); see :func:`read_d4rl_hdf5` for the
    keys. Nothing is downloaded unless ``download=True``.

    Args:
        dataset_id: e.g. ``"maze2d-open-v0"``.
        batch_size: default batch size of ``sample`` and iteration.
        sampler: e.g. ``SamplerWithoutReplacement(drop_last=True)`` to iterate epochs.
        collate_fn, pin_memory, prefetch, transform: as in
            :class:`~torchrl_lite.data.replay_buffers.ReplayBuffer`.
        split_trajs: store padded trajectories ``[K, max_len]`` with
            ``("collector", "mask")``; samples are then ``[batch_size, max_len]``.
        root: the folder holding ``<dataset_id>.hdf5``; default
            ``$TORCHRL_LITE_DATA_DIR/d4rl`` or ``~/.cache/torchrl_lite/d4rl``.
        download: if the file is missing, fetch it from the URL the ``d4rl`` package lists
            (needs ``d4rl`` and network access); ``False`` never touches the network.
        use_truncated_as_done: whether timeouts count as ``done``.

    Example:
        >>> from torchrl_lite.data.replay_buffers import SamplerWithoutReplacement
        >>> data = D4RLExperienceReplay(  # doctest: +SKIP
        ...     "maze2d-open-v0", split_trajs=True, batch_size=128,
        ...     sampler=SamplerWithoutReplacement(drop_last=True),
        ... )
        >>> for sample in data:  # doctest: +SKIP
        ...     print(sample.shape)
    """

    dataset_name = "d4rl"

    def __init__(
        self,
        dataset_id: str,
        batch_size: int | None = None,
        *,
        use_truncated_as_done=True,
        **kwargs,
    ):
        self.use_truncated_as_done = use_truncated_as_done
        super().__init__(dataset_id, batch_size, **kwargs)

    def _source_path(self) -> Path:
        return self.root / f"{self.dataset_id}.hdf5"

    def _convert(self, source: Path) -> TensorDict:
        return read_d4rl_hdf5(source, self.use_truncated_as_done)

    def _missing_message(self, source: Path) -> str:
        return (
            f"D4RL dataset {self.dataset_id!r} not found: looked for {source}. Put the "
            f"dataset's HDF5 file there (the d4rl package saves it under ~/.d4rl/datasets when "
            f"you call env.get_dataset(); the URLs are in d4rl.infos.DATASET_URLS), pass "
            f"root=<folder holding {self.dataset_id}.hdf5>, or pass download=True."
        )

    def _download(self, source: Path) -> None:
        import urllib.request

        infos = require("d4rl.infos", "d4rl")
        url = infos.DATASET_URLS.get(self.dataset_id)
        if url is None:
            raise ValueError(f"the d4rl package lists no URL for {self.dataset_id!r}.")
        source.parent.mkdir(parents=True, exist_ok=True)
        partial = source.with_name(source.name + ".part")
        urllib.request.urlretrieve(url, partial)
        partial.rename(source)
