"""Write small offline datasets in the layouts the dataset readers look for.

Offline scripts written for TorchRL take no dataset path: they read D4RL and Minari
data from the usual cache folders. These writers fill those folders from rollouts of
an env (random actions by default), so such scripts run where nothing can be
downloaded:

* :func:`write_d4rl_cache`: ``<d4rl folder>/<file name>.hdf5`` in D4RL's layout (see
  :func:`~torchrl_lite.data.datasets.d4rl.d4rl_file_names`);
* :func:`write_minari_hdf5`: ``<minari folder>/<dataset_id>/data/main_data.hdf5`` (one
  ``episode_<i>`` group per episode) and ``metadata.json``.

``tools/make_offline_cache.py`` is the command-line face of both.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import require
from torchrl_lite.data.datasets.d4rl import d4rl_dataset_dir, d4rl_file_names
from torchrl_lite.data.datasets.minari import minari_datasets_dir

__all__ = ["random_transitions", "write_d4rl_cache", "write_minari_hdf5"]


def random_transitions(env, frames: int, seed: int = 0, policy=None) -> TensorDictBase:
    """``frames`` steps of ``env`` (a single env) as flat transitions ``[frames]``.

    Episodes that end are reset and the rollout goes on; ``("collector", "traj_ids")``
    numbers them from 0 and the last step is marked truncated unless it ends an episode.

    Args:
        env: an unbatched env.
        frames: steps to take (>= 1).
        seed: seeds the env and torch's RNG (restored afterwards).
        policy: a TensorDict module writing ``"action"``; None: uniform random actions.
    """
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise ValueError(f"random_transitions: frames must be a positive int, got {frames!r}.")
    if env.batch_size.numel() != 1 or len(env.batch_size) > 0:
        raise ValueError(
            f"random_transitions: pass an unbatched env (batch_size []), got {env.batch_size}."
        )
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(seed)
        env.set_seed(seed)
        data = env.rollout(frames, policy, break_when_any_done=False)  # [N]
    done = data.get((K.NEXT, K.DONE)).reshape(-1).clone()
    truncated = data.get((K.NEXT, K.TRUNCATED), torch.zeros_like(done)).reshape(-1).clone()
    if not done[-1]:
        truncated[-1] = done[-1] = True
    data.set((K.NEXT, K.TRUNCATED), truncated.reshape(-1, 1))
    data.set((K.NEXT, K.DONE), done.reshape(-1, 1))
    ends = done.long()
    data.set(K.TRAJ_IDS, torch.cumsum(ends, 0) - ends)
    return data


def write_d4rl_cache(
    dataset_id: str, data: TensorDictBase, folder: Path | str | None = None
) -> Path:
    """Write flat transitions ``data [N]`` as D4RL's HDF5 file for ``dataset_id``.

    The file is named as the d4rl package names its download (the last name of
    :func:`~torchrl_lite.data.datasets.d4rl.d4rl_file_names`) in ``folder`` (default:
    d4rl's folder, ``$D4RL_DATASET_DIR`` or ``~/.d4rl/datasets``), with
    ``observations``, ``actions``, ``rewards``, ``terminals``, ``timeouts`` and
    ``next_observations`` (floating point as float32). Returns the file.
    """
    h5py = require("h5py", "utils")
    folder = Path(folder) if folder is not None else d4rl_dataset_dir()
    path = folder / d4rl_file_names(dataset_id)[-1]
    folder.mkdir(parents=True, exist_ok=True)
    terminated = data.get((K.NEXT, K.TERMINATED)).reshape(-1)
    done = data.get((K.NEXT, K.DONE)).reshape(-1)
    partial = path.with_name(path.name + ".partial")
    with h5py.File(partial, "w") as file:
        for name, value in (
            ("observations", data.get(K.OBSERVATION)),
            ("actions", data.get(K.ACTION)),
            ("rewards", data.get((K.NEXT, K.REWARD)).reshape(-1)),
            ("next_observations", data.get((K.NEXT, K.OBSERVATION))),
        ):
            value = value.float() if value.is_floating_point() else value
            file.create_dataset(name, data=value.numpy())
        file.create_dataset("terminals", data=terminated.numpy())
        file.create_dataset("timeouts", data=(done & ~terminated).numpy())
        file.attrs["writer"] = "torchrl_lite"
    partial.replace(path)
    return path


def write_minari_hdf5(
    dataset_id: str,
    data: TensorDictBase,
    folder: Path | str | None = None,
    env_id: str | None = None,
) -> Path:
    """Write flat transitions ``data [N]`` as Minari's HDF5 dataset ``dataset_id``.

    Each trajectory (runs of equal ``("collector", "traj_ids")``) becomes a group
    ``episode_<i>`` with ``observations [T + 1, ...]`` (the steps' observations, then the
    last next observation), ``actions [T, ...]``, ``rewards [T]``, ``terminations [T]``
    and ``truncations [T]``, in ``<folder>/<dataset_id>/data/main_data.hdf5`` (default
    folder: Minari's, ``$MINARI_DATASETS_PATH`` or ``~/.minari/datasets``); a
    ``metadata.json`` beside ``data/`` records the counts. Returns the HDF5 file.
    """
    h5py = require("h5py", "utils")
    folder = Path(folder) if folder is not None else minari_datasets_dir()
    path = folder / dataset_id / "data" / "main_data.hdf5"
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = data.get(K.TRAJ_IDS).reshape(-1)
    starts = torch.ones_like(ids, dtype=torch.bool)
    starts[1:] = ids[1:] != ids[:-1]
    bounds = starts.nonzero().flatten().tolist() + [ids.numel()]
    terminated = data.get((K.NEXT, K.TERMINATED)).reshape(-1)
    truncated = data.get((K.NEXT, K.DONE)).reshape(-1) & ~terminated
    partial = path.with_name(path.name + ".partial")
    with h5py.File(partial, "w") as file:
        for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
            group = file.create_group(f"episode_{i}")
            obs = torch.cat(
                [data.get(K.OBSERVATION)[lo:hi], data.get((K.NEXT, K.OBSERVATION))[hi - 1 : hi]]
            )
            group.create_dataset("observations", data=obs.numpy())
            group.create_dataset("actions", data=data.get(K.ACTION)[lo:hi].numpy())
            reward = data.get((K.NEXT, K.REWARD))[lo:hi].reshape(-1)
            group.create_dataset("rewards", data=reward.numpy())
            group.create_dataset("terminations", data=terminated[lo:hi].numpy())
            group.create_dataset("truncations", data=truncated[lo:hi].numpy())
            group.attrs.update({"id": i, "total_steps": hi - lo})
        file.attrs.update({"total_episodes": len(bounds) - 1, "total_steps": ids.numel()})
    partial.replace(path)
    metadata = {
        "dataset_id": dataset_id,
        "total_episodes": len(bounds) - 1,
        "total_steps": int(ids.numel()),
        "data_format": "hdf5",
        "env_id": env_id,
        "author": "torchrl_lite (tools/make_offline_cache.py)",
    }
    (path.parent.parent / "metadata.json").write_text(json.dumps(metadata, indent=1))
    return path
