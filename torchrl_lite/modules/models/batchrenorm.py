"""``BatchRenorm1d``: batch renormalization (Ioffe 2017, https://arxiv.org/abs/1702.03275).

In training, with the batch's mean ``mu_B`` and std ``sigma_B`` and the running ``mu``,
``sigma``::

    r = clip(sigma_B / sigma, 1 / max_r, max_r)        d = clip((mu_B - mu) / sigma, -max_d, max_d)
    y = weight * ((x - mu_B) / sigma_B * r + d) + bias  (r, d without gradient)

so training sees what evaluation (``(x - mu) / sigma``) will see. During the first
``warmup_steps`` batches ``r = 1, d = 0`` (plain batch norm) while the running statistics
settle; with ``smooth`` the two blend linearly instead. CrossQ uses it in its critic.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["BatchRenorm1d"]


class BatchRenorm1d(nn.Module):
    """Batch renormalization over dim 1 of a ``[N, C, ...]`` input (``C = num_features``).

    Args:
        num_features: ``C``.
        momentum: the running statistics move this fraction towards each batch's.
        eps: added to the variances.
        max_r: bound of the scale correction ``r``.
        max_d: bound of the shift correction ``d``.
        warmup_steps: batches of plain batch norm before the corrections apply.
        smooth: blend the corrections in linearly over the warm-up.

    Example:
        >>> bn = BatchRenorm1d(3, warmup_steps=0)
        >>> bn(torch.randn(8, 3)).shape
        torch.Size([8, 3])
    """

    def __init__(
        self,
        num_features: int,
        *,
        momentum: float = 0.01,
        eps: float = 1e-5,
        max_r: float = 3.0,
        max_d: float = 5.0,
        warmup_steps: int = 10000,
        smooth: bool = False,
    ):
        super().__init__()
        if not 0 < momentum <= 1:
            raise ValueError(f"BatchRenorm1d: momentum must lie in (0, 1], got {momentum}.")
        if max_r < 1 or max_d < 0:
            raise ValueError(
                f"BatchRenorm1d: needs max_r >= 1 and max_d >= 0, got {max_r}, {max_d}."
            )
        if warmup_steps < 0:
            raise ValueError(f"BatchRenorm1d: warmup_steps must be >= 0, got {warmup_steps}.")
        self.num_features, self.momentum, self.eps = num_features, momentum, eps
        self.max_r, self.max_d = max_r, max_d
        self.warmup_steps, self.smooth = warmup_steps, smooth
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))

    def _warmup_factor(self) -> torch.Tensor:
        if self.warmup_steps == 0:
            return torch.ones((), device=self.running_mean.device)
        done = self.num_batches_tracked.float() / self.warmup_steps
        return done.clamp(max=1.0) if self.smooth else (done >= 1).float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2 or x.shape[1] != self.num_features:
            raise ValueError(
                f"BatchRenorm1d expects [N, {self.num_features}, ...] inputs, got shape {list(x.shape)}."
            )
        view = (1, -1) + (1,) * (x.dim() - 2)  # broadcast [C] over [N, C, ...]
        std = (self.running_var + self.eps).sqrt()
        if not self.training:
            y = (x - self.running_mean.view(view)) / std.view(view)
            return y * self.weight.view(view) + self.bias.view(view)
        if x.numel() // x.shape[1] < 2:
            raise ValueError("BatchRenorm1d needs at least 2 values per feature in training mode.")
        dims = [d for d in range(x.dim()) if d != 1]
        mean, var = x.mean(dims), x.var(dims, unbiased=False)
        batch_std = (var + self.eps).sqrt()
        with torch.no_grad():
            factor = self._warmup_factor()
            r = (batch_std / std).clamp(1 / self.max_r, self.max_r)
            d = ((mean - self.running_mean) / std).clamp(-self.max_d, self.max_d)
            r, d = 1 + (r - 1) * factor, d * factor
            n = x.numel() // x.shape[1]
            self.running_mean.lerp_(mean, self.momentum)
            self.running_var.lerp_(var * n / (n - 1), self.momentum)
            self.num_batches_tracked += 1
        y = (x - mean.view(view)) / batch_std.view(view) * r.view(view) + d.view(view)
        return y * self.weight.view(view) + self.bias.view(view)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, momentum={self.momentum}, max_r={self.max_r}, "
            f"max_d={self.max_d}, warmup_steps={self.warmup_steps}, smooth={self.smooth}"
        )
