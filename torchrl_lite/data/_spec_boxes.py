"""What ``spec.space`` returns: the seed-era box objects (``low``/``high``, ``n``)."""

from __future__ import annotations

import torch


class ContinuousBox:
    """``spec.space`` of a ``Bounded`` spec (TorchRL's name): its ``low`` and ``high``.

    They are the spec's own tensors: ``spec.space.low is spec.low``.

    Example:
        >>> from torchrl_lite.data import Bounded
        >>> Bounded(low=-2.0, high=2.0, shape=(1,)).space.high
        tensor([2.])
    """

    def __init__(self, low: torch.Tensor, high: torch.Tensor):
        self.low, self.high = low, high

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, ContinuousBox)
            and torch.equal(self.low, other.low)
            and torch.equal(self.high, other.high)
        )

    def __repr__(self) -> str:
        return f"ContinuousBox(low={self.low}, high={self.high})"


class CategoricalBox:
    """``spec.space`` of a ``Categorical`` or ``OneHot`` spec (TorchRL's name): ``n``.

    Example:
        >>> from torchrl_lite.data import OneHot
        >>> OneHot(4).space.n
        4
    """

    def __init__(self, n: int):
        self.n = int(n)

    def __eq__(self, other) -> bool:
        return isinstance(other, CategoricalBox) and self.n == other.n

    def __repr__(self) -> str:
        return f"CategoricalBox(n={self.n})"


DiscreteBox = CategoricalBox  # the seed-era (TorchRL <= 0.5) name
