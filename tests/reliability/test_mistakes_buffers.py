"""Replay-buffer mistakes: impossible batch sizes without replacement, over-full extends."""

from __future__ import annotations

import warnings

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data.replay_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    RandomSampler,
    ReplayBuffer,
    RoundRobinWriter,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)


def _episodes(n: int, length: int) -> TensorDict:
    episode = torch.arange(n).repeat_interleave(length)
    return TensorDict(episode=episode, batch_size=[n * length])


def test_without_replacement_batch_over_capacity_warns_once():
    with pytest.warns(UserWarning) as record:
        buffer = ReplayBuffer(
            storage=LazyTensorStorage(5), sampler=SamplerWithoutReplacement(), batch_size=8
        )
    assert len(record) == 1
    message = str(record[0].message)
    assert "batch_size=8" in message and "max_size=5" in message
    assert "Lower batch_size to at most 5" in message and "max_size >= 8" in message
    buffer.extend(torch.arange(5.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        first, second = buffer.sample(), buffer.sample(8)
    assert sorted(first.tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0]  # a short batch, one epoch
    assert second.shape == (5,)


def test_without_replacement_batch_over_capacity_warns_once_at_sample_time():
    buffer = ReplayBuffer(storage=ListStorage(3), sampler=SamplerWithoutReplacement())
    buffer.extend([1, 2, 3])
    with pytest.warns(UserWarning, match=r"batch_size=4 is larger than the storage capacity"):
        buffer.sample(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(buffer.sample(4)) == 3


def test_without_replacement_drop_last_over_capacity_raises():
    sampler = SamplerWithoutReplacement(drop_last=True)
    with pytest.raises(
        ValueError,
        match=r"batch_size=8 is larger than the storage capacity "
        r"max_size=5.*drop_last=True no batch would ever be returned",
    ):
        ReplayBuffer(storage=LazyTensorStorage(5), sampler=sampler, batch_size=8)
    buffer = ReplayBuffer(storage=LazyTensorStorage(5), sampler=sampler)
    buffer.extend(torch.arange(5.0))
    with pytest.raises(ValueError, match=r"pass drop_last=False"):
        buffer.sample(6)
    assert buffer.sample(5).shape == (5,)  # batch_size == capacity is fine


def test_without_replacement_batch_within_capacity_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        buffer = ReplayBuffer(
            storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(), batch_size=10
        )
        buffer.extend(torch.arange(4.0))
        assert buffer.sample().shape == (4,)  # not full yet: a short batch, no warning


def test_slice_without_replacement_over_capacity_warns_once():
    sampler = SliceSamplerWithoutReplacement(slice_len=3, traj_key="episode")
    buffer = ReplayBuffer(storage=LazyTensorStorage(12), sampler=sampler)
    buffer.extend(_episodes(4, 3))
    with pytest.warns(UserWarning) as record:
        buffer.sample(15)
    assert len(record) == 1
    message = str(record[0].message)
    assert "batch_size=15 needs 5 trajectories of slice_len=3" in message
    assert "max_size=12 holds at most 4" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert buffer.sample(15).shape == (12,)


def test_slice_without_replacement_drop_last_over_capacity_raises_at_construction():
    sampler = SliceSamplerWithoutReplacement(num_slices=5, traj_key="episode", drop_last=True)
    with pytest.raises(ValueError, match=r"needs 5 trajectories.*max_size=12 holds at most 4"):
        ReplayBuffer(storage=LazyTensorStorage(12), sampler=sampler, batch_size=15)


@pytest.mark.parametrize("make", [ListStorage, LazyTensorStorage])
def test_extend_more_than_capacity_keeps_the_last_items(make):
    buffer = ReplayBuffer(storage=make(3))
    assert buffer.extend(torch.arange(4.0)).tolist() == [0, 1, 2, 0]
    assert torch.as_tensor(buffer[:]).tolist() == [3.0, 1.0, 2.0]  # a ring of 3: the last 3
    buffer.extend(torch.tensor([4.0]))
    assert torch.as_tensor(buffer[:]).tolist() == [3.0, 4.0, 2.0]


def test_list_storage_gap_still_raises_naming_the_positions():
    storage = ListStorage(5)
    with pytest.raises(IndexError, match=r"position 3 would leave a gap at \[0, 1, 2\]"):
        storage.set(torch.tensor([3]), ["x"])
    assert len(storage) == 0


def test_memmap_scratch_dir_that_is_a_file(tmp_path):
    file = tmp_path / "a_file"
    file.write_text("x")
    with pytest.raises(ValueError, match=r"LazyMemmapStorage: scratch_dir=.*a_file' is a file"):
        LazyMemmapStorage(10, scratch_dir=file)


@pytest.mark.parametrize("part", ["storage", "sampler", "writer"])
def test_buffer_parts_given_as_classes(part):
    classes = {"storage": LazyTensorStorage, "sampler": RandomSampler, "writer": RoundRobinWriter}
    with pytest.raises(
        TypeError,
        match=rf"ReplayBuffer: {part} must be an instance, got the "
        rf"class {classes[part].__name__}; build it, e.g. {part}=",
    ):
        ReplayBuffer(**{part: classes[part]})


def test_slice_sampler_without_its_end_key_names_both_options():
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(20), sampler=SliceSampler(slice_len=4)
    )
    buffer.extend(TensorDict(obs=torch.zeros(10, 1), batch_size=[10]))
    with pytest.raises(
        KeyError,
        match=r"SliceSampler tells trajectories apart by end_key=\('next', "
        r"'done'\), which the stored data lack.*pass end_key=.*or traj_key=",
    ):
        buffer.sample(8)
    assert len(buffer) == 10


def test_max_value_writer_without_its_rank_key():
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(10), writer=TensorDictMaxValueWriter(rank_key="score")
    )
    with pytest.raises(KeyError, match=r"ranks items by rank_key='score', which the data lack"):
        buffer.extend(TensorDict(obs=torch.zeros(3, 1), batch_size=[3]))
    assert len(buffer) == 0


def test_update_tensordict_priority_before_the_loss_wrote_it():
    buffer = TensorDictPrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(10))
    buffer.extend(TensorDict(obs=torch.zeros(4, 1), batch_size=[4]))
    sample = buffer.sample(2)
    with pytest.raises(
        KeyError,
        match=r"reads the priorities from 'td_error': run the loss on "
        r"this sample first",
    ):
        buffer.update_tensordict_priority(sample)
    sample["td_error"] = torch.tensor([1.0, 2.0])
    buffer.update_tensordict_priority(sample)  # once the loss wrote it
