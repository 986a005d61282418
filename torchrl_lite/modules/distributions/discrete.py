"""Discrete action distributions: ``Categorical``, ``OneHotCategorical`` (tensordict's) and
the action-masked ``MaskedCategorical`` / ``MaskedOneHotCategorical``."""

from __future__ import annotations

import torch
from tensordict.nn.distributions import OneHotCategorical
from torch import distributions as D

_EMPTY = torch.Size()

__all__ = ["Categorical", "OneHotCategorical", "MaskedCategorical", "MaskedOneHotCategorical"]


class Categorical(D.Categorical):
    """``torch.distributions.Categorical`` with ``deterministic_sample`` (the most likely index).

    Args:
        logits: unnormalised log-probabilities, categories on the last dim.
        probs: probabilities instead of ``logits``.

    Example:
        >>> Categorical(logits=torch.tensor([0.0, 3.0, 1.0])).deterministic_sample
        tensor(1)
    """

    def __init__(self, logits: torch.Tensor | None = None, probs: torch.Tensor | None = None):
        super().__init__(probs=probs, logits=logits, validate_args=False)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


def _dense_mask(indices: torch.Tensor, n: int, padding_value: int | None) -> torch.Tensor:
    """A ``[..., n]`` bool mask, True at the listed ``indices`` (``[..., K]``), ignoring padding."""
    indices = indices.long()
    valid = torch.ones_like(indices, dtype=torch.int32)
    if padding_value is not None:
        pad = indices == padding_value
        valid = valid.masked_fill(pad, 0)
        indices = indices.masked_fill(pad, 0)
    counts = torch.zeros(*indices.shape[:-1], n, dtype=torch.int32, device=indices.device)
    return counts.scatter_add_(-1, indices, valid) > 0


class MaskedCategorical(D.Categorical):
    """A categorical distribution over the actions allowed by a mask (e.g. legal moves).

    Masked actions get log-probability ``neg_inf``: they are never sampled and
    ``log_prob`` of one is ``neg_inf``. Every row must allow at least one action.

    Args:
        logits: unnormalised log-probabilities ``[*B, n]``.
        probs: probabilities instead of ``logits`` (masked ones are zeroed, the rest
            renormalised).
        mask: bool ``[*B, n]`` (broadcastable), True where the action is allowed.
        indices: instead of ``mask``, the allowed action indices ``[*B, K]``.
        neg_inf: log-probability of masked actions (default ``-inf``).
        padding_value: an entry of ``indices`` equal to it is padding, not an action
            (default None: every entry is an action).

    Example:
        >>> dist = MaskedCategorical(logits=torch.zeros(4), mask=torch.tensor([True, False, True, True]))
        >>> bool((dist.sample((100,)) != 1).all())
        True
        >>> dist.log_prob(torch.tensor([0, 1]))
        tensor([-1.0986,    -inf])
        >>> MaskedCategorical(logits=torch.zeros(4), indices=torch.tensor([2, 3])).probs
        tensor([0.0000, 0.0000, 0.5000, 0.5000])
    """

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        indices: torch.Tensor | None = None,
        neg_inf: float = float("-inf"),
        padding_value: int | None = None,
    ):
        if (mask is None) == (indices is None):
            raise ValueError("MaskedCategorical needs exactly one of mask= and indices=.")
        if (logits is None) == (probs is None):
            raise ValueError("MaskedCategorical needs exactly one of logits= and probs=.")
        params = logits if logits is not None else probs
        n = params.shape[-1]
        if mask is None:
            mask = _dense_mask(indices, n, padding_value)
        elif mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor (True = allowed), got {mask.dtype}.")
        if mask.shape[-1] != n:
            raise ValueError(
                f"mask has {mask.shape[-1]} actions on its last dim, the {'logits' if logits is not None else 'probs'} have {n}."
            )
        if probs is not None:
            probs = probs.masked_fill(~mask, 0.0)
            logits = (probs / probs.sum(-1, keepdim=True)).log()
        logits = logits.masked_fill(~mask, neg_inf)
        self._mask = mask
        self.neg_inf = neg_inf
        super().__init__(logits=logits, validate_args=False)

    @property
    def mask(self) -> torch.Tensor:
        """The bool mask of allowed actions, ``[*B, n]``."""
        return self._mask

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


class MaskedOneHotCategorical(MaskedCategorical):
    """``MaskedCategorical`` whose samples and ``log_prob`` inputs are one-hot ``[*B, n]`` tensors.

    Args:
        logits: unnormalised log-probabilities ``[*B, n]``.
        probs: probabilities instead of ``logits``.
        mask: bool ``[*B, n]``, True where the action is allowed.
        indices: instead of ``mask``, the allowed action indices ``[*B, K]``.
        neg_inf: log-probability of masked actions (default ``-inf``).
        padding_value: an entry of ``indices`` equal to it is padding.

    Example:
        >>> dist = MaskedOneHotCategorical(logits=torch.zeros(3), mask=torch.tensor([False, True, False]))
        >>> dist.sample()
        tensor([0, 1, 0])
    """

    @property
    def _n(self) -> int:
        return self.logits.shape[-1]

    def sample(self, sample_shape=_EMPTY) -> torch.Tensor:
        return torch.nn.functional.one_hot(super().sample(sample_shape), self._n)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        return super().log_prob(value.argmax(-1))

    @property
    def mode(self) -> torch.Tensor:
        return torch.nn.functional.one_hot(super().mode, self._n)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode
