"""``SafeTanhTransform``: ``torch.distributions.TanhTransform`` kept off the +-1 bounds."""

from __future__ import annotations

import torch
from torch import distributions as D

__all__ = ["SafeTanhTransform"]


class SafeTanhTransform(D.TanhTransform):
    """``y = tanh(x)`` clamped one float resolution inside ``(-1, 1)``, so that the inverse
    ``atanh(y)`` (and the log-density of a transformed distribution) stays finite.

    Example:
        >>> t = SafeTanhTransform()
        >>> bool(t.inv(t(torch.tensor([30.0]))).isfinite())
        True
    """

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        eps = torch.finfo(x.dtype).resolution
        return torch.tanh(x).clamp(-1 + eps, 1 - eps)

    def _inverse(self, y: torch.Tensor) -> torch.Tensor:
        eps = torch.finfo(y.dtype).resolution
        return torch.atanh(y.clamp(-1 + eps, 1 - eps))
