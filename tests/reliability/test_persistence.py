"""Crash-safe persistence: checkpoints and replay-buffer dumps killed at every step of the swap.

A forked child (cheap: torch is already imported) saves a new version over a saved one
and dies by ``os._exit`` just before the k-th file sync, rename or folder removal (or with
the file being synced cut in half, as a kill during the write leaves it), for every k;
another child saves in a loop until SIGKILL arrives from outside at a random moment. After
each death: the load returns a complete version (the previous or the new one, never a
mix), with a one-line notice when it had to use a copy beside the path, writes nothing,
and the next save leaves exactly one folder.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import stat
import time
import warnings
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite._atomic import RecoveryWarning
from torchrl_lite.data.replay_buffers import LazyTensorStorage, TensorDictPrioritizedReplayBuffer
from torchrl_lite.trainers import load_checkpoint, save_checkpoint

ROWS = 4  # rows added per version


@pytest.fixture(autouse=True)
def no_disk_flush(monkeypatch):
    """fsync only matters for power loss, not for killed processes: skip its cost here
    (the kill points still count every call)."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def make_buffer() -> TensorDictPrioritizedReplayBuffer:
    return TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(400))


def add_version(buffer, version: int) -> None:
    """Rows whose every entry holds ``version``: a loaded dump shows which saves it holds."""
    rows = TensorDict(
        {
            "step": torch.full((ROWS,), version),
            "obs": torch.full((ROWS, 3), float(version)),
            "next": {"obs": torch.full((ROWS, 3), float(version))},
        },
        [ROWS],
    )
    index = buffer.extend(rows)
    buffer.update_priority(index, torch.full((ROWS,), float(version)))


def check_buffer(buffer, version: int) -> None:
    """The buffer holds exactly versions 1..version, each with its priority."""
    assert len(buffer) == ROWS * version
    data = buffer.storage.get(torch.arange(len(buffer)))
    expected = torch.arange(1, version + 1).repeat_interleave(ROWS)
    assert torch.equal(data["step"], expected)
    assert torch.equal(data["obs"], expected[:, None].float().expand(-1, 3))
    assert torch.equal(data["next", "obs"], data["obs"])
    assert buffer.writer.cursor == len(buffer)
    priorities = buffer.sampler.priorities()[: len(buffer)]
    assert torch.allclose(priorities, (expected.double() + 1e-8) ** 0.7)


class Target:
    """What is saved: a checkpoint with a buffer dump inside, or a bare buffer dump."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind, self.root = kind, root
        self.path = root / ("ckpt" if kind == "checkpoint" else "dump")
        self.buffer = make_buffer()
        self.version = 0

    def save(self, version: int) -> None:
        while self.version < version:
            self.version += 1
            add_version(self.buffer, self.version)
        if self.kind == "checkpoint":
            state = {"step": version}
            save_checkpoint(self.path, state, {"buffer": self.buffer.dumps}, {"step": version})
        else:
            self.buffer.dumps(self.path)

    def load(self) -> int:
        """The version found on disk, checked whole; fails on any inconsistency."""
        buffer = make_buffer()
        if self.kind == "checkpoint":
            state, folder = load_checkpoint(self.path)
            buffer.loads(folder / "buffer")
            version = state["step"]
        else:
            buffer.loads(self.path)
            version = len(buffer) // ROWS
        check_buffer(buffer, version)
        return version


def tree(root: Path) -> dict:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def in_child(body) -> int:
    """Run ``body()`` in a forked child that never returns here; its wait status."""
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 0
        try:
            body()
        except BaseException:
            code = 3
        os._exit(code)
    return os.waitpid(pid, 0)[1]


def kill_at(step: int, torn: bool) -> None:
    """Make this process die just before its ``step``-th fsync, rename or folder removal."""
    calls = [0]

    def wrap(fn, kind):
        def wrapped(*args, **kwargs):
            calls[0] += 1
            if calls[0] == step:
                if torn and kind == "fsync" and stat.S_ISREG(os.fstat(args[0]).st_mode):
                    os.ftruncate(args[0], os.fstat(args[0]).st_size // 2)
                os._exit(9)
            return fn(*args, **kwargs)

        return wrapped

    os.fsync = wrap(os.fsync, "fsync")
    os.rename = wrap(os.rename, "rename")
    shutil.rmtree = wrap(shutil.rmtree, "rmtree")


def count_steps(kind: str, root: Path) -> list[str]:
    """The fsync/rename/rmtree calls saving version 2 over version 1 makes, in order."""
    target = Target(kind, root)
    target.save(1)
    calls = []
    originals = os.fsync, os.rename, shutil.rmtree

    def counter(fn, name):
        def wrapped(*args, **kwargs):
            regular = name == "fsync" and stat.S_ISREG(os.fstat(args[0]).st_mode)
            calls.append("fsync-file" if regular else name)
            return fn(*args, **kwargs)

        return wrapped

    os.fsync, os.rename, shutil.rmtree = (
        counter(fn, name) for fn, name in zip(originals, ("fsync", "rename", "rmtree"))
    )
    try:
        target.save(2)
    finally:
        os.fsync, os.rename, shutil.rmtree = originals
    shutil.rmtree(root)
    return calls


def load_and_check(target: Target, allowed: set) -> int:
    """Load after a kill: a whole allowed version, a notice iff a side copy was used,
    nothing written; then a new save leaves exactly one folder and loads back."""
    before = tree(target.root)
    in_place = target.path.is_dir() and (target.path / "meta.json").is_file()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        version = target.load()
    notices = [w for w in caught if issubclass(w.category, RecoveryWarning)]
    assert version in allowed
    assert len(notices) == (0 if in_place else 1), [str(w.message) for w in caught]
    if notices:
        message = str(notices[0].message)
        assert "\n" not in message and str(target.path) in message
    assert tree(target.root) == before  # loading writes nothing
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecoveryWarning)  # "recovered ...": checked elsewhere
        target.save(target.version + 1)
    assert sorted(p.name for p in target.root.iterdir()) == [target.path.name]
    if target.kind == "checkpoint":
        assert sorted(p.name for p in target.path.iterdir()) == ["buffer", "meta.json", "state.pt"]
    assert target.load() == target.version
    return version


@pytest.mark.parametrize("kind", ["checkpoint", "buffer"])
def test_kill_at_every_step_of_the_swap_recovers_a_complete_copy(kind, tmp_path):
    steps = count_steps(kind, tmp_path / "count")
    assert {"fsync-file", "rename", "rmtree"} <= set(steps), steps
    seen = set()
    for step, call in enumerate(steps, start=1):
        for torn in (False, True) if call == "fsync-file" else (False,):
            root = tmp_path / f"s{step}-{torn}"
            root.mkdir()
            target = Target(kind, root)
            target.save(1)

            def body(target=target, step=step, torn=torn):
                kill_at(step, torn)
                target.save(2)

            status = in_child(body)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 9, (step, torn, status)
            target.version = 1  # the child's rows never reached this process's buffer
            seen.add(load_and_check(target, {1, 2}))
            shutil.rmtree(root)
    assert seen == {1, 2}  # kills before the swap keep 1, kills after it show 2


@pytest.mark.parametrize("kind", ["checkpoint", "buffer"])
def test_sigkill_at_random_moments_recovers_a_complete_copy(kind, tmp_path):
    rng = random.Random(0)
    for repeat in range(20):
        root = tmp_path / f"r{repeat}"
        root.mkdir()
        target = Target(kind, root)
        target.save(1)
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(ready_r)
                os.write(ready_w, b"x")
                for version in range(2, 100):
                    target.save(version)
            finally:
                os._exit(0)
        os.close(ready_w)
        os.read(ready_r, 1)
        os.close(ready_r)
        time.sleep(rng.uniform(0.0, 0.1))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        target.version = 1
        load_and_check(target, set(range(1, 100)))
        shutil.rmtree(root)


def test_stale_copies_of_dead_processes_are_removed_on_the_next_save(tmp_path):
    path = tmp_path / "ckpt"
    save_checkpoint(path, {"step": 1})
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # reaped: a dead process's pid
    for name in (f"ckpt.tmp-{pid}", f"ckpt.old-{pid}", "ckpt.tmp", "ckpt.old"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "state.pt").write_bytes(b"half")
    live = tmp_path / f"ckpt.tmp-{os.getppid()}"  # a live process's save in progress
    live.mkdir()
    save_checkpoint(path, {"step": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ckpt", live.name])
    assert load_checkpoint(path)[0] == {"step": 2}


def test_trainer_load_after_kill_between_renames(tmp_path):
    from tests.trainers.setups import dqn_run

    run = dqn_run(2, path=tmp_path / "ckpt")
    run.trainer.train()
    path = tmp_path / "ckpt"
    os.rename(path, tmp_path / "ckpt.old-999999")  # the first rename of a killed save
    resumed = dqn_run(4, path=path)
    with pytest.warns(RecoveryWarning, match="ckpt.old-999999"):
        resumed.trainer.load()
    assert resumed.trainer.collected_frames == run.trainer.collected_frames
    for key, value in run.loss.state_dict().items():
        assert torch.equal(resumed.loss.state_dict()[key], value), key
    with pytest.warns(RecoveryWarning, match="recovered"):
        resumed.trainer.save()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
