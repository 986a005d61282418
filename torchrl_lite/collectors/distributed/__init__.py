"""Distributed collection on Ray: ``RayCollector`` and the worker it shares with the Scheme."""

from torchrl_lite.collectors.distributed.worker import RolloutWorker

__all__ = ["RolloutWorker"]
