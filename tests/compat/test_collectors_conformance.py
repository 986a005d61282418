"""The collector API of current TorchRL's tutorials: ``Collector(backend=...)``, whole
trajectory batches, background collection, policy transforms, ``Evaluator``."""

import functools
import logging

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from tests.collectors.helpers import CountingEnv, constant_policy, recurrent_policy
from torchrl_lite.collectors import (
    AsyncCollector,
    BaseCollector,
    Collector,
    DataCollectorBase,
    Evaluator,
    MultiaSyncDataCollector,
    MultiCollector,
    MultiSyncDataCollector,
    SyncDataCollector,
    aSyncDataCollector,
    split_trajectories,
)
from torchrl_lite.data.replay_buffers import LazyTensorStorage, ReplayBuffer
from torchrl_lite.envs import GymEnv, InitTracker, PendulumEnv, SerialEnv, TransformedEnv
from torchrl_lite.envs.transforms import RewardSum, TensorDictPrimer


def two_counters():
    return SerialEnv(2, [lambda: CountingEnv(2), lambda: CountingEnv(3)])


# -- names -----------------------------------------------------------------------------
def test_current_collector_names_are_aliases_of_ours():
    assert BaseCollector is DataCollectorBase
    assert aSyncDataCollector is AsyncCollector
    assert Collector is SyncDataCollector
    assert issubclass(AsyncCollector, MultiaSyncDataCollector)


# -- backend= --------------------------------------------------------------------------
def test_collector_backend_direct_is_the_in_process_collector():
    collector = Collector(CountingEnv(3), constant_policy(), frames_per_batch=4, backend="direct")
    assert type(collector) is SyncDataCollector
    # a one-element list of constructors is accepted, as TorchRL does
    listed = Collector([lambda: CountingEnv(3)], None, frames_per_batch=4, backend="direct")
    assert listed.next()["count"].shape == (4, 1)
    collector.shutdown()
    listed.shutdown()


def test_collector_backend_process_builds_the_multiprocess_collectors():
    make = functools.partial(CountingEnv, 3)
    sync = Collector(
        make,
        None,
        frames_per_batch=8,
        total_frames=8,
        backend="process",
        num_collectors=2,
        sync=True,
    )
    asyn = Collector([make], None, frames_per_batch=4, total_frames=8, num_collectors=1)
    try:
        assert type(sync) is MultiSyncDataCollector and sync.num_workers == 2
        assert type(asyn) is MultiaSyncDataCollector and asyn.num_workers == 1
        assert [d.numel() for d in sync] == [8]
        assert sum(d.numel() for d in asyn) == 8
    finally:
        sync.shutdown()
        asyn.shutdown()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"backend": "rpc"}, ValueError, "backend='rpc'.*not available"),
        ({"backend": "nope"}, ValueError, "unknown backend 'nope'"),
        ({"backend": "direct", "num_collectors": 2}, ValueError, "backend='direct' collects"),
        ({"num_collectors": 0}, ValueError, "num_collectors must be an int >= 1, got 0"),
        ({"backend": "process", "sync": "yes"}, TypeError, "sync must be True, False or None"),
        (
            {"backend": "process", "backend_options": {"frames_per_batch": 4}},
            ValueError,
            r"backend_options repeat the collector arguments \['frames_per_batch'\]",
        ),
    ],
)
def test_collector_backend_bad_selectors(kwargs, error, match):
    with pytest.raises(error, match=match):
        Collector(lambda: CountingEnv(3), None, frames_per_batch=4, **kwargs)


def test_collector_backend_num_collectors_must_match_a_list():
    with pytest.raises(ValueError, match="num_collectors=3 but 2 env constructors"):
        Collector([CountingEnv, CountingEnv], None, frames_per_batch=4, num_collectors=3)


def test_multicollector_dispatches_on_sync():
    collector = MultiCollector([CountingEnv], None, frames_per_batch=4, total_frames=4, sync=True)
    try:
        assert type(collector) is MultiSyncDataCollector
        assert isinstance(collector, MultiCollector)
    finally:
        collector.shutdown()
    with pytest.raises(TypeError, match="MultiCollector needs sync=True"):
        MultiCollector([CountingEnv], None, frames_per_batch=4)


def test_async_collector_runs_one_worker_and_rejects_more():
    collector = AsyncCollector(
        functools.partial(CountingEnv, 2), constant_policy(), frames_per_batch=4, total_frames=8
    )
    try:
        assert collector.num_workers == 1
        assert sum(d.numel() for d in collector) == 8
    finally:
        collector.shutdown()
    with pytest.raises(ValueError, match="got 2 env constructors"):
        AsyncCollector([CountingEnv, CountingEnv], None, frames_per_batch=4)


# -- trajs_per_batch -------------------------------------------------------------------
def _complete_reference(frames):
    """Trajectories of a plain collection of ``frames`` steps of two counters (lengths
    2 and 3), split with split_trajectories and kept when finished."""
    collector = SyncDataCollector(two_counters(), constant_policy(), frames_per_batch=frames)
    flat = split_trajectories(collector.next())
    collector.shutdown()
    length = flat["collector", "mask"].sum(-1)
    last = flat["next", "done"].squeeze(-1)[torch.arange(len(length)), length - 1]
    return flat[last]


def test_trajs_per_batch_padded_holds_whole_episodes_with_a_mask():
    collector = SyncDataCollector(
        two_counters(), constant_policy(), frames_per_batch=4, trajs_per_batch=3
    )
    out = collector.next()
    collector.shutdown()
    assert out.batch_size[0] == 3
    mask = out["collector", "mask"]
    lengths = mask.sum(-1)
    ids = out["collector", "traj_ids"][:, 0]
    for i in range(3):
        n = int(lengths[i])
        counts = out["next", "count"][i, :n].squeeze(-1)
        assert counts.tolist() == list(range(1, n + 1))  # a whole episode, from its reset
        assert bool(out["next", "done"][i, n - 1]) and not mask[i, n:].any()
        assert (out["collector", "traj_ids"][i, :n] == ids[i]).all()
    reference = _complete_reference(16)
    ref_by_id = {int(r["collector", "traj_ids"][0]): r for r in reference.unbind(0)}
    for i in range(3):  # equal to the same episode of a plain collection
        ref = ref_by_id[int(ids[i])]
        n = int(lengths[i])
        torch.testing.assert_close(out["next", "count"][i, :n], ref["next", "count"][:n])


def test_trajs_per_batch_cat_is_flat_and_ends_each_episode_with_done():
    collector = SyncDataCollector(
        two_counters(), constant_policy(), frames_per_batch=4, trajs_per_batch=4, traj_format="cat"
    )
    out = collector.next()
    collector.shutdown()
    assert out.batch_dims == 1
    ids = out["collector", "traj_ids"]
    ends = torch.cat([ids[1:] != ids[:-1], torch.tensor([True])])
    assert ends.sum() == 4
    assert torch.equal(out["next", "done"].squeeze(-1), ends)


def test_trajs_per_batch_with_a_replay_buffer_writes_finished_episodes_flat():
    rb = ReplayBuffer(storage=LazyTensorStorage(100), shared=True)
    collector = SyncDataCollector(
        CountingEnv(3),
        constant_policy(),
        frames_per_batch=4,
        total_frames=8,
        trajs_per_batch=2,
        replay_buffer=rb,
    )
    assert list(collector) == [None, None]
    collector.shutdown()
    assert rb.shared
    # 8 steps with episodes of 3: two finished episodes (6 steps); the third is running
    assert len(rb) == 6
    assert rb[:]["next", "count"].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"trajs_per_batch": 0}, ValueError, "trajs_per_batch must be >= 1, got 0"),
        ({"trajs_per_batch": 1.5}, TypeError, "trajs_per_batch must be an int"),
        ({"traj_format": "cat"}, ValueError, "traj_format='cat' only applies with trajs_per_batch"),
        ({"trajs_per_batch": 2, "traj_format": "stack"}, ValueError, "got 'stack'"),
        ({"trajs_per_batch": 2, "split_trajs": True}, ValueError, "drop split_trajs"),
    ],
)
def test_trajs_per_batch_bad_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        SyncDataCollector(CountingEnv(3), None, frames_per_batch=4, **kwargs)


# -- background collection -----------------------------------------------------------
def test_start_fills_the_buffer_in_the_background_until_async_shutdown():
    rb = ReplayBuffer(storage=LazyTensorStorage(1000))
    env = CountingEnv(5)
    collector = SyncDataCollector(
        env, constant_policy(), frames_per_batch=10, total_frames=-1, replay_buffer=rb
    )
    collector.start()
    with pytest.raises(RuntimeError, match="already collecting in the background"):
        collector.start()
    for _ in range(200):
        if len(rb) >= 20:
            break
        torch.multiprocessing.get_context().Event().wait(0.01)
    collector.async_shutdown()
    assert len(rb) >= 20 and len(rb) % 10 == 0
    assert collector.closed and env.is_closed


def test_start_needs_a_replay_buffer():
    collector = SyncDataCollector(CountingEnv(3), None, frames_per_batch=4)
    with pytest.raises(RuntimeError, match=r"pass replay_buffer= to the collector"):
        collector.start()


def test_a_collector_reuses_a_gym_env_a_previous_one_closed():
    env = GymEnv("CartPole-v1")
    first = Collector(env, None, frames_per_batch=10, total_frames=10)
    first.shutdown()
    assert env.is_closed
    second = Collector(env, None, frames_per_batch=10, total_frames=10)
    assert not env.is_closed and next(iter(second)).numel() == 10
    second.shutdown()


# -- policy transforms ---------------------------------------------------------------
def test_auto_register_policy_transforms_adds_init_tracker_and_primer_once():
    policy = recurrent_policy()
    collector = Collector(
        PendulumEnv(seed=0), policy, frames_per_batch=8, auto_register_policy_transforms=True
    )
    env = collector.env
    assert isinstance(env, TransformedEnv)
    kinds = [type(t) for t in env.transform]
    assert kinds == [InitTracker, TensorDictPrimer]
    assert "recurrent_state_h" in env.observation_spec.keys()
    data = collector.next()
    assert data["is_init"][0] and not data["is_init"][1:].any()
    # the env alone now feeds the policy
    rollout = env.rollout(3, policy)
    assert rollout["next", "recurrent_state_c"].shape == (3, 1, 8)
    again = Collector(env, policy, frames_per_batch=8, auto_register_policy_transforms=True)
    assert again.env is env and [type(t) for t in env.transform] == [InitTracker, TensorDictPrimer]
    collector.shutdown()
    again.shutdown()


def test_without_auto_register_the_collector_supplies_the_states_itself():
    collector = Collector(PendulumEnv(seed=0), recurrent_policy(), frames_per_batch=4)
    assert not isinstance(collector.env, TransformedEnv)
    assert collector.next()["next", "recurrent_state_h"].shape == (4, 1, 8)
    collector.shutdown()


# -- Evaluator -----------------------------------------------------------------------
def _returns_reference(env, policy, episodes, max_steps):
    """Mean and std of the returns of ``episodes`` deterministic rollouts."""
    with torch.no_grad():
        return _mean_std(env, policy, episodes, max_steps)


def _mean_std(env, policy, episodes, max_steps):
    returns = [
        float(env.rollout(max_steps, policy)["next", "reward"].sum()) for _ in range(episodes)
    ]
    t = torch.tensor(returns, dtype=torch.float64)
    return float(t.mean()), float(t.std())


def test_evaluator_metrics_match_plain_rollouts():
    policy = constant_policy(0.5)
    evaluator = Evaluator(functools.partial(CountingEnv, 4), policy, num_trajectories=3)
    result = evaluator.evaluate()
    assert result["eval/reward"] == pytest.approx(2.0)  # 4 steps of reward 0.5
    assert result["eval/num_episodes"] == 3
    assert result["eval/episode_length"] == 4.0 and result["eval/reward_std"] == 0.0
    assert result["eval/step"] == 0 and evaluator.evaluate()["eval/step"] == 1
    # new weights are used at once
    new = constant_policy(-1.0)
    assert evaluator.evaluate(weights=new)["eval/reward"] == pytest.approx(-4.0)
    evaluator.shutdown()
    with pytest.raises(RuntimeError, match="Evaluator was shut down"):
        evaluator.evaluate()


def test_evaluator_reads_episode_reward_and_cuts_at_max_steps():
    torch.manual_seed(0)
    env = TransformedEnv(PendulumEnv(seed=0), RewardSum())
    policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    evaluator = Evaluator(env, policy, num_trajectories=2, max_steps=7)
    result = evaluator.evaluate()
    ref_env = TransformedEnv(PendulumEnv(seed=0), RewardSum())
    mean, std = _returns_reference(ref_env, policy, 2, 7)
    assert result["eval/episode_length"] == 7.0
    assert result["eval/reward"] == pytest.approx(mean, rel=1e-5)
    assert result["eval/reward_std"] == pytest.approx(std, rel=1e-4, abs=1e-6)
    evaluator.shutdown()


def test_evaluator_takes_a_collector_class_by_name():
    policy = constant_policy(0.5)
    env = functools.partial(CountingEnv, 4)
    by_name = Evaluator(env, policy, num_trajectories=2, collector_cls="SyncDataCollector")
    assert by_name.evaluate()["eval/reward"] == pytest.approx(2.0)
    by_name.shutdown()
    wrong = Evaluator(env, policy, num_trajectories=2, collector_cls="SyncDataColector")
    with pytest.raises(ValueError, match="collector_cls='SyncDataColector' names no collector"):
        wrong.evaluate()
    wrong.shutdown()


def test_evaluator_background_trigger_poll_wait_and_busy_policies():
    calls = []
    evaluator = Evaluator(
        functools.partial(CountingEnv, 3),
        constant_policy(1.0),
        num_trajectories=2,
        on_result=calls.append,
        busy_policy="error",
    )
    assert evaluator.poll() is None and evaluator.wait(0.01) is None
    assert evaluator.trigger_eval() is True
    if evaluator.pending:
        with pytest.raises(RuntimeError, match="an evaluation is already running"):
            evaluator.trigger_eval()
    result = evaluator.wait(timeout=30)
    assert result["eval/reward"] == pytest.approx(3.0)
    assert not evaluator.pending
    assert isinstance(calls[0], TensorDict) and calls[0]["eval/reward"].item() == pytest.approx(3.0)
    evaluator.busy_policy = "queue"
    assert evaluator.trigger_eval(step=10) and evaluator.trigger_eval(step=11)
    assert [evaluator.wait(30)["eval/step"], evaluator.wait(30)["eval/step"]] == [10, 11]
    evaluator.shutdown()


def test_evaluator_on_result_failure_is_logged_not_raised(caplog):
    def broken(result):
        raise ValueError("callback bug")

    evaluator = Evaluator(
        functools.partial(CountingEnv, 2), constant_policy(), num_trajectories=1, on_result=broken
    )
    with caplog.at_level(logging.WARNING):
        evaluator.evaluate()
    assert "on_result callback failed" in caplog.text
    evaluator.shutdown()


def test_evaluator_process_backend_builds_env_and_policy_in_the_worker():
    evaluator = Evaluator(
        functools.partial(CountingEnv, 3),
        policy_factory=functools.partial(constant_policy, 0.25),
        num_trajectories=2,
        backend="process",
    )
    try:
        assert evaluator.evaluate()["eval/reward"] == pytest.approx(0.75)
    finally:
        evaluator.shutdown()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"busy_policy": "drop"}, "busy_policy must be one of"),
        ({"backend": "ray"}, "backend must be 'thread' or 'process', got 'ray'"),
        ({"num_trajectories": 0}, "num_trajectories must be an int >= 1, got 0"),
        ({"backend": "process"}, "pass an env constructor"),
        ({"policy_factory": lambda env: None}, "exactly one of policy and policy_factory"),
    ],
)
def test_evaluator_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Evaluator(CountingEnv(2), constant_policy(), **kwargs)


# -- categorical actions for a one-hot spec -------------------------------------------
def test_index_actions_for_a_one_hot_spec_are_converted_with_a_warning():
    # recurrent_sequence_training: an argmax policy on GymEnv("CartPole-v1") (one-hot spec)
    env = GymEnv("CartPole-v1")
    policy = TensorDictModule(
        lambda obs: (obs[..., 2] > 0).long(), in_keys=["observation"], out_keys=["action"]
    )
    collector = Collector(env, policy, frames_per_batch=20, total_frames=40)
    with pytest.warns(UserWarning, match="converted to one-hot"):
        batches = list(collector)
    collector.shutdown()
    for data in batches:
        want = (data["observation"][..., 2] > 0).long()
        assert data["action"].shape == (20, 2)
        assert torch.equal(data["action"].argmax(-1), want)  # the index the policy chose
        torch.testing.assert_close(
            data["action"].sum(-1), torch.ones(20, dtype=data["action"].dtype)
        )


def test_out_of_range_indices_still_raise():
    env = GymEnv("CartPole-v1")
    policy = lambda td: td.set("action", torch.tensor(5))  # noqa: E731
    collector = Collector(env, policy, frames_per_batch=4)
    with pytest.raises(ValueError, match=r"shape \[\] differs from the spec's \[2\]"):
        collector.next()
    collector.shutdown()
