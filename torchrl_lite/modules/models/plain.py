"""Plain networks the recipes build on: :func:`mlp` and :class:`PixelEncoder`.

Example:
    >>> import torch
    >>> net = mlp(3, 1, hidden=8, depth=2)
    >>> net(torch.zeros(5, 3)).shape
    torch.Size([5, 1])
    >>> PixelEncoder(4).out_features((4, 64, 64))
    1024
"""

from __future__ import annotations

import torch
from torch import nn

from torchrl_lite.modules.models.models import ConvNet

__all__ = ["PixelEncoder", "mlp"]


def mlp(
    in_features: int,
    out_features: int,
    hidden: int,
    depth: int,
    act=nn.Tanh,
    layer_norm: bool = False,
) -> nn.Module:
    """A plain MLP: ``depth`` hidden layers of ``hidden`` units (with ``layer_norm``, each
    normalized by a ``LayerNorm`` before its activation)."""
    layers, width = [], in_features
    for _ in range(depth):
        norm = [nn.LayerNorm(hidden)] if layer_norm else []
        layers += [nn.Linear(width, hidden), *norm, act()]
        width = hidden
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


class PixelEncoder(nn.Module):
    """uint8 frame stacks ``[*B, C, H, W]`` to features ``[*B, F]``: scaled to ``[0, 1]``,
    then convolutions with ReLUs (default: Nature DQN's 32-64-64 channels, kernels 8-4-3,
    strides 4-2-1)."""

    def __init__(
        self,
        in_channels: int,
        num_cells=(32, 64, 64),
        kernel_sizes=(8, 4, 3),
        strides=(4, 2, 1),
    ):
        super().__init__()
        self.conv = ConvNet(
            in_features=in_channels,
            num_cells=list(num_cells),
            kernel_sizes=list(kernel_sizes),
            strides=list(strides),
            activation_class=nn.ReLU,
        )

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        batch = pixels.shape[:-3]
        # channels-last: oneDNN's convolutions run about 2x faster on CPU with this layout
        x = pixels.reshape(-1, *pixels.shape[-3:]).contiguous(memory_format=torch.channels_last)
        out = self.conv(x / 255)  # uint8 -> float32 in [0, 1], layout kept; [N, F]
        return out.reshape(*batch, *out.shape[1:])

    def out_features(self, shape) -> int:
        """Features per image of shape ``[C, H, W]``."""
        with torch.no_grad():
            return self(torch.zeros(1, *shape, dtype=torch.uint8)).shape[-1]
