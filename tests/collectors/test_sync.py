"""SyncDataCollector: batch shapes, frame counts, trajectory ids, resets, options."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from tensordict.nn.distributions import NormalParamExtractor
from torch import nn

from tests.collectors.helpers import (
    CountingEnv,
    assert_same,
    constant_policy,
    make_pendulum,
    recurrent_policy,
)
from torchrl_lite.collectors import Collector, SyncDataCollector, split_trajectories
from torchrl_lite.data.replay_buffers import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.envs import GymEnv, InitTracker, SerialEnv, TransformedEnv
from torchrl_lite.envs.transforms import Compose
from torchrl_lite.envs.utils import ExplorationType
from torchrl_lite.modules import ProbabilisticActor, TanhNormal


def two_counters(limits=(2, 3)):
    return SerialEnv(2, [lambda limit=limit: CountingEnv(limit) for limit in limits])


def tanh_actor():
    torch.manual_seed(0)
    net = TensorDictModule(
        nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2), NormalParamExtractor()),
        in_keys=["observation"],
        out_keys=["loc", "scale"],
    )
    return ProbabilisticActor(
        net, in_keys=["loc", "scale"], distribution_class=TanhNormal, return_log_prob=True
    )


# -- shapes and frame counts -------------------------------------------------------------
def test_sync_frame_counts_and_batch_shape():
    collector = SyncDataCollector(
        lambda: SerialEnv(3, CountingEnv), constant_policy(), frames_per_batch=30, total_frames=90
    )
    batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([3, 10])] * 3
    assert collector._frames == 90 and len(collector) == 3
    assert collector.next() is None  # the budget is spent
    collector.shutdown()


def test_sync_unbatched_env_gives_time_only_batches():
    with SyncDataCollector(make_pendulum(), None, frames_per_batch=20, total_frames=40) as c:
        data = c.next()
    assert data.batch_size == torch.Size([20])
    assert data["collector", "traj_ids"].shape == torch.Size([20])
    assert c.env.is_closed  # shutdown (here by the context manager) closes the env


def test_sync_endless_collection():
    collector = SyncDataCollector(CountingEnv(), None, frames_per_batch=5, total_frames=-1)
    assert all(collector.next().numel() == 5 for _ in range(4))
    with pytest.raises(TypeError, match="endless"):
        len(collector)
    collector.shutdown()


def test_sync_total_frames_rounded_up_with_warning():
    with pytest.warns(UserWarning, match="15 frames will be collected"):
        collector = SyncDataCollector(CountingEnv(), None, frames_per_batch=5, total_frames=12)
    assert sum(b.numel() for b in collector) == 15


def test_sync_collector_alias():
    assert Collector is SyncDataCollector


# -- trajectories and resets -------------------------------------------------------------
def test_sync_traj_ids_continue_across_batches():
    collector = SyncDataCollector(
        CountingEnv(limit=4), constant_policy(), frames_per_batch=3, total_frames=12
    )
    data = torch.cat(list(collector), 0)
    # counts 0 1 2 3 | 0 1 2 3 | 0 1 2 3 across four batches of three steps
    assert data["count"].flatten().tolist() == [0, 1, 2, 3] * 3
    assert data["collector", "traj_ids"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert data["next", "done"].flatten().tolist() == [False, False, False, True] * 3


def test_sync_partial_resets_and_unique_traj_ids():
    collector = SyncDataCollector(two_counters((2, 3)), constant_policy(), frames_per_batch=12)
    data = collector.next()
    assert data["count"][..., 0].tolist() == [[0, 1, 0, 1, 0, 1], [0, 1, 2, 0, 1, 2]]
    # initial ids 0, 1; then new ids in the order the envs finish
    assert data["collector", "traj_ids"].tolist() == [[0, 0, 2, 2, 4, 4], [1, 1, 1, 3, 3, 3]]
    following = collector.next()["collector", "traj_ids"][:, 0].tolist()
    assert following == [5, 6]  # both were done at the end of the first batch
    collector.shutdown()


def test_sync_next_observation_is_next_root():
    data = SyncDataCollector(two_counters((5, 7)), None, frames_per_batch=8).next()
    same = ~data["next", "done"][:, :-1, 0]
    assert torch.equal(data["next", "count"][:, :-1][same], data["count"][:, 1:][same])


def test_sync_split_trajs_matches_split_trajectories():
    kwargs = {"frames_per_batch": 12, "total_frames": 12}
    plain = SyncDataCollector(two_counters(), constant_policy(), **kwargs).next()
    split = SyncDataCollector(two_counters(), constant_policy(), split_trajs=True, **kwargs).next()
    expected = split_trajectories(plain)
    assert split.batch_size == torch.Size([5, 3])
    assert_same(split, expected, skip_prefix=())


def test_sync_max_frames_per_traj_truncates():
    collector = SyncDataCollector(
        CountingEnv(limit=100), constant_policy(), frames_per_batch=10, max_frames_per_traj=4
    )
    data = collector.next()
    assert data["count"].flatten().tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    truncated = data["next", "truncated"].flatten().tolist()
    assert truncated == [False, False, False, True] * 2 + [False, False]
    assert torch.equal(data["next", "done"], data["next", "truncated"])
    assert not data["next", "terminated"].any()
    assert data["collector", "traj_ids"].tolist() == [0] * 4 + [1] * 4 + [2] * 2


def test_sync_reset_at_each_iter():
    collector = SyncDataCollector(
        CountingEnv(limit=100), None, frames_per_batch=3, total_frames=9, reset_at_each_iter=True
    )
    batches = list(collector)
    assert all(b["count"].flatten().tolist() == [0, 1, 2] for b in batches)
    assert [b["collector", "traj_ids"][0].item() for b in batches] == [0, 1, 2]


def test_sync_reset_when_done_false_keeps_stepping():
    collector = SyncDataCollector(
        CountingEnv(limit=2), None, frames_per_batch=4, reset_when_done=False
    )
    assert collector.next()["count"].flatten().tolist() == [0, 1, 2, 3]


# -- the policy --------------------------------------------------------------------------
def test_sync_policy_outputs_kept_and_no_grad():
    data = SyncDataCollector(make_pendulum(), tanh_actor(), frames_per_batch=10).next()
    for key in ("loc", "scale", "sample_log_prob", "action"):
        assert key in data.keys()
        assert not data[key].requires_grad


def test_sync_random_policy_respects_the_spec():
    env = make_pendulum()
    data = SyncDataCollector(env, None, frames_per_batch=50).next()
    assert env.action_spec.is_in(data["action"])
    assert data["action"].std() > 0


def test_sync_init_random_frames_then_policy_same_entries():
    collector = SyncDataCollector(
        make_pendulum(), tanh_actor(), frames_per_batch=10, total_frames=30, init_random_frames=10
    )
    first, second, _ = list(collector)
    assert set(first.keys(True, True)) == set(second.keys(True, True))
    assert (first["loc"] == 0).all() and (second["loc"] != 0).any()  # zeros while random
    assert (first["action"].abs() > 1).any()  # random actions span [-2, 2], the actor's [-1, 1]
    assert (second["action"].abs() <= 1).all()


def test_sync_exploration_type_deterministic():
    actor = tanh_actor()
    kwargs = {"frames_per_batch": 10, "exploration_type": ExplorationType.DETERMINISTIC}
    env = make_pendulum()
    env.set_seed(0)
    a = SyncDataCollector(env, actor, **kwargs).next()
    env = make_pendulum()
    env.set_seed(0)
    b = SyncDataCollector(env, actor, **kwargs).next()
    assert torch.equal(a["action"], b["action"])
    assert torch.allclose(a["action"], torch.tanh(a["loc"]), atol=1e-6)


def test_sync_update_policy_weights():
    policy = constant_policy(0.5)
    collector = SyncDataCollector(CountingEnv(), policy, frames_per_batch=4)
    assert (collector.next()["action"] == 0.5).all()
    new = TensorDict.from_module(constant_policy(-0.25)).data
    collector.update_policy_weights_(new)
    assert (collector.next()["action"] == -0.25).all()
    collector.update_policy_weights_(constant_policy(0.75).state_dict())
    assert (collector.next()["action"] == 0.75).all()
    collector.update_policy_weights_()  # the collector runs the policy itself: nothing to do
    collector.shutdown()


def test_sync_policy_on_another_device_is_a_copy_synced_by_update():
    policy = constant_policy(0.5)
    collector = SyncDataCollector(
        CountingEnv(), policy, frames_per_batch=4, policy_device="meta"
    )  # a copy lives on the meta device; nothing is run there here
    assert collector.policy is not policy and collector._source_policy is policy
    collector.shutdown()


# -- recurrent policies ----------------------------------------------------------------------
def test_sync_recurrent_policy_needs_no_primer():
    env = SerialEnv(2, make_pendulum)
    env.set_seed(3)
    collector = SyncDataCollector(env, recurrent_policy(), frames_per_batch=420)
    data = collector.next()
    is_init = data["is_init"][..., 0]
    assert is_init[:, 0].all() and is_init[:, 200].all() and is_init.sum() == 4
    h = data["recurrent_state_h"]
    assert (h[is_init] == 0).all()  # the hidden state starts at zero with each trajectory
    assert (h[~is_init] != 0).any()
    # the next hidden state is the root one at the following step
    assert torch.equal(data["next", "recurrent_state_h"][:, :199], h[:, 1:200])


def test_sync_recurrent_policy_same_as_with_primer_and_init_tracker():
    policy = recurrent_policy()
    lstm = policy[0]

    def make(with_primer):
        env = SerialEnv(2, make_pendulum)
        if with_primer:
            env = TransformedEnv(env, Compose(InitTracker(), lstm.make_tensordict_primer()))
        env.set_seed(0)
        return env

    a = SyncDataCollector(make(False), policy, frames_per_batch=440).next()
    b = SyncDataCollector(make(True), policy, frames_per_batch=440).next()
    assert_same(b.exclude(("next", "is_init")), a)


# -- options -------------------------------------------------------------------------------
def test_sync_postproc_and_replay_buffer():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100))
    collector = SyncDataCollector(
        two_counters(),
        constant_policy(),
        frames_per_batch=12,
        total_frames=24,
        postproc=lambda td: td.set("scaled", td["count"] * 10),
        replay_buffer=buffer,
    )
    assert list(collector) == [None, None]
    assert len(buffer) == 24
    sample = buffer.sample(8)
    assert torch.equal(sample["scaled"], sample["count"] * 10)


def test_sync_state_dict_round_trip():
    collector = SyncDataCollector(CountingEnv(), constant_policy(0.5), frames_per_batch=4)
    collector.next()
    state = collector.state_dict()
    assert state["frames"] == 4 and "policy_state_dict" in state
    other = SyncDataCollector(CountingEnv(), constant_policy(-0.5), frames_per_batch=4)
    other.load_state_dict(state)
    assert other._frames == 4
    assert (other.next()["action"] == 0.5).all()


@pytest.mark.parametrize("kind", ["single", "serial"])
def test_sync_state_dict_mid_run_continues_exactly(kind):
    """A state taken after 2 batches (episodes cut at the boundary), loaded into a collector
    built the same way (other seed, other weights), yields the original's next batch."""

    def build(seed):
        torch.manual_seed(seed)  # the policy's weights
        policy = TensorDictModule(
            nn.Sequential(nn.Linear(3, 1), nn.Tanh()), in_keys=["observation"], out_keys=["action"]
        )
        env = make_pendulum() if kind == "single" else SerialEnv(2, make_pendulum)
        collector = SyncDataCollector(env, policy, frames_per_batch=50, max_frames_per_traj=35)
        collector.set_seed(seed)
        return collector

    collector = build(0)
    collector.next(), collector.next()  # a trajectory is cut at the end of the second
    state = collector.state_dict()
    assert state["frames"] == 100 and state["env_state_dict"]["kind"] in ("gym", "serial")
    assert state["carry"]["td"] is not None and state["carry"]["traj_count"] > 0
    expected = collector.next()  # the state is a snapshot: this changes nothing in it
    other = build(99)
    other.load_state_dict(state)
    got = other.next()
    assert other._frames == 150
    for key in ["action", "observation", ("next", "observation"), ("next", "reward")]:
        assert torch.equal(got[key], expected[key]), key
    assert torch.equal(got["collector", "traj_ids"], expected["collector", "traj_ids"])
    assert got["next", "truncated"].any()  # a trajectory ended (max_frames_per_traj) in it
    collector.shutdown()
    other.shutdown()


def test_sync_load_state_dict_unknown_entries_is_key_error():
    collector = SyncDataCollector(CountingEnv(), None, frames_per_batch=4)
    with pytest.raises(KeyError, match="unknown entries"):
        collector.load_state_dict({"frames": 4, "env": {}})
    with pytest.raises(KeyError, match="unknown carry entries"):
        collector.load_state_dict({"carry": {"td": None, "traj_idx": None}})


def test_sync_set_seed_gives_each_sub_env_its_seed():
    collector = SyncDataCollector(lambda: SerialEnv(3, CountingEnv), None, frames_per_batch=3)
    assert collector.set_seed(10) == 13
    assert collector.next()["seed"][:, 0, 0].tolist() == [10, 11, 12]


def test_sync_same_seed_same_batches():
    def run():
        collector = SyncDataCollector(
            lambda: GymEnv("Pendulum-v1", num_envs=2), recurrent_policy(), frames_per_batch=40
        )
        collector.set_seed(7)
        return [collector.next(), collector.next()]

    for a, b in zip(run(), run()):
        assert_same(a, b, skip_prefix=())


def test_sync_seed_snippet():
    """The seed's PPO collector line, as written (smaller total_frames)."""
    env = GymEnv("Pendulum-v1")
    collector = SyncDataCollector(env, tanh_actor(), frames_per_batch=1000, total_frames=2000)
    sizes = [data["next", "reward"].shape for data in collector]
    assert sizes == [torch.Size([1000, 1])] * 2
