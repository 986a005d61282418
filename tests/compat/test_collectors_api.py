"""Seed-era TorchRL collector usage (issue 13, items 2, 3, 7 and 9), import changed only."""

import warnings

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite.collectors import (
    MultiaSyncDataCollector,
    MultiSyncDataCollector,
    RandomPolicy,
    SyncDataCollector,
    split_trajectories,
)
from torchrl_lite.envs import GymEnv
from torchrl_lite.envs.utils import ActionBoundsWarning


def lazy_policy():
    """A policy with an uninitialised (lazy) layer, as TorchRL's tutorials build them."""
    return TensorDictModule(nn.LazyLinear(1), in_keys=["observation"], out_keys=["action"])


def constant_policy(value: float):
    net = nn.Linear(3, 1)
    nn.init.zeros_(net.weight)
    nn.init.constant_(net.bias, value)
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


# -- item 2: lazy layers materialized at construction -----------------------------------
def test_sync_collector_materializes_a_lazy_policy():
    policy = lazy_policy()
    collector = SyncDataCollector(
        GymEnv("Pendulum-v1"), policy, frames_per_batch=10, total_frames=10
    )
    assert policy.module.weight.shape == (1, 3)  # shaped by one call on a reset
    data = next(iter(collector))
    assert data["action"].shape == (10, 1)
    collector.shutdown()


@pytest.mark.parametrize("cls", [MultiSyncDataCollector, MultiaSyncDataCollector])
def test_multi_collectors_materialize_a_lazy_policy(cls):
    policy = lazy_policy()
    collector = cls(
        [lambda: GymEnv("Pendulum-v1")] * 2, policy, frames_per_batch=20, total_frames=20
    )
    try:
        assert policy.module.weight.shape == (1, 3)
        with torch.no_grad():
            policy.module.bias.fill_(0.25)
            policy.module.weight.zero_()
        collector.update_policy_weights_()
        data = next(iter(collector))
        assert torch.allclose(data["action"], torch.tensor(0.25))
    finally:
        collector.shutdown()


# -- item 3: multi-collectors take env instances ----------------------------------------
def test_multi_collector_accepts_env_instances():
    envs = [GymEnv("Pendulum-v1"), GymEnv("Pendulum-v1")]
    collector = MultiSyncDataCollector(
        envs, RandomPolicy(envs[0].action_spec), frames_per_batch=20, total_frames=40
    )
    try:
        collector.set_seed(0)
        batches = list(collector)
        assert len(batches) == 2 and batches[0].numel() == 20
    finally:
        collector.shutdown()
    with pytest.warns(UserWarning, match="same env instance"):
        same = MultiSyncDataCollector(
            [envs[0], envs[0]], None, frames_per_batch=20, total_frames=20
        )
    same.shutdown()


# -- item 7: out-of-bound continuous actions in a collector ------------------------------
def test_collector_passes_an_overshooting_gaussian_policy_with_one_warning():
    env = GymEnv("Pendulum-v1")
    collector = SyncDataCollector(env, constant_policy(2.5), frames_per_batch=10, total_frames=30)
    with pytest.warns(ActionBoundsWarning, match=r"(?s)'action'.*max 2.5.*Bounded") as record:
        batches = list(collector)
    assert len(batches) == 3 and len([w for w in record if w.category is ActionBoundsWarning]) == 1
    assert torch.allclose(batches[-1]["action"], torch.tensor(2.5))  # passed on unchanged
    collector.shutdown()


def test_collector_notices_an_overshoot_after_the_first_step():
    calls = {"n": 0}

    def policy(td):  # in bounds for the first batch (checked step by step), then not
        calls["n"] += 1
        return td.set("action", torch.full((1,), 0.0 if calls["n"] <= 13 else -3.0))

    collector = SyncDataCollector(
        GymEnv("Pendulum-v1"), policy, frames_per_batch=10, total_frames=20
    )
    with pytest.warns(ActionBoundsWarning, match="min -3"):
        list(collector)  # the second batch's check (one comparison per batch) notices it
    collector.shutdown()
    calls["n"] = 0
    strict = SyncDataCollector(
        GymEnv("Pendulum-v1", spec_check="strict"), policy, frames_per_batch=10, total_frames=20
    )
    with pytest.raises(ValueError, match='beyond.*spec_check="strict"'):
        list(strict)
    strict.shutdown()
    with warnings.catch_warnings():  # in-bounds policies: no warning at all
        warnings.simplefilter("error", ActionBoundsWarning)
        ok = SyncDataCollector(
            GymEnv("Pendulum-v1"), constant_policy(1.0), frames_per_batch=10, total_frames=10
        )
        next(iter(ok))
        ok.shutdown()


def test_collector_still_raises_on_a_wrong_action_shape():
    policy = TensorDictModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["action"])
    collector = SyncDataCollector(GymEnv("Pendulum-v1"), policy, frames_per_batch=10)
    with pytest.raises(ValueError, match="shape"):
        collector.next()
    collector.shutdown()


# -- item 9: split_trajectories(as_nested=) ----------------------------------------------
@pytest.mark.parametrize("layout", [True, torch.jagged])
def test_split_trajectories_as_nested_equals_the_padded_split(layout):
    ids = torch.tensor([[0, 0, 1, 1, 1], [2, 3, 3, 3, 3]])
    td = TensorDict(
        {"obs": torch.arange(10.0).reshape(2, 5, 1), "collector": {"traj_ids": ids}}, [2, 5]
    )
    padded = split_trajectories(td)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: nested tensors are a prototype
        nested = split_trajectories(td, as_nested=layout)
    assert nested.batch_size == (4,)
    for i, traj in enumerate(nested["obs"].unbind()):
        length = int(padded["collector", "mask"][i].sum())
        torch.testing.assert_close(traj, padded["obs"][i, :length])
    with pytest.raises(TypeError, match="as_nested"):
        split_trajectories(td, as_nested="yes")
