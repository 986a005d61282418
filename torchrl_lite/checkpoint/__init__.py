"""Checkpoints of named training components (TorchRL's ``torchrl.checkpoint``).

``Checkpoint`` saves and restores components (modules, optimizers, replay buffers,
collectors, ``GlobalRNGState``, JSON values) into a crash-safe folder or one archive;
``CheckpointRotation`` keeps the last N (and the best) of a numbered series. Adapters
say how one component is written (``_adapters.py``).
"""

from torchrl_lite.checkpoint._adapters import (
    CheckpointAdapter,
    DumpLoadCheckpointAdapter,
    GlobalRNGState,
    JSONCheckpointAdapter,
    StateDictCheckpointAdapter,
    StateDictFormat,
)
from torchrl_lite.checkpoint._checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointFormat,
    CheckpointLoadResult,
    CheckpointOptions,
    CheckpointStrictness,
)
from torchrl_lite.checkpoint._rotation import (
    CheckpointBest,
    CheckpointMetricMode,
    CheckpointRotation,
)

__all__ = [
    "Checkpoint",
    "CheckpointAdapter",
    "CheckpointBest",
    "CheckpointError",
    "CheckpointFormat",
    "CheckpointLoadResult",
    "CheckpointMetricMode",
    "CheckpointOptions",
    "CheckpointRotation",
    "CheckpointStrictness",
    "DumpLoadCheckpointAdapter",
    "GlobalRNGState",
    "JSONCheckpointAdapter",
    "StateDictCheckpointAdapter",
    "StateDictFormat",
]
