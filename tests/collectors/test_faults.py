"""Bad input and faults: clear errors at the boundary, no hangs, no orphan processes."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from tests.collectors.helpers import CountingEnv, constant_policy, make_pendulum, wait_gone
from torchrl_lite.collectors import (
    MultiaSyncDataCollector,
    MultiSyncDataCollector,
    SyncDataCollector,
)
from torchrl_lite.envs import GymEnv, SerialEnv

MULTI = [MultiSyncDataCollector, MultiaSyncDataCollector]


def make_counter():
    return CountingEnv(limit=3)


def failing_env():
    return CountingEnv(limit=3, fail_at=5)


# -- frame budget ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"frames_per_batch": 0}, ValueError, "frames_per_batch must be >= 1"),
        ({"frames_per_batch": -3}, ValueError, "frames_per_batch must be >= 1"),
        ({"frames_per_batch": 1.5}, TypeError, "frames_per_batch must be an int"),
        ({"frames_per_batch": 30, "total_frames": 12}, ValueError, "smaller than"),
        ({"frames_per_batch": 30, "total_frames": 0}, ValueError, "total_frames must be > 0"),
        ({"frames_per_batch": 30, "max_frames_per_traj": 0}, ValueError, "max_frames_per_traj"),
    ],
)
def test_sync_bad_frame_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        SyncDataCollector(lambda: SerialEnv(3, CountingEnv), None, **kwargs)


def test_multi_sync_frames_not_divisible_by_workers():
    with pytest.raises(ValueError, match="not divisible by num_workers=2"):
        MultiSyncDataCollector([make_counter] * 2, None, frames_per_batch=7)


def test_sync_frames_not_divisible_by_envs_rounds_up_with_a_warning():
    # TorchRL's behaviour: every env steps equally often, the batch grows to a multiple
    with pytest.warns(UserWarning, match="not divisible by the number of envs, 3"):
        collector = SyncDataCollector(lambda: SerialEnv(3, CountingEnv), None, frames_per_batch=10)
    assert collector.frames_per_batch == 12
    assert collector.next().batch_size == (3, 4)
    collector.shutdown()


@pytest.mark.parametrize("cls", MULTI)
def test_multi_frames_not_divisible_by_a_workers_envs_round_up(cls, no_leftover_workers):
    # each worker's collector rounds its share up to a multiple of its 3 envs
    collector = cls([lambda: SerialEnv(3, CountingEnv)] * 2, None, frames_per_batch=20)
    try:
        batch = next(iter(collector))
    finally:
        collector.shutdown()
    per_worker = 12 if cls is MultiSyncDataCollector else 21  # 10 -> 12; async: 20 -> 21
    assert batch.numel() == per_worker * (2 if cls is MultiSyncDataCollector else 1)


# -- the policy ------------------------------------------------------------------------
def test_sync_policy_that_does_not_write_action():
    policy = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["act"])
    collector = SyncDataCollector(make_pendulum(), policy, frames_per_batch=10)
    with pytest.raises(KeyError) as info:
        collector.next()
    message = str(info.value)
    assert "did not write 'action'" in message and "['act']" in message
    assert "Bounded" in message  # the spec


@pytest.mark.parametrize("value, match", [(5.0, "outside the env's action spec"), (None, "shape")])
def test_sync_policy_that_writes_a_bad_action(value, match):
    if value is None:  # a wrong shape
        policy = TensorDictModule(nn.Linear(3, 2), in_keys=["observation"], out_keys=["action"])
    else:
        policy = constant_policy(value, in_key="observation")
        policy.module = nn.Linear(3, 1)
        with torch.no_grad():
            policy.module.weight.zero_()
            policy.module.bias.fill_(value)
    # a float overshoot warns by default (tests/compat); spec_check="strict" raises
    env = GymEnv("Pendulum-v1", spec_check="strict")
    collector = SyncDataCollector(env, policy, frames_per_batch=10)
    with pytest.raises(ValueError, match=match) as info:
        collector.next()
    assert "policy output keys: ['action']" in str(info.value)
    assert "Bounded" in str(info.value)


def test_sync_policy_types():
    with pytest.raises(TypeError, match="Wrap it, e.g. TensorDictModule"):
        SyncDataCollector(make_pendulum(), nn.Linear(3, 1), frames_per_batch=10)
    with pytest.raises(TypeError, match="must be callable"):
        SyncDataCollector(make_pendulum(), 3, frames_per_batch=10)
    with pytest.raises(TypeError, match="exploration_type"):
        SyncDataCollector(make_pendulum(), None, frames_per_batch=10, exploration_type="random")


def test_multi_policy_error_comes_back_with_its_type(no_leftover_workers):
    policy = TensorDictModule(nn.Linear(1, 1), in_keys=["count"], out_keys=["act"])
    collector = MultiSyncDataCollector([make_counter] * 2, policy, frames_per_batch=4)
    with pytest.raises(KeyError, match="did not write 'action'"):
        collector.next()


# -- the env ---------------------------------------------------------------------------
def test_env_arguments():
    with pytest.raises(TypeError, match="must be an env or a callable"):
        SyncDataCollector("Pendulum-v1", None, frames_per_batch=10)
    with pytest.raises(TypeError, match="must return an EnvBase"):
        SyncDataCollector(lambda: 3, None, frames_per_batch=10)
    with pytest.raises(ValueError, match="env_device=meta"):
        SyncDataCollector(make_pendulum(), None, frames_per_batch=10, env_device="meta")
    closed = make_pendulum()  # env instances are accepted (TorchRL), closed ones are not
    closed.close()
    with pytest.raises(ValueError, match="is closed"):
        MultiSyncDataCollector([closed], None, frames_per_batch=10)
    with pytest.raises(ValueError, match="num_workers"):
        MultiSyncDataCollector(make_pendulum, None, frames_per_batch=10)


# -- weights ---------------------------------------------------------------------------
def bad_weights():
    good = TensorDict.from_module(constant_policy()).data
    yield "missing", good.exclude(("module", "bias")), ValueError
    yield "unexpected", good.clone().set("extra", torch.zeros(1)), ValueError
    yield (
        "shape",
        TensorDict.from_module(TensorDictModule(nn.Linear(2, 1), ["a"], ["b"])),
        ValueError,
    )
    yield "not tensors", {"module.weight": 1.0, "module.bias": 2.0}, TypeError
    yield "type", [1, 2], TypeError


@pytest.mark.parametrize("case", list(bad_weights()), ids=lambda c: c[0])
def test_update_policy_weights_wrong_structure(case, no_leftover_workers):
    name, weights, error = case
    policy = constant_policy(0.5)
    for collector in (
        SyncDataCollector(make_counter(), policy, frames_per_batch=4),
        MultiSyncDataCollector([make_counter], policy, frames_per_batch=4),
    ):
        with pytest.raises(error, match="update_policy_weights_"):
            collector.update_policy_weights_(weights)
        assert (collector.next()["action"] == 0.5).all()  # nothing was copied
        collector.shutdown()


def test_update_policy_weights_without_a_policy(no_leftover_workers):
    for collector in (
        SyncDataCollector(make_counter(), None, frames_per_batch=4),
        MultiSyncDataCollector([make_counter], None, frames_per_batch=4),
    ):
        collector.update_policy_weights_()  # nothing to do
        with pytest.raises(ValueError, match="no weights"):
            collector.update_policy_weights_(TensorDict.from_module(constant_policy()))
        collector.shutdown()


# -- workers that fail or die ----------------------------------------------------------------
@pytest.mark.parametrize("cls", MULTI)
def test_worker_env_raises_in_step(cls, no_leftover_workers):
    collector = cls([make_counter, failing_env], None, frames_per_batch=4, total_frames=400)
    pids = collector.worker_pids
    start = time.monotonic()
    with pytest.raises(ValueError, match="boom at step 5") as info:
        for _ in collector:
            pass
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert "worker 1" in message and "Worker traceback" in message and "_step" in message
    assert not wait_gone(pids)
    with pytest.raises(RuntimeError, match="shut down after a failure"):
        collector.next()


@pytest.mark.parametrize("cls", MULTI)
def test_worker_env_raises_while_building(cls, no_leftover_workers):
    with pytest.raises(ValueError, match="boom while building the env"):
        cls([make_counter, lambda: CountingEnv(fail_in_init=True)], None, frames_per_batch=4)


@pytest.mark.parametrize("cls", MULTI)
def test_worker_killed_between_batches(cls, no_leftover_workers):
    collector = cls([make_counter] * 2, None, frames_per_batch=4)
    collector.next()
    os.kill(collector.worker_pids[1], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="killed by signal SIGKILL"):
        for _ in range(10):
            collector.next()
            time.sleep(0.05)


def test_worker_killed_while_the_parent_waits(no_leftover_workers):
    slow = lambda: CountingEnv(limit=1000)  # noqa: E731
    collector = MultiSyncDataCollector([slow] * 2, None, frames_per_batch=200_000)
    killer = threading.Timer(0.5, os.kill, (collector.worker_pids[0], signal.SIGKILL))
    killer.start()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="worker 0 .* was killed by signal SIGKILL"):
        collector.next()
    assert time.monotonic() - start < 10
    killer.join()


# -- shutdown and orphans ----------------------------------------------------------------------
@pytest.mark.parametrize("cls", MULTI)
def test_shutdown_joins_workers(cls, no_leftover_workers):
    collector = cls([make_counter] * 2, constant_policy(), frames_per_batch=4)
    collector.next()
    pids = collector.worker_pids
    collector.shutdown()
    assert not wait_gone(pids, timeout=0.1)
    with pytest.raises(RuntimeError, match="was shut down"):
        collector.next()
    collector.shutdown()  # twice is fine


def test_dropped_collector_stops_its_workers(no_leftover_workers):
    collector = MultiaSyncDataCollector([make_counter] * 2, None, frames_per_batch=4)
    collector.next()
    procs = list(collector._procs)
    del collector
    for proc in procs:
        proc.join(timeout=5)
        assert not proc.is_alive()


_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from torchrl_lite.collectors import MultiaSyncDataCollector
    from torchrl_lite.envs import GymEnv
    make = lambda: GymEnv("Pendulum-v1")
    collector = MultiaSyncDataCollector([make, make], None, frames_per_batch=50)
    print(" ".join(map(str, collector.worker_pids)), flush=True)
    for i, data in enumerate(collector):
        if i == 3 and sys.argv[1] == "raise":
            raise RuntimeError("the training loop failed")
        if i == 3 and sys.argv[1] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_no_orphans_when_the_parent_fails(how):
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, how], capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    if how == "raise":
        assert "the training loop failed" in out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    assert not wait_gone(pids, timeout=5), f"workers outlived their parent ({how})"
