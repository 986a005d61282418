"""The recorder of a collector over a batched env whose copies' specs differ.

Such an env (``envs/_batched_lazy.py``) gives ``LazyStackedTensorDict`` steps along dim 0:
each copy's rows are recorded by its own ``_Recorder`` (the fast one, on plain
TensorDicts) and the batch is their lazy stack, ``[n, *env_batch, T]``, whose TensorDict
``i`` is copy ``i``'s ``[*env_batch, T]`` batch.
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from torchrl_lite.collectors._recorder import _Recorder


class _CopiesRecorder:
    """``_Recorder``'s interface (``begin``, ``record``, ``result``), one per copy."""

    def __init__(self, steps: int, batch_dims: int):
        self.steps, self.batch_dims = steps, batch_dims
        self.copies: list[_Recorder] = []

    def begin(self, td: TensorDictBase, ids: torch.Tensor, defaults: dict) -> None:
        rows = td.tensordicts
        if len(self.copies) != len(rows):
            self.copies = [_Recorder(self.steps, self.batch_dims - 1) for _ in rows]
        for i, (recorder, row) in enumerate(zip(self.copies, rows)):
            recorder.begin(row, ids[i], {k: v[i] for k, v in defaults.items()})

    def record(self, td: TensorDictBase, ids: torch.Tensor) -> None:
        for recorder, row, row_ids in zip(self.copies, td.tensordicts, ids.unbind(0)):
            recorder.record(row, row_ids)

    def result(self, batch_size, device) -> TensorDictBase:
        rows = [recorder.result(batch_size[1:], device) for recorder in self.copies]
        return LazyStackedTensorDict(*rows, stack_dim=0)
