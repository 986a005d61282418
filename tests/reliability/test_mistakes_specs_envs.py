"""Mistakes a new user makes with specs, envs, transforms and collectors: typed errors
naming the value and the fix, found by the sweep in benchmarks/results/reliability_sweep.md."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import Binary, Bounded, Categorical, MultiCategorical, Unbounded
from torchrl_lite.envs import GymEnv, PendulumEnv
from torchrl_lite.envs.transforms import ObservationNorm, RewardScaling


@pytest.mark.parametrize(
    "build, error, match",
    [
        (
            lambda: Unbounded(shape=-1),
            ValueError,
            r"Unbounded: shape dims must be >= 0, got \[-1\]",
        ),
        (
            lambda: Unbounded(3, dtype="float32"),
            TypeError,
            r"dtype must be a torch.dtype .*'float32'",
        ),
        (
            lambda: Bounded(torch.zeros(3), torch.ones(2)),
            ValueError,
            r"Bounded: low of shape \[3\] and high of shape \[2\] do not broadcast",
        ),
        (lambda: Binary(0), ValueError, r"Binary: n must be integers >= 1.*got 0"),
        (
            lambda: Categorical(3).encode(7),
            ValueError,
            r"Cannot encode .*values=\[7\].*outside the range of Categorical.*n=3",
        ),
        (lambda: MultiCategorical([2, 3]).encode([1, 3]), ValueError, r"outside the range"),
        (lambda: Bounded(-1.0, 1.0, (1,)).encode([2.0]), ValueError, r"outside the range"),
    ],
)
def test_spec_mistakes_raise_naming_the_value(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_spec_encode_in_range_still_works():
    assert Categorical(3).encode(2).item() == 2
    assert MultiCategorical([2, 3]).encode([1, 2]).tolist() == [1, 2]


def test_env_device_that_does_not_exist_here():
    if torch.cuda.is_available():
        device = f"cuda:{torch.cuda.device_count()}"
    else:
        device = "cuda:0"
    with pytest.raises(ValueError, match=rf"GymEnv: device '{device}' is not available here"):
        GymEnv("CartPole-v1", device=device)
    with pytest.raises(ValueError, match=r"PendulumEnv: device 'gpu' is not a device name"):
        PendulumEnv(device="gpu")


def test_gym_kwargs_the_env_does_not_take_are_named():
    with pytest.raises(TypeError, match=r"GymEnv\('CartPole-v1'\).*\['render'\].*render_mode"):
        GymEnv("CartPole-v1", render="rgb_array")


def test_rollout_policy_or_callback_not_callable():
    env = GymEnv("CartPole-v1")
    with pytest.raises(TypeError, match=r"rollout: policy must be a callable .*got 'random'"):
        env.rollout(3, policy="random")
    with pytest.raises(TypeError, match=r"rollout: callback must be a callable .*got 5"):
        env.rollout(3, callback=5)


def test_reset_with_a_tensordict_of_another_batch_size():
    env = GymEnv("CartPole-v1", num_envs=2)
    with pytest.raises(
        ValueError,
        match=r"GymEnv.reset: the tensordict has batch size \[3\] but "
        r"the env has \[2\]",
    ):
        env.reset(TensorDict(batch_size=[3]))
    env.close()
    # an env that takes any batch (batch_locked=False) still resets to the given batch
    assert PendulumEnv(seed=0).reset(TensorDict(batch_size=[4]))["observation"].shape == (4, 3)


@pytest.mark.parametrize("transform_class", [ObservationNorm, RewardScaling])
def test_affine_transforms_reject_a_zero_or_non_finite_scale(transform_class):
    name = transform_class.__name__
    with pytest.raises(ValueError, match=rf"{name}: scale must be non-zero, got 0.0"):
        transform_class(loc=0.0, scale=0.0)
    with pytest.raises(
        ValueError,
        match=rf"{name}: scale must be > 0 \(it divides\), got \[1.0, "
        r"-2.0\] with standard_normal=True",
    ):
        transform_class(loc=0.0, scale=[1.0, -2.0], standard_normal=True)
    with pytest.raises(ValueError, match=rf"{name}: loc must be finite, got nan"):
        transform_class(loc=float("nan"), scale=1.0)
    assert transform_class(loc=0.0, scale=-1.0).scale.item() == -1.0  # a sign flip is allowed


def test_collector_policy_reading_a_key_the_env_lacks():
    policy = TensorDictModule(nn.Linear(3, 1), in_keys=["obs"], out_keys=["action"])
    with pytest.raises(
        KeyError,
        match=r"SyncDataCollector: the policy reads \['obs'\] "
        r"\(policy.in_keys=\['obs'\]\), which the env does not provide; the env "
        r"gives \['done', 'observation', 'terminated', 'truncated'\]",
    ):
        SyncDataCollector(lambda: GymEnv("Pendulum-v1"), policy, frames_per_batch=4, total_frames=4)


def test_collector_policy_reading_env_keys_builds():
    policy = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    collector = SyncDataCollector(
        lambda: GymEnv("Pendulum-v1"), policy, frames_per_batch=4, total_frames=4
    )
    assert next(iter(collector))["action"].shape == (4, 1)
    collector.shutdown()
