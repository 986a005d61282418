"""Builders under TorchRL's ``torchrl.trainers.helpers`` path, used by its REDQ script."""

from torchrl_lite.trainers.helpers.collectors import sync_async_collector, sync_sync_collector

__all__ = ["sync_async_collector", "sync_sync_collector"]
