"""DreamerV3's scalar maths: symlog squashing, two-hot targets, uniform-mixed categoricals.

Paper: Hafner et al. 2023, "Mastering Diverse Domains through World Models",
https://arxiv.org/abs/2301.04104.

* ``symlog(x) = sign(x) log(1 + |x|)`` compresses large magnitudes and is the identity
  near zero; ``symexp`` is its inverse. Observations are reconstructed in symlog space.
* Rewards and values are predicted as a categorical over ``K`` fixed bins
  ``b = symexp(linspace(-20, 20, K))`` (dense near zero, exponentially far apart in the
  tails). A target ``y`` with ``b_k <= y <= b_{k+1}`` is the *two-hot* vector putting
  ``(b_{k+1} - y) / (b_{k+1} - b_k)`` on ``b_k`` and the rest on ``b_{k+1}``, so its
  expectation ``sum_i p_i b_i`` is ``y`` again; the head is trained by cross-entropy
  against it and read out as the expectation of its softmax.
* The latent categoricals mix 1% of a uniform distribution into their softmax
  (``unimix``), so no class ever has probability zero and the KL terms stay finite.

Shapes: scalars ``[*B]`` (or ``[*B, 1]`` where stated); logits ``[*B, K]``.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "SymExpTwoHot",
    "straight_through_sample",
    "symexp",
    "symlog",
    "symlog_bins",
    "two_hot_cross_entropy",
    "two_hot_decode",
    "two_hot_encode",
    "unimix_probs",
]

BIN_RANGE = 20.0  # the bins span symexp(-20) .. symexp(20)


def symlog(x: torch.Tensor) -> torch.Tensor:
    """``sign(x) * log(1 + |x|)``, elementwise.

    Example:
        >>> symlog(torch.tensor([-(torch.e - 1), 0.0, torch.e - 1]))
        tensor([-1.,  0.,  1.])
    """
    return torch.sign(x) * torch.log1p(x.abs())


def symexp(x: torch.Tensor) -> torch.Tensor:
    """``sign(x) * (exp(|x|) - 1)``, the inverse of :func:`symlog`.

    Example:
        >>> symexp(torch.tensor([-1.0, 0.0, 2.0])).round(decimals=4)
        tensor([-1.7183,  0.0000,  6.3891])
    """
    return torch.sign(x) * torch.expm1(x.abs())


def symlog_bins(num_bins: int, *, device=None, dtype=None) -> torch.Tensor:
    """The ``num_bins`` ascending bin values ``symexp(linspace(-20, 20, num_bins))``.

    The grid is made exactly symmetric (``b_i = -b_{K-1-i}``), so a symmetric distribution
    decodes to exactly zero.

    Example:
        >>> symlog_bins(3)
        tensor([-4.8517e+08,  0.0000e+00,  4.8517e+08])
    """
    if int(num_bins) < 2:
        raise ValueError(f"symlog_bins: num_bins must be at least 2, got {num_bins}.")
    grid = torch.linspace(-BIN_RANGE, BIN_RANGE, int(num_bins), device=device, dtype=dtype)
    grid = (grid - grid.flip(0)) / 2  # exact mirror image about zero
    return symexp(grid)


def _check_bins(bins: torch.Tensor, name: str) -> None:
    if bins.ndim != 1 or bins.numel() < 2:
        raise ValueError(
            f"{name}: bins must be a 1-D ascending tensor of at least 2 values, got shape "
            f"{tuple(bins.shape)}; build them with symlog_bins(num_bins)."
        )


def two_hot_encode(x: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Two-hot targets ``[*B, K]`` of raw values ``x`` ``[*B]`` on ascending ``bins`` ``[K]``.

    The weight is split linearly between the two bins around each value (values beyond
    the outer bins go wholly to them), so ``two_hot_encode(x, b) @ b == x`` inside the
    range.

    Example:
        >>> two_hot_encode(torch.tensor([0.25, 2.0]), torch.tensor([-1.0, 0.0, 1.0]))
        tensor([[0.0000, 0.7500, 0.2500],
                [0.0000, 0.0000, 1.0000]])
    """
    _check_bins(bins, "two_hot_encode")
    bins = bins.to(device=x.device, dtype=x.dtype)
    x = x.clamp(bins[0], bins[-1])
    # index of the bin at or below x, kept so that k + 1 is a bin too
    low = (torch.searchsorted(bins, x.contiguous(), right=True) - 1).clamp(0, bins.numel() - 2)
    b_low, b_high = bins[low], bins[low + 1]
    w_high = (x - b_low) / (b_high - b_low)
    target = torch.zeros(*x.shape, bins.numel(), device=x.device, dtype=x.dtype)
    target.scatter_(-1, low.unsqueeze(-1), (1 - w_high).unsqueeze(-1))
    target.scatter_add_(-1, (low + 1).unsqueeze(-1), w_high.unsqueeze(-1))
    return target


def two_hot_decode(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """The expectation ``sum_i softmax(logits)_i b_i`` ``[*B]`` of logits ``[*B, K]``.

    The bins reach ``+-4.9e8``: mirrored bins are paired first (``(p_i - p_mirror) |b_i|``)
    so the large terms cancel before they are summed, e.g. zero logits decode to exactly 0.

    Example:
        >>> two_hot_decode(torch.tensor([[0.0, 0.0, 0.0]]), torch.tensor([-1.0, 0.0, 1.0]))
        tensor([0.])
    """
    _check_bins(bins, "two_hot_decode")
    if logits.shape[-1] != bins.numel():
        raise ValueError(
            f"two_hot_decode: logits have {logits.shape[-1]} classes but there are "
            f"{bins.numel()} bins; the head's output size must equal num_bins."
        )
    bins = bins.to(device=logits.device, dtype=logits.dtype)
    probs = torch.softmax(logits, -1)
    half = bins.numel() // 2
    upper = probs[..., bins.numel() - half :]  # the positive bins, ascending
    lower = probs[..., :half].flip(-1)  # their mirrors
    value = ((upper - lower) * bins[bins.numel() - half :]).sum(-1)
    if bins.numel() % 2:  # the middle bin (zero for symmetric bins)
        value = value + probs[..., half] * bins[half]
    return value


def two_hot_cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, bins: torch.Tensor
) -> torch.Tensor:
    """Cross-entropy ``[*B]`` of logits ``[*B, K]`` against two-hot raw targets ``[*B]`` or
    ``[*B, 1]`` (unreduced).

    Example:
        >>> two_hot_cross_entropy(torch.zeros(2, 4), torch.zeros(2, 1), symlog_bins(4))
        tensor([1.3863, 1.3863])
    """
    if target.shape == (*logits.shape[:-1], 1):
        target = target.squeeze(-1)
    if target.shape != logits.shape[:-1]:
        raise ValueError(
            f"two_hot_cross_entropy: logits {tuple(logits.shape)} need targets of shape "
            f"{tuple(logits.shape[:-1])} or {(*logits.shape[:-1], 1)}, got {tuple(target.shape)}."
        )
    return -(two_hot_encode(target, bins) * torch.log_softmax(logits, -1)).sum(-1)


class SymExpTwoHot(nn.Module):
    """A two-hot scalar head's read-out: logits ``[*B, K]`` -> value ``[*B, 1]``.

    Holds the bins (a buffer, moved with the module) and offers ``encode`` (targets),
    ``decode`` (``[*B]``) and ``loss`` (cross-entropy) on them.

    Args:
        num_bins: ``K`` (DreamerV3: 255).

    Example:
        >>> head = SymExpTwoHot(num_bins=11)
        >>> values = torch.tensor([-3.0, 0.5, 40.0])
        >>> torch.allclose(head.decode(head.encode(values).log()), values, rtol=1e-3)
        True
        >>> head(torch.zeros(2, 11))
        tensor([[0.],
                [0.]])
    """

    def __init__(self, num_bins: int = 255):
        super().__init__()
        self.num_bins = int(num_bins)
        self.register_buffer("bins", symlog_bins(self.num_bins))

    def encode(self, target: torch.Tensor) -> torch.Tensor:
        """Two-hot targets ``[*B, K]`` of raw values ``[*B]``."""
        return two_hot_encode(target, self.bins)

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """Expected raw values ``[*B]`` of logits ``[*B, K]``."""
        return two_hot_decode(logits, self.bins)

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Unreduced cross-entropy of logits against raw targets."""
        return two_hot_cross_entropy(logits, target, self.bins)

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return self.decode(logits).unsqueeze(-1)  # [*B, 1], as a reward or a value


def check_unimix(unimix: float, owner: str) -> float:
    """``unimix`` as a float in ``[0, 1)``, or a ``ValueError`` naming ``owner``."""
    if not 0.0 <= float(unimix) < 1.0:
        raise ValueError(f"{owner}: unimix must lie in [0, 1) (DreamerV3: 0.01), got {unimix}.")
    return float(unimix)


def unimix_probs(logits: torch.Tensor, unimix: float = 0.01) -> torch.Tensor:
    """``(1 - unimix) softmax(logits) + unimix / K`` over the last dim ``K``.

    Example:
        >>> unimix_probs(torch.tensor([100.0, 0.0]), 0.1)
        tensor([0.9500, 0.0500])
    """
    unimix = check_unimix(unimix, "unimix_probs")
    probs = torch.softmax(logits, -1)
    if unimix:
        probs = (1 - unimix) * probs + unimix / logits.shape[-1]
    return probs


def straight_through_sample(logits: torch.Tensor, unimix: float = 0.0) -> torch.Tensor:
    """One-hot samples ``[*B, C, K]`` of ``C`` categoricals with straight-through gradients.

    The forward value is a one-hot sample of the (uniform-mixed) probabilities; the
    gradient is that of the probabilities themselves.

    Example:
        >>> sample = straight_through_sample(torch.zeros(5, 2, 3))
        >>> sample.sum(-1)
        tensor([[1., 1.],
                [1., 1.],
                [1., 1.],
                [1., 1.],
                [1., 1.]])
    """
    probs = unimix_probs(logits, unimix)
    index = torch.multinomial(probs.detach().reshape(-1, probs.shape[-1]), 1)
    one_hot = torch.zeros_like(probs).reshape(-1, probs.shape[-1]).scatter_(-1, index, 1.0)
    return probs + (one_hot.reshape(probs.shape) - probs).detach()
