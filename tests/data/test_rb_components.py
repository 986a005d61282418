"""Storages, samplers, writers and the priority tree, each on its own."""

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data.replay_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    RandomSampler,
    RoundRobinWriter,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorStorage,
)
from torchrl_lite.data.replay_buffers.segment_tree import PrioritySegmentTree

scipy_stats = pytest.importorskip("scipy.stats", reason="scipy is needed for the chi-square test")


def transitions(n, start=0):
    """``n`` rows whose every entry encodes the row number (to check what comes back)."""
    x = torch.arange(start, start + n)
    return TensorDict(
        {
            "obs": x.float().unsqueeze(-1).expand(n, 3).clone(),
            ("next", "reward"): x.float().unsqueeze(-1),
            ("nested", "deep", "pixels"): (x % 256)
            .to(torch.uint8)
            .view(n, 1, 1)
            .expand(n, 2, 2)
            .clone(),
        },
        batch_size=[n],
    )


def make_storage(kind, size, tmp_path, ndim=1):
    if kind == "list":
        return ListStorage(size)
    if kind == "tensor":
        return LazyTensorStorage(size, ndim=ndim)
    return LazyMemmapStorage(size, scratch_dir=tmp_path / "scratch", ndim=ndim)


# -- storages ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["list", "tensor", "memmap"])
def test_storage_state_dict_round_trip(kind, tmp_path):
    storage = make_storage(kind, 20, tmp_path)
    data = transitions(7)
    storage.set(torch.arange(7), data)
    state = storage.state_dict()
    other = make_storage(kind, 20, tmp_path)
    other.load_state_dict(state)
    assert len(other) == len(storage) == 7
    got = other.get(torch.arange(7))
    got = torch.stack(got) if kind == "list" else got
    assert (got == data).all()
    other.load_state_dict(make_storage(kind, 20, tmp_path).state_dict())  # empty round trip
    assert len(other) == 0


@pytest.mark.parametrize("kind", ["tensor", "memmap"])
def test_storage_state_dict_round_trip_ndim2_and_wrapped(kind, tmp_path):
    storage = make_storage(kind, 40, tmp_path, ndim=2)
    data = transitions(20).view(4, 5)  # [envs, time]
    storage.set(torch.arange(4), data)
    other = make_storage(kind, 40, tmp_path, ndim=2)
    other.load_state_dict(storage.state_dict())
    assert len(other) == 20
    assert (other.get(torch.arange(20)) == data.reshape(-1)).all()
    wrapped = TensorStorage(data.reshape(-1).clone())
    copy = TensorStorage(transitions(20).zero_())
    copy.load_state_dict(wrapped.state_dict())
    assert (copy.get(torch.arange(20)) == data.reshape(-1)).all()


@pytest.mark.parametrize("kind", ["list", "tensor", "memmap"])
def test_storage_dumps_loads_round_trip(kind, tmp_path):
    storage = make_storage(kind, 20, tmp_path)
    storage.set(torch.arange(5), transitions(5))
    storage.dumps(tmp_path / "dump")
    other = make_storage(kind, 20, tmp_path)
    other.loads(tmp_path / "dump")
    got = other.get(torch.arange(5))
    got = torch.stack(got) if kind == "list" else got
    assert (got == transitions(5)).all()
    with pytest.raises(FileNotFoundError, match="meta.json"):
        other.loads(tmp_path / "nothing-here")


def test_lazy_tensor_storage_allocates_from_first_write_with_nested_keys():
    storage = LazyTensorStorage(10)
    assert len(storage) == 0 and not storage.initialized
    storage.set(0, transitions(1)[0])  # one item, no batch dim
    storage.set(torch.arange(1, 4), transitions(3, start=1))
    assert len(storage) == 4
    sample = storage.get(torch.tensor([3, 0]))
    assert sample.batch_size == torch.Size([2])
    assert sample["nested", "deep", "pixels"].dtype == torch.uint8
    assert sample["next", "reward"].squeeze(-1).tolist() == [3.0, 0.0]


def test_lazy_memmap_storage_writes_files_under_scratch_dir(tmp_path):
    storage = LazyMemmapStorage(100, scratch_dir=tmp_path)
    storage.set(torch.arange(10), transitions(10))
    files = list(tmp_path.rglob("*.memmap"))
    assert len(files) == 3  # one per leaf
    assert storage.get(torch.tensor([9]))["obs"][0, 0].item() == 9.0
    folder = storage._folder
    del storage
    import gc

    gc.collect()
    assert not folder.exists()


def test_storage_ndim2_rows_of_time_steps():
    storage = LazyTensorStorage(30, ndim=2)
    data = transitions(12).view(3, 4)  # 3 envs, 4 steps: rows of 4 items
    assert storage.rows_capacity(data) == 7  # 30 // 4
    storage.set(torch.arange(3), data)
    assert len(storage) == 12
    flat = storage.flat_index(torch.tensor([1]))
    assert flat.tolist() == [[4, 5, 6, 7]]
    assert storage.get(torch.tensor([5]))["next", "reward"].item() == 5.0


def test_tensor_storage_holds_plain_tensors():
    storage = LazyTensorStorage(10)
    storage.set(torch.arange(4), torch.arange(8.0).view(4, 2))
    assert storage.get(torch.tensor([3, 1])).tolist() == [[6.0, 7.0], [2.0, 3.0]]
    with pytest.raises(ValueError, match="dtype"):
        storage.set(torch.arange(4, 6), torch.zeros(2, 2, dtype=torch.float64))


def test_list_storage_holds_any_object():
    storage = ListStorage(5)
    storage.set(torch.arange(2), [{"a": 1}, "two"])
    assert storage.get(torch.tensor([1, 0])) == ["two", {"a": 1}]
    with pytest.raises(IndexError, match="gap"):
        storage.set(torch.tensor([2, 4]), [1, 2])
    assert len(storage) == 2


# -- writers -------------------------------------------------------------------------------


def test_round_robin_writer_wraps_and_keeps_the_last_rows():
    storage = LazyTensorStorage(5)
    writer = RoundRobinWriter()
    writer.register_storage(storage)
    assert writer.extend(transitions(3)).tolist() == [0, 1, 2]
    assert writer.extend(transitions(4, start=3)).tolist() == [3, 4, 0, 1]
    assert writer.cursor == 2
    stored = storage.get(torch.arange(5))["next", "reward"].squeeze(-1).tolist()
    assert stored == [5.0, 6.0, 2.0, 3.0, 4.0]
    index = writer.extend(transitions(7, start=10))  # more rows than the storage holds
    assert index.tolist() == [2, 3, 4, 0, 1, 2, 3]
    stored = storage.get(torch.arange(5))["next", "reward"].squeeze(-1).tolist()
    assert stored == [13.0, 14.0, 15.0, 16.0, 12.0]
    assert writer.cursor == 4


def test_max_value_writer_keeps_the_best_items():
    storage = LazyTensorStorage(4)
    writer = TensorDictMaxValueWriter(rank_key=("next", "reward"))
    writer.register_storage(storage)
    data = transitions(6)
    data["next", "reward"] = torch.tensor([[5.0], [1.0], [7.0], [3.0], [2.0], [9.0]])
    index = writer.extend(data)
    assert (index >= 0).sum() == 4
    kept = sorted(storage.get(torch.arange(4))["next", "reward"].squeeze(-1).tolist())
    assert kept == [3.0, 5.0, 7.0, 9.0]
    low = transitions(1)
    low["next", "reward"] = torch.tensor([[0.0]])
    assert writer.extend(low).tolist() == [-1]  # worse than everything: dropped
    high = transitions(1)
    high["next", "reward"] = torch.tensor([[8.0]])
    writer.extend(high)
    kept = sorted(storage.get(torch.arange(4))["next", "reward"].squeeze(-1).tolist())
    assert kept == [5.0, 7.0, 8.0, 9.0]


# -- samplers ------------------------------------------------------------------------------


def filled(n):
    storage = LazyTensorStorage(max(n, 1) * 2)
    storage.set(torch.arange(n), transitions(n))
    return storage


def test_random_sampler_covers_the_contents():
    index, info = RandomSampler().sample(filled(10), 2000)
    assert info == {} and index.min() == 0 and index.max() == 9
    assert torch.bincount(index, minlength=10).min() > 100


def test_sampler_without_replacement_epochs():
    storage = filled(10)
    sampler = SamplerWithoutReplacement()
    seen = []
    while True:
        index, _ = sampler.sample(storage, 3)
        seen += index.tolist()
        if sampler.ran_out:
            break
    assert sorted(seen) == list(range(10)) and len(seen) == 10
    drop = SamplerWithoutReplacement(drop_last=True, shuffle=False)
    batches = [drop.sample(storage, 4)[0].tolist() for _ in range(2)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7]] and drop.ran_out
    assert drop.sample(storage, 4)[0].tolist() == [0, 1, 2, 3]  # a new epoch


def test_segment_tree_matches_brute_force_with_duplicate_updates():
    rng = np.random.default_rng(0)
    tree = PrioritySegmentTree(1000, fanout=16)
    reference = np.zeros(1000)
    for _ in range(50):
        index = rng.integers(0, 1000, size=64)
        index[:8] = index[8:16]  # duplicates: the last write wins
        value = rng.random(64) * (rng.random(64) > 0.2)  # some zeros (empty leaves)
        tree.update(index, value)
        for i, v in zip(index, value):
            reference[i] = v
    assert np.allclose(tree.leaves, reference)
    assert np.isclose(tree.total(), reference.sum())
    assert tree.min() == reference[reference > 0].min()
    u = rng.random(5000) * tree.total()
    expected = np.searchsorted(np.cumsum(reference), u, side="right")
    found = tree.find_prefixsum_idx(u)
    assert (found == expected).mean() > 0.999  # equal but for float rounding at edges
    assert (reference[found] > 0).all()  # never an empty leaf
    assert (reference[tree.find_prefixsum_idx(np.full(3, tree.total() * 2))] > 0).all()


def test_prioritized_sampler_frequencies_match_p_alpha():
    alpha, n, draws = 0.7, 50, 100_000
    storage = filled(n)
    sampler = PrioritizedSampler(storage.max_size, alpha=alpha, beta=0.5, eps=0.0)
    sampler.extend(torch.arange(n))
    priority = torch.linspace(0.1, 5.0, n)
    sampler.update_priority(torch.arange(n), priority)
    index, _ = sampler.sample(storage, draws)
    counts = torch.bincount(index, minlength=n).numpy()
    expected_p = priority.double().numpy() ** alpha
    expected = expected_p / expected_p.sum() * draws
    statistic, p_value = scipy_stats.chisquare(counts, expected)
    assert p_value > 1e-3, (statistic, p_value)


def test_prioritized_sampler_importance_weights_match_the_formula():
    alpha, beta, n = 0.6, 0.4, 20
    storage = filled(n)
    sampler = PrioritizedSampler(storage.max_size, alpha=alpha, beta=beta, eps=1e-6)
    sampler.extend(torch.arange(n))
    priority = torch.rand(n) + 0.05
    sampler.update_priority(torch.arange(n), priority)
    index, info = sampler.sample(storage, 500)
    p = (priority.double() + 1e-6) ** alpha
    prob = p / p.sum()
    w = (n * prob) ** -beta
    expected = w / w.max()  # normalised by the largest weight over the buffer
    assert torch.allclose(info["_weight"].double(), expected[index], rtol=1e-5)
    assert info["_weight"].dtype == torch.float32


def test_prioritized_sampler_new_items_get_the_max_priority():
    storage = filled(4)
    sampler = PrioritizedSampler(storage.max_size, alpha=1.0, beta=1.0, eps=0.0)
    sampler.extend(torch.arange(2))
    sampler.update_priority(torch.tensor([0, 1, 1]), torch.tensor([3.0, 9.0, 2.0]))  # last wins
    sampler.extend(torch.arange(2, 4))
    assert sampler.priorities()[:4].tolist() == [3.0, 2.0, 9.0, 9.0]


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_prioritized_sampler_rejects_bad_priorities_without_change(bad):
    storage = filled(4)
    sampler = PrioritizedSampler(storage.max_size, alpha=1.0, beta=1.0)
    sampler.extend(torch.arange(4))
    before = sampler.priorities()
    with pytest.raises(ValueError, match="non-negative") as err:
        sampler.update_priority(torch.arange(4), torch.tensor([1.0, bad, 2.0, 3.0]))
    assert str(bad) in str(err.value) and "[1]" in str(err.value)
    assert torch.equal(sampler.priorities(), before)


def test_samplers_refuse_an_empty_storage():
    for sampler in (RandomSampler(), SamplerWithoutReplacement(), PrioritizedSampler(4, 1.0, 1.0)):
        with pytest.raises(RuntimeError, match="empty"):
            sampler.sample(LazyTensorStorage(4), 2)


# -- slice samplers ------------------------------------------------------------------------


def trajectories(lengths):
    ids = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    done = torch.zeros(ids.numel(), 1, dtype=torch.bool)
    done[torch.cumsum(torch.tensor(lengths), 0) - 1] = True
    return TensorDict(
        {
            "episode": ids,
            "step": torch.arange(ids.numel()),
            ("next", "done"): done,
            ("next", "truncated"): torch.zeros_like(done),
        },
        batch_size=[ids.numel()],
    )


@pytest.mark.parametrize("by", ["traj_key", "end_key"])
def test_slice_sampler_slices_stay_inside_trajectories(by):
    data = trajectories([5, 8, 2, 6])
    storage = LazyTensorStorage(100)
    storage.set(torch.arange(data.shape[0]), data)
    kwargs = {"traj_key": "episode"} if by == "traj_key" else {"end_key": ("next", "done")}
    sampler = SliceSampler(slice_len=4, **kwargs)
    index, info = sampler.sample(storage, 40)
    episodes = data["episode"][index].view(10, 4)
    assert (episodes == episodes[:, :1]).all()
    assert (data["step"][index].view(10, 4).diff(dim=1) == 1).all()
    assert 2 not in episodes  # shorter than slice_len: never used
    truncated = info["next", "truncated"].view(10, 4)
    assert truncated[:, -1].all() and not truncated[:, :-1].any()
    assert info["next", "done"].view(10, 4)[:, -1].all()


def test_slice_sampler_errors_and_short_slices():
    storage = LazyTensorStorage(100)
    storage.set(torch.arange(5), trajectories([2, 3]))
    with pytest.raises(ValueError, match="strict_length=False"):
        SliceSampler(slice_len=4, traj_key="episode").sample(storage, 8)
    with pytest.raises(ValueError, match="multiple"):
        SliceSampler(num_slices=3, traj_key="episode").sample(storage, 8)
    index, _ = SliceSampler(slice_len=4, traj_key="episode", strict_length=False).sample(storage, 8)
    assert index.numel() in (4, 5, 6)


def test_slice_sampler_respects_rows_and_the_write_cursor():
    storage = LazyTensorStorage(12, ndim=2)
    data = trajectories([12]).view(3, 4)  # one long episode over 3 rows of 4 steps
    storage.set(torch.arange(3), data)
    index, _ = SliceSampler(slice_len=4, traj_key="episode").sample(storage, 40)
    assert (index.view(10, 4)[:, 0] % 4 == 0).all()  # a slice never crosses a row
    circular = LazyTensorStorage(6)
    writer = RoundRobinWriter()
    writer.register_storage(circular)
    writer.extend(trajectories([8]))  # wraps: positions 0,1 hold steps 6,7
    sampler = SliceSampler(slice_len=2, traj_key="episode")
    index, _ = sampler.sample(circular, 200)
    steps = circular.get(index)["step"].view(100, 2)
    assert (steps.diff(dim=1) == 1).all()


def test_slice_sampler_without_replacement_uses_each_trajectory_once():
    storage = LazyTensorStorage(100)
    data = trajectories([4, 4, 4, 4, 4])
    storage.set(torch.arange(20), data)
    sampler = SliceSamplerWithoutReplacement(num_slices=2, traj_key="episode")
    seen = []
    while not sampler.ran_out:
        index, _ = sampler.sample(storage, 4)
        seen += data["episode"][index].view(-1, 2)[:, 0].tolist()  # the last batch: 1 slice
    assert sorted(seen) == [0, 1, 2, 3, 4]
