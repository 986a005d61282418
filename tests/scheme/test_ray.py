"""The Scheme on Ray (one Ray session, 2 CPUs): N collection and M gradient workers, sync
and async, against a local reference loop; faults; bad input. Each test starts one Scheme
(two actors) and runs a few updates."""

import os
import signal

import pytest
import torch

from tests.scheme import doubles
from torchrl_lite import Learner
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.scheme import Scheme, worker_seed

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the distributed tests need ray")


def _equal_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _reference_two_collectors(seed, updates, size=20, vec=2):
    """Local loop for 2 synchronous collection workers: each collector has its own RNG
    stream (its process's), gets the learner's weights each round, batches in order."""
    f = doubles.factories(vec, size)
    torch.manual_seed(worker_seed(seed, 0, 0))
    actor = f["actor_factory"]("cpu")
    algo = f["algo_factory"]("cpu", actor)
    storage = f["storage_factory"]("cpu", actor, algo)
    main = torch.get_rng_state()
    cols = []
    for c in range(2):
        torch.manual_seed(worker_seed(seed, 0, c))
        envs = f["train_envs_factory"]("cpu", seed, index_col_worker=c, index_grad_worker=0)
        col_actor = f["actor_factory"]("cpu")
        col_algo = f["algo_factory"]("cpu", col_actor)
        f["storage_factory"]("cpu", col_actor, col_algo)
        collector = SyncDataCollector(envs, col_algo.acting_policy, frames_per_batch=size * vec)
        cols.append([col_algo, collector, torch.get_rng_state()])
    torch.set_rng_state(main)
    done = 0
    while done < updates:
        weights = algo.get_weights()
        for col in cols:
            main = torch.get_rng_state()
            torch.set_rng_state(col[2])
            col[0].set_weights(weights)
            storage.insert(col[1].next())
            col[2] = torch.get_rng_state()
            torch.set_rng_state(main)
        storage.before_gradients()
        for mb in storage.generate_batches(algo.num_mini_batch, None, algo.num_epochs):
            if done < updates:
                algo.apply_gradients(algo.compute_gradients(mb)[0])
                done += 1
        storage.after_gradients()
    return algo.get_weights()


@pytest.mark.parametrize("channel", ["auto", "ray"])
def test_scheme_two_sync_col_workers_equal_local_reference(ray_session, channel):
    """Through the same-node shared-memory channel ("auto") and through Ray calls."""
    scheme = Scheme(**doubles.factories(), col_remote_workers=2, seed=4, col_channel=channel)
    channels = scheme.local.collection.group.channels
    assert [c is not None for c in channels] == [channel == "auto"] * 2
    learner = Learner(scheme, target_steps=10_000)
    for _ in range(8):  # 2 rounds of 2 x 40 frames, 4 updates each
        learner.step()
    assert learner.frames == 160
    assert learner.get_metrics()["col_alive"] == 2
    # equal to the local loop, hence reproducible from the seed
    assert _equal_weights(scheme.get_weights(), _reference_two_collectors(4, 8))
    learner.close()


def test_scheme_two_async_col_workers_track_policy_lag(ray_session):
    learner = Learner(Scheme(**doubles.factories(), col_remote_workers=2,
                             col_communication="asynchronous"), target_steps=240)  # fmt: skip
    while not learner.done():
        learner.step()
    m = learner.get_metrics()
    # each batch is resubmitted at once, so it is collected with weights >= 4 updates old
    # (4 minibatch updates per batch) except the very first ones
    assert m["policy_lag_min"] == 0 and m["policy_lag_max"] >= 4
    assert m["frames"] == 240 and m["restarts"] == 0
    learner.close()


@pytest.mark.parametrize(
    "mode", ["synchronous", pytest.param("asynchronous", marks=pytest.mark.slow)]
)
def test_scheme_two_grad_workers(ray_session, mode):
    scheme = Scheme(**doubles.factories(), grad_remote_workers=2, grad_communication=mode)
    learner = Learner(scheme, target_steps=10_000)
    for _ in range(6):
        learner.step()
    m = learner.get_metrics()
    assert scheme.version == 6 and m["grad_workers"] == 2 and m["grad_alive"] == 2
    if mode == "synchronous":  # each collects 40 frames per 4 minibatches: 2 collections
        assert m["frames"] == 160 and m["grad_asynchrony_max"] == 0
    else:  # a gradient computed on weights one update old was applied
        assert m["grad_asynchrony_max"] >= 1
    learner.close()


def test_scheme_col_worker_sigkilled_is_restarted(ray_session, tmp_path):
    scheme = Scheme(**doubles.factories(), col_remote_workers=2)
    learner = Learner(scheme, target_steps=480, log_dir=tmp_path)
    learner.step()
    pid = ray.get(scheme.local.collection.group.call(1, "ping"))
    os.kill(pid, signal.SIGKILL)
    while not learner.done():
        learner.step()
    m = learner.get_metrics()
    assert m["restarts"] == 1 and m["frames"] >= 480
    assert any("collection worker 1 failed" in e for e in learner.events)
    events = (tmp_path / "events.csv").read_text()
    assert "collection worker 1 failed" in events
    # the replacement got the current weights: it answers and is a different process
    new_pid = ray.get(scheme.local.collection.group.call(1, "ping"))
    assert new_pid != pid
    learner.close()


@pytest.mark.slow  # restarts start new worker processes: slow on a loaded machine
def test_scheme_repeated_deaths_raise_clear_error(ray_session):
    factories = {**doubles.factories(), "train_envs_factory":
                 doubles.make_faulty_envs_factory(after=25, only_col_worker=1)}  # fmt: skip
    learner = Learner(Scheme(**factories, col_remote_workers=2, max_worker_restarts=1), 10_000)
    with pytest.raises(RuntimeError) as info:
        while True:
            learner.step()
    message = str(info.value)
    assert (
        "collection worker 1 failed 2 times, past the restart cap max_worker_restarts=1" in message
    )
    assert "Its last error: RuntimeError: env step failed on purpose" in message
    assert "Worker traceback" in message and "in _step" in message


@pytest.mark.slow  # restarts start new worker processes: slow on a loaded machine
def test_scheme_unresponsive_worker_times_out(ray_session):
    factories = {**doubles.factories(), "train_envs_factory":
                 doubles.make_faulty_envs_factory(after=25, mode="hang", only_col_worker=0)}  # fmt: skip
    learner = Learner(Scheme(**factories, col_remote_workers=2, worker_timeout=20), 10_000)
    with pytest.raises(
        TimeoutError, match=r"collection worker 0 did not answer within timeout=20s"
    ):
        while True:
            learner.step()


def test_scheme_env_factory_raising_in_worker(ray_session):
    factories = doubles.factories(fail_in_worker=1)
    with pytest.raises(ValueError) as info:
        Scheme(**factories, col_remote_workers=2)
    message = str(info.value)
    assert "collection worker 1 raised ValueError: env factory failed on purpose" in message
    assert "Worker traceback" in message and "during start-up" in message


def test_scheme_resources_beyond_cluster(ray_session):
    with pytest.raises(ValueError, match=r"request 3 CPU in all \(col_worker_resources="):
        Scheme(**doubles.factories(), col_remote_workers=3)
    with pytest.raises(ValueError, match="grad_worker_resources"):
        Scheme(**doubles.factories(), grad_remote_workers=2,
               grad_worker_resources={"num_cpus": 1.5})  # fmt: skip


def test_scheme_unpicklable_factory(ray_session):
    import threading

    lock = threading.Lock()

    def storage_factory(device, actor, algo, _lock=lock):
        return doubles.make_storage_factory()(device, actor, algo)

    with pytest.raises(TypeError, match="storage_factory cannot be pickled"):
        Scheme(**{**doubles.factories(), "storage_factory": storage_factory}, col_remote_workers=2)


def test_scheme_decentralized_update_equals_central_average(ray_session):
    """Every gradient worker all-reduces and applies the average itself: the weights equal
    those of the synchronous central update (same seed, same minibatches)."""
    weights = {}
    for decentralized in (False, True):
        scheme = Scheme(**doubles.factories(), grad_remote_workers=2, seed=3,
                        decentralized_update=decentralized)  # fmt: skip
        learner = Learner(scheme, target_steps=10_000)
        for _ in range(4):
            learner.step()
        assert scheme.version == 4 and learner.get_metrics()["grad_alive"] == 2
        weights[decentralized] = scheme.get_weights()
        learner.close()
    central, decentral = weights[False], weights[True]
    assert central.keys() == decentral.keys()
    for key in central:
        torch.testing.assert_close(decentral[key], central[key], rtol=1e-5, atol=1e-6)
