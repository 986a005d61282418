"""DDPG's MLP actor and Q-network (TorchRL's ``DdpgMlpActor`` and ``DdpgMlpQNet``).

Paper: Lillicrap et al. 2016, "Continuous control with deep reinforcement learning",
https://arxiv.org/abs/1509.02971 (section 7: two hidden layers of 400 and 300 units, the
action joining the Q-network at its second layer, the last layers initialised uniformly in
``±3e-3`` so that the first outputs are near zero).

The first layers are lazy (input sizes inferred from the first call), as in TorchRL.
"""

from __future__ import annotations

import torch
from torch import nn

from torchrl_lite.modules.models._feedforward import MLP

__all__ = ["DdpgMlpActor", "DdpgMlpQNet"]

_LAST_LAYER_RANGE = 3e-3  # uniform(-r, r) weights and bias of the output layers (paper)


def _init_last_layer(mlp: MLP, bound: float) -> None:
    """Re-initialise the output ``nn.Linear`` of ``mlp`` uniformly in ``[-bound, bound]``."""
    last = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    if not last or isinstance(last[-1], nn.LazyLinear):
        return  # a lazy output layer: keeps its default initialisation
    with torch.no_grad():
        last[-1].weight.uniform_(-bound, bound)
        if last[-1].bias is not None:
            last[-1].bias.uniform_(-bound, bound)


class DdpgMlpActor(nn.Module):
    """DDPG's actor: ``observation [*B, O] -> action [*B, action_dim]`` (unbounded).

    Squash the output into the action bounds with a ``TanhDelta`` distribution, e.g. in a
    ``ProbabilisticActor``.

    Args:
        action_dim: the length of the action.
        mlp_net_kwargs: ``MLP`` keyword arguments updating the defaults
            ``in_features=None, out_features=action_dim, depth=2, num_cells=[400, 300],
            activation_class=nn.ELU, bias_last_layer=True``.
        device: where to create the parameters.

    Example:
        >>> actor = DdpgMlpActor(action_dim=4)
        >>> actor(torch.zeros(10, 6)).shape
        torch.Size([10, 4])
    """

    def __init__(self, action_dim: int, mlp_net_kwargs: dict | None = None, device=None):
        super().__init__()
        kwargs = {
            "in_features": None,
            "out_features": action_dim,
            "depth": 2,
            "num_cells": [400, 300],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
        }
        kwargs.update(mlp_net_kwargs or {})
        self.mlp = MLP(device=device, **kwargs)
        _init_last_layer(self.mlp, _LAST_LAYER_RANGE)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.mlp(observation)


class DdpgMlpQNet(nn.Module):
    """DDPG's Q-network: ``(observation, action) -> value [*B, 1]``.

    ``mlp1`` embeds the observation (one activated layer of 400 units); ``mlp2`` reads the
    embedding concatenated with the action (a hidden layer of 300 units, then the value).

    Args:
        mlp_net_kwargs_net1: ``MLP`` keyword arguments updating ``in_features=None,
            out_features=400, depth=0, num_cells=[], activation_class=nn.ELU,
            bias_last_layer=True, activate_last_layer=True``.
        mlp_net_kwargs_net2: ``MLP`` keyword arguments updating ``in_features=None,
            out_features=1, depth=1, num_cells=[300], activation_class=nn.ELU,
            bias_last_layer=True``.
        device: where to create the parameters.

    Example:
        >>> qnet = DdpgMlpQNet()
        >>> qnet(torch.zeros(10, 6), torch.zeros(10, 2)).shape
        torch.Size([10, 1])
    """

    def __init__(
        self,
        mlp_net_kwargs_net1: dict | None = None,
        mlp_net_kwargs_net2: dict | None = None,
        device=None,
    ):
        super().__init__()
        kwargs1 = {
            "in_features": None,
            "out_features": 400,
            "depth": 0,
            "num_cells": [],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
            "activate_last_layer": True,
        }
        kwargs1.update(mlp_net_kwargs_net1 or {})
        kwargs2 = {
            "in_features": None,
            "out_features": 1,
            "depth": 1,
            "num_cells": [300],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
        }
        kwargs2.update(mlp_net_kwargs_net2 or {})
        self.mlp1 = MLP(device=device, **kwargs1)
        self.mlp2 = MLP(device=device, **kwargs2)
        _init_last_layer(self.mlp2, _LAST_LAYER_RANGE)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.mlp2(torch.cat([self.mlp1(observation), action], -1))
