"""TorchRL's ``RayCollector`` signature, import changed only: a list of env factories or
envs (one per remote collector), ``num_collectors``, ``collector_class``,
``collector_kwargs``, ``remote_configs``, ``ray_init_config``,
``update_after_each_batch``, ``max_weight_update_interval`` and ``replay_buffer``, each
against the same collectors run in this process (or Ray's own resource count); and a
RayCollector that is no longer referenced frees its workers."""

import functools
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from tests.scheme.conftest import ray_session  # noqa: F401 (the suite's one Ray session)
from torchrl_lite.collectors import MultiSyncDataCollector, SyncDataCollector
from torchrl_lite.envs import PendulumEnv

pytestmark = pytest.mark.ray
pytest.importorskip("ray", reason="the distributed tests need ray")


class _Scale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return self.factor * x


def policy(scale=0.5):
    """action = 2 tanh(scale * sum(obs)): deterministic, inside Pendulum's [-2, 2]."""
    linear = nn.Linear(3, 1)
    nn.init.constant_(linear.weight, scale)
    nn.init.zeros_(linear.bias)
    return TensorDictModule(
        nn.Sequential(linear, nn.Tanh(), _Scale(2.0)), in_keys=["observation"], out_keys=["action"]
    )


def set_scale(module, scale):
    with torch.no_grad():
        module.module[0].weight.fill_(scale)


def acted_with(batch, scale) -> bool:
    return torch.allclose(
        batch["action"], 2 * torch.tanh(scale * batch["observation"].sum(-1, keepdim=True)),
        atol=1e-6,
    )  # fmt: skip


def local_batches(env_fn, frames, batches, **kwargs):
    collector = SyncDataCollector(env_fn, policy(), frames_per_batch=frames, **kwargs)
    out = [collector.next() for _ in range(batches)]
    collector.shutdown()
    return out


def free_cpus(ray, want, within=15.0):
    deadline = time.monotonic() + within
    while (free := ray.available_resources().get("CPU", 0.0)) < want:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return free


def test_list_of_env_factories_one_per_collector(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    makers = [functools.partial(PendulumEnv, seed=1), functools.partial(PendulumEnv, seed=2)]
    collector = RayCollector(makers, policy(), frames_per_batch=40, total_frames=80)
    assert collector.num_collectors == 2  # from the list
    batches = list(collector)
    expected = [local_batches(make, 20, 2) for make in makers]
    for i, batch in enumerate(batches):  # worker 0's 20 frames, then worker 1's
        assert (batch == torch.cat([expected[0][i], expected[1][i]])).all()
    collector.shutdown()


def test_list_of_env_instances(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    collector = RayCollector([PendulumEnv(seed=3), PendulumEnv(seed=4)], policy(),
                             frames_per_batch=20, num_collectors=2)  # fmt: skip
    batch = collector.next()
    expected = [local_batches(PendulumEnv(seed=s), 10, 1)[0] for s in (3, 4)]
    assert (batch == torch.cat(expected)).all()
    collector.shutdown()


def test_create_env_fn_list_bad_input(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    with pytest.raises(ValueError, match="create_env_fn lists 3 entries but num_collectors=2"):
        RayCollector([PendulumEnv] * 3, policy(), frames_per_batch=20, num_collectors=2)
    with pytest.raises(TypeError, match="create_env_fn must be an env, a callable returning"):
        RayCollector([PendulumEnv, 3], policy(), frames_per_batch=20)
    with pytest.raises(ValueError, match="create_env_fn is an empty list"):
        RayCollector([], policy(), frames_per_batch=20)
    with pytest.raises(ValueError, match="collector_kwargs lists 1 entries but num_collectors=2"):
        RayCollector([PendulumEnv] * 2, policy(), frames_per_batch=20, collector_kwargs=[{}])
    with pytest.raises(ValueError, match="num_workers_per_collector must be >= 1, got 0"):
        RayCollector(PendulumEnv, policy(), frames_per_batch=20, num_workers_per_collector=0)


def test_worker_group_takes_one_resource_dict_per_worker():
    """What remote_configs lists become: one Ray actor option dict per worker."""
    from torchrl_lite.collectors.distributed import RolloutWorker, WorkerGroup

    group = WorkerGroup("w", RolloutWorker, None, 2, [{"num_cpus": 0.5}, {"num_cpus": 1}])
    assert group.per_worker == [{"num_cpus": 0.5}, {"num_cpus": 1}]
    with pytest.raises(ValueError, match="1 resource dicts for 2 ws: give one each"):
        WorkerGroup("w", RolloutWorker, None, 2, [{"num_cpus": 1}])


def test_collector_kwargs_one_dict_or_one_per_collector(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    make = functools.partial(PendulumEnv, seed=5)
    per = [{"max_frames_per_traj": 4}, {"max_frames_per_traj": 7}]
    collector = RayCollector([make, make], policy(), frames_per_batch=40, collector_kwargs=per)
    batch = collector.next()
    expected = [local_batches(make, 20, 1, **kwargs)[0] for kwargs in per]
    assert (batch == torch.cat(expected)).all()
    truncated = batch["next", "truncated"].reshape(2, 20)
    assert truncated[0].nonzero().flatten().tolist() == [3, 7, 11, 15, 19]
    assert truncated[1].nonzero().flatten().tolist() == [6, 13]
    collector.shutdown()
    with pytest.raises(TypeError, match="collector_kwargs must be a dict or a list of dicts"):
        RayCollector(make, policy(), frames_per_batch=20, collector_kwargs=[3])


def test_collector_class_multi_sync_per_remote_collector(ray_session):  # noqa: F811
    """Each remote collector runs a MultiSyncDataCollector over 2 env processes, as TorchRL
    does with ``num_workers_per_collector``."""
    from torchrl_lite.collectors.distributed import RayCollector

    make = functools.partial(PendulumEnv, seed=6)
    collector = RayCollector(make, policy(), frames_per_batch=20, num_collectors=1, seed=9,
                             collector_class="sync", num_workers_per_collector=2)  # fmt: skip
    assert collector.collector_class is MultiSyncDataCollector
    batch = collector.next()
    local = MultiSyncDataCollector([make, make], policy(), frames_per_batch=20)
    local.set_seed(9)
    expected = local.next()
    local.shutdown()
    assert batch.batch_size == expected.batch_size == torch.Size([2, 10])
    assert (batch == expected).all()
    collector.shutdown()
    with pytest.raises(ValueError, match="collector_class='multi' is not a collector name"):
        RayCollector(make, policy(), frames_per_batch=20, collector_class="multi")
    with pytest.raises(TypeError, match="collector_class must be a collector class"):
        RayCollector(make, policy(), frames_per_batch=20, collector_class=dict)


def test_remote_configs_one_dict_or_one_per_collector(ray_session):  # noqa: F811
    """Ray's own count of free CPUs shows what each worker was given."""
    from torchrl_lite.collectors.distributed import RayCollector

    collector = RayCollector([PendulumEnv] * 2, policy(), frames_per_batch=20,
                             remote_configs=[{"num_cpus": 0.25}, {"num_cpus": 1}])  # fmt: skip
    assert free_cpus(ray_session, 0.75, within=0.0) == pytest.approx(0.75)
    collector.next()
    collector.shutdown()
    collector = RayCollector([PendulumEnv] * 2, policy(), frames_per_batch=20,
                             remote_configs={"num_cpus": 0.5})  # fmt: skip
    assert free_cpus(ray_session, 1.0, within=0.0) == pytest.approx(1.0)
    collector.shutdown()
    with pytest.raises(ValueError, match=r"request 3 CPU in all"):
        RayCollector([PendulumEnv] * 2, policy(), frames_per_batch=20,
                     remote_configs=[{"num_cpus": 2}, {"num_cpus": 1}])  # fmt: skip
    with pytest.raises(ValueError, match="remote_configs lists 3 entries but num_collectors=2"):
        RayCollector([PendulumEnv] * 2, policy(), frames_per_batch=20,
                     remote_configs=[{"num_cpus": 0.5}] * 3)  # fmt: skip


def test_weight_updates_after_each_batch_and_max_interval(ray_session):  # noqa: F811
    """The local policy changes after every batch and update_policy_weights_() is never
    called: update_after_each_batch sends every change; max_weight_update_interval=1
    refreshes a worker once it collected more than one batch with the same weights; -1
    (default) never."""
    from torchrl_lite.collectors.distributed import RayCollector

    scales = [0.5, -1.0, 0.25, 1.5]
    seen = {}
    for name, kwargs in [("after_each", {"update_after_each_batch": True}),
                         ("interval_1", {"max_weight_update_interval": 1}),
                         ("default", {})]:  # fmt: skip
        local = policy(scales[0])
        collector = RayCollector(PendulumEnv, local, frames_per_batch=20, **kwargs)
        seen[name] = []
        for i, batch in enumerate(collector.iterator()):
            seen[name].append(next(s for s in scales if acted_with(batch, s)))
            if i + 1 == len(scales):
                break
            set_scale(local, scales[i + 1])
        collector.shutdown()
    assert seen["after_each"] == [0.5, -1.0, 0.25, 1.5]
    assert seen["interval_1"] == [0.5, 0.5, 0.25, 0.25]
    assert seen["default"] == [0.5] * 4
    with pytest.raises(ValueError, match="max_weight_update_interval must be >= -1, got -2"):
        RayCollector(PendulumEnv, policy(), frames_per_batch=20, max_weight_update_interval=-2)


def test_replay_buffer_receives_every_workers_batches(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector
    from torchrl_lite.data import LazyTensorStorage, ReplayBuffer

    makers = [functools.partial(PendulumEnv, seed=7), functools.partial(PendulumEnv, seed=8)]
    buffer = ReplayBuffer(storage=LazyTensorStorage(100))
    collector = RayCollector(makers, policy(), frames_per_batch=40, total_frames=80,
                             replay_buffer=buffer)  # fmt: skip
    assert list(collector) == [None, None]  # the batches went into the buffer
    assert len(buffer) == 80
    expected = [local_batches(make, 20, 2) for make in makers]
    order = [expected[0][0], expected[1][0], expected[0][1], expected[1][1]]
    stored = buffer.storage.get(torch.arange(80))
    assert (stored == torch.cat(order)).all()
    collector.shutdown()


def test_unreferenced_ray_collector_frees_its_workers(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    collector = RayCollector([PendulumEnv] * 2, policy(), frames_per_batch=20)
    collector.next()
    assert free_cpus(ray_session, 2.0, within=0.0) == 0.0
    del collector
    assert free_cpus(ray_session, 2.0) == 2.0
    with RayCollector(PendulumEnv, policy(), frames_per_batch=20) as collector:
        collector.next()
    assert collector.closed and free_cpus(ray_session, 2.0) == 2.0


RAY_INIT_SCRIPT = textwrap.dedent(
    """
    import ray
    from torchrl_lite.collectors.distributed import RayCollector
    from torchrl_lite.envs import PendulumEnv

    assert not ray.is_initialized()
    collector = RayCollector(PendulumEnv, None, frames_per_batch=10, ray_init_config={
        "address": "local", "num_cpus": 1, "include_dashboard": False,
        "object_store_memory": 100 * 1024**2})
    print("cpus", ray.cluster_resources()["CPU"], "frames", collector.next().numel())
    """
)


def test_ray_init_config_starts_ray_when_none_runs(tmp_path):
    """A process without a Ray session: the collector starts one with ray_init_config."""
    from torchrl_lite.collectors.distributed import RayCollector

    with pytest.raises(TypeError, match="ray_init_config must be a dict of ray.init"):
        RayCollector(PendulumEnv, None, frames_per_batch=10, ray_init_config="local")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}  # fmt: skip
    env.pop("RAY_ADDRESS", None)
    for _ in range(3):  # Ray's node has 30 s to start: a busy 2-core machine may miss it
        out = subprocess.run([sys.executable, "-c", RAY_INIT_SCRIPT], cwd=root, env=env,
                             capture_output=True, text=True, timeout=240)  # fmt: skip
        if "timed out during startup" not in out.stderr:
            break
    assert out.returncode == 0, out.stderr[-3000:]
    assert "cpus 1.0 frames 10" in out.stdout
