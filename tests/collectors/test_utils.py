"""split_trajectories against hand-built expectations."""

import pytest
import torch
from tensordict import TensorDict

from tests.collectors.helpers import CountingEnv
from torchrl_lite.collectors import SyncDataCollector, split_trajectories
from torchrl_lite.envs import SerialEnv


def batch_2x5():
    """Two envs, five steps: env 0 runs trajectories 0 (3 steps) and 2 (2 steps), env 1
    runs 1 (2 steps) and 3 (3 steps)."""
    ids = torch.tensor([[0, 0, 0, 2, 2], [1, 1, 3, 3, 3]])
    done = torch.tensor([[0, 0, 1, 0, 0], [0, 1, 0, 0, 0]], dtype=torch.bool).unsqueeze(-1)
    return TensorDict(
        {
            "obs": torch.arange(10.0).reshape(2, 5, 1),
            "next": {"done": done},
            "collector": {"traj_ids": ids},
        },
        [2, 5],
    )


def test_split_trajectories_hand_built():
    out = split_trajectories(batch_2x5())
    assert out.batch_size == torch.Size([4, 3])
    assert out["obs"][..., 0].tolist() == [[0, 1, 2], [3, 4, 0], [5, 6, 0], [7, 8, 9]]
    assert out["collector", "traj_ids"].tolist() == [[0, 0, 0], [2, 2, 0], [1, 1, 0], [3, 3, 3]]
    assert out["collector", "mask"].tolist() == [
        [True, True, True],
        [True, True, False],
        [True, True, False],
        [True, True, True],
    ]
    assert out["next", "done"][..., 0].tolist() == [
        [False, False, True],
        [False, False, False],
        [False, True, False],
        [False, False, False],
    ]


def test_split_trajectories_from_done_flags_without_ids():
    td = batch_2x5().exclude("collector")
    out = split_trajectories(td)
    assert out["obs"][..., 0].tolist() == [[0, 1, 2], [3, 4, 0], [5, 6, 0], [7, 8, 9]]
    assert out["mask"].sum(-1).tolist() == [3, 2, 2, 3]  # no "collector": mask at the root


def test_split_trajectories_time_only_and_custom_keys():
    td = TensorDict({"x": torch.arange(4), "ids": torch.tensor([5, 5, 6, 6])}, [4])
    out = split_trajectories(td, trajectory_key="ids")
    assert out["x"].tolist() == [[0, 1], [2, 3]] and out["mask"].all()
    td = TensorDict({"x": torch.arange(3), "meta": {"traj_ids": torch.tensor([1, 2, 2])}}, [3])
    out = split_trajectories(td, prefix="meta")
    assert out["meta", "mask"].tolist() == [[True, False], [True, True]]


def test_split_trajectories_of_a_collector_batch():
    env = SerialEnv(3, [lambda n=n: CountingEnv(limit=n) for n in (2, 3, 4)])
    data = SyncDataCollector(env, None, frames_per_batch=30).next()
    out = split_trajectories(data)
    mask = out["collector", "mask"]
    assert mask.sum() == 30 and out.batch_size[1] == 4
    for traj, m in zip(out.unbind(0), mask):  # one id per trajectory, counts from 0
        assert traj["collector", "traj_ids"][m].unique().numel() == 1
        counts = traj["count"][m][:, 0]
        assert counts.tolist() == list(range(len(counts)))


def test_split_trajectories_bad_input():
    with pytest.raises(TypeError, match="expects a TensorDict"):
        split_trajectories(torch.zeros(3))
    with pytest.raises(ValueError, match="time dimension"):
        split_trajectories(TensorDict({"x": torch.zeros(())}, []))
    with pytest.raises(KeyError, match="traj_ids"):
        split_trajectories(TensorDict({"x": torch.zeros(3)}, [3]))
