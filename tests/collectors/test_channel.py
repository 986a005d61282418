"""The same-node shared-memory channel (collectors/distributed/channel.py): both ends in
one process (segments that grow, layouts that change, what cannot be packed, a worker's
error, a dead worker), then through Ray: the same batches as the Ray-call path and a
local collector, weights updates, a SIGKILLed channel worker restarted, nothing left in
/dev/shm or running after shutdown."""

import os
import signal
import time

import psutil
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from tests.collectors.helpers import assert_same
from tests.scheme import doubles
from tests.scheme.conftest import ray_session  # noqa: F401 (the suite's one Ray session)
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.collectors.distributed.channel import (
    ChannelClosedError,
    ChannelServer,
    check_channel,
)
from torchrl_lite.collectors.distributed.channel import CollectChannel as Channel
from torchrl_lite.collectors.distributed.transport import pack
from torchrl_lite.envs import PendulumEnv
from torchrl_lite.workers.errors import RemoteError as ChannelWorkerError


def _open(collect):
    server = ChannelServer(collect)
    return server, Channel(server.address, server.authkey, "worker 3")


def test_batches_and_weights_cross_the_channel_equal_and_as_copies():
    seen = []

    def collect(weights, version, min_fraction):
        seen.append((None if weights is None else weights["w"].clone(), version, min_fraction))
        n = 4 if version < 2 else 50_000  # the second layout needs a bigger segment
        batch = TensorDict(
            {"x": torch.arange(n, dtype=torch.float32).unsqueeze(-1) * (version + 1),
             "next": {"done": torch.zeros(n, 1, dtype=torch.bool)}}, [n]
        )  # fmt: skip
        return batch, {"version": version, "frames": n}

    server, channel = _open(collect)
    first, meta = channel.submit(pack({"w": torch.ones(3)}), version=1).result()
    assert meta == {"version": 1, "frames": 4}
    assert torch.equal(first["x"].squeeze(-1), torch.arange(4.0) * 2)
    assert first["next", "done"].dtype == torch.bool
    again, _ = channel.submit(None, version=1, min_fraction=0.5).result()  # no weights
    big_weights = {"w": torch.full((40_000,), 7.0)}  # more than the first weights segment
    big, _ = channel.submit(pack(big_weights), version=2).result()
    assert big.batch_size == torch.Size([50_000]) and big["x"][-1].item() == 49_999 * 3
    # each batch is the driver's own copy: the worker overwrote its segment since
    assert torch.equal(first["x"].squeeze(-1), torch.arange(4.0) * 2)
    assert torch.equal(again["x"], first["x"])
    assert [v for _, v, _ in seen] == [1, 1, 2] and [f for _, _, f in seen] == [1.0, 0.5, 1.0]
    assert torch.equal(seen[0][0], torch.ones(3)) and seen[1][0] is None
    assert torch.equal(seen[2][0], big_weights["w"])
    channel.close()


def test_what_cannot_be_packed_travels_pickled():
    def collect(weights, version, min_fraction):
        lazy = LazyStackedTensorDict(*[TensorDict({"a": torch.ones(2) * i}, []) for i in range(3)])
        return lazy, {"got": weights}

    server, channel = _open(collect)
    batch, meta = channel.submit({"not": "tensors"}, version=0).result()
    assert type(batch) is LazyStackedTensorDict and meta == {"got": {"not": "tensors"}}
    channel.close()


def test_a_worker_error_comes_back_with_its_traceback_and_the_channel_goes_on():
    calls = []

    def collect(weights, version, min_fraction):
        calls.append(version)
        if version == 0:
            raise ValueError("env step failed on purpose")
        return TensorDict({"x": torch.zeros(2)}, [2]), {}

    server, channel = _open(collect)
    with pytest.raises(ChannelWorkerError) as info:
        channel.submit(None, version=0).result()
    assert info.value.info["type"] == "ValueError"
    assert info.value.info["message"] == "env step failed on purpose"
    assert "in collect" in info.value.info["traceback"]
    assert channel.submit(None, version=1).result()[0].batch_size == torch.Size([2])
    channel.close()


def test_one_call_at_a_time():
    server, channel = _open(lambda w, v, f: (TensorDict({}, []), {}))
    channel.submit(None, 0)
    with pytest.raises(RuntimeError, match="worker 3 already has a collect in progress"):
        channel.submit(None, 0)
    channel.pending.result()
    assert channel.pending is None
    channel.close()
    channel.close()  # idempotent


def _serve_in_child(conn):
    def collect(weights, version, min_fraction):
        time.sleep(60)  # killed meanwhile

    server = ChannelServer(collect)
    conn.send((server.address, server.authkey))
    time.sleep(120)


def test_a_sigkilled_worker_process_reads_as_a_closed_channel():
    """The worker's process is SIGKILLed during a collect: the pending call ends at once
    with ChannelClosedError naming the worker, and so does the next one."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=_serve_in_child, args=(there,), daemon=True)
    proc.start()
    channel = Channel(*here.recv(), "worker 3")
    call = channel.submit(pack({"w": torch.ones(2)}), 0)
    assert not call.ready()
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    with pytest.raises(ChannelClosedError, match="worker 3's channel closed"):
        call.result()
    assert call.ready()
    with pytest.raises(ChannelClosedError, match="its process died"):
        channel.submit(None, 1).result()
    channel.close()


def test_bad_channel_mode():
    with pytest.raises(ValueError, match=r"channel='shm' is not a channel mode; valid: \['auto'"):
        check_channel("channel", "shm")
    from torchrl_lite.scheme import Scheme

    with pytest.raises(ValueError, match=r"col_channel='fast' is not a channel mode; valid:"):
        Scheme(**doubles.factories(), col_channel="fast")


# -- through Ray ----------------------------------------------------------------------------


def _policy(scale=0.5):
    from tensordict.nn import TensorDictModule

    linear = torch.nn.Linear(3, 1)
    torch.nn.init.constant_(linear.weight, scale)
    torch.nn.init.zeros_(linear.bias)
    return TensorDictModule(
        torch.nn.Sequential(linear, torch.nn.Tanh()), in_keys=["observation"], out_keys=["action"]
    )


def _local(seed, index, frames, batches, flip_at):
    policy = _policy()
    collector = SyncDataCollector(PendulumEnv, policy, frames_per_batch=frames)
    collector.set_seed(seed + 1000 * index)
    out = []
    for i in range(batches):
        if i == flip_at:
            torch.nn.init.constant_(policy.module[0].weight, -1.0)
        out.append(collector.next())
    collector.shutdown()
    return out


def _shm_files() -> set:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.ray
def test_channel_and_ray_paths_give_the_local_collectors_batches(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    shm_before = _shm_files()
    expected = [_local(3, i, 20, 3, flip_at=1) for i in range(2)]
    got = {}
    pids = []
    for mode in ("auto", "ray"):
        policy = _policy()
        collector = RayCollector(PendulumEnv, policy, frames_per_batch=40, total_frames=120,
                                 num_collectors=2, seed=3, channel=mode)  # fmt: skip
        assert [c is not None for c in collector.group.channels] == [mode == "auto"] * 2
        pids += [collector.group._get(collector.group.call(i, "ping")) for i in range(2)]
        got[mode] = []
        for i, batch in enumerate(collector):
            got[mode].append(batch)
            if i == 0:  # new weights reach every worker for the next batch
                torch.nn.init.constant_(policy.module[0].weight, -1.0)
                collector.update_policy_weights_()
        collector.shutdown()
    for batches in got.values():
        assert len(batches) == 3
        for i, batch in enumerate(batches):
            assert_same(batch, torch.cat([expected[0][i], expected[1][i]]), skip_prefix=())
    # shutdown: no worker process and no shared-memory file left behind
    deadline = time.monotonic() + 30
    while any(psutil.pid_exists(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in pids if psutil.pid_exists(p)]
    assert _shm_files() <= shm_before


@pytest.mark.ray
def test_a_sigkilled_channel_worker_is_restarted_with_a_new_channel(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    policy = _policy()
    collector = RayCollector(PendulumEnv, policy, frames_per_batch=40, num_collectors=2, seed=0)
    group = collector.group
    collector.next()
    torch.nn.init.constant_(policy.module[0].weight, -1.0)
    collector.update_policy_weights_()
    old_channel = group.channels[0]
    pid = group._get(group.call(0, "ping"))
    os.kill(pid, signal.SIGKILL)
    batch = collector.next()  # the healthy worker's batch: the dead one fails at once
    assert batch.batch_size == torch.Size([20])
    assert group.restarts[0] == 1
    assert any("remote collector 0 failed (ChannelClosedError" in e for e in collector.events)
    deadline = time.monotonic() + 120
    while group.alive < 2 and time.monotonic() < deadline:
        batch = collector.next()
    assert group.alive == 2 and group.channels[0] not in (None, old_channel)
    batch = collector.next()  # both workers again, the restarted one with the new weights
    assert batch.batch_size == torch.Size([40])
    expected = torch.tanh(-batch["observation"].sum(-1, keepdim=True))
    assert torch.allclose(batch["action"], expected, atol=1e-6)
    collector.shutdown()


@pytest.mark.ray
def test_ctrl_c_during_a_channel_collect_then_shutdown_leaves_nothing(ray_session, sigint_raises):  # noqa: F811
    """SIGINT while the driver waits on a channel: KeyboardInterrupt reaches the caller,
    and shutdown() leaves no worker process and no /dev/shm file."""
    import threading

    from torchrl_lite.collectors.distributed import RayCollector

    shm_before = _shm_files()
    collector = RayCollector(PendulumEnv, _policy(), frames_per_batch=20_000, num_collectors=1)
    group = collector.group
    assert group.channels[0] is not None
    pid = group._get(group.call(0, "ping"))
    interrupter = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            collector.next()  # about 1.5 s of collection
    finally:
        interrupter.cancel()
        collector.shutdown()
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not psutil.pid_exists(pid)
    assert _shm_files() <= shm_before
