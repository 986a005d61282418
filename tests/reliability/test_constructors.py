"""Constructors validate: impossible sizes, bounds and settings raise naming the value."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from torchrl_lite.data import Bounded, Categorical, MultiCategorical, OneHot
from torchrl_lite.data.replay_buffers import SliceSampler
from torchrl_lite.envs import GymEnv, TransformedEnv
from torchrl_lite.envs.transforms import ObservationNorm
from torchrl_lite.modules import MLP


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: OneHot(0), r"OneHot: n must be integers >= 1.*\[0\]"),
        (lambda: OneHot(-3), r"OneHot: n .*\[-3\]"),
        (lambda: Categorical(0), r"Categorical: n must be integers >= 1.*got 0"),
        (lambda: MultiCategorical([3, 0]), r"MultiCategorical: nvec .*\[3, 0\]"),
        (lambda: Bounded(float("nan"), 1.0, (2,)), r"Bounded: low holds NaN"),
        (lambda: Bounded(-1.0, [1.0, float("nan")]), r"Bounded: high holds NaN"),
        (lambda: Bounded(2.0, 1.0, (1,)), r"low must be <= high"),
        (lambda: MLP(3, 2, num_cells=0, depth=1), r"MLP: num_cells must be >= 1, got \[0\]"),
        (lambda: MLP(3, 2, num_cells=[8, 0]), r"num_cells must be >= 1, got \[8, 0\]"),
        (lambda: MLP(3, 0, num_cells=8, depth=1), r"MLP: out_features must be >= 1, got 0"),
        (lambda: MLP(0, 2, num_cells=8, depth=1), r"MLP: in_features must be >= 1, got 0"),
        (lambda: SliceSampler(slice_len=0), r"SliceSampler: slice_len must be an int >= 1"),
        (lambda: SliceSampler(num_slices=-2), r"SliceSampler: num_slices .* got -2"),
        (lambda: GymEnv("CartPole-v1", num_envs=-1), r"GymEnv: num_envs must be an int >= 0"),
        (lambda: GymEnv("CartPole-v1").set_seed(-1), r"GymEnv: seed must be >= 0, got -1"),
    ],
)
def test_constructor_rejects_impossible_values(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_valid_edge_values_still_build():
    assert OneHot(1).rand().tolist() == [1]
    assert Categorical(1).rand().item() == 0
    assert Bounded(-float("inf"), float("inf"), (1,)).shape == (1,)
    assert MLP(3, 1, num_cells=1, depth=1)(torch.zeros(2, 3)).shape == (2, 1)
    assert SliceSampler(slice_len=1).slice_len == 1


class _TextOnly(gym.Env):
    metadata = {"render_modes": ["ansi"]}
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 0.0, False, False, {}

    def render(self):
        return "text"


@pytest.mark.filterwarnings("ignore::UserWarning")  # gymnasium's own render_mode warning
def test_from_pixels_on_an_env_without_rgb_array_names_env_and_modes():
    from torchrl_lite.envs import GymWrapper

    gym.register("TextOnlyReliability-v0", entry_point=_TextOnly)
    with pytest.raises(ValueError, match=r"TextOnlyReliability-v0 renders only \['ansi'\]"):
        GymWrapper(gym.make("TextOnlyReliability-v0", render_mode="rgb_array"), from_pixels=True)


def test_observation_norm_shape_checked_at_attach_naming_key_and_shapes():
    norm = ObservationNorm(loc=torch.zeros(5), scale=torch.ones(5), in_keys=["observation"])
    with pytest.raises(ValueError, match=r"loc of shape \[5\].*'observation' of shape \[3\]"):
        TransformedEnv(GymEnv("Pendulum-v1"), norm)
    fits = ObservationNorm(loc=torch.zeros(3), scale=torch.ones(1), in_keys=["observation"])
    env = TransformedEnv(GymEnv("Pendulum-v1"), fits)
    assert env.rollout(2)["observation"].shape == (2, 3)


@pytest.mark.parametrize("name", ["TanhNormal", "IndependentNormal"])
def test_distribution_scale_checked_with_validate_args(name):
    from torchrl_lite.modules.distributions import continuous

    cls = getattr(continuous, name)
    with pytest.raises(ValueError, match=rf"{name}: scale must be > 0 everywhere"):
        cls(torch.zeros(3, 2), torch.tensor([1.0, -1.0]).expand(3, 2), validate_args=True)
    cls(torch.zeros(3, 2), torch.ones(3, 2), validate_args=True)  # valid: builds
    # checked without validate_args too (on the CPU, where the check needs no device sync)
    with pytest.raises(ValueError, match=rf"{name}: scale must be > 0 everywhere"):
        cls(torch.zeros(3, 2), -torch.ones(3, 2))
