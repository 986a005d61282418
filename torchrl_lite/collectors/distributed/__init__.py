"""Distributed collection on Ray: ``RayCollector`` and the worker it shares with the Scheme.

``RolloutWorker`` is the one collection worker (in-process or a Ray actor);
``WorkerGroup`` starts, watches, restarts and stops N of them (or the Scheme's gradient
workers). Importing this package does not import Ray; building a ``RayCollector`` does.
"""

from torchrl_lite.collectors.distributed.ray_collector import RayCollector
from torchrl_lite.collectors.distributed.ray_workers import WorkerGroup
from torchrl_lite.collectors.distributed.worker import RolloutWorker

__all__ = ["RayCollector", "RolloutWorker", "WorkerGroup"]
