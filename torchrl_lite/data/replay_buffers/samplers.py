"""Samplers (which stored items a replay buffer returns), at TorchRL's import path.

The contract and the plain samplers live in ``_sampler_base.py``, the slice samplers in
``slice_samplers.py``; this module only re-exports them.
"""

from torchrl_lite.data.replay_buffers._sampler_base import (
    PrioritizedSampler,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
)
from torchrl_lite.data.replay_buffers.slice_samplers import (
    SliceSampler,
    SliceSamplerWithoutReplacement,
)

__all__ = [
    "Sampler",
    "RandomSampler",
    "SamplerWithoutReplacement",
    "PrioritizedSampler",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
]
