"""Offline datasets read from small HDF5 files the tests write (nothing is downloaded)."""

import numpy as np
import pytest
import torch

from torchrl_lite.data.datasets import D4RLExperienceReplay, MinariExperienceReplay
from torchrl_lite.data.datasets import d4rl as d4rl_module
from torchrl_lite.data.replay_buffers import SamplerWithoutReplacement

h5py = pytest.importorskip("h5py", reason="h5py is needed to write the test datasets")


def write_d4rl(path, lengths, ends_with="terminal", next_observations=False):
    """Episodes of the given lengths; observation = [global step, episode]."""
    obs, terminals, timeouts = [], [], []
    for episode, length in enumerate(lengths):
        for t in range(length):
            obs.append([len(obs), episode])
            last = t == length - 1
            terminals.append(last and ends_with == "terminal")
            timeouts.append(last and ends_with == "timeout")
    obs = np.asarray(obs, dtype=np.float32)
    size = obs.shape[0]
    with h5py.File(path, "w") as file:
        file["observations"] = obs
        file["actions"] = obs[:, :1] * 10
        file["rewards"] = obs[:, 0] * 100
        file["terminals"] = np.asarray(terminals)
        file["timeouts"] = np.asarray(timeouts)
        file["infos/goal"] = np.tile(np.asarray([[1.0, 2.0]], dtype=np.float32), (size, 1))
        if next_observations:
            file["next_observations"] = obs + 0.5
    return obs


def test_seed_d4rl_snippet_on_a_local_file(tmp_path):
    write_d4rl(tmp_path / "maze2d-open-v0.hdf5", [3] * 200 + [5] * 100, ends_with="terminal")
    data = D4RLExperienceReplay(
        "maze2d-open-v0",
        split_trajs=True,
        batch_size=128,
        sampler=SamplerWithoutReplacement(drop_last=True),
        root=tmp_path,
    )
    batches = []
    for sample in data:  # or sample = data.sample()
        batches.append(sample)
    assert len(batches) == 2  # 300 trajectories // 128, the last partial batch dropped
    assert batches[0].batch_size == torch.Size([128, 5])
    sample = data.sample()
    mask = sample["collector", "mask"]
    assert mask.sum(1).min() >= 3 and (mask[:, 0]).all()
    obs, nxt = sample["observation"], sample["next", "observation"]
    steps = mask[:, 1:] & mask[:, :-1]
    assert torch.equal(nxt[:, :-1][steps], obs[:, 1:][steps])  # next obs = following obs
    done = sample["next", "done"].squeeze(-1)
    assert (done.sum(1) <= 1).all() and (done.sum(1) == 1).sum() > 0


def test_d4rl_flat_keys_and_timeouts(tmp_path):
    obs = write_d4rl(tmp_path / "hopper-test.hdf5", [4, 3, 5], ends_with="timeout")
    data = D4RLExperienceReplay("hopper-test", batch_size=4, root=tmp_path)
    # each timeout step has no known next observation: dropped (3 of 12 steps)
    assert len(data) == 9
    td = data.data
    assert td["observation"][:, 0].tolist() == [0, 1, 2, 4, 5, 7, 8, 9, 10]
    assert torch.equal(td["next", "observation"][:, 0], td["observation"][:, 0] + 1)
    assert td["next", "truncated"].squeeze(-1).tolist() == [0, 0, 1, 0, 1, 0, 0, 0, 1]
    assert td["next", "done"].squeeze(-1).tolist() == [0, 0, 1, 0, 1, 0, 0, 0, 1]
    assert not td["next", "terminated"].any() and not td["done"].any()
    assert td["collector", "traj_ids"].tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert torch.equal(td["next", "reward"].squeeze(-1), td["observation"][:, 0] * 100)
    assert td["info", "goal"].shape == torch.Size([9, 2])
    sample = data.sample()
    assert set(sample.keys()) >= {"observation", "action", "next", "index"}
    assert obs.shape == (12, 2)


def test_d4rl_with_next_observations_keeps_every_step(tmp_path):
    write_d4rl(tmp_path / "walker-test.hdf5", [4, 4], ends_with="timeout", next_observations=True)
    data = D4RLExperienceReplay("walker-test", batch_size=2, root=tmp_path)
    assert len(data) == 8
    assert torch.equal(data.data["next", "observation"], data.data["observation"] + 0.5)


def test_d4rl_converts_once_then_reads_the_cache(tmp_path, monkeypatch):
    write_d4rl(tmp_path / "cached-v0.hdf5", [4, 4])
    D4RLExperienceReplay("cached-v0", root=tmp_path)
    assert (tmp_path / "cached-v0.hdf5.torchrl_lite.memmap").is_dir()

    def fail(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(d4rl_module, "read_d4rl_hdf5", fail)
    again = D4RLExperienceReplay("cached-v0", root=tmp_path, batch_size=3)
    assert len(again) == 8 and again.sample().batch_size == torch.Size([3])


def test_d4rl_missing_file_names_the_path_and_never_downloads(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        D4RLExperienceReplay("maze2d-open-v0", root=tmp_path, download=False)
    assert str(tmp_path / "maze2d-open-v0.hdf5") in str(err.value)
    assert "root=" in str(err.value)


def test_offline_datasets_are_read_only(tmp_path):
    write_d4rl(tmp_path / "ro-v0.hdf5", [3])
    data = D4RLExperienceReplay("ro-v0", root=tmp_path)
    with pytest.raises(RuntimeError, match="read-only"):
        data.extend(data.data[:1].clone())


def write_minari(root, dataset_id, lengths, dict_obs=True):
    path = root / dataset_id / "data"
    path.mkdir(parents=True)
    with h5py.File(path / "main_data.hdf5", "w") as file:
        for episode, length in enumerate(lengths):
            group = file.create_group(f"episode_{episode}")
            steps = np.arange(length + 1, dtype=np.float32) + 100 * episode
            if dict_obs:
                group["observations/position"] = np.stack([steps, steps], -1)
                group["observations/goal"] = np.full((length + 1, 1), episode, dtype=np.float32)
            else:
                group["observations"] = steps[:, None]
            group["actions"] = steps[:-1, None] * 2
            group["rewards"] = steps[:-1]
            group["terminations"] = np.arange(length) == length - 1
            group["truncations"] = np.zeros(length, dtype=bool)
            group["infos/success"] = np.arange(length + 1) == length


def test_minari_dataset_with_dict_observations(tmp_path):
    write_minari(tmp_path, "test/pointmaze-v0", [3, 4])
    data = MinariExperienceReplay("test/pointmaze-v0", root=tmp_path, batch_size=5)
    assert len(data) == 7
    td = data.data
    position = td["observation", "position"][:, 0]
    assert position.tolist() == [0, 1, 2, 100, 101, 102, 103]
    assert torch.equal(td["next", "observation", "position"][:, 0], position + 1)
    assert td["collector", "traj_ids"].tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert td["next", "done"].squeeze(-1).tolist() == [0, 0, 1, 0, 0, 0, 1]
    assert td["next", "info", "success"].tolist() == [0, 0, 1, 0, 0, 0, 1]
    assert data.sample().batch_size == torch.Size([5])
    split = MinariExperienceReplay(
        "test/pointmaze-v0", root=tmp_path, split_trajs=True, batch_size=2
    )
    assert split.data.batch_size == torch.Size([2, 4])


def test_minari_missing_dataset_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="main_data.hdf5") as err:
        MinariExperienceReplay("test/absent-v0", root=tmp_path)
    assert "minari download test/absent-v0" in str(err.value)
