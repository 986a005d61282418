"""Behaviours TorchRL's example scripts rely on past their imports: the collector's step
count (discrete IQL/CQL log episode lengths from it), CQLLoss's v0.4 output keys, batched
envs handed unstarted to multiprocess collectors (REDQ), and the offline caches that the
bandit and discrete CQL scripts read."""

import torch

from tests.collectors.helpers import CountingEnv, constant_policy
from torchrl_lite.collectors import MultiSyncDataCollector, SyncDataCollector
from torchrl_lite.envs import SerialEnv, StepCounter, TransformedEnv


# -- max_frames_per_traj records the step count ----------------------------------------
def test_max_frames_per_traj_records_step_count_like_a_step_counter():
    # the reference: the same env under StepCounter(max_steps=4), rolled out by hand
    reference = TransformedEnv(CountingEnv(limit=100), StepCounter(max_steps=4))
    expected = reference.rollout(10, constant_policy(), break_when_any_done=False)
    collector = SyncDataCollector(
        CountingEnv(limit=100), constant_policy(), frames_per_batch=10, max_frames_per_traj=4
    )
    data = collector.next()
    for key in ["step_count", ("next", "step_count"), ("next", "done"), ("next", "truncated")]:
        assert torch.equal(data[key], expected[key]), key
    assert data["step_count"].dtype == torch.int64 and data["step_count"].shape == (10, 1)
    collector.shutdown()


def test_step_count_restarts_per_sub_env_and_runs_across_batches():
    # sub-env 0 terminates after 2 steps, sub-env 1 is cut at 3 (max_frames_per_traj)
    env = SerialEnv(2, [lambda: CountingEnv(2), lambda: CountingEnv(10)])
    collector = SyncDataCollector(
        env, constant_policy(), frames_per_batch=8, max_frames_per_traj=3, total_frames=16
    )
    first, second = list(collector)
    steps = torch.cat([first["next", "step_count"], second["next", "step_count"]], dim=1)
    assert steps[0].flatten().tolist() == [1, 2] * 4
    assert steps[1].flatten().tolist() == [1, 2, 3, 1, 2, 3, 1, 2]
    # what the scripts log: the length of each episode that ended in the batch
    ended = first["next", "step_count"][first["next", "done"]]
    assert sorted(ended.tolist()) == [2, 2, 3]


def test_no_step_count_without_max_frames_per_traj():
    collector = SyncDataCollector(CountingEnv(limit=3), constant_policy(), frames_per_batch=6)
    data = collector.next()
    assert "step_count" not in data.keys() and ("next", "step_count") not in data.keys(True)
    collector.shutdown()


def test_an_env_with_its_own_step_counter_keeps_its_count():
    # TorchRL raises here; we keep the env's count and still cut at the collector's limit
    env = TransformedEnv(CountingEnv(limit=100), StepCounter())
    collector = SyncDataCollector(env, constant_policy(), frames_per_batch=6, max_frames_per_traj=2)
    data = collector.next()
    assert data["next", "step_count"].flatten().tolist() == [1, 2, 1, 2, 1, 2]
    assert data["next", "truncated"].flatten().tolist() == [False, True] * 3
    collector.shutdown()


def test_multiprocess_workers_record_step_count():
    collector = MultiSyncDataCollector(
        [lambda: CountingEnv(limit=100)] * 2,
        constant_policy(),
        frames_per_batch=8,
        total_frames=8,
        max_frames_per_traj=3,
    )
    data = next(iter(collector))
    collector.shutdown()
    assert torch.equal(data["next", "step_count"].flatten(), data["next", "count"].flatten().long())
