"""TorchRL's offline-dataset call shapes: datasets found in the usual cache folders.

Every test points HOME (and the cache variables) at a temporary folder and writes a tiny
dataset there first: nothing is downloaded.
"""

import importlib.util
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from torchrl_lite.data.datasets import D4RLExperienceReplay, MinariExperienceReplay
from torchrl_lite.data.datasets.cache_writers import (
    random_transitions,
    write_d4rl_cache,
    write_minari_hdf5,
)
from torchrl_lite.data.datasets.d4rl import d4rl_file_names
from torchrl_lite.data.replay_buffers import SamplerWithoutReplacement
from torchrl_lite.envs import GymEnv

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("D4RL_DATASET_DIR", "MINARI_DATASETS_PATH", "TORCHRL_LITE_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture(scope="module")
def pendulum_steps():
    env = GymEnv("Pendulum-v1")
    data = random_transitions(env, 64, seed=3)
    env.close()
    return data


def test_random_transitions_number_episodes_and_end_the_last(pendulum_steps):
    data = pendulum_steps
    assert data.shape == (64,)
    assert data["next", "done"][-1].item()
    # Pendulum truncates at 200 steps: one episode here, cut short at the end
    assert data["collector", "traj_ids"].unique().tolist() == [0]
    assert data["next", "truncated"][-1].item() and not data["next", "terminated"].any()


def test_d4rl_file_names_follow_the_download_urls():
    assert d4rl_file_names("halfcheetah-medium-v2") == [
        "halfcheetah-medium-v2.hdf5",
        "halfcheetah_medium-v2.hdf5",
    ]
    assert d4rl_file_names("walker2d-medium-expert-v2")[-1] == "walker2d_medium_expert-v2.hdf5"
    assert d4rl_file_names("maze2d-open-v0") == ["maze2d-open-v0.hdf5"]


def test_d4rl_direct_download_reads_the_d4rl_folder(home, pendulum_steps):
    path = write_d4rl_cache("halfcheetah-medium-v2", pendulum_steps)
    assert path == home / ".d4rl" / "datasets" / "halfcheetah_medium-v2.hdf5"
    with h5py.File(path) as file:  # D4RL's own column names
        assert {"observations", "actions", "rewards", "terminals", "timeouts"} <= set(file)
    data = D4RLExperienceReplay(
        dataset_id="halfcheetah-medium-v2",
        split_trajs=False,
        batch_size=16,
        sampler=SamplerWithoutReplacement(drop_last=True),
        prefetch=4,
        direct_download=True,
    )
    assert len(data) == 64
    torch.testing.assert_close(data.data["observation"], pendulum_steps["observation"])
    torch.testing.assert_close(data.data["next", "reward"], pendulum_steps["next", "reward"])
    seen = torch.cat([data.sample()["index"] for _ in range(4)])
    assert sorted(seen.tolist()) == list(range(64))  # one epoch without replacement


def test_d4rl_dataset_dir_variable_is_honoured(home, tmp_path, pendulum_steps, monkeypatch):
    folder = tmp_path / "elsewhere"
    monkeypatch.setenv("D4RL_DATASET_DIR", str(folder))
    write_d4rl_cache("hopper-medium-v2", pendulum_steps)
    assert (folder / "hopper_medium-v2.hdf5").is_file()
    assert len(D4RLExperienceReplay("hopper-medium-v2", 4, direct_download=True)) == 64


def test_d4rl_reads_torchrls_converted_cache_as_it_is(home, pendulum_steps):
    folder = home / ".cache" / "torchrl" / "d4rl" / "hopper-expert-v2"
    pendulum_steps.memmap(prefix=folder)
    data = D4RLExperienceReplay("hopper-expert-v2", batch_size=5)
    assert data.source == folder
    torch.testing.assert_close(data.data["action"], pendulum_steps["action"])


def test_d4rl_absent_dataset_names_every_folder_looked_in(home):
    with pytest.raises(FileNotFoundError) as err:
        D4RLExperienceReplay("walker2d-medium-v2", batch_size=4, direct_download=True)
    text = str(err.value)
    assert str(home / ".d4rl" / "datasets" / "walker2d_medium-v2.hdf5") in text
    assert str(home / ".cache" / "torchrl" / "d4rl" / "walker2d-medium-v2") in text
    assert "tools/make_offline_cache.py d4rl walker2d-medium-v2" in text


def test_d4rl_from_env_is_refused_with_the_alternative(home):
    with pytest.raises(ValueError, match="from_env=False"):
        D4RLExperienceReplay("hopper-medium-v2", batch_size=4, from_env=True)


def test_dataset_download_flag_is_checked(home):
    with pytest.raises(ValueError, match="download must be True, False or 'force', got 'yes'"):
        D4RLExperienceReplay("hopper-medium-v2", batch_size=4, download="yes")


def test_minari_data_module_path_is_the_same_class():
    from torchrl_lite.data.datasets.minari_data import MinariExperienceReplay as Alias

    assert Alias is MinariExperienceReplay


def test_minari_round_trip_from_the_local_minari_folder(home, pendulum_steps):
    path = write_minari_hdf5("CartPole-v2-random-v1", pendulum_steps, env_id="Pendulum-v1")
    assert (
        path == home / ".minari" / "datasets" / "CartPole-v2-random-v1" / "data" / "main_data.hdf5"
    )
    meta = json.loads((path.parents[1] / "metadata.json").read_text())
    assert meta["total_steps"] == 64 and meta["total_episodes"] == 1
    with h5py.File(path) as file:  # observations carry one more row than actions
        episode = file["episode_0"]
        assert episode["observations"].shape[0] == episode["actions"].shape[0] + 1
        np.testing.assert_allclose(
            episode["observations"][-1], pendulum_steps["next", "observation"][-1].numpy()
        )
    data = MinariExperienceReplay(
        dataset_id="CartPole-v2-random-v1",
        split_trajs=False,
        batch_size=8,
        load_from_local_minari=True,
        sampler=SamplerWithoutReplacement(drop_last=True),
        prefetch=4,
    )
    for key in ("observation", "action", ("next", "observation"), ("next", "reward")):
        torch.testing.assert_close(data.data[key].float(), pendulum_steps[key].float())
    assert data.data["next", "truncated"][-1].item()


def test_minari_local_only_skips_torchrls_cache_and_says_where_it_looked(home, pendulum_steps):
    pendulum_steps.memmap(prefix=home / ".cache" / "torchrl" / "minari" / "x-v0")
    assert MinariExperienceReplay("x-v0", 4, download=True).source.name == "x-v0"
    with pytest.raises(FileNotFoundError) as err:
        MinariExperienceReplay("x-v0", 4, load_from_local_minari=True)
    assert str(home / ".minari" / "datasets" / "x-v0" / "data" / "main_data.hdf5") in str(err.value)
    assert ".cache/torchrl" not in str(err.value)


def test_make_offline_cache_tool_writes_both_layouts(home, tmp_path):
    spec = importlib.util.spec_from_file_location("moc", ROOT / "tools" / "make_offline_cache.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    argv = ["--env", "Pendulum-v1", "--frames", "32", "--out", str(tmp_path)]
    assert tool.main(["d4rl", "halfcheetah-medium-v2", *argv]) == 0
    assert tool.main(["minari", "ns/pend-v0", *argv]) == 0
    assert (tmp_path / "halfcheetah_medium-v2.hdf5").is_file()  # d4rl's file name
    assert len(D4RLExperienceReplay("halfcheetah-medium-v2", 4, root=tmp_path)) == 32
    assert len(MinariExperienceReplay("ns/pend-v0", 4, root=tmp_path)) == 32
