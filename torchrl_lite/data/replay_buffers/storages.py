"""Storages (where a replay buffer keeps its items), at TorchRL's import path.

The contract and the list storages live in ``_storage_base.py``, the tensor storages in
``tensor_storage.py``; this module only re-exports them.
"""

from torchrl_lite.data.replay_buffers._storage_base import LazyStackStorage, ListStorage, Storage
from torchrl_lite.data.replay_buffers.tensor_storage import (
    LazyMemmapStorage,
    LazyTensorStorage,
    TensorStorage,
)

__all__ = [
    "Storage",
    "ListStorage",
    "LazyStackStorage",
    "TensorStorage",
    "LazyTensorStorage",
    "LazyMemmapStorage",
]
