"""Data collectors: ``for data in collector`` yields batches of experience.

``SyncDataCollector`` (also ``Collector``) runs in this process; ``MultiSyncDataCollector``
(``MultiSyncCollector``) and ``MultiaSyncDataCollector`` (``MultiAsyncCollector``) run one
``SyncDataCollector`` per worker process; ``Collector(..., backend="process" | "ray")``
builds those (``_dispatch.py``; ``distributed/`` holds the Ray collector). ``AsyncCollector`` is the one-worker async collector,
``Evaluator`` runs evaluation episodes. ``split_trajectories`` pads a batch into
trajectories.
"""

from torchrl_lite.collectors import distributed  # noqa: F401 (registers backend="ray")
from torchrl_lite.collectors._async import AsyncCollector
from torchrl_lite.collectors.collectors import Collector, DataCollectorBase, SyncDataCollector
from torchrl_lite.collectors.evaluator import Evaluator
from torchrl_lite.collectors.multi import (
    MultiAsyncCollector,
    MultiaSyncDataCollector,
    MultiCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
)
from torchrl_lite.collectors.utils import split_trajectories
from torchrl_lite.envs.utils import RandomPolicy

BaseCollector = DataCollectorBase  # TorchRL's current name
aSyncDataCollector = AsyncCollector  # noqa: N816 (TorchRL v0.4's name)

__all__ = [
    "AsyncCollector",
    "BaseCollector",
    "Collector",
    "Evaluator",
    "MultiCollector",
    "DataCollectorBase",
    "MultiAsyncCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "RandomPolicy",
    "SyncDataCollector",
    "aSyncDataCollector",
    "split_trajectories",
]
