"""RayCollector: TorchRL's collector interface over remote SyncDataCollectors, against
the same collectors run locally; weight updates; async delivery; a killed worker."""

import os
import signal

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from tests.scheme.conftest import ray_session  # noqa: F401 (the suite's one Ray session)
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import PendulumEnv

pytestmark = pytest.mark.ray


def _policy(scale=0.5):
    """action = 2 tanh(scale * sum(obs)): deterministic, inside Pendulum's [-2, 2]."""
    linear = nn.Linear(3, 1)
    nn.init.constant_(linear.weight, scale)
    nn.init.zeros_(linear.bias)
    net = nn.Sequential(linear, nn.Tanh(), _Scale(2.0))
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


class _Scale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return self.factor * x


def _local_batch(policy, seed, index, frames, iterations=1):
    collector = SyncDataCollector(PendulumEnv, policy, frames_per_batch=frames)
    collector.set_seed(seed + 1000 * index)
    for _ in range(iterations):
        batch = collector.next()
    collector.shutdown()
    return batch


def test_ray_collector_sync_equals_local_collectors(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    policy = _policy()
    collector = RayCollector(PendulumEnv, policy, frames_per_batch=40, total_frames=120,
                             num_collectors=2, sync=True, seed=3)  # fmt: skip
    batches = []
    for i, batch in enumerate(collector):
        batches.append(batch)
        if i == 0:  # new weights reach every worker for the next batch
            nn.init.constant_(policy.module[0].weight, -1.0)
            collector.update_policy_weights_()
    assert [b.batch_size for b in batches] == [torch.Size([40])] * 3
    expected = torch.cat([_local_batch(_policy(), 3, i, 20) for i in range(2)])
    assert (batches[0] == expected).all()
    # the second batch was collected with the new weights: action = 2 tanh(-sum(obs))
    second = batches[1]
    expected_action = 2 * torch.tanh(-second["observation"].sum(-1, keepdim=True))
    assert torch.allclose(second["action"], expected_action, atol=1e-6)
    collector.shutdown()
    with pytest.raises(RuntimeError, match="was shut down"):
        collector.next()


@pytest.mark.slow  # a restart starts a new worker process
def test_ray_collector_async_survives_a_killed_worker(ray_session):  # noqa: F811
    import ray

    from torchrl_lite.collectors.distributed import RayCollector

    collector = RayCollector(PendulumEnv, _policy(), frames_per_batch=20, total_frames=-1,
                             num_collectors=2, sync=False)  # fmt: skip
    first = collector.next()
    assert first.batch_size == torch.Size([20])
    pid = ray.get(collector.group.call(0, "ping"))
    os.kill(pid, signal.SIGKILL)
    # the other worker keeps delivering while worker 0 restarts; how many batches it
    # delivers before Ray reports the death depends on the machine, not on this code
    for _ in range(500):
        assert collector.next().batch_size == torch.Size([20])
        if collector.group.restarts[0]:
            break
    assert collector.group.restarts[0] == 1
    assert any("remote collector 0 failed" in e for e in collector.events)
    collector.shutdown()


def test_ray_collector_bad_input(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    with pytest.raises(
        ValueError, match="frames_per_batch=41 must be divisible by num_collectors=2"
    ):
        RayCollector(PendulumEnv, _policy(), frames_per_batch=41, num_collectors=2)
    with pytest.raises(ValueError, match="num_collectors must be an int >= 1, got 0"):
        RayCollector(PendulumEnv, _policy(), frames_per_batch=40, num_collectors=0)
    with pytest.raises(ValueError, match=r"request 3 CPU in all \(remote_configs="):
        RayCollector(PendulumEnv, _policy(), frames_per_batch=30, num_collectors=3)
