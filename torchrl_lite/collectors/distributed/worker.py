"""RolloutWorker: the one collection worker behind ``RayCollector`` and the Scheme.

A worker owns a collector (``SyncDataCollector``) and a weight setter, built in its own
process from a zero-argument ``make`` factory; ``collect(weights, version)`` installs new
weights (if given), gathers one batch and returns it with what the driver needs to know
about it: the policy version that collected it (policy lag), frames, seconds, finished
episodes' returns. The same class runs in-process (the Scheme's 1/1 mode) and, wrapped by
``ray.remote``, as a Ray actor.

Remote workers are built with ``pack_batches=True``: a batch goes back packed in one
buffer with its metadata (``transport.result_message``; the driver calls
``transport.open_result``), and weights sent packed are unpacked before they are installed.

Same-node channel: ``open_channel(driver_node)`` (called by ``WorkerGroup`` once the actor
answers) starts ``channel.ChannelServer`` on this worker's own ``collect`` when the worker
runs on the driver's node; the driver then sends ``collect`` over shared memory instead of
a Ray call. Every other method stays a Ray call. A lock keeps one method at a time on the
collector (the channel's thread and Ray's run concurrently), as Ray's one-call-at-a-time
did; ``preempt`` takes no lock.

Preemption: while ``collect`` runs, ``preempt()`` (from another thread of the actor) asks
the worker to stop at the next chunk boundary once it holds at least
``min_fraction`` of its batch; the batch it returns is then shorter in time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

import torch

from torchrl_lite import _keys as K
from torchrl_lite.collectors.distributed.transport import result_message, unpack
from torchrl_lite.collectors.utils import finished_returns
from torchrl_lite.workers.rng import rng_state, set_rng_state

__all__ = ["RolloutWorker", "episode_returns_of"]

EPISODE_REWARD = "episode_reward"


def episode_returns_of(batch) -> list[float]:
    """Returns of the episodes that ended in ``batch`` (read from ``("next",
    "episode_reward")`` where ``("next", "done")``; empty without ``RewardSum``)."""
    if EPISODE_REWARD not in batch.get(K.NEXT).keys():
        return []
    return finished_returns(batch)


class RolloutWorker:
    """Collect batches with weights sent by a driver (in-process or as a Ray actor).

    Args:
        make: zero-argument factory returning ``(collector, set_weights)``: a collector with
            ``next()`` (and ``state_dict``/``load_state_dict``/``shutdown``), and a callable
            installing a weights object sent by the driver.
        seed: ``torch.manual_seed`` is called with it before ``make`` (None: not seeded).
        chunks: split each batch into this many sub-batches, so that ``preempt`` can end it
            early (1: no preemption).
        pack_batches: return ``(batch, meta)`` packed for the trip back to a driver (a Ray
            actor; ``transport.open_result`` opens it); False returns them as they are.

    Example:
        >>> from torchrl_lite.collectors import SyncDataCollector
        >>> from torchrl_lite.envs import PendulumEnv
        >>> def make():
        ...     collector = SyncDataCollector(PendulumEnv(seed=0), None, frames_per_batch=8)
        ...     return collector, collector.update_policy_weights_
        >>> worker = RolloutWorker(make, seed=0)
        >>> batch, meta = worker.collect()
        >>> batch.batch_size, meta["frames"], meta["version"]
        (torch.Size([8]), 8, 0)
        >>> worker.shutdown()
    """

    def __init__(
        self, make: Callable, seed: int | None = None, chunks: int = 1, pack_batches: bool = False
    ):
        if seed is not None:
            torch.manual_seed(seed)
        self.collector, self._set_weights = make()
        self.chunks = int(chunks)
        self.pack_batches = bool(pack_batches)
        self.version = 0
        self._preempt = threading.Event()
        self._min_chunks = self.chunks
        self._lock = threading.RLock()  # the channel's thread and Ray's calls take turns
        self._server = None

    def ping(self) -> int:
        """The worker's process id (answers once construction succeeded)."""
        return os.getpid()

    def node_id(self) -> str | None:
        """The Ray node this worker runs on (None outside Ray)."""
        try:
            import ray

            return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
        except ImportError:  # pragma: no cover
            return None

    def open_channel(self, driver_node: str | None = None):
        """Serve ``collect`` over a shared-memory channel (``channel.py``) if this worker
        runs on ``driver_node`` (the driver's Ray node id): returns ``(address, authkey)``
        for the driver's ``Channel``, or None on another node (Ray calls only)."""
        from torchrl_lite.collectors.distributed.channel import ChannelServer
        from torchrl_lite.workers.shm import shm_supported as channel_supported

        if not channel_supported() or (driver_node is not None and driver_node != self.node_id()):
            return None
        self._server = ChannelServer(self._collect)
        return self._server.address, self._server.authkey

    def set_weights(self, weights, version: int = 0) -> None:
        with self._lock:
            self._set_weights(unpack(weights))
            self.version = int(version)

    def collect(self, weights=None, version: int | None = None, min_fraction: float = 1.0):
        """One batch (``[*B, T]``, or shorter in ``T`` if preempted) and its metadata."""
        batch, meta = self._collect(weights, version, min_fraction)
        return result_message(batch, meta) if self.pack_batches else (batch, meta)

    def _collect(self, weights, version, min_fraction) -> tuple:
        """``collect``'s ``(batch, meta)``, unpacked (what the channel sends)."""
        with self._lock:
            return self._collect_locked(weights, version, min_fraction)

    def _collect_locked(self, weights, version, min_fraction) -> tuple:
        if weights is not None:
            self.set_weights(weights, self.version if version is None else version)
        start = time.perf_counter()
        self._preempt.clear()
        if self.chunks == 1:
            batch = self.collector.next()
        else:
            need = max(1, int(-(-min_fraction * self.chunks // 1)))  # ceil
            parts = []
            while len(parts) < self.chunks:
                parts.append(self.collector.next())
                if self._preempt.is_set() and len(parts) >= need:
                    break
            batch = torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]
        seconds = time.perf_counter() - start
        meta = {
            "version": self.version,
            "frames": batch.numel(),
            "seconds": seconds,
            "returns": episode_returns_of(batch),
            "preempted": self._preempt.is_set(),
            "pid": os.getpid(),
        }
        return batch, meta

    def set_seed(self, seed: int) -> int:
        """``collector.set_seed(seed)`` (the next batch starts from a reset)."""
        with self._lock:
            return self.collector.set_seed(seed)

    def preempt(self) -> None:
        """Ask a running ``collect`` to return what it holds (see the module docstring)."""
        self._preempt.set()

    def state_dict(self) -> dict:
        with self._lock:
            return {
                "collector": self.collector.state_dict(),
                "rng": rng_state(),
                "version": self.version,
            }

    def load_state_dict(self, state: dict) -> None:
        with self._lock:
            self.collector.load_state_dict(state["collector"])
            set_rng_state(state["rng"])
            self.version = int(state["version"])

    def shutdown(self) -> None:
        self.collector.shutdown()
