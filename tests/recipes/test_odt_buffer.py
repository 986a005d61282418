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


def test_online_loss_clamps_target_actions_inside_the_bounds():
    from tensordict.nn import NormalParamExtractor, TensorDictModule
    from torch import nn

    from torchrl_lite.data import Bounded
    from torchrl_lite.modules import ProbabilisticActor, TanhNormal
    from torchrl_lite.objectives import OnlineDTLoss

    torch.manual_seed(0)
    spec = Bounded(-2.0, 2.0, (1,))
    actor = ProbabilisticActor(
        TensorDictModule(nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()),
                         ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"], distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0},
    )  # fmt: skip
    obs = torch.randn(4, 5, 3)
    at_bound = TensorDict(observation=obs, action=torch.full((4, 5, 1), 2.0), batch_size=[4, 5])
    inside = TensorDict(observation=obs, action=torch.full((4, 5, 1), 1.98), batch_size=[4, 5])
    clamped = OnlineDTLoss(actor, action_spec=spec, action_margin=0.01)
    plain = OnlineDTLoss(actor, action_spec=spec)
    # 2.0 is read as 2 - 0.01 * 2 = 1.98; without the margin it stays at the bound
    torch.testing.assert_close(clamped(at_bound)["log_likelihood"], plain(inside)["log_likelihood"])
    assert plain(at_bound)["log_likelihood"] < plain(inside)["log_likelihood"] - 1.0
    with pytest.raises(ValueError, match=r"action_margin must be in \[0, 1\).*got 1.5"):
        OnlineDTLoss(actor, action_spec=spec, action_margin=1.5)
    with pytest.raises(
        ValueError, match=r"OnlineDTLoss\(action_margin>0\): needs the action bounds"
    ):
        OnlineDTLoss(actor, action_margin=0.01)


def test_odt_recipe_keeps_the_best_trajectories_seen(tmp_path):
    pytest.importorskip("h5py", reason="h5py is not installed (pip install 'torchrl-lite[utils]')")
    from torchrl_lite.recipes import odt
    from torchrl_lite.recipes.common import make_env
    from torchrl_lite.recipes.offline import collect_dataset

    path = tmp_path / "pendulum-random.hdf5"
    collect_dataset(make_env("Pendulum-v1"), None, 600, path, seed=0)  # 3 episodes
    cfg = odt.Config(
        dataset=str(path), frames=4, pretrain_steps=2, online_interval=2, online_episodes=2,
        eval_steps=30, buffer_trajectories=4, hidden=8, n_layer=1, context_length=3, batch_size=8,
    )  # fmt: skip
    trainer, _ = odt.make_trainer(cfg, progress_bar=False)
    windows = trainer.collector.dataset
    assert windows.evict == "lowest_return" and trainer.loss_module.action_margin == 0.01
    seen = windows.returns().tolist()
    trainer.train()  # two collections of two 30-step episodes
    refresh = odt.online_refresh_of(trainer)
    assert refresh.env_frames == 120 and windows.num_trajectories == 4
    # 30-step episodes (about -30 to -300) beat 200-step random ones (about -1000): the
    # buffer keeps the four best of the 3 + 4 trajectories seen
    kept = sorted(windows.returns().tolist(), reverse=True)
    assert min(kept) >= sorted(seen + kept, reverse=True)[3] - 1e-3
    assert len(windows) < 600  # at least one 200-step dataset episode left
