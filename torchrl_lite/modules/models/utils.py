"""Small layers the models are built from (TorchRL's ``torchrl.modules.models.utils``)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SquashDims"]


class SquashDims(nn.Module):
    """Flattens the last ``ndims_in`` dims into one (default 3: ``[*B, C, H, W] -> [*B, C*H*W]``).

    Args:
        ndims_in: number of trailing dims to flatten.

    Example:
        >>> SquashDims()(torch.zeros(2, 4, 3, 5, 5)).shape
        torch.Size([2, 4, 75])
    """

    def __init__(self, ndims_in: int = 3):
        super().__init__()
        self.ndims_in = ndims_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(-self.ndims_in, -1)
