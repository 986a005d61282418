"""Seed-era TorchRL replay-buffer usage (issue 13, item 5), import changed only."""

import pytest
import torch
from tensordict import TensorDict, tensorclass

from torchrl_lite.data import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    MultiStep,
    ReplayBuffer,
    SliceSampler,
    TensorDictReplayBuffer,
)
from torchrl_lite.data.postprocs import MultiStep as MultiStepFromPostprocs


@tensorclass
class Transition:
    observation: torch.Tensor
    reward: torch.Tensor


def _steps(n=10):
    return TensorDict({"obs": torch.arange(n, dtype=torch.float32).unsqueeze(-1)}, [n])


def test_indexing_a_buffer_and_its_storage_gives_tensordicts():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100))
    data = _steps()
    rb.extend(data)
    assert rb[3]["obs"].item() == 3.0 and rb[3].batch_size == ()
    assert torch.equal(rb[:]["obs"], data["obs"])  # everything, in storage order
    assert torch.equal(rb.storage[:4]["obs"], data["obs"][:4])
    assert torch.equal(rb[torch.tensor([7, 1])]["obs"].flatten(), torch.tensor([7.0, 1.0]))
    assert rb.storage[-1]["obs"].item() == 9.0
    with pytest.raises(IndexError, match="out of range"):
        rb.storage[10]
    lst = ReplayBuffer(storage=ListStorage(10))
    lst.extend([torch.tensor(1), torch.tensor(2), torch.tensor(3)])
    assert lst[:].tolist() == [1, 2, 3]  # collated like a sample
    assert lst.storage[:2] == [torch.tensor(1), torch.tensor(2)]


@pytest.mark.parametrize("storage", [LazyTensorStorage, LazyMemmapStorage])
def test_pytree_items_in_tensor_storages(storage, tmp_path):
    kwargs = {"scratch_dir": tmp_path} if storage is LazyMemmapStorage else {}
    rb = ReplayBuffer(storage=storage(50, **kwargs), batch_size=4)
    obs = torch.randn(10, 3)
    rb.extend({"obs": obs, "info": {"step": torch.arange(10)}})
    rb.add({"obs": torch.zeros(3), "info": {"step": torch.tensor(10)}})
    sample = rb.sample()
    assert isinstance(sample, dict) and sample["obs"].shape == (4, 3)
    torch.testing.assert_close(
        sample["obs"], torch.cat([obs, torch.zeros(1, 3)])[sample["info"]["step"]]
    )
    assert rb[:]["info"]["step"].tolist() == list(range(11))
    with pytest.raises(TypeError, match="holds dict"):
        rb.extend(TensorDict({"obs": obs}, [10]))
    with pytest.raises(ValueError, match="same first dim"):
        ReplayBuffer(storage=storage(50, **kwargs)).extend(
            {"a": torch.zeros(3), "b": torch.zeros(4)}
        )


def test_tensorclass_items_in_tensor_storages():
    rb = ReplayBuffer(storage=LazyTensorStorage(50), batch_size=5)
    data = Transition(observation=torch.randn(10, 3), reward=torch.arange(10.0), batch_size=[10])
    rb.extend(data)
    sample = rb.sample()
    assert isinstance(sample, Transition) and sample.batch_size == (5,)
    torch.testing.assert_close(sample.observation, data.observation[sample.reward.long()])
    assert isinstance(rb[0], Transition) and rb[0].reward.item() == 0.0


def _episodes():
    ep = torch.tensor([0] * 6 + [1] * 6 + [2] * 8)
    return TensorDict({"episode": ep, "t": torch.arange(20)}, [20])


@pytest.mark.parametrize("cache_values", [False, True])
def test_slice_sampler_cache_values_gives_the_same_samples(cache_values):
    samples = []
    for cache in (cache_values, not cache_values):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(20),
            sampler=SliceSampler(slice_len=4, traj_key="episode", cache_values=cache),
            batch_size=8,
        )
        rb.extend(_episodes())
        torch.manual_seed(0)
        samples.append([rb.sample()["t"] for _ in range(3)])
        assert rb.sampler.cache_values is cache
    for a, b in zip(*samples):
        assert torch.equal(a, b)
        assert (a.reshape(2, 4).diff(dim=-1) == 1).all()  # slices of one episode each


def _multistep_reference(reward, done, next_obs, gamma, n):
    """A plain loop over time: the n-step return and bootstrap step of each step."""
    T = len(reward)
    out_r, out_obs, out_k = [], [], []
    for t in range(T):
        ret, k = 0.0, 0
        for i in range(n + 1):
            if t + i >= T:
                break
            ret += gamma**i * reward[t + i]
            k += 1
            if done[t + i]:
                break
        out_r.append(ret)
        out_obs.append(next_obs[t + k - 1])
        out_k.append(k)
    return out_r, out_obs, out_k


def test_multistep_matches_a_plain_loop():
    assert MultiStep is MultiStepFromPostprocs
    torch.manual_seed(0)
    T = 12
    reward = torch.randn(T)
    done = torch.zeros(T, dtype=torch.bool)
    done[[3, 8]] = True
    next_obs = torch.arange(1.0, T + 1)
    td = TensorDict(
        {
            "observation": torch.arange(float(T)).unsqueeze(-1),
            "next": {
                "observation": next_obs.unsqueeze(-1),
                "reward": reward.unsqueeze(-1),
                "done": done.unsqueeze(-1),
                "terminated": done.unsqueeze(-1),
            },
        },
        [T],
    )
    out = MultiStep(gamma=0.9, n_steps=3)(td)
    ref_r, ref_obs, ref_k = _multistep_reference(
        reward.tolist(), done.tolist(), next_obs.tolist(), 0.9, 3
    )
    torch.testing.assert_close(out["next", "reward"].flatten(), torch.tensor(ref_r))
    assert out["next", "observation"].flatten().tolist() == ref_obs
    assert out["steps_to_next_obs"].flatten().tolist() == ref_k
    torch.testing.assert_close(
        out["gamma"].flatten(), 0.9 ** torch.tensor(ref_k, dtype=torch.float)
    )
    torch.testing.assert_close(out["next", "original_reward"].flatten(), reward)
    # batched [B, T]: each row on its own
    two = MultiStep(0.9, 3)(torch.stack([td, td]))
    torch.testing.assert_close(two["next", "reward"][1].flatten(), torch.tensor(ref_r))
    same = MultiStep(0.9, 0)(td)  # n_steps=0: the identity
    torch.testing.assert_close(same["next", "reward"], td["next", "reward"])
    with pytest.raises(ValueError, match="n_steps"):
        MultiStep(0.9, -1)


def test_multistep_as_collector_postproc():
    from torchrl_lite.collectors import RandomPolicy, SyncDataCollector
    from torchrl_lite.envs import GymEnv, StepCounter, TransformedEnv

    env = TransformedEnv(GymEnv("CartPole-v1"), StepCounter())
    env.set_seed(0)
    collector = SyncDataCollector(
        env,
        RandomPolicy(env.action_spec),
        frames_per_batch=40,
        total_frames=40,
        postproc=MultiStep(gamma=0.99, n_steps=4),
    )
    data = next(iter(collector))
    collector.shutdown()
    steps = data["steps_to_next_obs"].flatten()
    assert steps.max() == 5 and (steps >= 1).all()
    # the bootstrap observation is the one k - 1 steps later in the same trajectory
    k = steps[0].item()
    torch.testing.assert_close(data["next", "observation"][0], data["observation"][k])
