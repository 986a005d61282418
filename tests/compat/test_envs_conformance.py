"""Env behaviours TorchRL's tutorials rely on (issue 37), reproduced in our own words."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data import Bounded, Composite, Unbounded
from torchrl_lite.envs import EnvBase


def _plain_step(tensordict):
    """A module-level ``_step`` taking the TensorDict only (set as a staticmethod)."""
    x = tensordict["x"] + tensordict["action"]
    done = torch.zeros(tensordict.shape + (1,), dtype=torch.bool)
    return TensorDict({"x": x, "reward": -x.abs(), "done": done}, tensordict.shape)


def _plain_reset(self, tensordict):
    return TensorDict({"x": torch.zeros(1)}, [])


def _plain_seed(self, seed):
    self.seed_seen = seed


class _StaticHookEnv(EnvBase):
    _step = staticmethod(_plain_step)
    _reset = _plain_reset
    _set_seed = _plain_seed

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(x=Unbounded((1,)))
        self.action_spec = Bounded(-1.0, 1.0, (1,))
        self.reward_spec = Unbounded((1,))


def test_env_static_step_gets_the_tensordict_only():
    env = _StaticHookEnv()
    td = env.reset()
    td["action"] = torch.full((1,), 0.5)
    out = env.step(td)
    assert out["next", "x"].item() == 0.5
    # the flags the _step leaves out are filled as for a bound method
    assert not out["next", "terminated"].item() and not out["next", "truncated"].item()
    roll = env.rollout(4, lambda td: td.set("action", torch.full((1,), 0.25)))
    assert torch.allclose(roll["next", "x"].squeeze(-1), torch.tensor([0.25, 0.5, 0.75, 1.0]))
    env.set_seed(3)
    assert env.seed_seen == 3


def test_random_crop_accepts_an_absolute_sample_dim():
    from torchrl_lite.envs.transforms import RandomCropTensorDict

    td = TensorDict({"t": torch.arange(10).expand(3, 10)}, [3, 10])
    torch.manual_seed(0)
    out = RandomCropTensorDict(4, sample_dim=1)(td)
    assert out.batch_size == (3, 4)
    # each row is a run of consecutive steps starting at its own offset
    assert bool((out["t"].diff(dim=-1) == 1).all())
    assert bool((out["t"][:, 0] <= 6).all())
    # dim 0 crops across rows instead
    rows = TensorDict({"r": torch.arange(6).unsqueeze(-1).expand(6, 2)}, [6, 2])
    crop = RandomCropTensorDict(3, sample_dim=0)(rows)
    assert crop.batch_size == (3, 2) and bool((crop["r"].diff(dim=0) == 1).all())
    with pytest.raises(ValueError, match="sample_dim=2 is out of range"):
        RandomCropTensorDict(2, sample_dim=2)(td)
    with pytest.raises(ValueError, match="sample_dim must be an int, got 1.5"):
        RandomCropTensorDict(2, sample_dim=1.5)


def test_batched_env_single_task_flag_follows_the_factories():
    from torchrl_lite.envs import PendulumEnv, SerialEnv

    def other():
        return PendulumEnv()

    one = SerialEnv(2, PendulumEnv)
    same = SerialEnv(2, [PendulumEnv, PendulumEnv])
    multi = SerialEnv(2, [PendulumEnv, other])
    assert one._single_task and same._single_task and not multi._single_task
    for env in (one, same, multi):
        env.close()


def test_memmap_storage_in_a_temporary_directory_object_names_files_by_key():
    import tempfile

    from torchrl_lite.data import LazyMemmapStorage, ReplayBuffer

    tempdir = tempfile.TemporaryDirectory()
    rb = ReplayBuffer(storage=LazyMemmapStorage(10, scratch_dir=tempdir))
    rb.extend(TensorDict({"a": torch.zeros(4, 2), ("b", "c"): torch.ones(4)}, [4]))
    stored = rb._storage._storage
    a_file, c_file = stored["a"].filename, stored["b", "c"].filename
    assert a_file.startswith(tempdir.name) and a_file.endswith("a.memmap")
    assert c_file.endswith("b/c.memmap")
    assert torch.equal(stored["b", "c"][:4], torch.ones(4))
    # the storage keeps the folder alive while it needs it
    assert rb._storage._scratch_owner is tempdir
    odd = ReplayBuffer(storage=LazyMemmapStorage(10, scratch_dir=tempdir))
    odd.extend(TensorDict({"x y": torch.zeros(3), "a.memmap": torch.zeros(3)}, [3]))
    names = sorted(t.filename.rsplit("/", 1)[1] for t in odd._storage._storage.values())
    assert names == ["_0.memmap", "_1.memmap"]
    tempdir.cleanup()


def test_pytree_items_keep_their_structure():
    from torch.utils._pytree import tree_flatten, tree_structure

    from torchrl_lite.data import LazyTensorStorage, ReplayBuffer

    rb = ReplayBuffer(storage=LazyTensorStorage(20))
    item = {"a": torch.randn(3), "b": {"c": (torch.zeros(2), [torch.ones(1)])}, 30: -torch.ones(())}
    for _ in range(5):
        rb.add(item)
    sample = rb.sample(6)
    assert tree_structure(sample) == tree_structure(item)
    expected = [leaf.expand(6, *leaf.shape) for leaf in tree_flatten(item)[0]]
    for got, want in zip(tree_flatten(sample)[0], expected):
        assert torch.equal(got, want)
    assert sorted(rb._storage._storage.keys(True, True), key=str) == sorted(
        ["a", ("b", "c", "0"), ("b", "c", "1", "0"), "30"], key=str
    )
    with pytest.raises(TypeError, match="pytree items of structure"):
        rb.add({"a": torch.randn(3)})
    with pytest.raises(ValueError, match="both stored under '30'"):
        ReplayBuffer(storage=LazyTensorStorage(4)).add({30: torch.zeros(1), "30": torch.ones(1)})
    pairs = ReplayBuffer(storage=LazyTensorStorage(8))
    pairs.extend((torch.arange(4), torch.arange(4.0) * 2))  # a tuple of batches
    x, y = pairs.sample(5)
    assert torch.equal(y, x.float() * 2)


def test_update_priority_of_an_empty_slot_or_a_skipped_item():
    from torchrl_lite.data import LazyTensorStorage, PrioritizedReplayBuffer

    rb = PrioritizedReplayBuffer(alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(10))
    rb.extend(torch.arange(3.0))
    before = rb._sampler.priorities().clone()
    with pytest.warns(
        UserWarning, match=r"positions \[4\] hold no item yet \(the buffer holds 3\)"
    ):
        rb.update_priority(4, 0.5)  # a scalar index inside the capacity, not yet written
    assert torch.equal(rb._sampler.priorities(), before)
    # -1 marks an item the writer did not keep: skipped, the others are set
    rb.update_priority(torch.tensor([-1, 1, 2]), torch.tensor([5.0, 0.0, 3.0]))
    assert rb._sampler.priorities()[:3].tolist() == [1.0, 0.0, 3.0]
    rb.update_priority(0, 2.0)
    assert rb._sampler.priorities()[0].item() == 2.0
    with pytest.raises(IndexError, match=r"must be in \[0, 10\)"):
        rb.update_priority(-2, 1.0)


def test_prioritized_sampler_sum_tree_iterates_over_priorities():
    from torchrl_lite.data import LazyTensorStorage, PrioritizedReplayBuffer

    rb = PrioritizedReplayBuffer(alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(6))
    rb.extend(torch.arange(3.0))
    rb.update_priority(torch.arange(3), torch.tensor([2.0, 0.5, 4.0]))
    tree = rb._sampler._sum_tree
    assert len(tree) == 6
    assert list(tree) == [2.0, 0.5, 4.0, 0.0, 0.0, 0.0]
    assert tree[2] == 4.0
    with pytest.raises(IndexError):
        tree[6]


def test_env_creator_state_dict_gives_live_statistics_under_torchrl_names():
    from torchrl_lite.envs import (
        Compose,
        EnvCreator,
        GymEnv,
        SerialEnv,
        StepCounter,
        TransformedEnv,
        VecNorm,
    )

    make = EnvCreator(lambda: TransformedEnv(GymEnv("CartPole-v1"), VecNorm(decay=1.0)))
    env = SerialEnv(2, make)
    env.rollout(3, break_when_any_done=False)
    state = make.state_dict()
    assert set(state) == {"_extra_state"}
    # both eras' layouts reach the same live tensors
    count = state["_extra_state"]["observation_count"]
    assert count is state["_extra_state"]["td"]["observation_count"]
    assert float(count) == 2 * 4  # 2 copies x (1 reset + 3 steps)
    TensorDict(make.state_dict()).apply_(lambda t: t.zero_())  # zeroes the envs' statistics
    env.rollout(2, break_when_any_done=False)
    assert float(make.state_dict()["_extra_state"]["observation_count"]) == 2 * 3
    # v0.4's saved layout loads too
    make.load_state_dict({"_extra_state": {"td": state["_extra_state"]["td"].clone().zero_()}})
    assert float(count) == 0
    env.close()
    several = EnvCreator(
        lambda: TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(), VecNorm()))
    )
    assert set(several.state_dict()) == {"transforms.1._extra_state"}
    with pytest.raises(KeyError, match="holds"):
        several.state_dict()["transforms.1._extra_state"]["lock"]


def _pendulum():
    from torchrl_lite.envs import GymEnv

    return GymEnv("Pendulum-v1")


@pytest.mark.parametrize("kind", ["serial", "parallel", "parallel-grouped"])
def test_batched_env_index_is_a_live_view_of_those_copies(kind):
    import numpy as np

    from torchrl_lite.envs import ParallelEnv, SerialEnv

    if kind == "serial":
        env = SerialEnv(3, _pendulum)
    else:  # grouped: copies 0-1 share a worker process, so a view steps part of a group
        env = ParallelEnv(3, _pendulum, num_processes=2 if kind.endswith("grouped") else None)
    alone = [_pendulum() for _ in range(3)]  # the reference: each copy on its own
    env.set_seed(7)
    for i, single in enumerate(alone):
        single.set_seed(7 + i)
    first = env.reset()
    for i, single in enumerate(alone):
        torch.testing.assert_close(first["observation"][i], single.reset()["observation"])
    view = env[1:]
    assert view.batch_size == (2,) and env[0].batch_size == (1,)
    assert env[np.array([0, 2])].batch_size == (2,) and env[torch.tensor([-1])].indices == [2]
    actions = torch.tensor([[0.5], [-1.0]])
    out = view.step(view.reset().set("action", actions))
    for j, i in enumerate([1, 2]):
        single = alone[i]  # the view's reset resets copies 1 and 2 only
        want = single.step(single.reset().set("action", actions[j]))["next", "observation"]
        torch.testing.assert_close(out["next", "observation"][j], want)
    # copy 0 was neither stepped nor reset by the view
    full = env.step(first.set("action", torch.zeros(3, 1)))
    want0 = alone[0].step(TensorDict({"action": torch.zeros(1)}, []))["next", "observation"]
    torch.testing.assert_close(full["next", "observation"][0], want0)
    view.close()
    assert not env.is_closed
    with pytest.raises(RuntimeError, match=r"view of copies \[1, 2\] is closed"):
        view.rand_step()
    other = env[2]
    env.close()
    with pytest.raises(RuntimeError, match="belongs to is closed"):
        other.rand_step()


def test_batched_env_index_errors():
    from torchrl_lite.envs import SerialEnv

    env = SerialEnv(3, _pendulum)
    with pytest.raises(TypeError, match="mask.nonzero"):
        env[torch.tensor([True, False, True])]
    with pytest.raises(IndexError, match="copy index 3 is out of range for a batched env of 3"):
        env[[0, 3]]
    with pytest.raises(IndexError, match="selects no copy"):
        env[3:]
    with pytest.raises(RuntimeError, match="already closed"):
        view = env[0]
        view.close()
        view.close(raise_if_closed=True)
    env.close()
    env.close()  # a no-op by default
    with pytest.raises(RuntimeError, match="already closed"):
        env.close(raise_if_closed=True)


def test_next_state_reconstructor_against_a_row_loop():
    from torchrl_lite.envs.transforms import NextStateReconstructor

    torch.manual_seed(0)
    n = 12
    traj = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 0])  # row 9 repeats trajectory 0
    done = torch.zeros(n, 1, dtype=torch.bool)
    done[8] = done[2] = True
    obs = torch.randn(n, 3)
    td = TensorDict(
        {"observation": obs, ("next", "done"): done, ("collector", "traj_ids"): traj}, [n]
    )
    out = NextStateReconstructor()(td.clone())["next", "observation"]
    for i in range(n):  # the reference: row by row
        continues = i + 1 < n and traj[i + 1] == traj[i] and not done[i]
        if continues:
            assert torch.equal(out[i], obs[i + 1])
        else:
            assert torch.isnan(out[i]).all()
    # rows 2 -> 3 change trajectory; row 2 is also done; row 8 -> 9 too
    ints = TensorDict({"observation": torch.arange(4).unsqueeze(-1)}, [4])
    rebuilt = NextStateReconstructor(traj_key=None, done_key=None, fill_value=-1)(ints)
    assert rebuilt["next", "observation"].flatten().tolist() == [1, 2, 3, -1]
    with pytest.raises(TypeError, match="cannot hold NaN; pass an integer fill_value"):
        NextStateReconstructor(traj_key=None, done_key=None)(ints)
    with pytest.raises(KeyError, match=r"no traj key \('collector', 'traj_ids'\)"):
        NextStateReconstructor(done_key=None)(TensorDict({"observation": obs}, [n]))
    loose = NextStateReconstructor(strict=False)(TensorDict({"observation": obs}, [n]))
    assert torch.equal(loose["next", "observation"][:-1], obs[1:])
    with pytest.raises(ValueError, match=r"flat \[B\] sample"):
        NextStateReconstructor()(td.reshape(3, 4))


def test_next_observation_delta_env_side_and_buffer_side():
    from torchrl_lite.collectors import SyncDataCollector
    from torchrl_lite.envs import GymEnv, SerialEnv, TransformedEnv
    from torchrl_lite.envs.transforms import NextObservationDelta

    plain, env = (
        GymEnv("Pendulum-v1"),
        TransformedEnv(GymEnv("Pendulum-v1"), NextObservationDelta()),
    )
    plain.set_seed(3)
    env.set_seed(3)
    torch.manual_seed(0)
    want = plain.rollout(6)
    torch.manual_seed(0)
    got = env.rollout(6)
    assert ("next", "observation") not in got.keys(True) and "delta" not in got.keys()
    delta = got["next", "delta", "observation"]
    assert delta.dtype == torch.float16
    torch.testing.assert_close(got["observation"], want["observation"])  # the full obs
    torch.testing.assert_close(delta, (want["next", "observation"] - want["observation"]).half())
    rebuilt = NextObservationDelta(in_keys=["observation"])(got.clone())
    assert ("next", "delta") not in rebuilt.keys(True)
    assert rebuilt["next", "observation"].dtype == torch.float32
    torch.testing.assert_close(
        rebuilt["next", "observation"], want["next", "observation"], atol=2e-2, rtol=1e-3
    )
    kept = NextObservationDelta(in_keys=["observation"], drop_delta=False)(got.clone())
    assert ("next", "delta", "observation") in kept.keys(True)
    # a collector records the compact steps too
    collector = SyncDataCollector(env, None, frames_per_batch=8, total_frames=8)
    batch = next(iter(collector))
    collector.shutdown()
    assert ("next", "observation") not in batch.keys(True)
    assert batch["next", "delta", "observation"].shape == (8, 3)
    with pytest.raises(TypeError, match="Wrap the batched env instead"):
        SerialEnv(2, lambda: TransformedEnv(GymEnv("Pendulum-v1"), NextObservationDelta()))
    with pytest.raises(ValueError, match="needs in_keys"):
        NextObservationDelta()(got)
    with pytest.raises(ValueError, match="delta_dtype must be a floating torch dtype"):
        NextObservationDelta(delta_dtype=torch.int8)


def test_collector_compact_obs_and_rebuilding_the_next_observation():
    from torchrl_lite.collectors import SyncDataCollector
    from torchrl_lite.envs import GymEnv
    from torchrl_lite.envs.transforms import NextStateReconstructor

    batches = []
    for compact in (False, True):
        env = GymEnv("CartPole-v1")
        env.set_seed(5)
        torch.manual_seed(5)
        collector = SyncDataCollector(
            env, None, frames_per_batch=60, total_frames=60, compact_obs=compact
        )
        batches.append(next(iter(collector)))
        collector.shutdown()
    full, compact = batches
    assert set(full.keys(True, True)) - set(compact.keys(True, True)) == {("next", "observation")}
    torch.testing.assert_close(compact["observation"], full["observation"])
    torch.testing.assert_close(compact["next", "reward"], full["next", "reward"])
    rebuilt = NextStateReconstructor()(compact.clone())["next", "observation"]
    ends = full["next", "done"].squeeze(-1).clone()
    ends[-1] = True  # the batch's last step has no next row
    assert torch.isnan(rebuilt[ends]).all() and not torch.isnan(rebuilt[~ends]).any()
    torch.testing.assert_close(rebuilt[~ends], full["next", "observation"][~ends])


def _gae_batch():
    torch.manual_seed(0)
    obs = torch.randn(2, 10, 3)
    next_obs = torch.cat([obs[:, 1:], torch.randn(2, 1, 3)], 1)
    done = torch.zeros(2, 10, 1, dtype=torch.bool)
    done[0, 4] = done[1, 9] = True
    return TensorDict(
        {
            "observation": obs,
            ("next", "observation"): next_obs,
            ("next", "reward"): torch.randn(2, 10, 1),
            ("next", "done"): done,
            ("next", "terminated"): done.clone(),
        },
        [2, 10],
    )


def test_gae_chunked_value_calls_and_nan_next_observations():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.objectives.value import GAE

    net = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["state_value"])
    data = _gae_batch()
    full = GAE(gamma=0.9, lmbda=0.95, value_network=net)(data.clone())["advantage"]
    for kwargs in ({"num_chunks": 4}, {"value_chunk_size": 7}, {"num_chunk": 3}):
        chunked = GAE(gamma=0.9, lmbda=0.95, value_network=net, **kwargs)(data.clone())
        torch.testing.assert_close(chunked["advantage"], full)
    # a NaN next observation at a terminated step (NextStateReconstructor at an episode
    # end) gives the advantages of the true one: that next value is masked anyway
    holes = data.clone()
    holes["next", "observation"][0, 4] = float("nan")
    holes["next", "observation"][1, 9] = float("nan")
    for shifted in (False, True):
        out = GAE(gamma=0.9, lmbda=0.95, value_network=net, shifted=shifted)(holes.clone())
        torch.testing.assert_close(out["advantage"], full)
    assert out["shifted_valid"].all() and out["shifted_valid"].shape == (2, 10)
    with pytest.raises(ValueError, match="value_chunk_size or num_chunks, not both"):
        GAE(gamma=0.9, lmbda=0.95, value_network=net, num_chunks=2, value_chunk_size=3)
    with pytest.raises(ValueError, match="num_chunks must be an int >= 1, got 0"):
        GAE(gamma=0.9, lmbda=0.95, value_network=net, num_chunks=0)
    with pytest.raises(ValueError, match="num_chunk=2 and num_chunks=3 differ"):
        GAE(gamma=0.9, lmbda=0.95, value_network=net, num_chunks=3, num_chunk=2)


def test_gym_env_with_an_image_observation_returns_it_as_pixels():
    import gymnasium as gym

    from torchrl_lite.envs import GymEnv

    env = GymEnv("ALE/Pong-v5")  # ale-py registered on demand
    assert list(env.observation_spec.keys()) == ["pixels"]
    raw = gym.make("ALE/Pong-v5")
    first, _ = raw.reset(seed=4)
    env.set_seed(4)
    td = env.reset()
    assert torch.equal(td["pixels"], torch.from_numpy(first))
    # from_pixels on such an env renders nothing more: the screen is the pixels
    assert list(GymEnv("ALE/Pong-v5", from_pixels=True).observation_spec.keys()) == ["pixels"]
    assert list(GymEnv("CartPole-v1").observation_spec.keys()) == ["observation"]
