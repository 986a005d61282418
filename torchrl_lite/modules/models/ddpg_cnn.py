"""DDPG's convolutional actor and Q-network for pixel inputs (TorchRL's ``DdpgCnnActor``
and ``DdpgCnnQNet``; Lillicrap et al. 2016, https://arxiv.org/abs/1509.02971).

A ``ConvNet`` embeds the image ``[*B, C, H, W]`` (average-pooled over space by default,
then flattened); an ``MLP`` maps the embedding (with the action for the Q-network) to the
output. Layers after the convolutions are lazy (sizes inferred on the first call).
"""

from __future__ import annotations

import torch
from torch import nn

from torchrl_lite.modules.models._feedforward import MLP, ConvNet

__all__ = ["DdpgCnnActor", "DdpgCnnQNet"]


def _conv(defaults: dict, given: dict | None, use_avg_pooling: bool, device) -> nn.Module:
    kwargs = {**defaults, **(given or {})}
    conv = ConvNet(device=device, **kwargs)
    if use_avg_pooling:  # [*B, C, H, W] -> [*B, C]: pool before the ConvNet's flattening
        return nn.Sequential(*list(conv.children())[:-1], nn.AdaptiveAvgPool2d(1), nn.Flatten(-3))
    return conv


class DdpgCnnActor(nn.Module):
    """``pixels [*B, C, H, W] -> (action [*B, action_dim], hidden [*B, F])``.

    Args:
        action_dim: the length of the action.
        conv_net_kwargs: ``ConvNet`` options updating ``num_cells=[32, 64, 64],
            kernel_sizes=[8, 4, 3], strides=[4, 2, 1], activation_class=nn.ELU``.
        mlp_net_kwargs: ``MLP`` options updating ``in_features=None, out_features=action_dim,
            num_cells=[200, 200], activation_class=nn.ELU``.
        use_avg_pooling: average the feature maps over space before the MLP.
        device: where to create the parameters.

    Example:
        >>> actor = DdpgCnnActor(action_dim=2)
        >>> [t.shape for t in actor(torch.zeros(5, 3, 64, 64))]
        [torch.Size([5, 2]), torch.Size([5, 64])]
    """

    def __init__(
        self,
        action_dim: int,
        conv_net_kwargs: dict | None = None,
        mlp_net_kwargs: dict | None = None,
        use_avg_pooling: bool = True,
        device=None,
    ):
        super().__init__()
        conv_defaults = {
            "num_cells": [32, 64, 64],
            "kernel_sizes": [8, 4, 3],
            "strides": [4, 2, 1],
            "activation_class": nn.ELU,
        }
        self.convnet = _conv(conv_defaults, conv_net_kwargs, use_avg_pooling, device)
        mlp = {
            "in_features": None,
            "out_features": action_dim,
            "num_cells": [200, 200],
            "activation_class": nn.ELU,
        }
        self.mlp = MLP(device=device, **{**mlp, **(mlp_net_kwargs or {})})

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.convnet(observation)
        return self.mlp(hidden), hidden


class DdpgCnnQNet(nn.Module):
    """``(pixels [*B, C, H, W], action [*B, A]) -> value [*B, 1]``.

    Args:
        conv_net_kwargs: ``ConvNet`` options updating ``num_cells=[32, 32, 32],
            kernel_sizes=3, strides=1, activation_class=nn.ELU``.
        mlp_net_kwargs: ``MLP`` options updating ``in_features=None, out_features=1,
            num_cells=[200, 200], activation_class=nn.ELU``.
        use_avg_pooling: average the feature maps over space before the MLP.
        device: where to create the parameters.

    Example:
        >>> q = DdpgCnnQNet()
        >>> q(torch.zeros(5, 3, 32, 32), torch.zeros(5, 2)).shape
        torch.Size([5, 1])
    """

    def __init__(
        self,
        conv_net_kwargs: dict | None = None,
        mlp_net_kwargs: dict | None = None,
        use_avg_pooling: bool = True,
        device=None,
    ):
        super().__init__()
        conv_defaults = {
            "num_cells": [32, 32, 32],
            "kernel_sizes": 3,
            "strides": 1,
            "activation_class": nn.ELU,
        }
        self.convnet = _conv(conv_defaults, conv_net_kwargs, use_avg_pooling, device)
        mlp = {"in_features": None, "out_features": 1, "num_cells": [200, 200],
               "activation_class": nn.ELU}  # fmt: skip
        self.mlp = MLP(device=device, **{**mlp, **(mlp_net_kwargs or {})})

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.cat([self.convnet(observation), action], -1))
