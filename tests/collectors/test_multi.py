"""MultiSyncDataCollector and MultiaSyncDataCollector: shapes, ids, weights, determinism."""

import functools
import time

import pytest
import torch
from tensordict import TensorDict

from tests.collectors.helpers import (
    CountingEnv,
    assert_same,
    constant_policy,
    make_pendulum,
    recurrent_policy,
)
from torchrl_lite.collectors import (
    MultiAsyncCollector,
    MultiaSyncDataCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
    SyncDataCollector,
)
from torchrl_lite.data.replay_buffers import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.envs import GymEnv, ParallelEnv, SerialEnv


def make_counter():
    return CountingEnv(limit=3)


def test_multi_aliases():
    assert MultiSyncCollector is MultiSyncDataCollector
    assert MultiAsyncCollector is MultiaSyncDataCollector


# -- sync --------------------------------------------------------------------------------
def test_multi_sync_shapes_frames_and_worker_ids(no_leftover_workers):
    collector = MultiSyncDataCollector(
        [make_counter, make_counter], constant_policy(), frames_per_batch=8, total_frames=24
    )
    batches = list(collector)
    collector.shutdown()
    assert [b.batch_size for b in batches] == [torch.Size([2, 4])] * 3
    ids = batches[0]["collector", "worker_id"]
    assert ids[0].eq(0).all() and ids[1].eq(1).all()
    data = torch.cat(batches, -1)  # [2, 12]: each row is one worker's stream of steps
    assert data["count"][..., 0].tolist() == [[0, 1, 2] * 4] * 2
    # a trajectory cut by the batch boundary keeps its id; ids never clash between workers
    assert data["collector", "traj_ids"].tolist() == [
        [0, 0, 0, 2, 2, 2, 4, 4, 4, 6, 6, 6],
        [1, 1, 1, 3, 3, 3, 5, 5, 5, 7, 7, 7],
    ]


@pytest.mark.parametrize("cat_results, shape", [(-1, [8]), (0, [8])])
def test_multi_sync_cat_results(cat_results, shape, no_leftover_workers):
    with MultiSyncDataCollector(
        make_counter, None, num_workers=2, frames_per_batch=8, cat_results=cat_results
    ) as collector:
        assert list(collector.next().batch_size) == shape


def test_multi_sync_batched_envs_in_workers(no_leftover_workers):
    with MultiSyncDataCollector(
        [lambda: GymEnv("Pendulum-v1", num_envs=2)] * 2, None, frames_per_batch=40
    ) as collector:
        data = collector.next()
    assert data.batch_size == torch.Size([2, 2, 10])
    assert data["collector", "traj_ids"][..., 0].tolist() == [[0, 2], [1, 3]]


def test_multi_sync_policy_update_used_by_the_next_batch(no_leftover_workers):
    policy = constant_policy(0.5)
    with MultiSyncDataCollector([make_counter] * 2, policy, frames_per_batch=8) as collector:
        assert (collector.next()["action"] == 0.5).all()
        with torch.no_grad():
            policy.module.bias.fill_(-0.5)
        collector.update_policy_weights_()
        assert (collector.next()["action"] == -0.5).all()
        collector.update_policy_weights_(TensorDict.from_module(constant_policy(0.25)))
        assert (collector.next()["action"] == 0.25).all()


def test_multi_sync_split_trajs_postproc_replay_buffer(no_leftover_workers):
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100))
    with MultiSyncDataCollector(
        [make_counter] * 2, None, frames_per_batch=12, replay_buffer=buffer
    ) as collector:
        assert collector.next() is None
    assert len(buffer) == 12
    with MultiSyncDataCollector(
        [make_counter] * 2,
        None,
        frames_per_batch=12,
        split_trajs=True,
        postproc=lambda td: td.set("seen", torch.ones(td.shape)),
    ) as collector:
        data = collector.next()
    assert data.batch_size == torch.Size([4, 3]) and data["collector", "mask"].all()
    assert data["seen"].all()


def test_multi_sync_init_random_frames(no_leftover_workers):
    with MultiSyncDataCollector(
        [make_counter] * 2, constant_policy(0.5), frames_per_batch=20, init_random_frames=20
    ) as collector:
        assert not (collector.next()["action"] == 0.5).all()
        assert (collector.next()["action"] == 0.5).all()


def test_multi_set_seed_distinct_per_worker_and_state_dict(no_leftover_workers):
    policy = constant_policy(0.5)
    with MultiSyncDataCollector(
        [lambda: SerialEnv(2, CountingEnv)] * 2, policy, frames_per_batch=8
    ) as collector:
        assert collector.set_seed(100) == 104
        assert collector.next()["seed"][..., 0, 0].tolist() == [[100, 101], [102, 103]]
        state = collector.state_dict()
        assert state["frames"] == 8 and set(state) >= {"worker0", "worker1"}
        state["policy_state_dict"] = constant_policy(0.25).state_dict()
        collector.load_state_dict(state)
        assert (collector.next()["action"] == 0.25).all()


def test_multi_sync_same_batches_as_serial_and_parallel_envs(no_leftover_workers):
    """A recurrent policy, no primer: same seed, same data in every collector type."""
    runs = []
    for kind in ("serial", "parallel", "multi"):
        policy = recurrent_policy()
        if kind == "multi":
            collector = MultiSyncDataCollector([make_pendulum] * 2, policy, frames_per_batch=500)
        else:
            env_cls = SerialEnv if kind == "serial" else ParallelEnv
            collector = SyncDataCollector(env_cls(2, make_pendulum), policy, frames_per_batch=500)
        collector.set_seed(11)
        runs.append([collector.next(), collector.next()])
        collector.shutdown()
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert_same(b, a)
    assert runs[0][1]["is_init"].sum() == 2  # the trajectories restart once (200 steps)


def test_multi_spawn_start_method(no_leftover_workers):
    with MultiSyncDataCollector(
        [lambda: CountingEnv(limit=3)],
        constant_policy(0.5),
        frames_per_batch=6,
        mp_start_method="spawn",
    ) as collector:
        assert collector.mp_start_method == "spawn"
        collector.update_policy_weights_(constant_policy(-0.5).state_dict())
        assert (collector.next()["action"] == -0.5).all()


# -- async -------------------------------------------------------------------------------
class _GatedCounter(CountingEnv):
    """Worker 0's env waits, before its second batch, until worker 1's env has begun its
    second batch: the parent has then yielded worker 1's first batch, so both workers
    appear however the OS schedules them (a free-running worker 0 can win all 10 under
    load)."""

    def __init__(self, worker, flag):
        super().__init__(limit=3)
        self.worker, self.flag = worker, flag

    def _step(self, tensordict):
        if self.steps == 6:  # the first step of this worker's second batch
            if self.worker == 1:
                self.flag.touch()
            deadline = time.monotonic() + 60
            while self.worker == 0 and not self.flag.exists() and time.monotonic() < deadline:
                time.sleep(0.002)
        return super()._step(tensordict)


def test_multi_async_yields_each_workers_batches(no_leftover_workers, tmp_path):
    flag = tmp_path / "worker1-second-batch"
    makers = [functools.partial(_GatedCounter, w, flag) for w in (0, 1)]
    collector = MultiaSyncDataCollector(makers, None, frames_per_batch=6, total_frames=60)
    batches = list(collector)
    collector.shutdown()
    assert len(batches) == 10 and all(b.batch_size == torch.Size([6]) for b in batches)
    by_worker = {}
    for batch in batches:
        worker = batch["collector", "worker_id"]
        assert (worker == worker[0]).all()
        by_worker.setdefault(int(worker[0]), []).append(batch)
    assert set(by_worker) == {0, 1}
    for w, mine in by_worker.items():  # each worker's stream continues across its batches
        ids = torch.cat([b["collector", "traj_ids"] for b in mine])
        assert (ids % 2 == w).all() and (ids.diff() >= 0).all()


def test_multi_async_policy_update_reaches_workers(no_leftover_workers):
    policy = constant_policy(0.5)
    collector = MultiaSyncDataCollector([make_counter] * 2, policy, frames_per_batch=6)
    before, after = {0: set(), 1: set()}, {0: set(), 1: set()}
    updated = False
    for i, data in enumerate(collector):
        worker = int(data["collector", "worker_id"][0])
        (after if updated else before)[worker].add(round(float(data["action"].mean()), 3))
        # the async collector hands out whichever worker is ready first: wait until each
        # has delivered a batch under the old weights before changing them
        if not updated and all(before.values()):
            with torch.no_grad():
                policy.module.bias.fill_(-0.5)
            collector.update_policy_weights_()
            updated = True
        if all(-0.5 in actions for actions in after.values()):
            break
        assert i < 60, f"the weights never reached every worker: {before}, {after}"
    collector.shutdown()
    assert before == {0: {0.5}, 1: {0.5}}
    # a batch already in flight may use the old weights, then every batch uses the new ones
    assert all(actions <= {0.5, -0.5} for actions in after.values())


class PixelPolicy(torch.nn.Module):
    """A tiny policy on pixels: a linear function of the mean brightness."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(1, 1)

    def forward(self, pixels):
        return torch.tanh(self.linear(pixels.float().mean((-3, -2, -1)).unsqueeze(-1) / 255))


@pytest.mark.parametrize(
    "total_frames", [300, pytest.param(10000, marks=pytest.mark.slow)], ids=["short", "seed"]
)
def test_multi_async_seed_snippet(total_frames, no_leftover_workers):
    """The seed's MultiaSyncDataCollector loop as written (devices "cpu")."""
    from tensordict.nn import TensorDictModule

    env_make = lambda: GymEnv("Pendulum-v1", from_pixels=True)  # noqa: E731
    policy = TensorDictModule(PixelPolicy(), in_keys=["pixels"], out_keys=["action"])
    loss_module = lambda td: (policy(td.clone())["action"] ** 2).mean()  # noqa: E731
    optim = torch.optim.SGD(policy.parameters(), lr=0.01)
    collector = MultiaSyncDataCollector(
        [env_make, env_make],
        policy=policy,
        devices=["cpu", "cpu"],
        total_frames=total_frames,
        frames_per_batch=50,
    )
    batches = 0
    for tensordict_data in collector:
        loss = loss_module(tensordict_data)
        loss.backward()
        optim.step()
        optim.zero_grad()
        collector.update_policy_weights_()
        batches += 1
    collector.shutdown()
    assert batches == total_frames // 50
    assert tensordict_data["pixels"].shape[0] == 50


@pytest.mark.gpu
def test_collectors_on_cuda(no_leftover_workers):
    """The seed's ``devices=["cuda:0", "cuda:0"]``: policies run on the GPU."""
    policy = constant_policy(0.5)
    data = SyncDataCollector(make_counter(), policy, frames_per_batch=4, device="cuda:0").next()
    assert data.device.type == "cuda" and (data["action"] == 0.5).all()
    with MultiaSyncDataCollector(
        [make_counter, make_counter],
        policy=policy,
        devices=["cuda:0", "cuda:0"],
        total_frames=200,
        frames_per_batch=50,
    ) as collector:
        for data in collector:
            assert (data["action"] == 0.5).all()
            collector.update_policy_weights_()
