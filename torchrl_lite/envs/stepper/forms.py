"""What the transforms' numpy forms share: ``Elementwise`` (a transform whose step and
reset apply ``_apply_transform`` to each (in, out) pair), ``Cast`` (a dtype cast in
place, done by the buffers' dtype) and ``episodes`` (the stretches of rows between
resets, for forms that carry a value along an episode). The forms
themselves are returned by each transform's ``_numpy_form`` (see ``NumpyForm`` in
``envs/stepper/__init__.py``).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["Cast", "Elementwise", "episodes"]


class Elementwise:
    """The ``NumpyForm`` of a transform that maps each in_key to its out_key with
    ``_apply_transform``: one torch call per range of rows, on views of the buffers."""

    per_step = False

    def __init__(self, transform):
        self.fn = transform._apply_transform
        self.pairs = list(transform._pairs)
        self.reads = [i for i, _ in self.pairs]
        self.writes = [o for _, o in self.pairs]

    def bind(self, stepper) -> None:
        self.bufs = [(stepper.nxt[i], stepper.nxt[o]) for i, o in self.pairs]
        self.roots = [
            (stepper.root[i], stepper.root[o]) for i, o in self.pairs if i in stepper.root
        ]

    def _apply(self, x: np.ndarray) -> np.ndarray:
        return self.fn(torch.from_numpy(x)).numpy()

    def reset(self, chosen, t: int) -> None:
        for src, dst in self.roots:
            dst[t, chosen] = self._apply(src[t, chosen])

    def advance(self, t0: int, t1: int) -> None:
        for src, dst in self.bufs:
            dst[t0:t1] = self._apply(src[t0:t1])


class Cast:
    """The ``NumpyForm`` of a dtype cast in place (``DTypeCastTransform`` without action
    entries, e.g. ``DoubleToFloat`` on MuJoCo's float64 observations): nothing runs per
    row. ``TransformedStepper`` gives the entries of ``casts`` (key -> numpy dtype)
    buffers of the new dtype, and the wrapped env's stepper's writes into them cast, with
    the rounding of ``Tensor.to``."""

    per_step = False
    reads: list = []
    writes: list = []

    def __init__(self, casts: dict):
        self.casts = casts

    def bind(self, stepper) -> None:
        """Nothing to bind: the cast is the dtype of the buffers the stepper allocated."""

    def reset(self, chosen, t: int) -> None:
        """Nothing to redo: a reset's observations were cast as they were written."""

    def advance(self, t0: int, t1: int) -> None:
        """Nothing to apply: each step's writes were cast already."""


def episodes(stepper, t0: int, t1: int, out: np.ndarray, root: np.ndarray):
    """``(copy, a, b, value before step a)`` for each stretch of rows ``[a, b)`` of
    ``[t0, t1)`` without a reset inside: the value is the root's after a reset (and in
    the first row), else the previous step's ``out``."""
    resets = stepper.resets
    for i in range(stepper.n):
        starts = [t0, *(np.flatnonzero(resets[t0 + 1 : t1, i]) + t0 + 1).tolist()]
        for a, b in zip(starts, [*starts[1:], t1]):
            yield i, a, b, (root[a, i] if a == 0 or resets[a, i] else out[a - 1, i])
