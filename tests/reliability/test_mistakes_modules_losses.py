"""Mistakes a new user makes with modules, exploration, value estimators and the Scheme
factories: typed errors naming the value and the fix (see reliability_sweep.md)."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from torchrl_lite.agent import factories_from_recipe
from torchrl_lite.data import Bounded
from torchrl_lite.modules import (
    MLP,
    Actor,
    AdditiveGaussianModule,
    ConvNet,
    GRUModule,
    LSTMModule,
    OrnsteinUhlenbeckProcessModule,
    ValueOperator,
)
from torchrl_lite.objectives import GAE

SPEC = Bounded(-1.0, 1.0, (1,))


@pytest.mark.parametrize(
    "build, error, match",
    [
        (
            lambda: MLP(3, 2, num_cells=8, depth=1, activation_class=nn.ReLU()),
            TypeError,
            r"MLP: activation_class must be a class, got the module instance ReLU\(\); pass "
            r"activation_class=ReLU",
        ),
        (
            lambda: MLP(3, 2, num_cells=8, depth=1, norm_class=nn.LayerNorm(8)),
            TypeError,
            r"MLP: norm_class must be a class",
        ),
        (
            lambda: ConvNet(num_cells=[8], activation_class=nn.ELU()),
            TypeError,
            r"ConvNet: activation_class must be a class",
        ),
        (
            lambda: AdditiveGaussianModule(SPEC, sigma_init=-1.0),
            ValueError,
            r"AdditiveGaussianModule: sigma_init must be a finite number >= 0, got -1.0",
        ),
        (
            lambda: AdditiveGaussianModule(SPEC, std=float("nan")),
            ValueError,
            r"AdditiveGaussianModule: std must be a finite number >= 0, got nan",
        ),
        (
            lambda: OrnsteinUhlenbeckProcessModule(SPEC, theta=-0.15),
            ValueError,
            r"OrnsteinUhlenbeckProcessModule: theta must be a finite number >= 0, got -0.15",
        ),
        (
            lambda: OrnsteinUhlenbeckProcessModule(SPEC, dt=0.0),
            ValueError,
            r"OrnsteinUhlenbeckProcessModule: dt must be a finite number > 0, got 0.0",
        ),
        (
            lambda: ValueOperator(nn.Linear(3, 1), in_keys=[]),
            ValueError,
            r"ValueOperator: in_keys is empty.*e.g. in_keys=\['observation'\]",
        ),
        (lambda: Actor(nn.Linear(3, 1), in_keys=[]), ValueError, r"Actor: in_keys is empty"),
        (
            lambda: LSTMModule(input_size=0, hidden_size=8, in_key="obs", out_key="h"),
            ValueError,
            r"LSTMModule: input_size must be an int >= 1, got 0",
        ),
        (
            lambda: GRUModule(input_size=3, hidden_size=8, num_layers=0, in_key="obs", out_key="h"),
            ValueError,
            r"GRUModule: num_layers must be an int >= 1, got 0",
        ),
        (
            lambda: factories_from_recipe("ppo", {"env": "CartPole-v1"}),
            TypeError,
            r"factories_from_recipe: cfg must be the recipe's Config instance, got dict; build "
            r"it with get_recipe\('ppo'\).Config",
        ),
    ],
)
def test_module_mistakes_raise_naming_the_value(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_valid_noise_and_layer_settings_still_build():
    assert AdditiveGaussianModule(SPEC, sigma_init=0.0, sigma_end=0.0).sigma.item() == 0.0
    assert OrnsteinUhlenbeckProcessModule(SPEC, theta=0.0).theta == 0.0
    assert MLP(3, 2, num_cells=8, depth=1, activation_class=nn.ReLU)(torch.zeros(1, 3)).shape == (
        1,
        2,
    )


def _trajectory(done_dtype) -> TensorDict:
    done = torch.tensor([0, 0, 1, 0, 0, 1]).reshape(1, 6, 1).to(done_dtype)
    obs = torch.arange(14.0).reshape(1, 7, 2)
    return TensorDict(
        observation=obs[:, :-1],
        next=TensorDict(
            observation=obs[:, 1:],
            reward=torch.ones(1, 6, 1),
            done=done,
            terminated=done,
            batch_size=[1, 6],
        ),
        batch_size=[1, 6],
    )


def test_estimators_read_done_flags_stored_as_numbers_as_bool():
    torch.manual_seed(0)
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=ValueOperator(nn.Linear(2, 1)))
    expected = gae(_trajectory(torch.bool))["advantage"]
    for dtype in (torch.float32, torch.int64):
        torch.testing.assert_close(gae(_trajectory(dtype))["advantage"], expected)
