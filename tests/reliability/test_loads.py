"""Loads verify what they read: damaged dumps raise naming the file, change nothing, write nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from tests.data.test_replay_buffers import assert_same, prioritized_buffer, snapshot, transitions
from torchrl_lite.data.replay_buffers import (
    LazyMemmapStorage,
    ListStorage,
    ReplayBuffer,
    TensorDictPrioritizedReplayBuffer,
)


def files(root: Path) -> dict:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def other_buffer(tmp_path) -> TensorDictPrioritizedReplayBuffer:
    """A buffer with contents of its own, to show a failed load keeps them."""
    storage = LazyMemmapStorage(20, scratch_dir=tmp_path / "scratch")
    buffer = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=storage, batch_size=4)
    buffer.extend(transitions(6, start=50))
    buffer.update_priority(torch.arange(6), torch.arange(6.0) + 2)
    return buffer


def damaged(tmp_path, damage: str) -> tuple[Path, Path]:
    """A dump of ``prioritized_buffer`` with one file damaged; ``(dump, damaged file)``."""
    dump = tmp_path / "dump"
    prioritized_buffer(tmp_path / "scratch-src").dumps(dump)
    data = dump / "storage" / "data"
    if damage == "truncated":
        file = data / "observation.memmap"
        file.write_bytes(file.read_bytes()[:100])
    elif damage == "missing":
        file = data / "next" / "reward.memmap"
        file.unlink()
    elif damage == "too_long":
        file = data / "b" / "c.memmap"
        file.write_bytes(file.read_bytes() + b"\0" * 12)
    elif damage == "data_meta_shape":  # tensordict's own metadata disagrees with ours
        file = data / "observation.memmap"
        meta = json.loads((data / "meta.json").read_text())
        meta["observation"]["shape"] = [5, 9]
        (data / "meta.json").write_text(json.dumps(meta))
    elif damage == "data_meta_json":
        file = data / "next" / "meta.json"
        file.write_text("{garbage")
    elif damage == "storage_meta":
        file = dump / "storage" / "meta.json"
        file.write_text("{not json")
    elif damage == "storage_meta_leaves":
        file = dump / "storage" / "meta.json"
        meta = json.loads(file.read_text())
        del meta["leaves"]
        file.write_text(json.dumps(meta))
    elif damage == "buffer_meta":
        file = dump / "meta.json"
        file.write_bytes(b"\x00\x01garbage")
    elif damage in ("sampler_bytes", "writer_bytes"):
        file = dump / f"{damage.split('_')[0]}.pt"
        file.write_bytes(file.read_bytes()[:40])
    elif damage == "sampler_content":
        file = dump / "sampler.pt"
        torch.save({"tree": {"capacity": 7, "leaves": torch.zeros(7)}, "max_priority": 1.0}, file)
    elif damage == "writer_content":
        file = dump / "writer.pt"
        torch.save({"unrelated": 1}, file)
    else:
        raise AssertionError(damage)
    return dump, file


DAMAGES = {
    "truncated": ValueError,
    "missing": FileNotFoundError,
    "too_long": ValueError,
    "data_meta_shape": ValueError,
    "data_meta_json": ValueError,
    "storage_meta": ValueError,
    "storage_meta_leaves": ValueError,
    "buffer_meta": ValueError,
    "sampler_bytes": ValueError,
    "writer_bytes": ValueError,
    "sampler_content": ValueError,
    "writer_content": ValueError,
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_dump_raises_naming_the_file_and_changes_nothing(damage, tmp_path):
    dump, file = damaged(tmp_path, damage)
    on_disk = files(dump)
    buffer = other_buffer(tmp_path)
    before = snapshot(buffer)
    with pytest.raises(DAMAGES[damage], match=re.escape(str(file))):
        buffer.loads(dump)
    assert_same(before, snapshot(buffer))  # contents, cursor and priorities as they were
    assert files(dump) == on_disk  # nothing written to the dump (no zero-filled extension)
    buffer.extend(transitions(2, start=90))  # and the buffer still works


def test_truncated_file_never_loads_zeros_into_a_fresh_buffer(tmp_path):
    dump, file = damaged(tmp_path, "truncated")
    fresh = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyMemmapStorage(20))
    with pytest.raises(ValueError, match="truncated"):
        fresh.loads(dump)
    assert len(fresh) == 0 and not fresh.storage.initialized


def test_storage_loads_checks_its_files_directly(tmp_path):
    storage = LazyMemmapStorage(20, scratch_dir=tmp_path / "s")
    storage.set(torch.arange(5), transitions(5))
    storage.dumps(tmp_path / "dump")
    file = tmp_path / "dump" / "data" / "action.memmap"
    file.write_bytes(file.read_bytes()[:4])
    other = LazyMemmapStorage(20, scratch_dir=tmp_path / "o")
    with pytest.raises(ValueError, match=re.escape(str(file)) + ".*holds 4 bytes.*need 20"):
        other.loads(tmp_path / "dump")
    assert len(other) == 0


def test_list_storage_corrupt_items_names_the_file(tmp_path):
    buffer = ReplayBuffer(storage=ListStorage(10))
    buffer.extend(["a", "b"])
    buffer.dumps(tmp_path / "dump")
    items = tmp_path / "dump" / "storage" / "items.pt"
    items.write_bytes(b"garbage")
    other = ReplayBuffer(storage=ListStorage(10))
    other.extend(["z"])
    with pytest.raises(ValueError, match=re.escape(str(items))):
        other.loads(tmp_path / "dump")
    assert len(other) == 1 and other.storage.get(torch.tensor([0])) == ["z"]


def test_trainer_load_with_a_damaged_buffer_dump_names_the_file(tmp_path):
    from tests.trainers.setups import dqn_run

    saved = dqn_run(2, path=tmp_path / "ckpt")
    saved.trainer.train()
    data_files = sorted((tmp_path / "ckpt").rglob("*.memmap"))
    data_files[0].write_bytes(b"")
    run = dqn_run(2, seed=3)
    before = {k: v.clone() for k, v in run.loss.state_dict().items()}
    with pytest.raises(ValueError, match=re.escape(str(data_files[0]))):
        run.trainer.load(tmp_path / "ckpt")
    assert run.trainer.collected_frames == 0
    for key, value in run.loss.state_dict().items():
        assert torch.equal(value, before[key]), key
