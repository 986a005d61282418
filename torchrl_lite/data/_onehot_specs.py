"""The one-hot specs: ``OneHot`` (``Discrete`` spaces, TorchRL's default encoding) and
``MultiOneHot`` (``MultiDiscrete``), one-hot vectors with ``encode``/``to_categorical``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.nn.functional import one_hot as _one_hot

from torchrl_lite.data._spec_base import TensorSpec, _check_sizes, _describe, _size
from torchrl_lite.data._spec_boxes import CategoricalBox

__all__ = ["OneHot", "MultiOneHot"]


def _argmax(value: torch.Tensor) -> torch.Tensor:
    return (value.to(torch.uint8) if value.dtype == torch.bool else value).argmax(-1)


class _OneHots(TensorSpec):
    """Concatenated one-hot vectors of sizes ``self.nvec`` (the last dim is their sum).

    Each subclass defines ``_indices(value) -> list``: category indices split into one
    tensor per one-hot chunk (``OneHot``: one chunk; ``MultiOneHot``: one per size).
    """

    _event_ndim = 1  # the last dim is one value (a one-hot vector), not rows

    def __init__(self, nvec, shape, device, dtype):
        _check_sizes(type(self).__name__, "n" if type(self).__name__ == "OneHot" else "nvec", nvec)
        self.nvec = [int(k) for k in nvec]
        shape = torch.Size([sum(self.nvec)]) if shape is None else _size(shape)
        if not shape or shape[-1] != sum(self.nvec):
            name = type(self).__name__
            raise ValueError(f"{name}: the last dim of {list(shape)} must be {sum(self.nvec)}")
        super().__init__(shape, dtype, device)

    def _from_indices(self, indices) -> torch.Tensor:
        try:
            chunks = [_one_hot(i.to(self.device).long(), n) for i, n in zip(indices, self.nvec)]
        except RuntimeError as err:
            raise ValueError(f"Indices out of range for {self}: {err}") from err
        return (chunks[0] if len(chunks) == 1 else torch.cat(chunks, -1)).to(self.dtype)

    def _in_range(self, value, split):
        ok = ((value == 0) | (value == 1)).all()
        for chunk in value.split(self.nvec, -1):
            ok &= (chunk.sum(-1) == 1).all()
        return bool(ok)

    def rand(self, shape=None):
        batch = (_size(shape) + self.shape)[:-1]
        return self._from_indices(
            [torch.randint(0, n, batch, device=self.device) for n in self.nvec]
        )

    def encode(self, value):
        """A one-hot value as is, or category indices turned into one-hot vectors."""
        value = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
        if value.shape[-1:] == self.shape[-1:] and value.dim() >= len(self.shape):
            return value.to(device=self.device, dtype=self.dtype)
        return self._from_indices(self._indices(value))

    def project(self, value):
        """The one-hot vector of each chunk's largest entry."""
        return self._from_indices(self._indices(self.to_categorical(value)))


class OneHot(_OneHots):
    """One-hot vectors of length ``n`` (last dim); ``encode`` accepts an integer index.

    Example:
        >>> OneHot(3).encode(1)
        tensor([0, 1, 0])
    """

    def __init__(self, n: int, shape=None, device=None, dtype: torch.dtype = torch.int64):
        super().__init__([n], shape, device, dtype)
        self.n = int(n)

    def _params(self):
        return {"n": self.n}

    @property
    def space(self) -> CategoricalBox:
        """The number of values as TorchRL's ``CategoricalBox`` (``space.n``)."""
        return CategoricalBox(self.n)

    def _indices(self, value):
        return [value]

    def rand(self, shape=None):
        # one row of a cached identity matrix per draw: half the cost of one_hot
        batch = self.shape[:-1] if shape is None else (_size(shape) + self.shape)[:-1]
        eye = self.__dict__.get("_eye")
        if eye is None or eye.device != self.device:
            eye = self._eye = torch.eye(self.n, dtype=self.dtype, device=self.device)
        return eye[torch.randint(0, self.n, batch, device=self.device)]

    def to_categorical(self, value: torch.Tensor) -> torch.Tensor:
        return _argmax(value)


class MultiOneHot(_OneHots):
    """Concatenated one-hot vectors of sizes ``nvec`` (last dim ``sum(nvec)``).

    Example:
        >>> MultiOneHot([2, 3]).encode([1, 0])
        tensor([0, 1, 1, 0, 0])
    """

    def __init__(self, nvec: Sequence[int], shape=None, device=None, dtype=torch.int64):
        super().__init__(nvec, shape, device, dtype)

    def _params(self):
        return {"nvec": self.nvec}

    def _indices(self, value):
        if value.shape[-1:] != torch.Size([len(self.nvec)]):
            raise ValueError(f"Cannot encode {_describe(value)} as {self}")
        return value.unbind(-1)

    def to_categorical(self, value: torch.Tensor) -> torch.Tensor:
        return torch.stack([_argmax(c) for c in value.split(self.nvec, -1)], -1)
