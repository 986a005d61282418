"""Seed-era TorchRL spec and distribution code, import changed: ``spec.space`` and the
``min=``/``max=`` keywords of ``TanhNormal`` / ``TanhDelta``.

The references are the specs' own ``low``/``high``/``n``, gymnasium's spaces, and the same
distribution built with the canonical ``low``/``high`` keywords.
"""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.data import Bounded, Categorical, OneHot
from torchrl_lite.data.tensor_specs import CategoricalBox, ContinuousBox, DiscreteBox
from torchrl_lite.envs import GymEnv, PendulumEnv
from torchrl_lite.modules import ProbabilisticActor, TanhDelta, TanhNormal


# -- spec.space ------------------------------------------------------------------------
def test_bounded_space_low_high_as_scripts_read_them():
    """TorchRL scripts read bounds as ``env.action_spec.space.low`` / ``.high``."""
    env = GymEnv("Pendulum-v1")
    try:
        space = env.action_spec.space
        assert isinstance(space, ContinuousBox)
        reference = gym.make("Pendulum-v1").action_space
        torch.testing.assert_close(space.low, torch.as_tensor(reference.low))
        torch.testing.assert_close(space.high, torch.as_tensor(reference.high))
        assert space.low is env.action_spec.low and space.high is env.action_spec.high
    finally:
        env.close()
    spec = PendulumEnv().action_spec
    assert torch.equal(spec.space.high, torch.full((1,), 2.0))
    assert Bounded(-1.0, 1.0, shape=(2,)).space == ContinuousBox(-torch.ones(2), torch.ones(2))


@pytest.mark.parametrize("categorical", [True, False])
def test_discrete_space_n(categorical):
    env = GymEnv("CartPole-v1", categorical_action_encoding=categorical)
    try:
        spec = env.action_spec
        assert isinstance(spec, Categorical if categorical else OneHot)
        assert isinstance(spec.space, CategoricalBox)
        assert spec.space.n == gym.make("CartPole-v1").action_space.n == spec.n
    finally:
        env.close()
    assert Categorical(5).space == OneHot(5).space == DiscreteBox(5)  # seed-era name
    assert Categorical(5).to("cpu").space.n == 5


# -- TanhNormal / TanhDelta(min=, max=) ------------------------------------------------
def test_tanh_normal_min_max_equal_low_high():
    loc, scale = torch.randn(4, 2), torch.rand(4, 2) + 0.1
    ref = TanhNormal(loc, scale, low=-3.0, high=2.0)
    got = TanhNormal(loc, scale, min=-3.0, max=2.0)
    assert (got.low, got.high) == (ref.low, ref.high) == (-3.0, 2.0)
    torch.manual_seed(0)
    a_ref = ref.sample()
    torch.manual_seed(0)
    a_got = got.sample()
    torch.testing.assert_close(a_got, a_ref)
    torch.testing.assert_close(got.log_prob(a_ref), ref.log_prob(a_ref))
    torch.testing.assert_close(got.mode, ref.mode)
    # one bound under the old name, the other under the new one
    mixed = TanhNormal(loc, scale, min=-3.0, high=2.0)
    torch.testing.assert_close(mixed.log_prob(a_ref), ref.log_prob(a_ref))


def test_tanh_delta_min_max_equal_low_high():
    param = torch.tensor([[-5.0, 0.3, 9.0]])
    low, high = torch.tensor([-1.0, 0.0, -2.0]), torch.tensor([1.0, 4.0, 2.0])
    got = TanhDelta(param, min=low, max=high)
    ref = TanhDelta(param, low=low, high=high)
    torch.testing.assert_close(got.mode, ref.mode)
    assert bool(((got.mode >= low) & (got.mode <= high)).all())


@pytest.mark.parametrize("cls", [TanhNormal, TanhDelta])
def test_bound_given_under_both_names_raises(cls):
    args = (torch.zeros(2), torch.ones(2)) if cls is TanhNormal else (torch.zeros(2),)
    with pytest.raises(TypeError, match=f"{cls.__name__}: got both high=1.0 and max=2.0"):
        cls(*args, high=1.0, max=2.0)


def test_seed_era_actor_with_min_max_distribution_kwargs():
    """A v0.4 script: ``distribution_kwargs={"min": low, "max": high}`` from the env spec."""
    env = PendulumEnv(seed=0)
    spec = env.action_spec
    net = TensorDictModule(
        nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()), ["observation"], ["loc", "scale"]
    )
    actor = ProbabilisticActor(
        net,
        in_keys=["loc", "scale"],
        spec=spec,
        distribution_class=TanhNormal,
        distribution_kwargs={"min": spec.space.low, "max": spec.space.high},
        return_log_prob=True,
    )
    with torch.no_grad():
        rollout = env.rollout(20, actor)
    action = rollout["action"]
    assert action.shape == (20, 1)
    assert bool(((action >= -2.0) & (action <= 2.0)).all())
    td = net(TensorDict(observation=rollout["observation"], batch_size=[20]))
    dist = actor.get_dist(td)
    assert torch.equal(dist.low, spec.low) and torch.equal(dist.high, spec.high)
    # the squashing uses Pendulum's bounds (±2), not the default ±1
    torch.testing.assert_close(dist.mode, 2.0 * torch.tanh(td["loc"]))
