"""SyncDataCollector over a batched env whose copies' specs differ: lazily stacked batches.

The reference is a collector over each copy alone, seeded as the batched env seeds it:
its batches must equal row ``i`` of the batched collector's ``LazyStackedTensorDict``.
"""

import functools

import pytest
import torch
from tensordict import LazyStackedTensorDict
from tensordict.nn import TensorDictModule

from tests.envs.test_batched_lazy import MAKE_A, MAKE_B, TaskEnv, assert_same, policy_for
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyStackStorage, ListStorage, ReplayBuffer, TensorDictReplayBuffer
from torchrl_lite.envs import ParallelEnv, SerialEnv

TRAJ_IDS = ("collector", "traj_ids")
# same action spec as MAKE_A, other observations: a policy on a shared key fits both
MAKE_C = functools.partial(TaskEnv, obs_dim=4, act_dim=1, limit=4, extra=True)


def steps_policy():
    """An nn policy reading ``"steps"``, an entry of the same shape in every copy."""
    return TensorDictModule(lambda s: torch.tanh(s.float() / 3), ["steps"], ["action"])


def alone_batches(make, policy, seed, steps, batches):
    env = make()
    collector = SyncDataCollector(env, policy, frames_per_batch=steps)
    collector.set_seed(seed)
    out = [collector.next() for _ in range(batches)]
    collector.shutdown()
    return out


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
@pytest.mark.parametrize(
    "makers, policies",
    [
        ((MAKE_A, MAKE_B), (policy_for([1, 2]), policy_for([1]), policy_for([2]))),
        ((MAKE_A, MAKE_C), (steps_policy(),) * 3),
    ],
    ids=["per-copy-policy", "nn-policy-on-a-shared-key"],
)
def test_collector_batches_equal_each_copy_alone(cls, makers, policies):
    env = cls(2, list(makers))
    collector = SyncDataCollector(env, policies[0], frames_per_batch=12, total_frames=24)
    collector.set_seed(11)
    batches = list(collector)
    collector.shutdown()
    for batch in batches:
        assert isinstance(batch, LazyStackedTensorDict) and batch.batch_size == (2, 6)
    for i, make in enumerate(makers):
        expected = alone_batches(make, policies[1 + i], 11 + i, 6, 2)
        for batch, ref in zip(batches, expected):
            assert_same(batch[i].exclude(TRAJ_IDS), ref.exclude(TRAJ_IDS))
    # trajectory ids: a new id per reset, per copy
    ids = batches[0][0][TRAJ_IDS].tolist()
    assert ids == sorted(ids) and len(set(ids)) == 2  # copy 0 (limit 3): two trajectories


def test_collector_random_batches_go_to_a_lazy_stack_storage():
    env = SerialEnv(2, [MAKE_A, MAKE_B])
    buffer = TensorDictReplayBuffer(storage=LazyStackStorage(100), batch_size=8)
    collector = SyncDataCollector(
        env, None, frames_per_batch=10, total_frames=20, replay_buffer=buffer
    )
    assert list(collector) == [None, None]
    collector.shutdown()
    assert len(buffer) == 20
    sample = buffer.sample()
    assert isinstance(sample, LazyStackedTensorDict) and sample.batch_size == (8,)
    dims = {row["observation"].shape[-1] for row in buffer[:].tensordicts}
    assert dims == {3, 4}  # steps of both copies, each with its own entries
    for row in buffer[:].tensordicts:
        assert ("task_id" in row.keys()) == (row["observation"].shape[-1] == 4)


def test_plain_list_storage_cannot_stack_different_steps():
    # the default collate of ListStorage stacks densely: LazyStackStorage is the fix
    buffer = ReplayBuffer(storage=ListStorage(10))
    batch = SerialEnv(2, [MAKE_A, MAKE_B]).rollout(2, break_when_any_done=False)
    buffer.extend(batch.reshape(-1))
    with pytest.raises(ValueError, match="ListStorage: the sampled items do not stack"):
        buffer[:]


def test_collector_split_trajs_of_copies_that_differ():
    env = SerialEnv(2, [MAKE_A, MAKE_B])  # limits 3 and 4
    collector = SyncDataCollector(env, None, frames_per_batch=14, split_trajs=True)
    batch = collector.next()
    collector.shutdown()
    # copy 0: 3 + 3 + 1 steps, copy 1: 4 + 3 steps, each padded to 4
    assert isinstance(batch, LazyStackedTensorDict) and batch.batch_size == (5, 4)
    masks = [row["collector", "mask"].sum().item() for row in batch.tensordicts]
    assert masks == [3, 3, 1, 4, 3]
    assert [row["observation"].shape[-1] for row in batch.tensordicts] == [3, 3, 3, 4, 4]
    assert "task_id" in batch[3].keys() and "task_id" not in batch[0].keys()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_multiprocess_collectors_over_copies_that_differ(mode):
    from torchrl_lite.collectors import MultiaSyncDataCollector, MultiSyncDataCollector

    make = functools.partial(SerialEnv, 2, [MAKE_A, MAKE_B])
    cls = MultiSyncDataCollector if mode == "sync" else MultiaSyncDataCollector
    multi = cls([make], policy_for([1, 2]), frames_per_batch=12, total_frames=36)
    multi.set_seed(5)
    batches = list(multi)
    multi.shutdown()
    single = SyncDataCollector(make(), policy_for([1, 2]), frames_per_batch=12, total_frames=36)
    single.set_seed(5)
    expected = list(single)
    single.shutdown()
    for batch, ref in zip(batches, expected, strict=True):
        batch = batch.reshape(2, 6) if batch.batch_dims == 3 else batch  # [workers=1, ...]
        for i in range(2):
            got = batch[i].exclude(("collector", "worker_id"))
            assert_same(got.exclude(TRAJ_IDS), ref[i].exclude(TRAJ_IDS))
