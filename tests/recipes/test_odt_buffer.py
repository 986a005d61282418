"""The online decision transformer's trajectory buffer: a dataset larger than the buffer
starts with its best trajectories; a full buffer drops the oldest or the worst."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data.datasets import TrajectoryWindows


def _episodes(returns, length=3, first_id=0):
    """Flat transitions of one episode per return (reward spread evenly over its steps)."""
    n = len(returns) * length
    reward = torch.tensor(returns, dtype=torch.float32).repeat_interleave(length) / length
    return TensorDict(
        {
            "observation": reward.unsqueeze(-1).expand(n, 3).clone(),
            "action": torch.zeros(n, 1),
            ("next", "reward"): reward.unsqueeze(-1),
            ("collector", "traj_ids"): first_id + torch.arange(n) // length,
        },
        batch_size=[n],
    )


def _returns(windows):
    return [round(r) for r in windows.returns().tolist()]


def test_a_large_dataset_starts_with_its_best_trajectories_in_order():
    windows = TrajectoryWindows(_episodes([-5.0, -1.0, -9.0, -2.0, -3.0]), 2, capacity=3)
    assert _returns(windows) == [-1, -2, -3] and len(windows) == 9
    # the windows only hold the kept trajectories' steps
    assert set(windows.sample(200)["observation"][..., -1, 0].mul(3).round().tolist()) <= {
        -1.0, -2.0, -3.0,
    }  # fmt: skip


def test_oldest_eviction_is_first_in_first_out():
    windows = TrajectoryWindows(_episodes([-1.0, -2.0, -3.0]), 2, capacity=3)
    assert windows.extend(_episodes([-9.0, -0.5], first_id=10)) == 2
    assert _returns(windows) == [-3, -9, -0] and windows.num_trajectories == 3


def test_lowest_return_eviction_keeps_the_best_seen():
    windows = TrajectoryWindows(_episodes([-1.0, -2.0, -3.0]), 2, capacity=3, evict="lowest_return")
    windows.extend(_episodes([-9.0, -0.5], first_id=10))  # -9 leaves at once, -0.5 stays
    assert _returns(windows) == [-1, -2, -0]
    windows.extend(_episodes([-2.0], first_id=20))  # a tie with a stored -2: the older leaves
    assert _returns(windows) == [-1, -0, -2] and len(windows) == 9


def test_unknown_eviction_is_rejected():
    with pytest.raises(
        ValueError, match=r"evict must be one of \('oldest', 'lowest_return'\), got 'worst'"
    ):
        TrajectoryWindows(_episodes([-1.0]), 2, capacity=3, evict="worst")
