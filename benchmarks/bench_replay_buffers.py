"""Replay buffer benchmarks: ``extend`` and ``sample(256)`` against a raw gather of the same tensors.

Run: ``python benchmarks/bench_replay_buffers.py``. Capacity 100_000, filled with
``"a": float32[5]`` and ``("b", "c"): uint8[3, 32, 32]``. The sampling floor is
``torch.randint`` + ``index_select`` of the two tensors (the fastest raw gather; plain
advanced indexing ``t[idx]`` is also timed, for reference). The ``extend`` floor is
``copy_`` of the two tensors into preallocated (already touched) tensors. Every timing
comes from this run, one torch thread; per-call medians over rounds that time all the
cases back to back, so that load from other processes hits them alike. Targets: uniform
sampling <= 1.15x the floor, prioritized sample + priority update <= 3x, ``extend`` of
100k transitions <= 1.5x.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import torch
from tensordict import TensorDict

from _common import smoke, write_table
from torchrl_lite.data.replay_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    RandomSampler,
    SamplerWithoutReplacement,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)

torch.set_num_threads(1)
CAPACITY = 100_000
BATCH = 256
CALLS = 50 if smoke() else 200  # sample calls per timed chunk
ROUNDS = 3 if smoke() else 15
EXTEND_ROUNDS = 2 if smoke() else 7


def make_data(n: int) -> TensorDict:
    return TensorDict(
        {
            "a": torch.randn(n, 5),
            ("b", "c"): torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8),
        },
        batch_size=[n],
    )


def chunk_time(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def paired(fns: dict, calls: int, rounds: int) -> dict:
    """Per-call seconds of each function: median over rounds that time them back to back."""
    for fn in fns.values():  # warm-up
        chunk_time(fn, max(calls // 5, 1))
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(chunk_time(fn, calls))
    return {name: statistics.median(ts) for name, ts in times.items()}


def sample_rows(data: TensorDict, scratch: str) -> list[list]:
    a, c = data["a"], data["b", "c"]

    def raw_index_select():
        index = torch.randint(CAPACITY, (BATCH,))
        return a.index_select(0, index), c.index_select(0, index)

    def raw_advanced_indexing():
        index = torch.randint(CAPACITY, (BATCH,))
        return a[index], c[index]

    tensor_storage = LazyTensorStorage(CAPACITY)
    random_rb = TensorDictReplayBuffer(storage=tensor_storage, sampler=RandomSampler())
    random_rb.extend(data)
    # the same filled storage, sampled without replacement
    epoch_rb = TensorDictReplayBuffer(storage=tensor_storage, sampler=SamplerWithoutReplacement())
    memmap_rb = TensorDictReplayBuffer(
        storage=LazyMemmapStorage(CAPACITY, scratch_dir=scratch), sampler=RandomSampler()
    )
    memmap_rb.extend(data)
    prioritized = TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=LazyTensorStorage(CAPACITY)
    )
    prioritized.extend(data)
    priorities = torch.rand(BATCH) + 0.01

    def prioritized_sample_update():
        sample = prioritized.sample(BATCH)
        prioritized.update_priority(sample["index"], priorities)

    times = paired(
        {
            "floor": raw_index_select,
            "advanced": raw_advanced_indexing,
            "random": lambda: random_rb.sample(BATCH),
            "epoch": lambda: epoch_rb.sample(BATCH),
            "memmap": lambda: memmap_rb.sample(BATCH),
            "prioritized": lambda: prioritized.sample(BATCH),
            "prioritized_update": prioritized_sample_update,
        },
        CALLS,
        ROUNDS,
    )
    floor = times["floor"]
    cases = [
        ("raw randint + index_select (floor)", "floor", ""),
        ("raw randint + t[idx] (reference)", "advanced", ""),
        ("LazyTensorStorage + RandomSampler", "random", "<= 1.15"),
        ("LazyTensorStorage + SamplerWithoutReplacement", "epoch", "<= 1.15"),
        ("LazyMemmapStorage + RandomSampler", "memmap", "<= 1.15"),
        ("Prioritized (LazyTensorStorage): sample", "prioritized", ""),
        ("Prioritized: sample + update_priority", "prioritized_update", "<= 3"),
    ]
    return [
        [f"sample({BATCH}): {label}", times[key] * 1e6, times[key] / floor, target]
        for label, key, target in cases
    ]


def extend_rows(data: TensorDict, scratch: str) -> list[list]:
    a, c = data["a"], data["b", "c"]
    a_buf, c_buf = torch.empty_like(a), torch.empty_like(c)
    a_buf.copy_(a)  # touch the pages once: the floor copies into ready memory
    c_buf.copy_(c)

    def raw_copy():
        a_buf.copy_(a)
        c_buf.copy_(c)

    def raw_alloc_copy():
        torch.empty_like(a).copy_(a)
        torch.empty_like(c).copy_(c)

    tensor_rb = TensorDictReplayBuffer(storage=LazyTensorStorage(CAPACITY))
    tensor_rb.extend(data)  # allocated: the timed extends overwrite all 100k
    memmap_rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(CAPACITY, scratch_dir=scratch))
    memmap_rb.extend(data)
    fns = {
        "floor": raw_copy,
        "tensor": lambda: tensor_rb.extend(data),
        "memmap": lambda: memmap_rb.extend(data),
        "alloc_floor": raw_alloc_copy,
        "first": lambda: TensorDictReplayBuffer(storage=LazyTensorStorage(CAPACITY)).extend(data),
    }
    times = paired(fns, 1, EXTEND_ROUNDS)
    floor, alloc_floor = times["floor"], times["alloc_floor"]
    return [
        ["extend(100k): raw copy_ into preallocated (floor)", times["floor"] * 1e3, 1.0, ""],
        [
            "extend(100k): LazyTensorStorage",
            times["tensor"] * 1e3,
            times["tensor"] / floor,
            "<= 1.5",
        ],
        [
            "extend(100k): LazyMemmapStorage",
            times["memmap"] * 1e3,
            times["memmap"] / floor,
            "<= 1.5",
        ],
        [
            "first extend(100k), LazyTensorStorage allocating (vs raw empty + copy_)",
            times["first"] * 1e3,
            times["first"] / alloc_floor,
            "",
        ],
    ]


def main() -> None:
    torch.manual_seed(0)
    data = make_data(CAPACITY)
    with tempfile.TemporaryDirectory() as scratch:
        samples = sample_rows(data, scratch)
        extends = extend_rows(data, scratch)
    rows = [[label, f"{t:.1f} us", ratio, target] for label, t, ratio, target in samples]
    rows += [[label, f"{t:.1f} ms", ratio, target] for label, t, ratio, target in extends]
    write_table(
        "replay_buffers",
        'Replay buffers (capacity 100k, "a": f32[5], ("b", "c"): u8[3,32,32])',
        ["case", "time", "ratio vs floor", "target"],
        rows,
        notes=(
            f"Floors measured in the same run: torch.randint + index_select of the same tensors "
            f"for sample({BATCH}); copy_ into preallocated tensors for extend. One thread; "
            "medians over rounds that time every case back to back. Prioritized: alpha=0.7, "
            "beta=0.5, update of the 256 sampled priorities."
        ),
    )


if __name__ == "__main__":
    main()
