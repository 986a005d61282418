"""Data collectors: ``for data in collector`` yields batches of experience.

``SyncDataCollector`` (also ``Collector``) runs in this process; ``MultiSyncDataCollector``
(``MultiSyncCollector``) and ``MultiaSyncDataCollector`` (``MultiAsyncCollector``) run one
``SyncDataCollector`` per worker process. ``split_trajectories`` pads a batch into
trajectories.
"""

from torchrl_lite.collectors.collectors import Collector, DataCollectorBase, SyncDataCollector
from torchrl_lite.collectors.multi import (
    MultiAsyncCollector,
    MultiaSyncDataCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
)
from torchrl_lite.collectors.utils import split_trajectories
from torchrl_lite.envs.utils import RandomPolicy

__all__ = [
    "Collector",
    "DataCollectorBase",
    "MultiAsyncCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "RandomPolicy",
    "SyncDataCollector",
    "split_trajectories",
]
