"""Replay buffers: the seed's snippets, bad input, persistence, threads and transforms."""

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
from tensordict import TensorDict

import torchrl_lite.data as data_pkg
import torchrl_lite.data.replay_buffers as rb_pkg
from torchrl_lite.data.replay_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedReplayBuffer,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SliceSampler,
    TensorDictMaxValueWriter,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def transitions(n, start=0):
    """``n`` rows whose every entry encodes the row number."""
    x = torch.arange(start, start + n)
    return TensorDict(
        {
            "observation": x.float().unsqueeze(-1).expand(n, 3).clone(),
            "action": x.float().unsqueeze(-1),
            ("next", "reward"): x.float().unsqueeze(-1),
            ("next", "done"): (x % 10 == 9).unsqueeze(-1),
            ("b", "c"): (x % 256).to(torch.uint8).view(n, 1, 1, 1).expand(n, 3, 2, 2).clone(),
        },
        batch_size=[n],
    )


def snapshot(buffer):
    """Everything a failed write must leave unchanged: contents, cursor, sampler state."""
    storage = buffer.storage
    contents = None
    if len(storage):
        contents = storage.get(torch.arange(len(storage))).clone()
    return (
        len(buffer),
        contents,
        dict(buffer.writer.state_dict()),
        _copy(buffer.sampler.state_dict()),
    )


def _copy(state):
    if isinstance(state, dict):
        return {k: _copy(v) for k, v in state.items()}
    return state.clone() if isinstance(state, torch.Tensor) else state


def assert_same(before, after):
    assert before[0] == after[0]
    assert (before[1] is None) == (after[1] is None)
    if before[1] is not None:
        assert (before[1] == after[1]).all()
    assert before[2] == after[2]
    assert _flat(before[3]) == _flat(after[3])


def _flat(state):
    if isinstance(state, dict):
        return {k: _flat(v) for k, v in state.items()}
    return state.tolist() if isinstance(state, torch.Tensor) else state


# -- the seed's snippets -------------------------------------------------------------------


def test_seed_ppo_buffer_iterates_one_epoch_per_loop():
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(1000),
        sampler=SamplerWithoutReplacement(),
        batch_size=50,
    )
    for epoch in range(3):
        buffer.extend(transitions(1000, start=epoch * 1000))
        seen = []
        for sample in buffer:  # consume data
            assert sample.batch_size == torch.Size([50])
            assert (sample["action"].squeeze(-1) == sample["next", "reward"].squeeze(-1)).all()
            seen += sample["index"].tolist()
        assert sorted(seen) == list(range(1000))
        assert sample["observation"].min() >= epoch * 1000  # the freshly written data


def test_seed_prioritized_buffer_with_memmap_and_prefetch(tmp_path):
    buffer_size = 500
    storage = LazyMemmapStorage(buffer_size, scratch_dir=tmp_path)
    buffer = TensorDictPrioritizedReplayBuffer(
        alpha=0.7,
        beta=0.5,
        collate_fn=lambda x: x,
        pin_memory=torch.device("cpu") != torch.device("cpu"),
        prefetch=10,  # multi-threaded sampling
        storage=storage,
    )
    buffer.extend(transitions(300))
    for _ in range(30):
        sample = buffer.sample(32)
        assert set(sample.keys()) >= {"index", "_weight", "observation"}
        assert (sample["observation"][:, 0] == sample["index"].float()).all()
        sample["td_error"] = sample["_weight"] + 0.5
        buffer.update_tensordict_priority(sample)
    assert list(tmp_path.iterdir())  # the memory-mapped files are under scratch_dir


def test_prefetch_keeps_samples_ready_and_respects_batch_size():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8, prefetch=3)
    buffer.extend(transitions(50))
    batches = [buffer.sample() for _ in range(10)]
    assert all(b.batch_size == torch.Size([8]) for b in batches)
    assert len(buffer._futures) == 2
    assert buffer.sample(5).batch_size == torch.Size([5])  # other sizes: sampled now
    buffer.empty()
    assert len(buffer._futures) == 0
    with pytest.raises(RuntimeError, match="empty"):
        buffer.sample()


def test_prefetch_keeps_epochs_exact():
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(100),
        sampler=SamplerWithoutReplacement(),
        batch_size=7,
        prefetch=4,
    )
    buffer.extend(transitions(30))
    first = torch.cat([buffer.sample()["index"] for _ in range(2)])
    rest = torch.cat([sample["index"] for sample in buffer])  # finishes the same epoch
    assert sorted(torch.cat([first, rest]).tolist()) == list(range(30))


def test_iteration_with_random_sampler_never_ends():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
    buffer.extend(transitions(10))
    assert len(list(itertools.islice(buffer, 100))) == 100
    with pytest.raises(RuntimeError, match="batch_size"):
        iter(ReplayBuffer()).__next__()


def test_exports_from_data_and_replay_buffers():
    from torchrl_lite.data.replay_buffers import storages

    for name in rb_pkg.__all__:
        assert getattr(data_pkg, name) is getattr(rb_pkg, name)
    assert storages.LazyMemmapStorage is LazyMemmapStorage  # TorchRL's module path works
    assert data_pkg.D4RLExperienceReplay.__module__ == "torchrl_lite.data.datasets.d4rl"


# -- buffers in general --------------------------------------------------------------------


def test_replay_buffer_with_list_storage_and_any_items():
    buffer = ReplayBuffer(storage=ListStorage(10), batch_size=3)
    buffer.extend([{"x": i} for i in range(4)])
    buffer.add({"x": 4})
    assert len(buffer) == 5
    sample = buffer.sample()
    assert isinstance(sample, list) and len(sample) == 3
    stacked = TensorDictReplayBuffer(storage=ListStorage(10), batch_size=4)
    stacked.extend(transitions(6))
    out = stacked.sample()
    assert out.batch_size == torch.Size([4]) and "index" in out.keys()
    assert (out["action"].squeeze(-1) == out["index"].float()).all()


def test_replay_buffer_of_tensors_returns_info_on_request():
    buffer = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement())
    buffer.extend(torch.arange(6.0))
    data, info = buffer.sample(6, return_info=True)
    assert sorted(data.tolist()) == list(range(6)) and torch.equal(data, info["index"].float())
    with pytest.raises(ValueError, match="batch_size"):
        buffer.sample()


def test_prioritized_replay_buffer_update_and_weights():
    buffer = PrioritizedReplayBuffer(alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(10))
    buffer.extend(torch.arange(4.0))
    buffer.update_priority(torch.arange(4), torch.tensor([1.0, 1.0, 1.0, 97.0]))
    data, info = buffer.sample(1000, return_info=True)
    assert (data == 3).float().mean() > 0.9
    assert torch.allclose(info["_weight"][data == 3], torch.tensor(1 / 97.0))
    with pytest.raises(IndexError, match=r"must be in \[0, 10\).*got \[10, 10\]"):
        buffer.update_priority(torch.tensor([10]), torch.tensor([1.0]))


def test_sampled_tensordicts_can_be_extended_back():
    source = TensorDictPrioritizedReplayBuffer(alpha=0.5, beta=0.5, storage=LazyTensorStorage(20))
    source.extend(transitions(10))
    target = TensorDictReplayBuffer(storage=LazyTensorStorage(20))
    target.extend(source.sample(5))  # "index" and "_weight" are not stored
    assert len(target) == 5 and "index" not in target.storage._leaves


def test_prioritized_extend_reads_initial_priorities():
    buffer = TensorDictPrioritizedReplayBuffer(
        alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(10), priority_key="td_error"
    )
    data = transitions(3)
    data["td_error"] = torch.tensor([0.0, 0.0, 5.0])
    buffer.extend(data)
    assert buffer.sampler.priorities()[:3].tolist() == [0.0, 0.0, 5.0]
    assert (buffer.sample(50)["index"] == 2).all()


def test_any_tensordict_buffer_with_a_prioritized_sampler_reads_priorities():
    from torchrl_lite.data.replay_buffers import PrioritizedSampler

    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(10), sampler=PrioritizedSampler(10, alpha=1.0, beta=1.0, eps=0.0)
    )
    data = transitions(2)
    data["td_error"] = torch.tensor([0.0, 4.0])
    buffer.extend(data)
    one = transitions(1, start=2)[0]
    one["td_error"] = torch.tensor(2.0)
    assert buffer.add(one) == 2
    assert buffer.sampler.priorities()[:3].tolist() == [0.0, 4.0, 2.0]


def test_ndim2_buffer_of_env_time_batches():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(40, ndim=2), batch_size=16)
    index = buffer.extend(transitions(20).view(4, 5))  # 4 envs, 5 steps
    assert index.shape == torch.Size([4, 5]) and len(buffer) == 20
    sample = buffer.sample()
    assert sample.batch_size == torch.Size([16])
    assert (sample["action"].squeeze(-1) == sample["index"].float()).all()


def test_buffer_with_slice_sampler_and_max_value_writer():
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(100),
        sampler=SliceSampler(slice_len=5, end_key=("next", "done")),
        batch_size=20,
    )
    buffer.extend(transitions(50))
    sample = buffer.sample()
    steps = sample["action"].view(4, 5)
    assert (steps.diff(dim=1) == 1).all() and (steps[:, 0] % 10 <= 5).all()
    assert sample["next", "done"].view(4, 5)[:, -1].all()
    best = TensorDictReplayBuffer(storage=LazyTensorStorage(5), writer=TensorDictMaxValueWriter())
    best.extend(transitions(20))
    assert sorted(best.storage.get(torch.arange(5))["action"].squeeze(-1).tolist()) == [
        15.0,
        16.0,
        17.0,
        18.0,
        19.0,
    ]


def test_pin_memory_is_a_no_op_without_cuda():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10), pin_memory=True, batch_size=2)
    buffer.extend(transitions(4))
    sample = buffer.sample()
    if not torch.cuda.is_available():
        assert not sample["observation"].is_pinned()


@pytest.mark.gpu
def test_cuda_storages_and_pinned_samples(tmp_path):
    on_gpu = TensorDictReplayBuffer(storage=LazyTensorStorage(100, device="cuda"), batch_size=8)
    on_gpu.extend(transitions(20))
    sample = on_gpu.sample()
    assert sample.device.type == "cuda" and sample["index"].device.type == "cuda"
    assert (sample["action"].squeeze(-1) == sample["index"].float()).all()
    memmap = TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=LazyMemmapStorage(100, scratch_dir=tmp_path, device="cuda")
    )
    memmap.extend(transitions(20))
    sample = memmap.sample(8)
    assert sample["_weight"].device.type == "cuda"
    memmap.update_tensordict_priority(sample.set("td_error", torch.rand(8, device="cuda")))
    pinned = TensorDictReplayBuffer(storage=LazyTensorStorage(100), pin_memory=True, batch_size=8)
    pinned.extend(transitions(20))
    assert pinned.sample()["observation"].is_pinned()


def test_transform_is_applied_on_sample():
    def double(td):
        td["observation"] = td["observation"] * 2
        return td

    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10), transform=double, batch_size=4)
    buffer.extend(transitions(5))
    sample = buffer.sample()
    assert torch.equal(sample["observation"][:, 0], sample["index"].float() * 2)
    buffer.append_transform(lambda td: td.set("seen", torch.ones(td.shape)))
    sample = buffer.sample()
    assert "seen" in sample.keys() and torch.equal(
        sample["observation"][:, 0], sample["index"].float() * 2
    )
    assert buffer.storage.get(torch.tensor([1]))["observation"][0, 0] == 1.0  # storage untouched


def test_catframes_transform_on_sampled_slices():
    try:
        from torchrl_lite.envs.transforms import CatFrames
    except ImportError as err:
        pytest.skip(f"CatFrames is not importable: {err}")
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(100),
        sampler=SliceSampler(slice_len=4, end_key=("next", "done")),
        transform=CatFrames(N=2, dim=-1, in_keys=["action"]),
        batch_size=12,
    )
    buffer.extend(transitions(40))
    sample = buffer.sample()
    stacks = sample["action"].view(3, 4, 2)
    assert torch.equal(stacks[:, 0, 0], stacks[:, 0, 1])  # slice start: the frame repeated
    assert torch.equal(stacks[:, 1:, 0] + 1, stacks[:, 1:, 1])  # then [previous, current]


def test_extend_and_sample_from_two_threads():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(256), batch_size=64)
    buffer.extend(transitions(64))
    errors = []

    def writer():
        try:
            for i in range(200):
                buffer.extend(transitions(32, start=i * 32))
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    thread = threading.Thread(target=writer)
    thread.start()
    while thread.is_alive():
        sample = buffer.sample()
        # every row is read whole: its entries agree with each other
        assert (sample["observation"][:, 0] == sample["action"][:, 0]).all()
        assert (sample["b", "c"][:, 0, 0, 0] == (sample["action"][:, 0].long() % 256)).all()
    thread.join()
    assert not errors


# -- bad input leaves the buffer unchanged -------------------------------------------------


def prioritized_buffer(tmp_path=None):
    storage = LazyMemmapStorage(20, scratch_dir=tmp_path) if tmp_path else LazyTensorStorage(20)
    buffer = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=storage, batch_size=4)
    buffer.extend(transitions(15))
    sample = buffer.sample()
    sample["td_error"] = torch.rand(4) + 0.1
    buffer.update_tensordict_priority(sample)
    return buffer


def _missing_key(data):
    return data.exclude(("next", "reward"))


def _extra_key(data):
    return data.set("observatoin", torch.zeros(data.shape[0], 3))


def _bad_shape(data):
    return data.set("observation", torch.zeros(data.shape[0], 4))


def _bad_dtype(data):
    return data.set("action", data["action"].double())


def _bad_batch(data):
    return data[0]


@pytest.mark.parametrize(
    "corrupt, error, match",
    [
        (_missing_key, KeyError, r"\('next', 'reward'\)"),
        (_extra_key, KeyError, "observatoin.*Did you mean 'observation'"),
        (_bad_shape, ValueError, "'observation' has item shape \\[4\\].*\\[3\\]"),
        (_bad_dtype, ValueError, "'action' has dtype torch.float64"),
        (_bad_batch, ValueError, "batch dimension"),
    ],
)
@pytest.mark.parametrize("memmap", [False, True])
def test_bad_extend_names_the_key_and_changes_nothing(corrupt, error, match, memmap, tmp_path):
    buffer = prioritized_buffer(tmp_path if memmap else None)
    before = snapshot(buffer)
    with pytest.raises(error, match=match):
        buffer.extend(corrupt(transitions(10, start=100)))
    assert_same(before, snapshot(buffer))
    buffer.extend(transitions(10, start=100))  # a good batch still goes in
    assert len(buffer) == 20


def test_bad_first_extend_leaves_the_storage_unallocated():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    with pytest.raises(ValueError, match="batch dimension"):
        buffer.extend(transitions(1)[0])
    assert len(buffer) == 0 and not buffer.storage.initialized and buffer.writer.cursor == 0


def test_bad_priorities_are_rejected_with_their_values():
    buffer = prioritized_buffer()
    before = snapshot(buffer)
    with pytest.raises(ValueError, match=r"nan.*positions \[3\]"):
        buffer.update_priority(torch.tensor([2, 3]), torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match=r"-2.0"):
        buffer.update_priority(torch.tensor([2, 3]), torch.tensor([1.0, -2.0]))
    data = transitions(3, start=50)
    data["td_error"] = torch.tensor([1.0, -1.0, float("nan")])
    with pytest.raises(ValueError, match=r"'td_error'.*-1.0"):
        buffer.extend(data)
    assert_same(before, snapshot(buffer))


def test_sample_on_an_empty_buffer_says_so():
    for buffer in (
        TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=2),
        TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyMemmapStorage(10)),
        ReplayBuffer(batch_size=2),
    ):
        with pytest.raises(RuntimeError, match="empty replay buffer"):
            buffer.sample(2)


def test_bad_batch_sizes_are_rejected():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    buffer.extend(transitions(4))
    with pytest.raises(ValueError, match="positive"):
        buffer.sample(0)
    with pytest.raises(TypeError, match="int"):
        buffer.sample(2.5)
    with pytest.raises(ValueError, match="positive"):
        TensorDictReplayBuffer(batch_size=-1)


def test_drop_last_with_a_batch_larger_than_the_contents():
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(100),
        sampler=SamplerWithoutReplacement(drop_last=True),
        batch_size=32,
    )
    buffer.extend(transitions(20))
    with pytest.raises(ValueError, match="batch_size=32 is larger than the 20 stored items"):
        buffer.sample()


# -- persistence ---------------------------------------------------------------------------


@pytest.mark.parametrize("memmap", [False, True])
def test_dumps_loads_restores_contents_cursor_and_priorities(memmap, tmp_path):
    def build():
        storage = LazyMemmapStorage(20, scratch_dir=tmp_path) if memmap else LazyTensorStorage(20)
        return TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=storage, batch_size=4)

    buffer = build()
    buffer.extend(transitions(27))  # wraps: the cursor is at 7
    buffer.update_priority(torch.arange(5), torch.arange(5.0) + 1)
    buffer.dumps(tmp_path / "dump")
    buffer.dumps(tmp_path / "dump")  # a second dump replaces the first
    restored = build()
    restored.loads(tmp_path / "dump")
    assert_same(snapshot(buffer), snapshot(restored))
    assert restored.writer.cursor == 7
    buffer.extend(transitions(3, start=100))
    restored.extend(transitions(3, start=100))
    assert_same(snapshot(buffer), snapshot(restored))


def test_loads_refuses_a_different_buffer_without_change(tmp_path):
    buffer = prioritized_buffer()
    buffer.dumps(tmp_path / "dump")
    other = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=RandomSampler())
    other.extend(transitions(2))
    before = snapshot(other)
    with pytest.raises(ValueError, match="sampler"):
        other.loads(tmp_path / "dump")
    assert_same(before, snapshot(other))
    with pytest.raises(FileNotFoundError, match="meta.json"):
        other.loads(tmp_path / "missing")


_DUMP_AND_HANG = """
import sys, time, torch
sys.path.insert(0, {repo!r})
from tests.data.test_replay_buffers import transitions
from torchrl_lite.data.replay_buffers import LazyMemmapStorage, TensorDictPrioritizedReplayBuffer
storage = LazyMemmapStorage(1000, scratch_dir={scratch!r})
buffer = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=storage)
buffer.extend(transitions(1500))  # wraps: cursor 500
buffer.update_priority(torch.arange(100), torch.arange(100.0) + 1)
buffer.dumps({path!r})
print("DUMPED", flush=True)
time.sleep(600)
"""

_LOAD_AND_CHECK = """
import sys, torch
sys.path.insert(0, {repo!r})
from tests.data.test_replay_buffers import transitions
from torchrl_lite.data.replay_buffers import LazyMemmapStorage, TensorDictPrioritizedReplayBuffer
buffer = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyMemmapStorage(1000))
buffer.loads({path!r})
expected = transitions(1500)[500:]
got = buffer.storage.get(torch.arange(1000))
order = torch.cat([torch.arange(500, 1000), torch.arange(500)])  # positions of rows 500..1499
assert len(buffer) == 1000, len(buffer)
assert (got[order] == expected).all()
assert buffer.writer.cursor == 500, buffer.writer.cursor
priorities = buffer.sampler.priorities()
assert torch.allclose(priorities[:100], (torch.arange(100.0).double() + 1 + 1e-8) ** 0.7)
print("LOADED OK", flush=True)
"""


def test_memmap_dump_survives_sigkill_and_loads_in_a_new_process(tmp_path):
    path = str(tmp_path / "dump")
    script = _DUMP_AND_HANG.format(repo=REPO, scratch=str(tmp_path / "scratch"), path=path)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "DUMPED", line
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    check = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_LOAD_AND_CHECK.format(repo=REPO, path=path))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, check.stderr
    assert "LOADED OK" in check.stdout


def test_extending_with_no_items_writes_nothing_even_before_the_first_write():
    from torchrl_lite.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer

    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    empty = TensorDict({"obs": torch.zeros(0, 3)}, batch_size=[0])
    assert rb.extend(empty).shape == (0,) and len(rb) == 0  # a lazy storage stays unbuilt
    rb.extend(TensorDict({"obs": torch.ones(4, 3)}, batch_size=[4]))
    assert rb.extend(empty).numel() == 0 and len(rb) == 4
    plain = ReplayBuffer(storage=LazyTensorStorage(10))
    assert plain.extend(torch.zeros(0, 2)).numel() == 0 and len(plain) == 0
