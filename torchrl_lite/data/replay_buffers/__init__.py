"""Replay buffers: a storage (where items live), a sampler (which items come back) and a
writer (where new items go), composed by :class:`ReplayBuffer` and its TensorDict and
prioritized variants.

Example:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl_lite.data.replay_buffers import (
    ...     LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer,
    ... )
    >>> buffer = TensorDictReplayBuffer(
    ...     storage=LazyTensorStorage(1000), sampler=SamplerWithoutReplacement(), batch_size=50
    ... )
    >>> _ = buffer.extend(TensorDict(observation=torch.randn(100, 3), batch_size=[100]))
    >>> [sample.shape[0] for sample in buffer]
    [50, 50]
"""

from torchrl_lite.data.replay_buffers.replay_buffers import (
    PrioritizedReplayBuffer,
    ReplayBuffer,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from torchrl_lite.data.replay_buffers.samplers import (
    PrioritizedSampler,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)
from torchrl_lite.data.replay_buffers.storages import LazyStackStorage, ListStorage, Storage
from torchrl_lite.data.replay_buffers.tensor_storage import (
    LazyMemmapStorage,
    LazyTensorStorage,
    TensorStorage,
)
from torchrl_lite.data.replay_buffers.writers import (
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
    Writer,
)

__all__ = [
    "ReplayBuffer",
    "PrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
    "Storage",
    "ListStorage",
    "LazyStackStorage",
    "TensorStorage",
    "LazyTensorStorage",
    "LazyMemmapStorage",
    "Sampler",
    "RandomSampler",
    "SamplerWithoutReplacement",
    "PrioritizedSampler",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "Writer",
    "RoundRobinWriter",
    "TensorDictRoundRobinWriter",
    "TensorDictMaxValueWriter",
]
